"""High-level functions over the reversible programs: check the arguments, allocate the outputs,
run every batch element (leading axes) in parallel, and differentiate by running the programs
backwards. Every input gets the right answer or a named error (``inputs.py``): NaN or Inf inputs,
rank deficiency (``RankDeficientError``, with the batch element and column) and results that
overflow (``ResultOverflowError``) are refused; extreme magnitudes are scaled by powers of two;
empty matrices and batches give empty results, as in NumPy.
"""
from __future__ import annotations

import numpy as np

from ..batch import BatchedFunction
from . import givens, gram_schmidt, householder, projection, sphere
from .inputs import (DTYPES, array_module, as_array, batch_index, check_rank, check_result, flat, negated,
                     rank_tolerance, require_finite, scale_exponents, times_power_of_two)

QR_METHODS = {"cgs2": gram_schmidt.cgs2, "bcgs2": gram_schmidt.bcgs2, "mgs": gram_schmidt.mgs,
              "cgs": gram_schmidt.cgs, "householder": householder.householder, "givens": givens.givens}
PROJECT_METHODS = {"cgs2": projection.project_cgs2, "bcgs2": projection.project_bcgs2, "mgs": projection.project_mgs,
                   "cgs": projection.project_cgs, "householder": projection.project_householder}
LSTSQ_METHODS = {"cgs2": projection.lstsq_cgs2, "bcgs2": projection.lstsq_bcgs2, "mgs": projection.lstsq_mgs,
                 "cgs": projection.lstsq_cgs, "householder": projection.lstsq_householder}

__all__ = ["DTYPES", "QR_METHODS", "PROJECT_METHODS", "LSTSQ_METHODS", "qr", "qr_vjp", "project", "project_vjp",
           "lstsq", "lstsq_vjp", "normalize", "normalize_vjp", "tangent_project", "tangent_project_vjp"]


def _method(table: dict, method):
    if not isinstance(method, str) or method not in table:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(table)}")
    return table[method]


_BATCHED: dict = {}


def _batched(program) -> BatchedFunction:
    """The program over a batch of every parameter (cached). Calls here donate their arguments
    (``donate=True``): the outputs are fresh zeros, and the programs never write the inputs."""
    if program not in _BATCHED:
        _BATCHED[program] = BatchedFunction(program, program.params)
    return _BATCHED[program]


class _Matrices:
    """A checked batch of matrices A (..., m, n): flattened to one batch axis and scaled by powers
    of two where its magnitude is extreme (``exponents``: per element, A = scaled * 2**e)."""

    def __init__(self, A, dtype=None):
        A = as_array("A", A, 2, core=" (..., m, n)")
        if dtype is not None:
            A = A.astype(dtype, copy=False)
        self.xp = array_module(A)
        self.shape, self.dtype = tuple(A.shape), A.dtype
        self.batch, (self.m, self.n) = self.shape[:-2], self.shape[-2:]
        self.p = min(self.m, self.n)
        self.flat = flat(A, 2)
        self.b = self.flat.shape[0]
        self.exponents = scale_exponents(require_finite("A", self.flat, self.batch, self.xp), self.xp)
        self.scaled = times_power_of_two(self.flat, negated(self.exponents), self.xp)

    @property
    def empty(self) -> bool:
        return self.flat.size == 0

    def zeros(self, *core) -> np.ndarray:
        return self.xp.zeros((self.b,) + core, self.dtype)

    def unflat(self, a, *core):
        return a.reshape(self.batch + core)

    def up(self, a):
        """``a * 2**e``: a result scaled back (R)."""
        return times_power_of_two(a, self.exponents, self.xp)

    def down(self, a):
        """``a * 2**-e``: a result or cotangent scaled the other way (x, gradients of A)."""
        return times_power_of_two(a, negated(self.exponents), self.xp)


def _vector(name: str, value, M: _Matrices, shape: tuple, dtype=None):
    """A checked vector argument of batch shape ``shape[:-1]`` (flattened like M)."""
    v = as_array(name, value, 1, like=dtype)
    if tuple(v.shape) != shape:
        raise ValueError(f"'{name}' has shape {tuple(v.shape)}; for A of shape {M.shape} it needs {shape}")
    v = flat(v, 1)
    require_finite(name, v, M.batch, M.xp)
    return v


