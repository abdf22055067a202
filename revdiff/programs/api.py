"""High-level functions over the reversible programs: check the arguments, allocate the outputs,
run every batch element (leading axes) in parallel, and differentiate by running the programs
backwards. Every input gets the right answer or a named error (``inputs.py``): NaN or Inf inputs,
rank deficiency (``RankDeficientError``, with the batch element and column) and results that
overflow (``ResultOverflowError``) are refused; extreme magnitudes are scaled by powers of two;
empty matrices and batches give empty results, as in NumPy.
"""
from __future__ import annotations

import numpy as np

from revdiff.batch import BatchedFunction
from revdiff.programs import givens, gram_schmidt, householder, projection, sphere
from revdiff.programs.inputs import (DTYPES, array_module, as_array, batch_index, check_rank, check_result,
                                     combined, flat, negated, rank_tolerance, require_finite, scale_exponents,
                                     times_power_of_two)
from revdiff.programs.scan import largest_per_element

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


class _Batch:
    """A checked argument with its batch axes merged into one (``flat``: a single value becomes a
    batch of one), the array module it lives in, and its shapes."""

    def __init__(self, array, core: int):
        self.xp = array_module(array)
        self.shape, self.dtype = tuple(array.shape), array.dtype
        self.batch = self.shape[:len(self.shape) - core]
        self.flat = flat(array, core)
        self.b = self.flat.shape[0]

    @property
    def empty(self) -> bool:
        return self.flat.size == 0

    def zeros(self, *core):
        return self.xp.zeros((self.b,) + core, self.dtype)

    def unflat(self, a, *core):
        return a.reshape(self.batch + core)

    def scaled(self, a, *exponents):
        """``a * 2**(sum of exponents)``, per batch element or per column (``inputs.combined``)."""
        return times_power_of_two(a, combined(*exponents), self.xp)


class _Matrices(_Batch):
    """A checked batch of matrices A (..., m, n), its columns scaled by powers of two where their
    magnitude is extreme: ``A = scaled * 2**e``, e per batch element and column (None: no column
    needed it)."""

    def __init__(self, A, dtype=None):
        A = as_array("A", A, 2, dtype=dtype, core=" (..., m, n)")
        super().__init__(A, 2)
        self.m, self.n = self.shape[-2:]
        self.p = min(self.m, self.n)
        big = require_finite("A", self.flat, self.batch, self.xp, per_column=True)
        self.e = scale_exponents(big, self.dtype, self.xp)
        self.A = self.scaled(self.flat, negated(self.e))


class _Vectors(_Batch):
    """A checked batch of vectors (..., n), scaled by a power of two per element where its magnitude
    is extreme (``v = scaled * 2**e``). ``direction``: none may be zero (it is normalised)."""

    def __init__(self, name: str, value, like: _Batch, shape: tuple | None = None, cotangent: bool = False,
                 direction: bool = False, why: str = ""):
        v = as_array(name, value, 1, **({"cotangent_of": like.dtype} if cotangent else {"dtype": like.dtype}))
        if shape is not None and tuple(v.shape) != shape:
            raise ValueError(f"'{name}' has shape {tuple(v.shape)}; {why} {shape}")
        super().__init__(v, 1)
        big = require_finite(name, self.flat, self.batch, self.xp)
        if direction and self.shape[-1] and bool(self.xp.any(big == 0)):
            b = int(self.xp.argmax(big == 0))
            raise ValueError(f"'{name}' at batch index {batch_index(self.batch, b)} is zero and has no direction")
        self.e = scale_exponents(big, self.dtype, self.xp)
        self.v = self.scaled(self.flat, negated(self.e))


def _qr_run(method: str, M: _Matrices):
    """The batched QR program and its zero outputs for M."""
    program = _method(QR_METHODS, method)
    outputs = (M.zeros(M.m, M.p), M.zeros(M.p, M.n))
    if program is givens.givens:
        if np.iscomplexobj(M.flat):
            raise TypeError(f"method 'givens' takes real matrices; 'A' has dtype {M.dtype} "
                            "(use 'householder' or 'cgs2' for complex input)")
        outputs += (M.zeros(M.m, M.p),)  # the rotation angles
    return _batched(program), outputs


