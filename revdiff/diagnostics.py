"""Measuring what reversibility costs in floating point: how far a forward-then-inverse round trip
lands from the state it started from."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from revdiff.function import ReversibleFunction


class Drift(NamedTuple):
    """Largest absolute difference, and that difference over the largest magnitude of the original."""
    abs: float
    rel: float


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else value


def roundtrip_error(f: ReversibleFunction, *args: Any) -> dict:
    """Run ``f`` forward and then its inverse on copies of ``args``; per parameter name, the
    ``Drift`` of the restored value from the original (0.0 and 0.0 for a bit-exact round trip)."""
    forward = f(*(_copy(a) for a in args))
    restored = (~f)(*forward)
    report = {}
    for name, before, after in zip(f.params, args, restored):
        a, b = np.asarray(before), np.asarray(after)
        if a.dtype == bool:
            a, b = a.astype(int), b.astype(int)
        if np.issubdtype(a.dtype, np.integer):  # subtract exactly, then report as a float
            diff = float(np.max(np.abs(b.astype(np.int64) - a.astype(np.int64)), initial=0))
        else:
            diff = float(np.max(np.abs(b - a), initial=0.0))
        scale = float(np.max(np.abs(a), initial=0.0))
        report[name] = Drift(diff, diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf")))
    return report


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"{key} not in /proc/self/status")


def peak_memory_growth(fn: Callable, *args: Any) -> tuple:
    """``(fn(*args), bytes)``: how far the process's resident memory peaked above its level at the
    call (everything counted: NumPy, LLVM, frameworks). Linux only; bytes is None elsewhere."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak-RSS mark (Linux >= 4.0)
        before = _status_bytes("VmRSS")
    except OSError:
        return fn(*args), None
    result = fn(*args)
    return result, max(_status_bytes("VmHWM") - before, 0)
