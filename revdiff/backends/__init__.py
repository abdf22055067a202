"""Backends: low-level IR printed as LLVM IR and compiled to machine code (``llvm``), printed as
Python (``python``: ``backend="python"`` runs it, and ``f.source()`` shows it), rewritten to run
several batch elements side by side in SIMD lanes (``lanes``), or printed as CUDA C and launched
(``cuda``)."""
