"""Scans the high-level functions make over their inputs and results: the largest magnitude of each
batch element or column (NaN where it holds a NaN), and the rank ratios of triangular factors.

On the CPU the inputs of a call (``in_range``: every argument at once) and the triangular factors
are scanned by compiled loops at every size (low IR, compiled like the programs: ``kernels.py``),
split among threads for large batches, without temporaries; the other scans (of results,
cotangents and tangents: ``largest_per_element``, ``largest_per_column``) use them above
``COMPILED_MIN_SIZE`` entries, NumPy below; GPU arrays CuPy (callers pass the module).
"""
from __future__ import annotations

import functools

import numpy as np

from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Index, Name, Select, Shape
from revdiff.ir.low import Assign, AugAssign, Branch, Local, Loop
from revdiff.programs.kernels import kernel, run, run_kernel
from revdiff.targets.llvm.entry_calls import NativeProgram

#: ``largest_per_element`` and ``largest_per_column`` scan arrays with fewer entries by NumPy expressions
COMPILED_MIN_SIZE = 1 << 16


@functools.cache
def safe_exponent(dtype) -> int:
    """Magnitudes within 2**±s compute without overflow or underflow in ``dtype``: 500 for double,
    52 for single precision (a quarter of the exponent range each way, less room for sums)."""
    return int(np.finfo(dtype).maxexp) // 2 - 12


#: running maxima per element in ``_element_maximum``, of interleaved entries: chains that overlap
CHAINS = 8


def _magnitude(x, tag: str = "") -> list:
    """Statements setting ``_x<tag>`` to max(|Re x|, |Im x|) of element expression ``x``, NaN where either is."""
    re, im, out = Name(f"_re{tag}"), Name(f"_im{tag}"), f"_x{tag}"
    larger = BoolOp("or", (Compare(">", im, re), Compare("!=", im, im)))
    return [Local(re.id, Call("abs", (Call("real", (x,)),))), Local(im.id, Call("abs", (Call("imag", (x,)),))),
            Local(out, Select(larger, im, re))]


def _sticky_max(target, x) -> Assign:
    """``target = x`` where x is larger or NaN: a NaN sticks, nothing compares greater than it."""
    return Assign((target,), (Select(BoolOp("or", (Compare(">", x, target), Compare("!=", x, x))), x, target),))


def _element_maximum(x: str, out: str) -> list:
    """Statements of element ``_b``: ``out[_b]`` = the largest magnitude of ``x[_b, :]``, also left in
    the local ``_big`` (``_in_range`` reads it). A single running maximum makes each compare wait for
    the one before; ``CHAINS`` running maxima of interleaved entries overlap, and their maximum is the
    same (and NaN where a NaN is) in any order."""
    b, t, n = Name("_b"), Name("_t"), Shape(x, 1)
    bulk = BinOp("-", n, BinOp("%", n, Const(CHAINS)))
    steps = []
    for j in range(CHAINS):
        entry = Index(x, (b, BinOp("+", t, Const(j))))
        steps += _magnitude(entry, str(j)) + [_sticky_max(Name(f"_big{j}"), Name(f"_x{j}"))]
    rest = _magnitude(Index(x, (b, t)), "0") + [_sticky_max(Name("_big0"), Name("_x0"))]
    return ([Local(f"_big{j}", Const(0.0)) for j in range(CHAINS)]
            + [Loop("_t", Const(0), bulk, Const(CHAINS), steps), Loop("_t", bulk, n, Const(1), rest),
               Local("_big", Name("_big0"))]
            + [_sticky_max(Name("_big"), Name(f"_big{j}")) for j in range(1, CHAINS)]
            + [Assign((Index(out, (b,)),), (Name("_big"),))])


def _column_maxima(x: str, out: str) -> list:
    """Statements of element ``_b``: ``out[_b, k]`` = the largest magnitude of ``x[_b, :, k]``, row by row."""
    b, i, k = Name("_b"), Name("_i"), Name("_k")
    return [Loop("_k", Const(0), Shape(x, 2), Const(1), [Assign((Index(out, (b, k)),), (Const(0.0),))]),
            Loop("_i", Const(0), Shape(x, 1), Const(1), [
                Loop("_k", Const(0), Shape(x, 2), Const(1),
                     _magnitude(Index(x, (b, i, k))) + [_sticky_max(Index(out, (b, k)), Name("_x"))])])]


def _largest_by_row(types: dict) -> list:
    return [Loop("_b", Name("_lo"), Name("_hi"), Const(1), _element_maximum("a", "out"))]


