"""High-level functions over the reversible programs: allocate outputs, loop over leading batch
dimensions, validate inputs, and differentiate by running the programs backwards."""
from __future__ import annotations

import numpy as np

from ..ad import vjp
from ..errors import RankDeficientError
from . import givens, gram_schmidt, householder, projection, sphere

QR_METHODS = {"cgs2": gram_schmidt.cgs2, "mgs": gram_schmidt.mgs, "cgs": gram_schmidt.cgs,
              "householder": householder.householder, "givens": givens.givens}
PROJECT_METHODS = {"cgs2": projection.project_cgs2, "mgs": projection.project_mgs, "cgs": projection.project_cgs,
                   "householder": projection.project_householder}
LSTSQ_METHODS = {"cgs2": projection.lstsq_cgs2, "mgs": projection.lstsq_mgs, "cgs": projection.lstsq_cgs,
                 "householder": projection.lstsq_householder}
DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def _method(table: dict, method: str):
    if method not in table:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(table)}")
    return table[method]


def _array(name: str, value, min_ndim: int, dtype=None) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype.type not in DTYPES:
        if np.issubdtype(a.dtype, np.integer):
            a = a.astype(np.float64)
        else:
            raise TypeError(f"'{name}' has dtype {a.dtype}; use float32, float64, complex64 or complex128")
    if dtype is not None:
        a = a.astype(np.result_type(a.dtype, dtype), copy=False)
    if a.ndim < min_ndim:
        raise ValueError(f"'{name}' needs at least {min_ndim} dimensions, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"'{name}' contains NaN or Inf")
    return np.ascontiguousarray(a)


def _rank_tolerance(dtype: np.dtype, rank_tol: float | None) -> float:
    return rank_tol if rank_tol is not None else 100 * np.finfo(dtype).eps


def _check_rank(R: np.ndarray, A: np.ndarray, index: tuple, tol: float) -> None:
    """Raise RankDeficientError where a column's residual norm is tiny against its own norm."""
    p = min(A.shape)
    norms = np.linalg.norm(A[:, :p], axis=0)
    for k in range(p):
        ratio = abs(R[k, k]) / norms[k] if norms[k] > 0 else 0.0
        if not ratio > tol:  # a NaN ratio (0/0 in a degenerate column) is rank deficient too
            raise RankDeficientError(f"matrix at batch index {index}: column {k} is linearly dependent on the "
                                     f"previous ones (residual norm / column norm = {ratio:.3e} <= {tol:.1e})")


def _zero_columns(A: np.ndarray, index: tuple) -> None:
    norms = np.linalg.norm(A, axis=0)
    for k in range(min(A.shape)):
        if norms[k] == 0:
            raise RankDeficientError(f"matrix at batch index {index}: column {k} is zero "
                                     "(residual norm / column norm = 0)")


def _qr_program(method: str, A: np.ndarray):
    """The QR program for method, and a function making its argument tuple for one matrix."""
    program = _method(QR_METHODS, method)
    m, n = A.shape[-2:]
    p = min(m, n)
    if program is givens.givens:
        if not np.isrealobj(A):
            raise TypeError(f"method 'givens' takes real matrices; 'A' has dtype {A.dtype} "
                            "(use 'householder' or 'cgs2' for complex input)")
        return program, lambda a: (np.zeros((m, p), a.dtype), np.zeros((p, n), a.dtype), np.zeros((m, p), a.dtype), a)
    return program, lambda a: (np.zeros((m, p), a.dtype), np.zeros((p, n), a.dtype), a)


def qr(A, method: str = "cgs2", rank_tol: float | None = None) -> tuple:
    """Q, R of A (..., m, n): Q (..., m, p), R (..., p, n), p = min(m, n), diag(R) real positive.

    method: "cgs2" (default), "mgs", "cgs", "householder" or "givens" (real only; the rotation
    angles are an extra output of ``revdiff.programs.givens``)."""
    A = _array("A", A, 2)
    program, arguments = _qr_program(method, A)
    m, n = A.shape[-2:]
    p = min(m, n)
    Q = np.zeros(A.shape[:-2] + (m, p), A.dtype)
    R = np.zeros(A.shape[:-2] + (p, n), A.dtype)
    tol = _rank_tolerance(A.dtype, rank_tol)
    for b in np.ndindex(A.shape[:-2]):
        _zero_columns(A[b], b)
        Q[b], R[b] = program(*arguments(A[b].copy()))[:2]
        _check_rank(R[b], A[b], b, tol)
    return Q, R


def qr_vjp(A, gQ, gR, method: str = "cgs2", rank_tol: float | None = None) -> np.ndarray:
    """Cotangent of A given those of Q and R (None: zero), by running the QR program backwards."""
    A = _array("A", A, 2)
    program, arguments = _qr_program(method, A)
    m, n = A.shape[-2:]
    p = min(m, n)
    gQ = np.zeros(A.shape[:-2] + (m, p), A.dtype) if gQ is None else _array("gQ", gQ, 2, A.dtype)
    gR = np.zeros(A.shape[:-2] + (p, n), A.dtype) if gR is None else _array("gR", gR, 2, A.dtype)
    if gQ.shape != A.shape[:-2] + (m, p) or gR.shape != A.shape[:-2] + (p, n):
        raise ValueError(f"for A of shape {A.shape}, gQ must have shape {A.shape[:-2] + (m, p)} (thin Q) and gR "
                         f"{A.shape[:-2] + (p, n)}; got {gQ.shape} and {gR.shape}")
    gA = np.zeros_like(A)
    tol = _rank_tolerance(A.dtype, rank_tol)
    for b in np.ndindex(A.shape[:-2]):
        _zero_columns(A[b], b)
        outputs, pullback = vjp(program, *arguments(A[b]))
        _check_rank(outputs[1], A[b], b, tol)
        cotangents = (gQ[b], gR[b]) + (None,) * (len(outputs) - 2)
        gA[b] = pullback(*cotangents)[-1]
    return gA


def _vector_program(table, method, A, y, cotangent=None, out_rows=None):
    program = _method(table, method)
    A = _array("A", A, 2)
    y = _array("y", y, 1, A.dtype)
    A = A.astype(y.dtype, copy=False)
    if y.shape[:-1] != A.shape[:-2] or y.shape[-1] != A.shape[-2]:
        raise ValueError(f"y of shape {y.shape} does not match A of shape {A.shape} (need {A.shape[:-1]})")
    return program, A, y


def project(A, y, method: str = "cgs2", rank_tol: float | None = None) -> np.ndarray:
    """z = Q Q^H y, the orthogonal projection of y onto the column space of A."""
    program, A, y = _vector_program(PROJECT_METHODS, method, A, y)
    z = np.zeros_like(y)
    tol = _rank_tolerance(A.dtype, rank_tol)
    for b in np.ndindex(A.shape[:-2]):
        _zero_columns(A[b], b)
        _check_rank(qr(A[b], method)[1], A[b], b, tol) if rank_tol is not None else None
        program(z[b], A[b].copy(), y[b].copy())
    return z


def project_vjp(A, y, gz, method: str = "cgs2", rank_tol: float | None = None) -> tuple:
    """(gA, gy): cotangents of A and y given that of z = Q Q^H y."""
    program, A, y = _vector_program(PROJECT_METHODS, method, A, y)
    gz = _array("gz", gz, 1, A.dtype)
    if gz.shape != y.shape:
        raise ValueError(f"gz has shape {gz.shape}, expected {y.shape}")
    gA, gy = np.zeros_like(A), np.zeros_like(y)
    tol = _rank_tolerance(A.dtype, rank_tol)
    m = A.shape[-2]
    for b in np.ndindex(A.shape[:-2]):
        _zero_columns(A[b], b)
        _, pullback = vjp(program, np.zeros(m, A.dtype), A[b], y[b])
        _, gA[b], gy[b] = pullback(gz[b], None, None)
        if rank_tol is not None:
            _check_rank(qr(A[b], method)[1], A[b], b, tol)
    return gA, gy


def lstsq(A, y, method: str = "cgs2") -> np.ndarray:
    """x minimising |A x - y| (A of full column rank, m >= n), through the QR program."""
    program, A, y = _vector_program(LSTSQ_METHODS, method, A, y)
    x = np.zeros(A.shape[:-1][:-1] + (A.shape[-1],), A.dtype)
    for b in np.ndindex(A.shape[:-2]):
        _zero_columns(A[b], b)
        program(x[b], A[b].copy(), y[b].copy())
    return x


def lstsq_vjp(A, y, gx, method: str = "cgs2") -> tuple:
    """(gA, gy) given the cotangent of the least-squares solution x."""
    program, A, y = _vector_program(LSTSQ_METHODS, method, A, y)
    gx = _array("gx", gx, 1, A.dtype)
    gA, gy = np.zeros_like(A), np.zeros_like(y)
    n = A.shape[-1]
    for b in np.ndindex(A.shape[:-2]):
        _, pullback = vjp(program, np.zeros(n, A.dtype), A[b], y[b])
        _, gA[b], gy[b] = pullback(gx[b], None, None)
    return gA, gy


def normalize(x) -> np.ndarray:
    """x / |x| along the last axis."""
    x = _array("x", x, 1)
    y = np.zeros_like(x)
    for b in np.ndindex(x.shape[:-1]):
        if not np.any(x[b]):
            raise ValueError(f"'x' at batch index {b} is zero and has no direction")
        sphere.normalize(y[b], x[b].copy())
    return y


def normalize_vjp(x, gy) -> np.ndarray:
    x = _array("x", x, 1)
    gy = _array("gy", gy, 1, x.dtype)
    gx = np.zeros_like(x)
    for b in np.ndindex(x.shape[:-1]):
        _, pullback = vjp(sphere.normalize, np.zeros_like(x[b]), x[b])
        gx[b] = pullback(gy[b], None)[1]
    return gx


def tangent_project(g, z) -> np.ndarray:
    """g - (z_hat^H g) z_hat along the last axis, z_hat = z / |z|."""
    g, z = _array("g", g, 1), _array("z", z, 1)
    dtype = np.result_type(g, z)
    g, z = g.astype(dtype), z.astype(dtype)
    out = np.zeros_like(g)
    for b in np.ndindex(g.shape[:-1]):
        sphere.tangent_project(out[b], g[b].copy(), z[b].copy())
    return out


def tangent_project_vjp(g, z, gout) -> tuple:
    g, z = _array("g", g, 1), _array("z", z, 1)
    dtype = np.result_type(g, z)
    g, z = g.astype(dtype), z.astype(dtype)
    gout = _array("gout", gout, 1, dtype)
    gg, gz = np.zeros_like(g), np.zeros_like(z)
    for b in np.ndindex(g.shape[:-1]):
        _, pullback = vjp(sphere.tangent_project, np.zeros_like(g[b]), g[b], z[b])
        _, gg[b], gz[b] = pullback(gout[b], None, None)
    return gg, gz
