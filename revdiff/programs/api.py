"""High-level functions over the reversible programs: allocate outputs, loop over leading batch
dimensions, validate inputs, and differentiate by running the programs backwards."""
from __future__ import annotations

import numpy as np

from ..batch import BatchedFunction
from ..errors import RankDeficientError
from . import givens, gram_schmidt, householder, projection, sphere

QR_METHODS = {"cgs2": gram_schmidt.cgs2, "bcgs2": gram_schmidt.bcgs2, "mgs": gram_schmidt.mgs,
              "cgs": gram_schmidt.cgs, "householder": householder.householder, "givens": givens.givens}
PROJECT_METHODS = {"cgs2": projection.project_cgs2, "bcgs2": projection.project_bcgs2, "mgs": projection.project_mgs,
                   "cgs": projection.project_cgs, "householder": projection.project_householder}
LSTSQ_METHODS = {"cgs2": projection.lstsq_cgs2, "bcgs2": projection.lstsq_bcgs2, "mgs": projection.lstsq_mgs,
                 "cgs": projection.lstsq_cgs, "householder": projection.lstsq_householder}
DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def _method(table: dict, method: str):
    if method not in table:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(table)}")
    return table[method]


def _xp(a):
    """The array module of ``a``: CuPy for GPU arrays (the programs then run as CUDA kernels), else NumPy."""
    if hasattr(a, "__cuda_array_interface__"):
        from ..gpu import cupy_module
        return cupy_module()
    return np


def _array(name: str, value, min_ndim: int, dtype=None) -> np.ndarray:
    xp = _xp(value)
    a = xp.asarray(value)
    if a.dtype.type not in DTYPES:
        if np.issubdtype(a.dtype, np.integer):
            a = a.astype(np.float64)
        else:
            raise TypeError(f"'{name}' has dtype {a.dtype}; use float32, float64, complex64 or complex128")
    if dtype is not None:
        a = a.astype(np.result_type(a.dtype, dtype), copy=False)
    if a.ndim < min_ndim:
        raise ValueError(f"'{name}' needs at least {min_ndim} dimensions, got shape {a.shape}")
    if not bool(xp.all(xp.isfinite(a))):
        raise ValueError(f"'{name}' contains NaN or Inf")
    return xp.ascontiguousarray(a)


def _zeros_like(a):
    return _xp(a).zeros_like(a)


def _rank_tolerance(dtype: np.dtype, rank_tol: float | None) -> float:
    return rank_tol if rank_tol is not None else 100 * np.finfo(dtype).eps


