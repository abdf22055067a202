"""CuPy, imported on first use: device arrays are optional, and ``import revdiff`` never loads it."""
from __future__ import annotations

from typing import Any, Iterable


def on_device(value: Any) -> bool:
    """Whether ``value`` is a GPU array: CuPy's, or anything with ``__cuda_array_interface__``."""
    return hasattr(value, "__cuda_array_interface__")


def any_on_device(values: Iterable) -> bool:
    """Whether any of ``values`` is a GPU array: then a call runs on the GPU."""
    return any(on_device(v) for v in values)


def cupy_module():
    """The ``cupy`` module, or an ImportError saying how to install it."""
    try:
        import cupy
    except ImportError:
        raise ImportError("device arrays need CuPy: pip install 'revdiff[cuda]'") from None
    return cupy