def _largest(*arrays):
    """The common scale exponent of cotangents per batch element: their largest magnitude."""
    big = None
    for a in arrays:
        m = largest_per_element(a, array_module(a)) if a.shape[0] else array_module(a).zeros(0)
        big = m if big is None else array_module(a).maximum(big, m)
    return big


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
    Q, R = program(*outputs, M.A, donate=True)[:2]
    check_rank(R, M.batch, tol, M.xp)
    R = M.scaled(R, M.e)  # A D = Q R' for the column scaling D: R = R' D^-1
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
        g = as_array(name, g, 2, cotangent_of=M.dtype)
        if tuple(g.shape) != M.batch + core:
            raise ValueError(f"for A of shape {M.shape}, '{name}' must have shape {M.batch + core} "
                             f"({'thin Q' if name == 'gQ' else 'R'}); got {tuple(g.shape)}")
        g = flat(g, 2)
        require_finite(name, g, M.batch, M.xp)
        cotangents.append(g)
    if M.empty:
        return M.xp.zeros(M.shape, M.dtype)
    # R = R' D^-1: the cotangent of R' is gR D^-1, and gA = gA' D; both cotangents scaled by 2**-h
    gQ, gR = cotangents[0], M.scaled(cotangents[1], M.e)
    h = scale_exponents(_largest(gQ, gR), M.dtype, M.xp)
    cotangents = (M.scaled(gQ, negated(h)), M.scaled(gR, negated(h)))
    outs, grads = program.vjp(outputs + (M.A,), cotangents + (None,) * (len(outputs) - 1), donate=True)
    check_rank(outs[1], M.batch, tol, M.xp)  # outs: (Q, R, [angles,] A); no cotangents for angles and A
    gA = M.scaled(grads[-1], negated(M.e), h)
    check_result("qr_vjp", "gA", gA, M.batch, M.xp)
    return M.unflat(gA, M.m, M.n)


def _with_vector(A, y) -> tuple:
    """Checked (M, y) for the projection and least squares, computed in one dtype; each remembers
    its own (``given``): a real argument gets a real gradient, as in PyTorch, also when the other
    is complex."""
    A_array, y_array = as_array("A", A, 2, core=" (..., m, n)"), as_array("y", y, 1)
    M = _Matrices(A_array, np.result_type(A_array.dtype, y_array.dtype))
    Y = _Vectors("y", y_array, M, M.batch + (M.m,), why=f"for A of shape {M.shape} it needs")
    M.given, Y.given = A_array.dtype, y_array.dtype
    return M, Y


def _as_given(g, given):
    """A gradient in the dtype its argument came in: the real part for a real one (the imaginary
    part is the derivative along directions that argument cannot move in)."""
    return g.real.astype(given) if np.iscomplexobj(g) and not np.issubdtype(given, np.complexfloating) else g


def project(A, y, method: str = "cgs2", rank_tol: float | None = None) -> np.ndarray:
    """z = Q Q^H y, the orthogonal projection of y (..., m) onto the column space of A (..., m, n).
    Raises RankDeficientError, as ``qr``, where a column of A is (numerically) dependent on the
    earlier ones; a matrix without columns projects onto {0}."""
    program = _batched(_method(PROJECT_METHODS, method))
    M, Y = _with_vector(A, y)
    tol = rank_tolerance(rank_tol, M.dtype)
    if M.empty:
        return M.unflat(M.xp.zeros_like(Y.flat), M.m)
    z, R = program(M.zeros(M.m), M.zeros(M.p, M.n), M.A, Y.v, donate=True)[:2]
    check_rank(R, M.batch, tol, M.xp)
    z = Y.scaled(z, Y.e)  # z is linear in y and the same for every column scaling of A
    check_result("project", "z", z, M.batch, M.xp)
    return M.unflat(z, M.m)


