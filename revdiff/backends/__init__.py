"""Backends: print low-level IR as Python for Numba (``numba``), as SIMD-lane Python (``lanes``), or as CUDA C (``cuda``)."""
