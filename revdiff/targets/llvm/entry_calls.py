"""Calling compiled programs from Python: one call through ctypes, which releases the GIL while the
program runs, with the NumPy arrays themselves (each scalar in a one-element array; the entry reads
their data pointers, shapes and strides: ``targets/llvm/array_fields.py``), or, where NumPy's array
layout could not be found, with the arguments packed into one array of 64-bit words (an array's data
pointer, shape and byte strides; a pointer to each scalar; the error record). The entries:
``targets/llvm/module.py``."""
from __future__ import annotations

import numpy as np

from revdiff.ir.checks import RECORD_SIZE
from revdiff.targets.llvm.array_fields import ARRAY_FIELDS
from revdiff.targets.llvm.jit import entry_function, object_entry_function


class NativeProgram:
    """A program compiled to machine code, called as ``program(*args, record)`` with the arguments of
    its parameters (NumPy arrays, updated in place, and numbers) and a float64 error record
    (``ir/checks.py``); returns the final values of its scalar parameters, in order, as the Python
    program does."""

    def __init__(self, name: str, types: tuple, address: int, loops: bool):
        self.__name__ = name
        self.types = types
        self.revdiff_loops = loops  # a while loop: run where Ctrl-C can stop it (``calls.interruptible``)
        self._dtypes = tuple(np.dtype(t.dtype) for t in types)
        self._scalars = tuple(k for k, t in enumerate(types) if not t.ndim)
        self._function = entry_function(address) if ARRAY_FIELDS is None else \
            object_entry_function(address, len(types) + 1)

    def __repr__(self) -> str:
        return f"<compiled revdiff program {self.__name__}>"

    def _check_record(self, record) -> None:
        if not (isinstance(record, np.ndarray) and record.dtype == np.float64 and record.flags.c_contiguous
                and record.size >= RECORD_SIZE):
            raise TypeError(f"{self.__name__}: the error record must be a contiguous float64 array of "
                            f"{RECORD_SIZE} entries")

    def _refuse(self, v, t) -> TypeError:
        return TypeError(f"{self.__name__} was compiled for a {t.describe()}, not {_describe(v)}")

    def _check(self, args: tuple) -> None:
        """Refuse arguments that do not have the types compiled for, and an unfit error record (the last)."""
        *values, record = args
        if len(values) != len(self.types):
            raise TypeError(f"{self.__name__} takes {len(self.types)} arguments, got {len(values)}")
        for v, t, dtype in zip(values, self.types, self._dtypes):
            if t.ndim and (not isinstance(v, np.ndarray) or v.ndim != t.ndim or (v.dtype is not dtype and (
                    v.dtype != dtype or not v.dtype.isnative))):
                raise self._refuse(v, t)
        self._check_record(record)

    def _slotted(self, args: tuple) -> tuple:
        """(objects, slots): ``args`` with each scalar in a one-element array of its dtype (a slot,
        where the program leaves its final value)."""
        objects, slots = list(args), []
        for k in self._scalars:
            slot = objects[k] = np.array([args[k]], dtype=self._dtypes[k])
            slots.append(slot)
        return objects, slots

    def _call_with_objects(self, *args):
        """The call where the entry reads the arrays' fields: nothing is packed."""
        self._check(args)
        return self._call_typed(*args)

    def _call_packed(self, *args):
        """The call where the entry unpacks words (NumPy's array layout unknown): each array's data
        pointer, shape and strides; a slot's and the record's data pointer."""
        self._check(args)
        objects, slots = self._slotted(args)
        words: list = []  # packed as Python integers, converted once (per-word stores cost a microsecond each)
        for v, t in zip(objects, list(self.types) + [None]):
            words.append(v.__array_interface__["data"][0])
            if t is not None and t.ndim:
                words.extend(v.shape)
                words.extend(v.strides)
        packed = np.array(words, np.int64)  # every word fits: addresses, sizes and strides are below 2**63
        self._function(packed.__array_interface__["data"][0])
        return tuple(slot[0].item() for slot in slots)

    def _call_typed(self, *args):
        """The call for arguments known to have the types compiled for (a kernel found by its
        arrays' dtypes and ranks, a program found by its arguments' kinds: ``calls.argument_kinds``)
        and an error record made by the caller: nothing is checked, scalars are put in slots."""
        if not self._scalars:
            self._function(*args)
            return ()
        objects, slots = self._slotted(args)
        self._function(*objects)
        return tuple(slot[0].item() for slot in slots)

    __call__ = _call_packed if ARRAY_FIELDS is None else _call_with_objects
    #: the call where the caller guarantees the types (``_call_typed``; the packed call checks them anyway)
    call_typed = _call_packed if ARRAY_FIELDS is None else _call_typed


def _describe(v) -> str:
    if isinstance(v, np.ndarray):
        order = "" if v.dtype.isnative else " (non-native byte order)"
        return f"a {v.dtype} array of rank {v.ndim}{order}"
    return type(v).__name__
