"""Scans the high-level functions make over their inputs and results: the largest magnitude of each
batch element or column (NaN where it holds a NaN), and the rank ratios of triangular factors.

Large batches are scanned by compiled loops in parallel, without temporaries; small ones, and GPU
arrays, by NumPy or CuPy expressions, with no compilation to wait for (callers pass the module).
"""
from __future__ import annotations

import numba
import numpy as np

from revdiff.runtime.cache import cached_njit

#: arrays with fewer entries are scanned by NumPy expressions
COMPILED_MIN_SIZE = 1 << 16


@cached_njit(nogil=True, parallel=True)
def _largest_by_row(a):
    out = np.empty(a.shape[0])
    for b in numba.prange(a.shape[0]):
        big = 0.0
        for t in range(a.shape[1]):
            x = abs(a[b, t].real)
            y = abs(a[b, t].imag)
            x = y if y > x else x
            if x > big or x != x:  # a NaN sticks: nothing compares greater than it
                big = x
                if x != x:
                    break
        out[b] = big
    return out


def largest_per_element(a, xp=np) -> np.ndarray:
    """max over each batch element (axis 0 of ``a``; the rest flattened) of max(|Re x|, |Im x|),
    NaN for an element holding a NaN. Within a factor sqrt(2) of the largest modulus. ``xp``: the
    array module of ``a`` (NumPy or CuPy)."""
    flat = a.reshape(a.shape[0], -1)
    if xp is np and a.size >= COMPILED_MIN_SIZE:
        return _largest_by_row(np.ascontiguousarray(flat))
    if flat.shape[1] == 0:
        return xp.zeros(flat.shape[0])
    parts = xp.maximum(xp.abs(flat.real), xp.abs(flat.imag)) if xp.iscomplexobj(flat) else xp.abs(flat)
    return parts.max(axis=1).astype(np.float64)


@cached_njit(nogil=True, parallel=True)
def _largest_by_column(a):
    out = np.zeros((a.shape[0], a.shape[2]))
    for b in numba.prange(a.shape[0]):
        for i in range(a.shape[1]):
            for k in range(a.shape[2]):
                x = abs(a[b, i, k].real)
                y = abs(a[b, i, k].imag)
                x = y if y > x else x
                if x > out[b, k] or x != x:  # a NaN sticks: nothing compares greater than it
                    out[b, k] = x
    return out


def largest_per_column(A, xp=np) -> np.ndarray:
    """max over the rows of each column of each matrix of A (batch, rows, columns) of
    max(|Re x|, |Im x|), NaN for a column holding a NaN; (batch, columns)."""
    if xp is np and A.size >= COMPILED_MIN_SIZE:
        return _largest_by_column(np.ascontiguousarray(A))
    if A.shape[1] == 0:
        return xp.zeros((A.shape[0], A.shape[2]))
    parts = xp.maximum(xp.abs(A.real), xp.abs(A.imag)) if xp.iscomplexobj(A) else xp.abs(A)
    return parts.max(axis=1).astype(np.float64)


def column_norms(M, xp=np) -> np.ndarray:
    """Euclidean norms of the columns of each matrix of M (..., rows, columns), scaled so that no
    square overflows or underflows."""
    size = xp.abs(M)
    big = size.max(axis=-2, keepdims=True) if M.shape[-2] else xp.zeros(M.shape[:-2] + (1, M.shape[-1]))
    safe = xp.where(big > 0, big, 1)
    return big[..., 0, :] * xp.sqrt(((size / safe) ** 2).sum(axis=-2))


@cached_njit(nogil=True, parallel=True)
def _rank_ratios_by_element(R):
    b, p = R.shape[0], min(R.shape[1], R.shape[2])
    out = np.empty((b, p))
    for e in numba.prange(b):
        for k in range(p):
            big = 0.0
            for i in range(k + 1):  # R is upper triangular
                big = max(big, abs(R[e, i, k]))
            if big == 0.0 or big != big:
                out[e, k] = 0.0 if big == 0.0 else big
                continue
            total = 0.0
            for i in range(k + 1):
                total += abs(R[e, i, k] / big) ** 2
            out[e, k] = abs(R[e, k, k]) / (big * np.sqrt(total))
    return out


def rank_ratios(R, xp=np) -> np.ndarray:
    """|R[k, k]| / ||R[:, k]|| for the leading square block of each triangular factor in R
    (..., p, n): how far column k of A = Q R is from the span of the earlier ones (0 for a zero
    column). With Q orthonormal, ||R[:, k]|| = ||A[:, k]||."""
    if xp is np and R.ndim == 3 and R.size >= COMPILED_MIN_SIZE:
        return _rank_ratios_by_element(np.ascontiguousarray(R))
    p = min(R.shape[-2:])
    square = R[..., :p, :p]
    norms = column_norms(square, xp)
    diag = xp.abs(xp.diagonal(square, axis1=-2, axis2=-1))
    ratios = diag / xp.where(norms > 0, norms, 1)
    return xp.where(norms > 0, ratios, xp.where(norms == 0, 0.0, np.nan))  # NaN stays NaN, as compiled

