"""Emitters: print the low-level IR as Python (run by Numba or the interpreter) or as CUDA C."""
