"""Plans: warm calls of the high-level functions on one host matrix, in a few steps. After a call in
the usual case, the checked path (``api.py``) records what it ran for the call's argument kinds
(shapes, dtype, options): the program's single-call form, the shapes of its fresh outputs, the rank
tolerance, the results it returned. A later call of the same kinds makes the same compiled calls
on fresh arrays, with nothing else around them: the scan of its inputs (``scan.in_range``), the
program (``execute.run_owned``), the rank scan of R (``scan.rank_ratios``) and the finiteness of
the results.

A plan answers the usual case only: every input in range (nothing to scale), the program's own
checks and the rank check passed, finite results. For anything else it returns None, and the
checked path runs the call from the start, meets the same condition and raises or handles it
(scaling, the other row orders of ``ranked``, ``cgs2_where_refused``, the named errors). Its results
are the checked path's bit for bit: the same program on the same values.
"""
from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from revdiff.batch import BatchedFunction
from revdiff.batching import OneElement
from revdiff.calls import current
from revdiff.execute import run_owned
from revdiff.programs.arguments import Matrices
from revdiff.programs.inputs import DTYPES
from revdiff.programs.methods import chosen_method, resolved
from revdiff.programs.kernels import run_one
from revdiff.programs.ranked import Rows
from revdiff.programs.scan import in_range_kernel, rank_ratio_arrays, rank_ratios_kernel
from revdiff.targets.llvm.entry_calls import NativeProgram

#: plans kept at once (one per function, options, shapes and dtype); the oldest goes first
MAX_PLANS = 256
_PLANS: dict = {}
_LOCK = threading.Lock()


class Plan(NamedTuple):
    """What a warm call runs. ``method``: the method the options resolve to, and ``chosen``: the one
    whose program runs (both checked again on every call, as the rules read module constants);
    ``outputs``: the shapes of the program's fresh outputs (its first parameters); ``returns``:
    ("out", i) for output i's final value or ("grad", k) for parameter k's gradient, per result;
    ``scan`` and ``rank``: the compiled kernels of the input scan and the rank scan."""
    batched: BatchedFunction
    one: OneElement
    kind: str
    method: tuple
    chosen: str
    outputs: tuple
    tol: float
    returns: tuple
    single: bool
    scan: object
    rank: object


def _key(function: str, options: tuple, arrays: tuple) -> tuple | None:
    """The plan key of a call with ``arrays`` (its matrix first; None for a cotangent left out), or
    None where one is not a C-ordered host array of the matrix's supported dtype (the checked path
    converts those)."""
    A = arrays[0]
    if type(A) is not np.ndarray or A.ndim != 2:
        return None
    dtype = A.dtype
    if dtype.type not in DTYPES or not dtype.isnative:
        return None
    shapes = []
    for a in arrays:
        if a is None:
            shapes.append(None)
        elif type(a) is np.ndarray and a.dtype == dtype and a.flags.c_contiguous:
            shapes.append(a.shape)
        else:
            return None
    return (function, tuple(map(type, options)), options, dtype, tuple(shapes))


