"""GPU arrays: recognised by ``__cuda_array_interface__``, their memory ranges and write flags, and
CuPy, imported on first use (device arrays are optional, and ``import revdiff`` never loads it)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np


def on_device(value: Any) -> bool:
    """Whether ``value`` is a GPU array: CuPy's, or anything with ``__cuda_array_interface__``."""
    return value.__class__ is not np.ndarray and hasattr(value, "__cuda_array_interface__")


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


def _extent(a: Any) -> tuple:
    """[first, last) byte addresses GPU array ``a`` spans (empty for an array of no elements)."""
    face = a.__cuda_array_interface__
    pointer, itemsize, shape = face["data"][0], np.dtype(face["typestr"]).itemsize, tuple(face["shape"])
    if any(n == 0 for n in shape):
        return pointer, pointer
    strides = face.get("strides")
    if strides is None:  # C order
        strides, step = [], itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    low = pointer + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
    high = pointer + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0) + itemsize
    return low, high


def may_share_memory(a: Any, b: Any) -> bool:
    """Whether GPU arrays ``a`` and ``b`` share memory: whether the byte ranges they span overlap (so
    two interleaved views of one array, e.g. its even and odd columns, count as sharing); never for a
    host array (host pairs: ``calls.sharing``)."""
    if on_device(a) and on_device(b):
        (low_a, high_a), (low_b, high_b) = _extent(a), _extent(b)
        return low_a < high_b and low_b < high_a
    return False


def writeable(a: Any) -> bool:
    """Whether GPU array ``a`` may be written: the read-only flag of its ``__cuda_array_interface__``
    (CuPy's arrays are always writeable) and no zero stride along an axis of more than one element (a
    broadcast view, whose elements share memory, as NumPy's ``broadcast_to`` views are read-only).
    Host arrays: NumPy's flag (``calls.validate``)."""
    face = a.__cuda_array_interface__
    strides = face.get("strides") or ()
    return not face["data"][1] and not any(s == 0 and n > 1 for n, s in zip(face["shape"], strides))