def _qr_run(method: str, M: _Matrices):
    """The batched QR program and its zero outputs for M."""
    program = _method(QR_METHODS, method)
    outputs = (M.zeros(M.m, M.p), M.zeros(M.p, M.n))
    if program is givens.givens:
        if np.iscomplexobj(M.flat):
            raise TypeError(f"method 'givens' takes real matrices; 'A' has dtype {M.dtype} "
                            "(use 'householder' or 'cgs2' for complex input)")
        outputs += (M.zeros(M.m, M.p),)
    return _batched(program), outputs


def qr(A, method: str = "cgs2", rank_tol: float | None = None) -> tuple:
    """Q, R of A (..., m, n): Q (..., m, p), R (..., p, n), p = min(m, n), diag(R) real positive.

    method: "cgs2" (default), "bcgs2", "mgs", "cgs", "householder" or "givens" (real only; the
    rotation angles are an extra output of ``revdiff.programs.givens``). Batches run in parallel.
    Raises RankDeficientError where a column's residual is at most ``rank_tol`` (default 100 eps)
    of its norm: Q is not determined by A there."""
    M = _Matrices(A)
    tol = rank_tolerance(rank_tol, M.dtype)
    program, outputs = _qr_run(method, M)
    if M.empty:
        return M.unflat(outputs[0], M.m, M.p), M.unflat(outputs[1], M.p, M.n)
    Q, R = program(*outputs, M.scaled, donate=True)[:2]
    check_rank(R, M.batch, tol, M.xp)
    R = M.up(R)
    check_result("qr", "R", R, M.batch, M.xp)
    return M.unflat(Q, M.m, M.p), M.unflat(R, M.p, M.n)


def qr_vjp(A, gQ, gR, method: str = "cgs2", rank_tol: float | None = None) -> np.ndarray:
    """Cotangent of A given those of Q and R (None: zero), by running the QR program backwards."""
    M = _Matrices(A)
    tol = rank_tolerance(rank_tol, M.dtype)
    program, outputs = _qr_run(method, M)
    cotangents = []
    for name, g, core in (("gQ", gQ, (M.m, M.p)), ("gR", gR, (M.p, M.n))):
        if g is None:
            cotangents.append(M.zeros(*core))
            continue
        g = as_array(name, g, 2, like=M.dtype)
        if tuple(g.shape) != M.batch + core:
            raise ValueError(f"for A of shape {M.shape}, '{name}' must have shape {M.batch + core} "
                             f"({'thin Q' if name == 'gQ' else 'R'}); got {tuple(g.shape)}")
        g = flat(g, 2)
        require_finite(name, g, M.batch, M.xp)
        cotangents.append(g)
    if M.empty:
        return M.xp.zeros(M.shape, M.dtype)
    # Q(A) = Q(cA), R(A) = R(cA) / c for c = 2**-e, and the vjp is linear in its cotangents:
    # gA = c vjp(cA; gQ, gR / c) = vjp(cA; c gQ, gR)
    cotangents[0] = M.down(cotangents[0])
    outs, grads = program.vjp(outputs + (M.scaled,), tuple(cotangents) + (None,) * (len(outputs) - 1),
                              donate=True)
    check_rank(outs[1], M.batch, tol, M.xp)
    check_result("qr_vjp", "gA", grads[-1], M.batch, M.xp)
    return M.unflat(grads[-1], M.m, M.n)


def _with_vector(A, y):
    """Checked (M, y) for the projection and least squares: one dtype for both."""
    y_array = as_array("y", y, 1)
    A_array = as_array("A", A, 2, core=" (..., m, n)")
    M = _Matrices(A_array, np.result_type(A_array.dtype, y_array.dtype))
    return M, _vector("y", y_array, M, M.batch + (M.m,), M.dtype)


def project(A, y, method: str = "cgs2", rank_tol: float | None = None) -> np.ndarray:
    """z = Q Q^H y, the orthogonal projection of y (..., m) onto the column space of A (..., m, n).
    Raises RankDeficientError, as ``qr``, where a column of A is (numerically) dependent on the
    earlier ones; a matrix without columns projects onto {0}."""
    program = _batched(_method(PROJECT_METHODS, method))
    M, y = _with_vector(A, y)
    tol = rank_tolerance(rank_tol, M.dtype)
    if M.empty:
        return M.unflat(M.xp.zeros_like(y), M.m)
    z, R = program(M.zeros(M.m), M.zeros(M.p, M.n), M.scaled, y, donate=True)[:2]
    check_rank(R, M.batch, tol, M.xp)
    return M.unflat(z, M.m)