def project_vjp(A, y, gz, method: str = "cgs2", rank_tol: float | None = None) -> tuple:
    """(gA, gy): cotangents of A and y given that of z = Q Q^H y."""
    program = _batched(_method(PROJECT_METHODS, method))
    M, Y = _with_vector(A, y)
    tol = rank_tolerance(rank_tol, M.dtype)
    G = _Vectors("gz", gz, M, M.batch + (M.m,), cotangent=True, why="as the cotangent of z it needs the shape of y,")
    if M.empty:
        return M.xp.zeros(M.shape, M.dtype), M.unflat(M.xp.zeros_like(Y.flat), M.m)
    outs, (_, _, gA, gy) = program.vjp((M.zeros(M.m), M.zeros(M.p, M.n), M.A, Y.v), (G.v, None, None, None),
                                       donate=True)
    check_rank(outs[1], M.batch, tol, M.xp)
    gA = _as_given(M.scaled(gA, negated(M.e), Y.e, G.e), M.given)  # z(A D, y) = z(A, y), linear in y and gz
    gy = _as_given(G.scaled(gy, G.e), Y.given)
    check_result("project_vjp", "gA", gA, M.batch, M.xp)
    check_result("project_vjp", "gy", gy, M.batch, M.xp)
    return M.unflat(gA, M.m, M.n), M.unflat(gy, M.m)


def _least_squares(A, y, method: str, rank_tol):
    program = _batched(_method(LSTSQ_METHODS, method))
    M, Y = _with_vector(A, y)
    if M.m < M.n:
        raise ValueError(f"lstsq needs a tall or square A (m >= n) of full column rank; A has shape {M.shape}, "
                         "and a wide A's least-squares problem has infinitely many solutions, of which "
                         "revdiff does not pick one")
    return program, M, Y, rank_tolerance(rank_tol, M.dtype)


def lstsq(A, y, method: str = "cgs2", rank_tol: float | None = None) -> np.ndarray:
    """x minimising |A x - y| for A (..., m, n) of full column rank (m >= n), through the QR program.
    Raises RankDeficientError, as ``qr``, where a column of A is (numerically) dependent."""
    program, M, Y, tol = _least_squares(A, y, method, rank_tol)
    if M.empty:
        return M.xp.zeros(M.batch + (M.n,), M.dtype)
    x, R = program(M.zeros(M.n), M.zeros(M.n, M.n), M.A, Y.v, donate=True)[:2]
    check_rank(R, M.batch, tol, M.xp)
    x = M.scaled(x, negated(M.e), Y.e)  # (A D) x' = y: x = D x', linear in y
    check_result("lstsq", "x", x, M.batch, M.xp)
    return M.unflat(x, M.n)


def lstsq_vjp(A, y, gx, method: str = "cgs2", rank_tol: float | None = None) -> tuple:
    """(gA, gy) given the cotangent of the least-squares solution x."""
    program, M, Y, tol = _least_squares(A, y, method, rank_tol)
    G = _Vectors("gx", gx, M, M.batch + (M.n,), cotangent=True, why="as the cotangent of x it needs the shape of x,")
    if M.empty:
        return M.xp.zeros(M.shape, M.dtype), M.unflat(M.xp.zeros_like(Y.flat), M.m)
    # x = D x'(A D, y): the cotangent of x' is D gx (scaled by 2**-h), and gA = gA' D
    gx_scaled = M.scaled(G.flat, negated(M.e))
    h = scale_exponents(_largest(gx_scaled), M.dtype, M.xp)
    outs, (_, _, gA, gy) = program.vjp((M.zeros(M.n), M.zeros(M.n, M.n), M.A, Y.v),
                                       (M.scaled(gx_scaled, negated(h)), None, None, None), donate=True)
    check_rank(outs[1], M.batch, tol, M.xp)
    gA = _as_given(M.scaled(gA, negated(M.e), Y.e, h), M.given)
    gy = _as_given(M.scaled(gy, h), Y.given)
    check_result("lstsq_vjp", "gA", gA, M.batch, M.xp)
    check_result("lstsq_vjp", "gy", gy, M.batch, M.xp)
    return M.unflat(gA, M.m, M.n), M.unflat(gy, M.m)


