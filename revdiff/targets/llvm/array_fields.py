"""Where a NumPy array object keeps its data pointer, shape and strides (``PyArrayObject_fields``,
which NumPy's C API reads inline: part of its ABI), found once per process by looking at an array
whose values are known. Compiled entries read them straight from the array objects Python passes,
so that a call of a program packs nothing (``entry_calls.py``); where they cannot be found (an
unusual Python or NumPy build), the arguments are packed into words instead."""
from __future__ import annotations

import ctypes
from typing import NamedTuple

import numpy as np


class ArrayFields(NamedTuple):
    """Byte offsets, in an ndarray object, of its data pointer and of the pointers to its shape and
    its byte strides (arrays of int64)."""
    data: int
    shape: int
    strides: int


def _words(address: int, count: int) -> list:
    return list((ctypes.c_int64 * count).from_address(address))


def _matches(a: np.ndarray, fields: ArrayFields) -> bool:
    """Whether ``a`` holds its data pointer, shape and strides at ``fields``; the shape and strides
    pointers are followed only once the data pointer is where the layout says (nothing else is read
    as a pointer)."""
    if _words(id(a) + fields.data, 1)[0] != a.__array_interface__["data"][0]:
        return False
    shape, strides = _words(id(a) + fields.shape, 1)[0], _words(id(a) + fields.strides, 1)[0]
    return _words(shape, a.ndim) == list(a.shape) and _words(strides, a.ndim) == list(a.strides)


def _probe() -> "ArrayFields | None":
    """NumPy's layout after the object header (``object.__basicsize__`` bytes: larger in free-threaded
    and debug builds of Python): the data pointer, the rank (an int, padded), the shape pointer, the
    strides pointer; checked on arrays of several ranks, dtypes and strides, or None."""
    head = object.__basicsize__
    fields = ArrayFields(head, head + 16, head + 24)
    probes = [np.empty((3, 7))[:, 1::2], np.empty((2, 9, 5), np.float32)[::-1], np.arange(11.0)[2:]]
    return fields if all(_matches(a, fields) for a in probes) else None


#: the offsets in this process's arrays, or None where they could not be found
ARRAY_FIELDS: "ArrayFields | None" = _probe()
