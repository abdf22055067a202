"""The LLVM backend: low-level IR printed as LLVM IR (``emit.py`` and the modules it builds on),
compiled to machine code by ``runtime/native.py``."""
