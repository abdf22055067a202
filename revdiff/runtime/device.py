"""CuPy, imported on first use: device arrays are optional, and ``import revdiff`` never loads it."""
from __future__ import annotations


def cupy_module():
    """The ``cupy`` module, or an ImportError saying how to install it."""
    try:
        import cupy
    except ImportError:
        raise ImportError("device arrays need CuPy: pip install 'revdiff[cuda]'") from None
    return cupy
