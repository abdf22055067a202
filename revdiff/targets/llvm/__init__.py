"""The CPU target: low-level IR printed as LLVM IR (``emit.py`` and the modules it builds on, one
module per program: ``module.py``), compiled by llvmlite's MCJIT with a verified object cache
(``jit.py``), loaded as programs and batched entries (``programs.py``), and called from Python
(``entry_calls.py``, reading NumPy's array objects: ``array_fields.py``)."""