def largest_per_element(a, xp=np) -> np.ndarray:
    """max over each batch element (axis 0 of ``a``; the rest flattened) of max(|Re x|, |Im x|),
    NaN for an element holding a NaN. Within a factor sqrt(2) of the largest modulus. ``xp``: the
    array module of ``a`` (NumPy or CuPy)."""
    flat = a.reshape(a.shape[0], -1)
    if xp is np and a.size >= COMPILED_MIN_SIZE:
        out = np.empty(flat.shape[0])
        run_kernel("largest_by_row", _largest_by_row, flat.shape[0], a=flat, out=out)
        return out
    if flat.shape[1] == 0:
        return xp.zeros(flat.shape[0])
    parts = xp.maximum(xp.abs(flat.real), xp.abs(flat.imag)) if flat.dtype.kind == "c" else xp.abs(flat)
    return largest(parts, xp, axis=1).astype(np.float64, copy=False)


def _in_range(types: dict) -> list:
    """Kernel ``in_range``: for arrays ``x0, x1, ...`` (each a batch of matrices, scanned per
    column into ``big<i>`` (b, columns), or of flattened elements, scanned whole into ``big<i>``
    (b,)) the largest magnitudes as ``largest_per_column`` and ``largest_per_element`` find them,
    and ``inside[b, i]``: 1 where every magnitude of element b of ``x<i>`` lies in [2**-s, 2**s]
    (``safe_exponent`` of its dtype; a NaN fails the comparisons), else 0."""
    b, k = Name("_b"), Name("_k")
    body = []
    for a in range((len(types) - 1) // 2):  # x<a>, big<a> per array, then inside
        x, big = f"x{a}", f"big{a}"
        s = float(2.0 ** safe_exponent(np.dtype(types[x].dtype)))
        inside = lambda v: BoolOp("and", (Compare(">=", v, Const(1 / s)), Compare("<=", v, Const(s))))  # noqa: E731
        if types[x].ndim == 3:  # per column
            column = Index(big, (b, k))
            body += [*_column_maxima(x, big), Local("_ok", Const(1.0)),
                     Loop("_k", Const(0), Shape(x, 2), Const(1),
                          [Assign((Name("_ok"),), (Select(inside(column), Name("_ok"), Const(0.0)),))])]
        else:
            body += [*_element_maximum(x, big), Local("_ok", Select(inside(Name("_big")), Const(1.0), Const(0.0)))]
        body.append(Assign((Index("inside", (b, Const(a))),), (Name("_ok"),)))
    return [Loop("_b", Name("_lo"), Name("_hi"), Const(1), body)]


def in_range(arrays: list) -> tuple:
    """(magnitudes, inside) of (a, per_column) pairs of host arrays with entries, each flattened to one
    batch axis (b, m, n) per column or (b, ...) per element, in one compiled pass (``_in_range``): the
    largest magnitudes of each, as ``largest_per_column`` and ``largest_per_element`` give them, and
    per array whether every one of them is finite and in [2**-s, 2**s]."""
    b = arrays[0][0].shape[0]
    if any(a.shape[0] != b for a, _ in arrays):  # the kernel reads every array at the first one's elements
        raise ValueError(f"in_range scans arrays of one batch size, got {[a.shape[0] for a, _ in arrays]}")
    values, bigs = [], []
    for a, per_column in arrays:
        big = np.empty((b, a.shape[2]) if per_column else b)
        values += (a if per_column else a.reshape(b, -1), big)
        bigs.append(big)
    inside = np.empty((b, len(arrays)))
    values.append(inside)
    values = tuple(values)
    run(in_range_kernel(values, for_layout=True), b, values)
    every = inside[0] if b == 1 else np.minimum.reduce(inside, axis=0)
    return bigs, [v == 1.0 for v in every.tolist()]


def in_range_kernel(values: tuple, for_layout: bool = False) -> NativeProgram:
    """The compiled kernel of ``in_range`` for ``values``, its arguments (x0, big0, x1, big1, ...,
    inside), found by their dtypes and ranks. ``for_layout``: compiled for these arrays' layout
    (``kernels.kernel``); plans, which run it on later arrays, leave it False."""
    return kernel("in_range", _in_range, _in_range_names((len(values) - 1) // 2), values, for_layout)


@functools.cache
def _in_range_names(count: int) -> tuple:
    return (*[name for i in range(count) for name in (f"x{i}", f"big{i}")], "inside")


def largest(a, xp=np, axis=None):
    """``a.max(axis)``, NaN where a NaN is: NumPy's reduction called directly, without the method's
    Python wrapper (a few microseconds for the small arrays a single call scans)."""
    return np.maximum.reduce(a, axis=axis) if xp is np else a.max(axis=axis)


def smallest(a, xp=np):
    """``a.min()``, as ``largest``."""
    return np.minimum.reduce(a, axis=None) if xp is np else a.min()


def _largest_by_column(types: dict) -> list:
    return [Loop("_b", Name("_lo"), Name("_hi"), Const(1), _column_maxima("a", "out"))]


def largest_per_column(A, xp=np) -> np.ndarray:
    """max over the rows of each column of each matrix of A (batch, rows, columns) of
    max(|Re x|, |Im x|), NaN for a column holding a NaN; (batch, columns)."""
    if xp is np and A.size >= COMPILED_MIN_SIZE:
        out = np.empty((A.shape[0], A.shape[2]))
        run_kernel("largest_by_column", _largest_by_column, A.shape[0], a=A, out=out)
        return out
    if A.shape[1] == 0:
        return xp.zeros((A.shape[0], A.shape[2]))
    parts = xp.maximum(xp.abs(A.real), xp.abs(A.imag)) if A.dtype.kind == "c" else xp.abs(A)
    return largest(parts, xp, axis=1).astype(np.float64, copy=False)


def column_norms(M, xp=np) -> np.ndarray:
    """Euclidean norms of the columns of each matrix of M (..., rows, columns), scaled so that no
    square overflows or underflows."""
    size = xp.abs(M)
    big = size.max(axis=-2, keepdims=True) if M.shape[-2] else xp.zeros(M.shape[:-2] + (1, M.shape[-1]))
    safe = xp.where(big > 0, big, 1)
    return big[..., 0, :] * xp.sqrt(((size / safe) ** 2).sum(axis=-2))


def _rank_ratios(types: dict) -> list:
    e, k, i = Name("_b"), Name("_k"), Name("_i")
    big, total = Name("_big"), Name("_total")
    entry = Index("R", (e, i, k))
    p = Call("min", (Shape("R", 1), Shape("R", 2)))
    scan = [Local("_a", Call("abs", (entry,))),
            Assign((big,), (Select(Compare(">", Name("_a"), big), Name("_a"), big),))]  # max(big, |R[e, i, k]|)
    ratio = BinOp("/", Call("abs", (Index("R", (e, k, k)),)), BinOp("*", big, Call("sqrt", (total,))))
    out, low = Index("out", (e, k)), Name("_low")
    column = [Local("_big", Const(0.0)),
              Loop("_i", Const(0), BinOp("+", k, Const(1)), Const(1), scan),
              Branch(BoolOp("or", (Compare("==", big, Const(0.0)), Compare("!=", big, big))),
                     [Assign((out,), (Select(Compare("==", big, Const(0.0)), Const(0.0), big),))],
                     [Local("_total", Const(0.0)),
                      Loop("_i", Const(0), BinOp("+", k, Const(1)), Const(1),
                           [AugAssign(total, "+", BinOp("**", Call("abs", (BinOp("/", entry, big),)), Const(2)))]),
                      Assign((out,), (ratio,))]),
              Assign((low,), (Select(BoolOp("or", (Compare("<", out, low), Compare("!=", out, out))), out, low),))]
    return [Loop("_b", Name("_lo"), Name("_hi"), Const(1), [
        Local("_low", Const(2.0)),  # above every ratio (at most 1, and rounding)
        Loop("_k", Const(0), p, Const(1), column),
        Assign((Index("lowest", (e,)),), (low,))])]


def rank_ratio_arrays(R) -> tuple:
    """The arguments of the ``rank_ratios`` kernel for host R (b, p, n): R, then the ratios
    (b, min(p, n)) and the smallest ratio of each factor (b) it writes."""
    return R, np.empty((R.shape[0], min(R.shape[1], R.shape[2]))), np.empty(R.shape[0])


def rank_ratios_kernel(values: tuple) -> NativeProgram:
    """The compiled kernel of ``rank_ratios`` for ``values`` (``rank_ratio_arrays``)."""
    return kernel("rank_ratios", _rank_ratios, ("R", "out", "lowest"), values)


def rank_ratios(R, xp=np) -> tuple:
    """(ratios, lowest): |R[k, k]| / ||R[:, k]|| for the leading square block of each triangular
    factor in R (b, p, n), p > 0: how far column k of A = Q R is from the span of the earlier ones
    (0 for a zero column; with Q orthonormal, ||R[:, k]|| = ||A[:, k]||), and the smallest ratio of
    each factor (NaN where one is NaN)."""
    if xp is np and R.ndim == 3:  # compiled at every size: one call where NumPy makes a dozen
        values = rank_ratio_arrays(R)
        run(rank_ratios_kernel(values), R.shape[0], values)
        return values[1:]
    p = min(R.shape[-2:])
    square = R[..., :p, :p]
    norms = column_norms(square, xp)
    diag = xp.abs(xp.diagonal(square, axis1=-2, axis2=-1))
    ratios = diag / xp.where(norms > 0, norms, 1)
    ratios = xp.where(norms > 0, ratios, xp.where(norms == 0, 0.0, np.nan))  # NaN stays NaN, as compiled
    return ratios, ratios.min(axis=1)
