"""The targets, one folder each with its emitter, its glue (low IR to a loaded module) and its launcher:
``llvm`` (machine code for the CPU: LLVM IR from the low IR, the JIT and its object cache, calls from
Python), ``lanes`` (a program rewritten to run 8 batch elements side by side in SIMD lanes, compiled
by ``llvm``), ``cuda`` (CUDA C, kernel modules, their launch through CuPy and a host build of the same
source) and ``python`` (the low IR printed as Python: ``backend="python"``, and ``f.source()``).
``batch_entries.py``: the low IR of the batched entries that ``llvm`` and ``lanes`` compile."""
