"""The Numba backend: Python source of low-level IR, and batched entry points around it."""