class _Dtype:
    """The dtype the vectors of the sphere functions share (``_Vectors`` reads ``like.dtype``)."""

    def __init__(self, *arrays):
        self.dtype = np.result_type(*(a.dtype for a in arrays))


def normalize(x) -> np.ndarray:
    """x / |x| along the last axis (ValueError for a zero vector, which has no direction)."""
    x = as_array("x", x, 1)
    X = _Vectors("x", x, _Dtype(x), direction=True)
    if X.empty:
        return X.xp.zeros(X.shape, X.dtype)
    return _batched(sphere.normalize)(X.xp.zeros_like(X.flat), X.v, donate=True)[0].reshape(X.shape)


def normalize_vjp(x, gy) -> np.ndarray:
    """The cotangent of x given that of y = x / |x|."""
    x = as_array("x", x, 1)
    X = _Vectors("x", x, _Dtype(x), direction=True)
    G = _Vectors("gy", gy, X, X.shape, cotangent=True, why="as the cotangent of y = x / |x| it needs the shape of x,")
    if X.empty:
        return X.xp.zeros(X.shape, X.dtype)
    _, (_, gx) = _batched(sphere.normalize).vjp((X.xp.zeros_like(X.flat), X.v), (G.v, None), donate=True)
    gx = X.scaled(gx, negated(X.e), G.e)  # y(x) = y(cx): gx = c gx', linear in gy
    check_result("normalize_vjp", "gx", gx, X.batch, X.xp)
    return gx.reshape(X.shape)


def _tangent_arguments(g, z) -> tuple:
    g_array, z_array = as_array("g", g, 1), as_array("z", z, 1)
    if tuple(g_array.shape) != tuple(z_array.shape):
        raise ValueError(f"g of shape {tuple(g_array.shape)} and z of shape {tuple(z_array.shape)} differ")
    like = _Dtype(g_array, z_array)
    G, Z = _Vectors("g", g_array, like), _Vectors("z", z_array, like, direction=True)
    G.given, Z.given = g_array.dtype, z_array.dtype
    return G, Z


def tangent_project(g, z) -> np.ndarray:
    """g - (z_hat^H g) z_hat along the last axis, z_hat = z / |z| (ValueError for a zero z)."""
    G, Z = _tangent_arguments(g, z)
    if Z.empty:
        return Z.xp.zeros(Z.shape, Z.dtype)
    out = _batched(sphere.tangent_project)(Z.xp.zeros_like(G.v), G.v, Z.v, donate=True)[0]
    out = G.scaled(out, G.e)  # linear in g, the same for every scaling of z
    check_result("tangent_project", "out", out, Z.batch, Z.xp)
    return out.reshape(Z.shape)


def tangent_project_vjp(g, z, gout) -> tuple:
    """(gg, gz) given the cotangent of the tangent projection."""
    G, Z = _tangent_arguments(g, z)
    O = _Vectors("gout", gout, Z, Z.shape, cotangent=True,
                 why="as the cotangent of the projection it needs the shape of g and z,")
    if Z.empty:
        return Z.xp.zeros(Z.shape, Z.dtype), Z.xp.zeros(Z.shape, Z.dtype)
    _, (_, gg, gz) = _batched(sphere.tangent_project).vjp((Z.xp.zeros_like(G.v), G.v, Z.v), (O.v, None, None),
                                                          donate=True)
    gg = _as_given(G.scaled(gg, O.e), G.given)
    gz = _as_given(Z.scaled(gz, negated(Z.e), G.e, O.e), Z.given)
    for name, value in (("gg", gg), ("gz", gz)):
        check_result("tangent_project_vjp", name, value, Z.batch, Z.xp)
    return gg.reshape(Z.shape), gz.reshape(Z.shape)
