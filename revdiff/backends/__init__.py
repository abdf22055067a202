"""Backends: low-level IR printed as Python for Numba (``numba``: one element per call, and the batched
parallel entries around it), rewritten to run several batch elements side by side in SIMD lanes
before Numba compiles it (``lanes``), or printed as CUDA C and launched (``cuda``)."""