def run_plan(function: str, options: tuple, inputs: tuple, cotangents: tuple = ()):
    """The results of a warm call of ``function`` (the ``options`` that key it: method, rank_tol,
    mode...) on ``inputs`` (the matrix, then vectors) with ``cotangents`` (of the program's outputs,
    None for zero) through its plan, or None: no plan, or not the usual case (see the module)."""
    key = _key(function, options, inputs + cotangents)
    if key is None:
        return None
    try:
        plan = _PLANS.get(key)
    except TypeError:  # an unhashable option: the checked path names it
        return None
    if plan is None or not current(plan.batched.f, plan.one.program):
        return None
    A = inputs[0]
    method, mode, projection = plan.method
    now = resolved(method, A.shape, False, mode, A.dtype, projection)
    if chosen_method(now, A.shape) != plan.chosen:
        return None
    if not _inside(plan.scan, inputs + cotangents):  # NaN, Inf or a magnitude to scale
        return None
    outputs = tuple(np.zeros(shape, A.dtype) for shape in plan.outputs)
    done = run_owned(plan.batched, plan.one, plan.kind, outputs + inputs,
                     cotangents + (None,) * (len(outputs) + len(inputs) - len(cotangents)))
    if done is None:
        return None
    finals, grads = (done, None) if plan.kind != "vjp" else done
    values = rank_ratio_arrays(finals[1][None])
    run_one(plan.rank, values)
    if not float(values[2][0]) > plan.tol:  # a dependent column (NaN fails)
        return None
    results = tuple(finals[k] if role == "out" else grads[k] for role, k in plan.returns)
    for r in results:  # a sum is finite only where every term is (an overflowing sum goes back, too)
        if not np.isfinite(np.add.reduce(r, axis=None)):
            return None
    return results[0] if plan.single else results


def _scanned(arrays: tuple) -> tuple:
    """The arguments of the ``in_range`` kernel (``scan.in_range``) for the matrix (per column) and
    the other arrays of ``arrays`` (whole; None: a cotangent left out)."""
    A = arrays[0]
    values = [A[None], np.empty((1, A.shape[1]))]
    for a in arrays[1:]:
        if a is not None:
            values += (a.reshape(1, -1), np.empty(1))
    values.append(np.empty((1, len(values) // 2)))
    return tuple(values)


def _inside(kernel, arrays: tuple) -> bool:
    """Whether every value of ``arrays`` is finite and in range: the checked path then scales none."""
    values = _scanned(arrays)
    run_one(kernel, values)
    return bool(np.minimum.reduce(values[-1], axis=None) == 1.0)


def record(function: str, options: tuple, inputs: tuple, cotangents: tuple, batched: BatchedFunction, kind: str,
           method: tuple, outputs: tuple, tol: float, returns: tuple, single: bool = True) -> None:
    """Keep the plan of a call the checked path answered in the usual case (one host matrix, nothing
    scaled, A's own row order, no truncation or pivoting): ``method`` (the method option, QR mode,
    whether a projection) resolved as it ran, the program ``batched`` over its ``outputs`` (shapes)
    and ``inputs``, and what it returned (``Plan``). Nothing is kept for arguments the plans do
    not take (``_key``), or for programs with scalar parameters or loops to interrupt."""
    key = _key(function, options, inputs + cotangents)
    if key is None:
        return
    dtype = inputs[0].dtype
    args = tuple(np.zeros((1,) + shape, dtype) for shape in outputs) + tuple(a[None] for a in inputs)
    one = batched.one_element(kind, args)
    program = one.program.program if one is not None else None
    if not (one is not None and one.typed and isinstance(program, NativeProgram) and not program.revdiff_loops
            and all(t.ndim for t in one.program.types) and not any(scalar for _, _, scalar in one.extra_slots)):
        return
    now = resolved(method[0], inputs[0].shape, False, method[1], dtype, method[2])
    scan = in_range_kernel(_scanned(inputs + cotangents))
    rank = rank_ratios_kernel(rank_ratio_arrays(args[1]))
    plan = Plan(batched, one, kind, method, chosen_method(now, inputs[0].shape), outputs, tol, returns, single, scan,
                rank)
    with _LOCK:
        if key not in _PLANS and len(_PLANS) >= MAX_PLANS:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = plan


def usual(M: Matrices, rows: Rows, *exponents) -> bool:
    """Whether a checked call ran as a plan would run it: one host matrix in its own row order
    (``ranked.Rows``), nothing scaled (``exponents``: those of the other arguments and of the
    cotangents, beside A's own)."""
    return M.batch == () and not M.gpu and rows.order is None and M.e is None and all(e is None for e in exponents)


def clear() -> None:
    """Forget every plan (the next call of each kind takes the checked path and records one again)."""
    with _LOCK:
        _PLANS.clear()