def _batch_index(shape: tuple, flat: int) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _check_rank(R: np.ndarray, A: np.ndarray, batch_shape: tuple, tol: float) -> None:
    """Raise RankDeficientError where a column's residual norm is tiny against its own norm
    (R, A flattened to one batch axis)."""
    xp = _xp(A)
    p = min(A.shape[-2:])
    norms = xp.linalg.norm(A[..., :p], axis=-2)
    diag = xp.abs(xp.diagonal(R, axis1=-2, axis2=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = xp.where(norms > 0, diag / xp.where(norms > 0, norms, 1), 0.0)
    bad = ~(ratio > tol)  # a NaN ratio (0/0 in a degenerate column) is rank deficient too
    if bool(xp.any(bad)):
        b, k = (int(i) for i in xp.argwhere(bad)[0])
        raise RankDeficientError(f"matrix at batch index {_batch_index(batch_shape, b)}: column {k} is linearly "
                                 f"dependent on the previous ones (residual norm / column norm = "
                                 f"{ratio[b, k]:.3e} <= {tol:.1e})")


def _zero_columns(A: np.ndarray, batch_shape: tuple) -> None:
    xp = _xp(A)
    p = min(A.shape[-2:])
    if A.size == 0 or bool(xp.all(A[..., 0, :p] != 0)):  # a nonzero first row settles every column
        return
    zero = ~xp.any(A[..., :p] != 0, axis=-2)
    if bool(xp.any(zero)):
        b, k = (int(i) for i in xp.argwhere(zero)[0])
        raise RankDeficientError(f"matrix at batch index {_batch_index(batch_shape, b)}: column {k} is zero "
                                 "(residual norm / column norm = 0)")


def _flat(a: np.ndarray, core: int) -> np.ndarray:
    """One leading batch axis (a matrix without batch dimensions gets a batch of one)."""
    return a.reshape((-1,) + a.shape[a.ndim - core:])


_BATCHED: dict = {}


def _batched(program, names: tuple) -> BatchedFunction:
    """The batched program (cached). Calls here donate their arguments (``donate=True``): the
    outputs are fresh zeros, and the programs never write the user's inputs (A, y, x, g, z)."""
    key = (program, tuple(names))
    if key not in _BATCHED:
        _BATCHED[key] = BatchedFunction(program, names)
    return _BATCHED[key]


def _qr_program(method: str, A: np.ndarray) -> tuple:
    """The QR program for method and its zero-initialised outputs for the flattened batch A."""
    program = _method(QR_METHODS, method)
    b, m, n = A.shape
    p = min(m, n)
    xp = _xp(A)
    outputs = (xp.zeros((b, m, p), A.dtype), xp.zeros((b, p, n), A.dtype))
    if program is givens.givens:
        if not np.isrealobj(A):
            raise TypeError(f"method 'givens' takes real matrices; 'A' has dtype {A.dtype} "
                            "(use 'householder' or 'cgs2' for complex input)")
        outputs += (xp.zeros((b, m, p), A.dtype),)
    return _batched(program, program.params), outputs


def qr(A, method: str = "cgs2", rank_tol: float | None = None) -> tuple:
    """Q, R of A (..., m, n): Q (..., m, p), R (..., p, n), p = min(m, n), diag(R) real positive.

    method: "cgs2" (default), "mgs", "cgs", "householder" or "givens" (real only; the rotation
    angles are an extra output of ``revdiff.programs.givens``). Batches run in parallel."""
    A = _array("A", A, 2)
    batch, (m, n) = A.shape[:-2], A.shape[-2:]
    flat = _flat(A, 2)
    program, outputs = _qr_program(method, flat)
    _zero_columns(flat, batch)
    Q, R = program(*outputs, flat, donate=True)[:2]
    _check_rank(R, flat, batch, _rank_tolerance(A.dtype, rank_tol))
    return Q.reshape(batch + Q.shape[1:]), R.reshape(batch + R.shape[1:])


def qr_vjp(A, gQ, gR, method: str = "cgs2", rank_tol: float | None = None) -> np.ndarray:
    """Cotangent of A given those of Q and R (None: zero), by running the QR program backwards."""
    A = _array("A", A, 2)
    batch, (m, n) = A.shape[:-2], A.shape[-2:]
    p = min(m, n)
    gQ = _xp(A).zeros(batch + (m, p), A.dtype) if gQ is None else _array("gQ", gQ, 2, A.dtype)
    gR = _xp(A).zeros(batch + (p, n), A.dtype) if gR is None else _array("gR", gR, 2, A.dtype)
    if gQ.shape != batch + (m, p) or gR.shape != batch + (p, n):
        raise ValueError(f"for A of shape {A.shape}, gQ must have shape {batch + (m, p)} (thin Q) and gR "
                         f"{batch + (p, n)}; got {gQ.shape} and {gR.shape}")
    flat = _flat(A, 2)
    program, outputs = _qr_program(method, flat)
    _zero_columns(flat, batch)
    cotangents = (_flat(gQ.astype(A.dtype, copy=False), 2), _flat(gR.astype(A.dtype, copy=False), 2))
    outs, grads = program.vjp(outputs + (flat,), cotangents + (None,) * (len(outputs) - 1), donate=True)
    _check_rank(outs[1], flat, batch, _rank_tolerance(A.dtype, rank_tol))
    return grads[-1].reshape(A.shape)


def _vector_program(table, method, A, y):
    program = _method(table, method)
    A = _array("A", A, 2)
    y = _array("y", y, 1, A.dtype)
    A = A.astype(y.dtype, copy=False)
    if y.shape[:-1] != A.shape[:-2] or y.shape[-1] != A.shape[-2]:
        raise ValueError(f"y of shape {y.shape} does not match A of shape {A.shape} (need {A.shape[:-1]})")
    _zero_columns(_flat(A, 2), A.shape[:-2])
    return _batched(program, program.params), A, y


def _rank_check_by_qr(A: np.ndarray, method: str, rank_tol: float | None) -> None:
    if rank_tol is not None:
        qr(A, method if method in QR_METHODS else "cgs2", rank_tol)


def project(A, y, method: str = "cgs2", rank_tol: float | None = None) -> np.ndarray:
    """z = Q Q^H y, the orthogonal projection of y onto the column space of A."""
    program, A, y = _vector_program(PROJECT_METHODS, method, A, y)
    _rank_check_by_qr(A, method, rank_tol)
    z = program(_zeros_like(_flat(y, 1)), _flat(A, 2), _flat(y, 1), donate=True)[0]
    return z.reshape(y.shape)


def project_vjp(A, y, gz, method: str = "cgs2", rank_tol: float | None = None) -> tuple:
    """(gA, gy): cotangents of A and y given that of z = Q Q^H y."""
    program, A, y = _vector_program(PROJECT_METHODS, method, A, y)
    gz = _array("gz", gz, 1, A.dtype)
    if gz.shape != y.shape:
        raise ValueError(f"gz has shape {gz.shape}, expected {y.shape}")
    _rank_check_by_qr(A, method, rank_tol)
    _, (_, gA, gy) = program.vjp((_zeros_like(_flat(y, 1)), _flat(A, 2), _flat(y, 1)),
                                 (_flat(gz.astype(A.dtype, copy=False), 1), None, None), donate=True)
    return gA.reshape(A.shape), gy.reshape(y.shape)


def lstsq(A, y, method: str = "cgs2") -> np.ndarray:
    """x minimising |A x - y| (A of full column rank, m >= n), through the QR program."""
    program, A, y = _vector_program(LSTSQ_METHODS, method, A, y)
    flat = _flat(A, 2)
    x = program(_xp(A).zeros((flat.shape[0], A.shape[-1]), A.dtype), flat, _flat(y, 1), donate=True)[0]
    return x.reshape(A.shape[:-2] + (A.shape[-1],))


def lstsq_vjp(A, y, gx, method: str = "cgs2") -> tuple:
    """(gA, gy) given the cotangent of the least-squares solution x."""
    program, A, y = _vector_program(LSTSQ_METHODS, method, A, y)
    gx = _array("gx", gx, 1, A.dtype)
    if gx.shape != A.shape[:-2] + (A.shape[-1],):
        raise ValueError(f"gx has shape {gx.shape}, expected {A.shape[:-2] + (A.shape[-1],)}")
    flat = _flat(A, 2)
    _, (_, gA, gy) = program.vjp((_xp(A).zeros((flat.shape[0], A.shape[-1]), A.dtype), flat, _flat(y, 1)),
                                 (_flat(gx.astype(A.dtype, copy=False), 1), None, None), donate=True)
    return gA.reshape(A.shape), gy.reshape(y.shape)


def _nonzero_vectors(x: np.ndarray) -> None:
    xp = _xp(x)
    zero = ~xp.any(_flat(x, 1) != 0, axis=-1)
    if bool(xp.any(zero)):
        raise ValueError(f"'x' at batch index {_batch_index(x.shape[:-1], int(xp.argmax(zero)))} is zero "
                         "and has no direction")


def normalize(x) -> np.ndarray:
    """x / |x| along the last axis."""
    x = _array("x", x, 1)
    _nonzero_vectors(x)
    program = _batched(sphere.normalize, ("y", "x"))
    return program(_zeros_like(_flat(x, 1)), _flat(x, 1), donate=True)[0].reshape(x.shape)


def normalize_vjp(x, gy) -> np.ndarray:
    x = _array("x", x, 1)
    gy = _array("gy", gy, 1, x.dtype)
    _nonzero_vectors(x)
    program = _batched(sphere.normalize, ("y", "x"))
    _, (_, gx) = program.vjp((_zeros_like(_flat(x, 1)), _flat(x, 1)), (_flat(gy.astype(x.dtype, copy=False), 1), None),
                             donate=True)
    return gx.reshape(x.shape)


def _tangent_arguments(g, z) -> tuple:
    g, z = _array("g", g, 1), _array("z", z, 1)
    dtype = np.result_type(g.dtype, z.dtype)
    if g.shape != z.shape:
        raise ValueError(f"g of shape {g.shape} and z of shape {z.shape} differ")
    _nonzero_vectors(z)
    return g.astype(dtype, copy=False), z.astype(dtype, copy=False)


def tangent_project(g, z) -> np.ndarray:
    """g - (z_hat^H g) z_hat along the last axis, z_hat = z / |z|."""
    g, z = _tangent_arguments(g, z)
    program = _batched(sphere.tangent_project, ("out", "g", "z"))
    return program(_zeros_like(_flat(g, 1)), _flat(g, 1), _flat(z, 1), donate=True)[0].reshape(g.shape)


def tangent_project_vjp(g, z, gout) -> tuple:
    g, z = _tangent_arguments(g, z)
    gout = _array("gout", gout, 1, g.dtype)
    program = _batched(sphere.tangent_project, ("out", "g", "z"))
    _, (_, gg, gz) = program.vjp((_zeros_like(_flat(g, 1)), _flat(g, 1), _flat(z, 1)),
                                 (_flat(gout.astype(g.dtype, copy=False), 1), None, None), donate=True)
    return gg.reshape(g.shape), gz.reshape(z.shape)