def project_vjp(A, y, gz, method: str = "cgs2", rank_tol: float | None = None) -> tuple:
    """(gA, gy): cotangents of A and y given that of z = Q Q^H y."""
    program = _batched(_method(PROJECT_METHODS, method))
    M, y = _with_vector(A, y)
    tol = rank_tolerance(rank_tol, M.dtype)
    gz = _vector("gz", gz, M, M.batch + (M.m,), M.dtype)
    if M.empty:
        return M.xp.zeros(M.shape, M.dtype), M.unflat(M.xp.zeros_like(y), M.m)
    outs, (_, _, gA, gy) = program.vjp((M.zeros(M.m), M.zeros(M.p, M.n), M.scaled, y), (gz, None, None, None),
                                       donate=True)
    check_rank(outs[1], M.batch, tol, M.xp)
    gA = M.down(gA)  # z(A) = z(cA): gA = c gA'
    check_result("project_vjp", "gA", gA, M.batch, M.xp)
    check_result("project_vjp", "gy", gy, M.batch, M.xp)
    return M.unflat(gA, M.m, M.n), M.unflat(gy, M.m)


def _least_squares(A, y, method: str, rank_tol):
    program = _batched(_method(LSTSQ_METHODS, method))
    M, y = _with_vector(A, y)
    if M.m < M.n:
        raise ValueError(f"lstsq needs a tall or square A (m >= n) of full column rank; A has shape {M.shape}, "
                         "and a wide A's least-squares problem has infinitely many solutions, of which "
                         "revdiff does not pick one")
    return program, M, y, rank_tolerance(rank_tol, M.dtype)


def lstsq(A, y, method: str = "cgs2", rank_tol: float | None = None) -> np.ndarray:
    """x minimising |A x - y| for A (..., m, n) of full column rank (m >= n), through the QR program.
    Raises RankDeficientError, as ``qr``, where a column of A is (numerically) dependent."""
    program, M, y, tol = _least_squares(A, y, method, rank_tol)
    if M.empty:
        return M.xp.zeros(M.batch + (M.n,), M.dtype)
    x, R = program(M.zeros(M.n), M.zeros(M.n, M.n), M.scaled, y, donate=True)[:2]
    check_rank(R, M.batch, tol, M.xp)
    x = M.down(x)  # (cA) x' = y: x = c x'
    check_result("lstsq", "x", x, M.batch, M.xp)
    return M.unflat(x, M.n)


def lstsq_vjp(A, y, gx, method: str = "cgs2", rank_tol: float | None = None) -> tuple:
    """(gA, gy) given the cotangent of the least-squares solution x."""
    program, M, y, tol = _least_squares(A, y, method, rank_tol)
    gx = _vector("gx", gx, M, M.batch + (M.n,), M.dtype)
    if M.empty:
        return M.xp.zeros(M.shape, M.dtype), M.unflat(M.xp.zeros_like(y), M.m)
    # x(A, y) = c x'(cA, y): the cotangent of x' is c gx, and gA = c gA'
    outs, (_, _, gA, gy) = program.vjp((M.zeros(M.n), M.zeros(M.n, M.n), M.scaled, y),
                                       (M.down(gx), None, None, None), donate=True)
    check_rank(outs[1], M.batch, tol, M.xp)
    gA = M.down(gA)
    check_result("lstsq_vjp", "gA", gA, M.batch, M.xp)
    check_result("lstsq_vjp", "gy", gy, M.batch, M.xp)
    return M.unflat(gA, M.m, M.n), M.unflat(gy, M.m)


