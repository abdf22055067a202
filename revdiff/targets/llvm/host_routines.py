"""The host routines of generated Python code (``backend="python"``), by the names it calls them:
the interrupt check of while loops and the largest magnitude of a view in NumPy, and the BLAS
routines as the very code compiled programs run (``targets/llvm/host.py``, called through
ctypes), so that both backends give the same bits."""
from __future__ import annotations

import ctypes
import threading

import numpy as np

from revdiff.targets.llvm.host import OPERANDS, exported
from revdiff.ir.checks import INTERRUPT
from revdiff.ir.low import host_symbol
from revdiff.targets.llvm import jit as native

_LOCK = threading.Lock()
_ROUTINES: dict = {}  # dtype -> {routine: ctypes function}


def _compiled(dtype: str) -> dict:
    with _LOCK:
        if dtype not in _ROUTINES:
            text, symbols = exported(dtype)
            addresses = native.load(text, f"host_routines_{dtype}", list(symbols.values()))
            functions = {}
            for routine, symbol in symbols.items():
                if routine.startswith("largest_"):
                    functions[routine] = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_void_p,
                                                          ctypes.c_int64, ctypes.c_int64)(addresses[symbol])
                    continue
                ranks, flags = OPERANDS[routine]
                args = [t for rank in ranks for t in [ctypes.c_void_p] + [ctypes.c_int64] * (2 * rank)]
                args += [ctypes.c_bool] * (flags + 1)
                functions[routine] = ctypes.CFUNCTYPE(ctypes.c_bool, *args)(addresses[symbol])
            _ROUTINES[dtype] = functions
    return _ROUTINES[dtype]


def _blas(routine: str):
    ranks, flags = OPERANDS[routine]

    def call(*operands) -> bool:
        views, rest = operands[:len(ranks)], operands[len(ranks):]
        dtypes = {v.dtype.name for v in views}
        if len(dtypes) != 1 or not dtypes <= {"float32", "float64"} or \
                any(v.ndim != rank for v, rank in zip(views, ranks)):
            return False
        args = []
        for v in views:
            args += [v.ctypes.data, *v.shape, *v.strides]
        return bool(_compiled(dtypes.pop())[routine](*args, *(bool(f) for f in rest[:flags]), rest[flags] > 0))

    call.__name__ = routine
    return call


def interrupt_requested(record) -> bool:
    """Whether the caller set the interrupt field of the error record (Ctrl-C)."""
    return record[INTERRUPT] != 0.0


def largest_magnitude(scale, V):
    """max(scale, |x|) over every element x of view ``V``; a NaN element leaves it as it is."""
    if V.size == 0:
        return scale
    top = np.fmax.reduce(np.abs(V), axis=None)
    return top if top > scale else scale


def compiled_largest(scale: float, v) -> float:
    """The compiled programs' scan (four running maxima) of a vector view ``v`` of a real or complex
    dtype: ``max(scale, |x|)`` over its elements."""
    real = {"complex128": "float64", "complex64": "float32"}.get(v.dtype.name, v.dtype.name)
    return _compiled(real)[f"largest_{v.dtype.name}"](scale, v.ctypes.data, v.shape[0], v.strides[0])


def lane_copy(*_operands) -> bool:
    """Declines: generated Python copies lane buffers by its loops (compiled code transposes)."""
    return False


ROUTINES = {"interrupt_requested": interrupt_requested, "largest_magnitude": largest_magnitude,
            "lane_copy": lane_copy,
            **{name: _blas(name) for name in OPERANDS}}


def routines(names) -> dict:
    """The routines ``names``, under the names generated code calls them by (its globals)."""
    return {host_symbol(r): ROUTINES[r] for r in sorted(names)}

matvec = ROUTINES["matvec"]
matvec_input_gradient = ROUTINES["matvec_input_gradient"]
outer_update = ROUTINES["outer_update"]
matmat = ROUTINES["matmat"]
matmat_gradient = ROUTINES["matmat_gradient"]
