"""Scans the high-level functions make over their inputs and results: the largest magnitude of each
batch element or column (NaN where it holds a NaN), and the rank ratios of triangular factors.

Large batches are scanned by compiled loops (low IR, compiled like the programs: ``kernels.py``)
split among threads, without temporaries; small ones, and GPU arrays, by NumPy or CuPy expressions
(callers pass the module).
"""
from __future__ import annotations

import numpy as np

from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Index, Name, Select, Shape
from revdiff.ir.low import Assign, AugAssign, Branch, Local, Loop
from revdiff.programs.kernels import run_kernel

#: arrays with fewer entries are scanned by NumPy expressions
COMPILED_MIN_SIZE = 1 << 16


def _magnitude(x) -> tuple:
    """Statements setting ``_x`` to max(|Re x|, |Im x|) of element expression ``x``."""
    re, im = Call("abs", (Call("real", (x,)),)), Call("abs", (Call("imag", (x,)),))
    return [Local("_re", re), Local("_im", im),
            Local("_x", Select(Compare(">", Name("_im"), Name("_re")), Name("_im"), Name("_re")))]


def _sticky_max(target) -> Assign:
    """``target = _x`` where _x is larger or NaN: a NaN sticks, nothing compares greater than it."""
    x = Name("_x")
    return Assign((target,), (Select(BoolOp("or", (Compare(">", x, target), Compare("!=", x, x))), x, target),))


def _largest_by_row(dtype: str) -> tuple:
    b, t = Name("_b"), Name("_t")
    body = [Loop("_b", Name("_lo"), Name("_hi"), Const(1), [
        Local("_big", Const(0.0)),
        Loop("_t", Const(0), Shape("a", 1), Const(1),
             _magnitude(Index("a", (b, t))) + [_sticky_max(Name("_big"))]),
        Assign((Index("out", (b,)),), (Name("_big"),))])]
    return body, {"a": (dtype, 2), "out": ("float64", 1)}


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


def largest(a, xp=np, axis=None):
    """``a.max(axis)``, NaN where a NaN is: NumPy's reduction called directly, without the method's
    Python wrapper (a few microseconds for the small arrays a single call scans)."""
    return np.maximum.reduce(a, axis=axis) if xp is np else a.max(axis=axis)


def smallest(a, xp=np):
    """``a.min()``, as ``largest``."""
    return np.minimum.reduce(a, axis=None) if xp is np else a.min()


def _largest_by_column(dtype: str) -> tuple:
    b, i, k = Name("_b"), Name("_i"), Name("_k")
    body = [Loop("_b", Name("_lo"), Name("_hi"), Const(1), [
        Loop("_k", Const(0), Shape("a", 2), Const(1), [Assign((Index("out", (b, k)),), (Const(0.0),))]),
        Loop("_i", Const(0), Shape("a", 1), Const(1), [
            Loop("_k", Const(0), Shape("a", 2), Const(1),
                 _magnitude(Index("a", (b, i, k))) + [_sticky_max(Index("out", (b, k)))])])])]
    return body, {"a": (dtype, 3), "out": ("float64", 2)}


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


def _rank_ratios(dtype: str) -> tuple:
    e, k, i = Name("_b"), Name("_k"), Name("_i")
    big, total = Name("_big"), Name("_total")
    entry = Index("R", (e, i, k))
    p = Call("min", (Shape("R", 1), Shape("R", 2)))
    scan = [Local("_a", Call("abs", (entry,))),
            Assign((big,), (Select(Compare(">", Name("_a"), big), Name("_a"), big),))]  # max(big, |R[e, i, k]|)
    ratio = BinOp("/", Call("abs", (Index("R", (e, k, k)),)), BinOp("*", big, Call("sqrt", (total,))))
    column = [Local("_big", Const(0.0)),
              Loop("_i", Const(0), BinOp("+", k, Const(1)), Const(1), scan),
              Branch(BoolOp("or", (Compare("==", big, Const(0.0)), Compare("!=", big, big))),
                     [Assign((Index("out", (e, k)),), (Select(Compare("==", big, Const(0.0)), Const(0.0), big),))],
                     [Local("_total", Const(0.0)),
                      Loop("_i", Const(0), BinOp("+", k, Const(1)), Const(1),
                           [AugAssign(total, "+", BinOp("**", Call("abs", (BinOp("/", entry, big),)), Const(2)))]),
                      Assign((Index("out", (e, k)),), (ratio,))])]
    body = [Loop("_b", Name("_lo"), Name("_hi"), Const(1), [Loop("_k", Const(0), p, Const(1), column)])]
    return body, {"R": (dtype, 3), "out": ("float64", 2)}


def rank_ratios(R, xp=np) -> np.ndarray:
    """|R[k, k]| / ||R[:, k]|| for the leading square block of each triangular factor in R
    (..., p, n): how far column k of A = Q R is from the span of the earlier ones (0 for a zero
    column). With Q orthonormal, ||R[:, k]|| = ||A[:, k]||."""
    if xp is np and R.ndim == 3:  # compiled at every size: one call where NumPy makes a dozen
        out = np.empty((R.shape[0], min(R.shape[1], R.shape[2])))
        run_kernel("rank_ratios", _rank_ratios, R.shape[0], R=R, out=out)
        return out
    p = min(R.shape[-2:])
    square = R[..., :p, :p]
    norms = column_norms(square, xp)
    diag = xp.abs(xp.diagonal(square, axis1=-2, axis2=-1))
    ratios = diag / xp.where(norms > 0, norms, 1)
    return xp.where(norms > 0, ratios, xp.where(norms == 0, 0.0, np.nan))  # NaN stays NaN, as compiled
