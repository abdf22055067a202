"""Plans: warm calls of the high-level functions on one host matrix, in a few steps. After a call in
the usual case, the checked path (``api.py``) records what it ran for the call's shapes, dtype and
options: the program's single-call form, the shapes of its fresh outputs, the rank tolerance, the
results it returned. A later call with the same shapes, dtype and options (C-ordered NumPy arrays
of one dtype) makes the same compiled calls on fresh arrays, with nothing else around them: the
scan of its inputs (``scan.in_range``), the program (``execute.run_owned``, beside the call driver
rather than through it), the rank scan of R (``scan.rank_ratios``) and the finiteness of the results.

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
from revdiff.execute import run_owned, runs_owned
from revdiff.programs.arguments import Matrices
from revdiff.programs.inputs import DTYPES, all_finite, outside_range
from revdiff.programs.kernels import run_one
from revdiff.programs.methods import chosen_method, resolved
from revdiff.programs.ranked import Rows
from revdiff.programs.scan import in_range_kernel, rank_ratio_arrays, rank_ratios_kernel

#: plans kept at once (one per function, options, shapes and dtype); the first recorded goes first
MAX_PLANS = 256
#: the position of R among the outputs of every QR, projection and least-squares program
R_OUTPUT = 1
_PLANS: dict = {}
_LOCK = threading.Lock()


class Rule(NamedTuple):
    """What picks a call's program: the ``method`` option, the QR ``mode``, whether a projection (or
    least squares), and the table of programs by method (``methods.py``)."""
    method: str
    mode: str
    projection: bool
    table: dict


class CallPlan(NamedTuple):
    """What a warm call runs: ``batched``'s single-call program ``one`` (a "value" or a "vjp") on
    fresh outputs of ``output_shapes`` (its first parameters) and the inputs; ``rule``, checked
    again on every call (the rules read module constants); ``returns``: ("out", i) for output i's
    final value or ("grad", k) for parameter k's gradient, per result; ``scan`` and ``rank``: the
    compiled kernels of the input scan and the rank scan."""
    batched: BatchedFunction
    one: OneElement
    kind: str
    rule: Rule
    output_shapes: tuple
    tol: float
    returns: tuple
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


def run_plan(function: str, options: tuple, inputs: tuple, cotangents: tuple = ()) -> "np.ndarray | tuple | None":
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
    if plan is None or not current(plan.batched.f, plan.one.program) or not _still_chosen(plan, inputs[0]):
        return None
    if not _unscaled(plan.scan, inputs + cotangents):  # NaN, Inf or a magnitude to scale
        return None
    outputs = tuple(np.zeros(shape, inputs[0].dtype) for shape in plan.output_shapes)
    arguments = outputs + inputs
    done = run_owned(plan.batched, plan.one, plan.kind, arguments,
                     cotangents + (None,) * (len(arguments) - len(cotangents)))
    if done is None:
        return None
    finals, grads = (done, None) if plan.kind != "vjp" else done
    _, _, lowest = values = rank_ratio_arrays(finals[R_OUTPUT][None])
    run_one(plan.rank, values)
    if not float(lowest[0]) > plan.tol:  # a dependent column (NaN fails)
        return None
    results = tuple(finals[k] if role == "out" else grads[k] for role, k in plan.returns)
    if not all(all_finite(r) for r in results):
        return None
    return results[0] if len(results) == 1 else results


def _still_chosen(plan: CallPlan, A) -> bool:
    """Whether the rule still picks the plan's program for A (the rule's constants unchanged)."""
    rule = plan.rule
    method = resolved(rule.method, A.shape, False, rule.mode, A.dtype, rule.projection)
    return rule.table.get(chosen_method(method, A.shape)) is plan.batched.f


def _scan_arguments(arrays: tuple) -> tuple:
    """The arguments of the ``in_range`` kernel (``scan.in_range``) for the matrix (per column) and
    the other arrays of ``arrays`` (whole; None: a cotangent left out)."""
    A = arrays[0]
    values = [A[None], np.empty((1, A.shape[1]))]
    for a in arrays[1:]:
        if a is not None:
            values += (a.reshape(1, -1), np.empty(1))
    values.append(np.empty((1, len(values) // 2)))
    return tuple(values)


def _unscaled(kernel, arrays: tuple) -> bool:
    """Whether the checked path would scale none of ``arrays`` and refuse none as NaN or Inf: every
    largest magnitude (per column of the matrix, whole for the others) finite and in range, or 0
    (``inputs.scale_exponents`` leaves zeros as they are: a zero cotangent, a zero column that the
    rank check then names)."""
    values = _scan_arguments(arrays)
    run_one(kernel, values)
    if np.minimum.reduce(values[-1], axis=None) == 1.0:  # every one in range (the usual case)
        return True
    return all(np.all(np.isfinite(big) & ~outside_range(big, arrays[0].dtype)) for big in values[1:-1:2])


def record(function: str, options: tuple, inputs: tuple, cotangents: tuple, batched: BatchedFunction, kind: str,
           rule: Rule, output_shapes: tuple, tol: float, returns: tuple) -> None:
    """Keep the plan of a call the checked path answered in the usual case (``usual``; no
    truncation or pivoting): its ``rule``, the program ``batched`` on fresh outputs of
    ``output_shapes`` and the ``inputs``, and what it returned (``CallPlan``). Nothing is kept for
    arguments the plans do not take (``_key``), for a program that writes an input (a plan passes
    the caller's arrays) or that ``execute.run_owned`` cannot run; a plan kept already for the
    same program stays."""
    key = _key(function, options, inputs + cotangents)
    if key is None or batched.f.forward_function.modified_positions() - set(range(len(output_shapes))):
        return
    dtype = inputs[0].dtype
    args = tuple(np.zeros((1,) + shape, dtype) for shape in output_shapes) + tuple(a[None] for a in inputs)
    one = batched.one_element(kind, args)
    if one is None or not runs_owned(one):
        return
    kept = _PLANS.get(key)
    if kept is not None and kept.one is one and kept.rule == rule:
        return
    scan = in_range_kernel(_scan_arguments(inputs + cotangents))
    plan = CallPlan(batched, one, kind, rule, output_shapes, tol, returns, scan,
                    rank_ratios_kernel(rank_ratio_arrays(args[R_OUTPUT])))
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