class _Vectors:
    """A checked batch of vectors (..., n) that need a direction: none may be zero. Scaled by
    powers of two where the magnitude is extreme, as matrices are."""

    def __init__(self, name: str, value, dtype=None):
        v = as_array(name, value, 1, like=dtype) if dtype is not None else as_array(name, value, 1)
        self.xp = array_module(v)
        self.shape, self.dtype = tuple(v.shape), v.dtype
        self.batch = self.shape[:-1]
        self.flat = flat(v, 1)
        big = require_finite(name, self.flat, self.batch, self.xp)
        if self.shape[-1] and bool(self.xp.any(big == 0)):
            b = int(self.xp.argmax(big == 0))
            raise ValueError(f"'{name}' at batch index {batch_index(self.batch, b)} is zero and has no direction")
        self.exponents = scale_exponents(big, self.xp)
        self.scaled = times_power_of_two(self.flat, negated(self.exponents), self.xp)

    @property
    def empty(self) -> bool:
        return self.flat.size == 0


def _shaped_like(name: str, value, like: _Vectors, what: str) -> np.ndarray:
    """A checked array of the shape and dtype of ``like`` (``what`` says why, for the error)."""
    g = as_array(name, value, 1, like=like.dtype)
    if tuple(g.shape) != like.shape:
        raise ValueError(f"'{name}' has shape {tuple(g.shape)}; {what}, {like.shape}")
    g = flat(g, 1)
    require_finite(name, g, like.batch, like.xp)
    return g


def normalize(x) -> np.ndarray:
    """x / |x| along the last axis (ValueError for a zero vector, which has no direction)."""
    X = _Vectors("x", x)
    if X.empty:
        return X.xp.zeros(X.shape, X.dtype)
    return _batched(sphere.normalize)(X.xp.zeros_like(X.flat), X.scaled, donate=True)[0].reshape(X.shape)


def normalize_vjp(x, gy) -> np.ndarray:
    """The cotangent of x given that of y = x / |x|."""
    X = _Vectors("x", x)
    gy = _shaped_like("gy", gy, X, "as the cotangent of y = x / |x| it needs the shape of x")
    if X.empty:
        return X.xp.zeros(X.shape, X.dtype)
    _, (_, gx) = _batched(sphere.normalize).vjp((X.xp.zeros_like(X.flat), X.scaled), (gy, None), donate=True)
    gx = times_power_of_two(gx, negated(X.exponents), X.xp)  # y(x) = y(cx): gx = c gx'
    check_result("normalize_vjp", "gx", gx, X.batch, X.xp)
    return gx.reshape(X.shape)


def _tangent_arguments(g, z) -> tuple:
    g_array, z_array = as_array("g", g, 1), as_array("z", z, 1)
    dtype = np.result_type(g_array.dtype, z_array.dtype)
    if tuple(g_array.shape) != tuple(z_array.shape):
        raise ValueError(f"g of shape {tuple(g_array.shape)} and z of shape {tuple(z_array.shape)} differ")
    Z = _Vectors("z", z_array.astype(dtype, copy=False))
    return _shaped_like("g", g_array.astype(dtype, copy=False), Z, "it needs the shape of z"), Z


def tangent_project(g, z) -> np.ndarray:
    """g - (z_hat^H g) z_hat along the last axis, z_hat = z / |z| (ValueError for a zero z)."""
    g, Z = _tangent_arguments(g, z)
    if Z.empty:
        return Z.xp.zeros(Z.shape, Z.dtype)
    out = _batched(sphere.tangent_project)(Z.xp.zeros_like(g), g, Z.scaled, donate=True)[0]
    return out.reshape(Z.shape)


def tangent_project_vjp(g, z, gout) -> tuple:
    """(gg, gz) given the cotangent of the tangent projection."""
    g, Z = _tangent_arguments(g, z)
    gout = _shaped_like("gout", gout, Z, "as the cotangent of the projection it needs the shape of g and z")
    if Z.empty:
        return Z.xp.zeros(Z.shape, Z.dtype), Z.xp.zeros(Z.shape, Z.dtype)
    _, (_, gg, gz) = _batched(sphere.tangent_project).vjp((Z.xp.zeros_like(g), g, Z.scaled), (gout, None, None),
                                                          donate=True)
    gz = times_power_of_two(gz, negated(Z.exponents), Z.xp)
    for name, value in (("gg", gg), ("gz", gz)):
        check_result("tangent_project_vjp", name, value, Z.batch, Z.xp)
    return gg.reshape(Z.shape), gz.reshape(Z.shape)
