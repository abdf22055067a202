"""Compiled loops that are not reversible programs (the scans of the high-level functions' inputs
and results, the pivot order): low IR written by hand, compiled like the programs
(``targets/llvm/programs.py``: once per process, cached on disk), and run over a batch axis split among
threads (``calls.run_batch``). A kernel's body loops ``_b`` over ``[_lo, _hi)``."""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from revdiff.calls import ERROR_RECORD, run_batch
from revdiff.targets.llvm.programs import entry_callable
from revdiff.ir.low import LowFunction
from revdiff.ir.types import VarType, kind_of_dtype

INT = VarType("int", 0, "int64")
_KERNELS: dict = {}
_LOCK = threading.Lock()


def kernel(name: str, make: Callable, arrays: dict):
    """The compiled kernel ``name`` for ``arrays`` (parameter name -> example array), its body made by
    ``make(dtype of the first array)`` as (statements, ...); found by the arrays' dtypes and ranks."""
    key = (name, tuple((a.dtype, a.ndim) for a in arrays.values()))
    fn = _KERNELS.get(key)
    if fn is not None:
        return fn
    with _LOCK:
        fn = _KERNELS.get(key)
        if fn is None:
            types = {p: VarType(kind_of_dtype(a.dtype), a.ndim, a.dtype.name) for p, a in arrays.items()}
            body = make(next(iter(types.values())).dtype)[0]
            params = ["_lo", "_hi"] + list(arrays) + ["_errors"]
            all_types = {"_lo": INT, "_hi": INT, "_errors": VarType("float", 2, "float64"), **types}
            low = LowFunction(f"{name}_{'_'.join(t.dtype for t in types.values())}", params, body, ["_lo", "_hi"],
                              all_types)
            fn = _KERNELS[key] = entry_callable(low, {}, "llvm", f"revdiff kernel {name}", loops=False)
    return fn


def run_kernel(name: str, make: Callable, units: int, **arrays) -> None:
    """Run kernel ``name`` over ``[0, units)`` on ``arrays`` (updated in place)."""
    run_batch(kernel(name, make, arrays), tuple(arrays.values()), np.zeros((1, ERROR_RECORD)), units)
