"""Compiled loops that are not reversible programs (the scans of the high-level functions' inputs
and results, the pivot order): low IR written by hand, compiled like the programs
(``targets/llvm/programs.py``: once per process, cached on disk), and run over a batch axis split among
threads (``calls.run_batch``). A kernel's body loops ``_b`` over ``[_lo, _hi)``, read from its first
parameter, the int64 array ``_bounds``: with every parameter an array, a call passes its arguments
as they are (``NativeProgram.call_typed``), a few microseconds for the small arrays of one call."""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from revdiff.calls import ERROR_RECORD, raise_failure, run_batch
from revdiff.ir.high import Const, Index
from revdiff.ir.low import Local, LowFunction
from revdiff.ir.types import VarType, kind_of_dtype
from revdiff.targets.llvm.entry_calls import NativeProgram
from revdiff.targets.llvm.programs import entry_callable

_BOUNDS = VarType("int", 1, "int64")
_KERNELS: dict = {}
_LOCK = threading.Lock()


def kernel(name: str, make: Callable, names: tuple, arrays: tuple, for_layout: bool = False) -> NativeProgram:
    """The compiled kernel ``name`` for ``arrays`` (example arrays of its parameters ``names``), its
    body made by ``make(types)`` (parameter name -> VarType of each array) as a list of statements;
    found by the arrays' dtypes and ranks. ``for_layout``: also by which arrays' last axes are
    contiguous, compiled knowing it (adjacent loads LLVM can vectorise), so the kernel must be run on
    those arrays (``run_kernel`` does) or on arrays laid out alike."""
    contiguous = tuple(a.ndim > 0 and (a.shape[-1] <= 1 or a.strides[-1] == a.itemsize) for a in arrays) \
        if for_layout else ()
    key = (name, *[(a.dtype, a.ndim) for a in arrays], contiguous)
    fn = _KERNELS.get(key)
    if fn is not None:
        return fn
    with _LOCK:
        fn = _KERNELS.get(key)
        if fn is None:
            if not all(a.dtype.isnative for a in arrays):  # called unchecked (``run``): never cached
                raise TypeError(f"kernel {name} reads arrays in native byte order only")
            types = {p: VarType(kind_of_dtype(a.dtype), a.ndim, a.dtype.name) for p, a in zip(names, arrays)}
            body = [Local("_lo", Index("_bounds", (Const(0),))), Local("_hi", Index("_bounds", (Const(1),))),
                    *make(types)]
            params = ["_bounds", *names, "_errors"]
            all_types = {"_bounds": _BOUNDS, "_errors": VarType("float", 2, "float64"), **types}
            low = LowFunction(f"{name}_{'_'.join(t.dtype for t in types.values())}", params, body, [], all_types)
            unit_stride_params = frozenset(p for p, unit in zip(names, contiguous) if unit)
            fn = _KERNELS[key] = entry_callable(low, {}, "llvm", f"revdiff kernel {name}", loops=False,
                                                unit_stride=unit_stride_params)
    return fn


def run(fn, units: int, arrays: tuple) -> None:
    """Run kernel ``fn`` (``kernel``'s, found by these arrays' dtypes and ranks, and by their layout
    where it was looked up ``for_layout``, so called without checking them again) over ``[0, units)``
    on ``arrays``, updated in place, split among threads where there are several units
    (``calls.run_batch``)."""
    if units == 1:
        run_one(fn, arrays)
    else:
        run_batch(fn, arrays, np.zeros((1, ERROR_RECORD)), units, kernel=True)


#: the bounds of a kernel run over one unit (read, never written, by every such run at once)
_ONE_UNIT = np.array([0, 1], np.int64)
_ONE_UNIT.flags.writeable = False


def run_one(fn: NativeProgram, arrays: tuple) -> None:
    """``run`` over the single unit [0, 1), in this thread and with nothing to split (the scans of a
    single matrix, a plan's among them: ``plans.py``)."""
    record = np.zeros(ERROR_RECORD)
    fn.call_typed(_ONE_UNIT, *arrays, np.zeros((1, ERROR_RECORD)), record)
    if record[0]:
        raise_failure(record)


def run_kernel(name: str, make: Callable, units: int, **arrays) -> None:
    """Run kernel ``name`` over ``[0, units)`` on ``arrays`` (parameter name -> array, updated in place)."""
    values = tuple(arrays.values())
    run(kernel(name, make, tuple(arrays), values, for_layout=True), units, values)
