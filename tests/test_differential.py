"""Differential property test of the high-level functions: random shapes (empty, 1x1, tall, wide,
batched), dtypes, magnitudes from 1e-300 to 1e300, ranks (full, a dependent column, a dependent
leading block) and methods. Every run either agrees with an independent reference to a stated
tolerance or raises a named revdiff error, and well-conditioned full-rank input never raises:

- qr against the conditions that define thin QR uniquely (Q orthonormal, R upper triangular with
  a positive diagonal, Q R = A), projections against an SVD-based one, least squares against
  NumPy's, normalisation against x / |x| computed with scaling;
- gradients against central differences of those references at unit magnitude, and at every
  other magnitude against the unit-magnitude gradient scaled as the function's homogeneity says.

``REVDIFF_DIFFERENTIAL=long`` runs every method and 400 examples per function.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import revdiff
from revdiff import programs as P

LONG = os.environ.get("REVDIFF_DIFFERENTIAL") == "long"
METHODS = ["cgs2", "bcgs2", "mgs", "cgs", "householder", "givens"] if LONG else ["cgs2", "householder"]
DTYPES = [np.float64, np.complex128, np.float32, np.complex64] if LONG else [np.float64, np.complex128, np.float32]
EXAMPLES = 400 if LONG else 12
profile = settings(max_examples=EXAMPLES, deadline=None, derandomize=not LONG,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

NAMED = (revdiff.RankDeficientError, revdiff.ResultOverflowError)


def eps(dtype) -> float:
    return float(np.finfo(dtype).eps)


def draw_matrix(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x


@st.composite
def matrices(draw, wide: bool = True):
    """(A at unit magnitude in float64/complex128, the magnitude, dtype, rank structure, method)."""
    dtype = draw(st.sampled_from(DTYPES))
    batch = draw(st.sampled_from([(), (1,), (3,), (2, 2), (0,)]))
    m = draw(st.integers(0, 7))
    n = draw(st.integers(0, 7 if wide else m))
    rank = draw(st.sampled_from(["full", "full", "dependent", "leading"]))
    top = 300 if np.finfo(dtype).bits == 64 else 30
    magnitude = 10.0 ** draw(st.integers(-top, top))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31)))
    A = draw_matrix(rng, batch + (m, n), dtype)
    p = min(m, n)
    if rank == "dependent" and n >= 2 and m >= 2:
        k = int(rng.integers(1, min(n, m + 1) if n <= m else p))  # a column among the leading p
        A[..., :, k] = A[..., :, :k] @ draw_matrix(rng, (k,), dtype)
    elif rank == "leading" and p >= 2:  # the leading block loses rank; a wide A can keep its row rank
        A[..., :, p - 1] = A[..., :, 0] * 2.0
    else:
        rank = "full"
    A /= max(np.abs(A).max(), 1e-300) if A.size else 1.0
    return A, magnitude, dtype, rank, draw(st.sampled_from(METHODS))


def at(A, magnitude, dtype):
    """A at the magnitude, rounded to dtype (float32 data stays within its range)."""
    return (A * magnitude).astype(dtype)


def well_conditioned(A) -> bool:
    """Each leading column far from the span of the earlier ones (what qr requires)."""
    p = min(A.shape[-2:])
    for M in A.reshape((-1,) + A.shape[-2:]):
        R = np.linalg.qr(M[:, :p], mode="r")
        d = np.abs(np.diag(R))
        if p and d.min() < 1e-3 * np.linalg.norm(M[:, :p], axis=0).max():
            return False
    return True


def svd_projection(M, y):
    if M.size == 0:
        return np.zeros_like(y)
    U, s, _ = np.linalg.svd(M, full_matrices=False)
    U = U[:, s > s.max() * 1e-9]
    return U @ (U.conj().T @ y)


def flatten(a, core: int):
    """One batch axis (empty batches included)."""
    return a.reshape((int(np.prod(a.shape[:a.ndim - core])),) + a.shape[a.ndim - core:])


def directional(f, A, V, h=1e-6):
    return (f(A + h * V) - f(A - h * V)) / (2 * h)


def real_inner(a, b) -> float:
    return float(np.real(np.vdot(a, b)))


def tolerance(dtype) -> float:
    return 1e3 * eps(dtype)


def gradient_tolerance(dtype) -> float:
    """Of a gradient against central differences in float64 at a modest condition number."""
    return 1e-6 if np.finfo(dtype).bits == 64 else 2e-2


ORTHOGONALITY_LOSS = {"cgs": 2, "mgs": 1}  # the power of kappa in the loss of orthogonality


@profile
@given(matrices())
def test_qr_agrees_or_names_the_problem(case):
    A, magnitude, dtype, rank, method = case
    if method == "givens" and np.issubdtype(dtype, np.complexfloating):
        method = "householder"
    X = at(A, magnitude, dtype)
    try:
        Q, R = P.qr(X, method=method)
    except NAMED:
        assert rank != "full" or not well_conditioned(A), "well-conditioned full-rank input was refused"
        return
    assert rank == "full" or X.size == 0 or min(X.shape[-2:]) < 2, "a dependent column went unnoticed"
    m, n = X.shape[-2:]
    p = min(m, n)
    assert Q.shape == X.shape[:-2] + (m, p) and R.shape == X.shape[:-2] + (p, n) and Q.dtype == dtype
    if X.size == 0:
        return
    tol = tolerance(dtype)
    eye = np.eye(p)
    for q, r, x, a in zip(Q.reshape((-1, m, p)), R.reshape((-1, p, n)), X.reshape((-1, m, n)), A.reshape((-1, m, n))):
        q64, r64, x64 = (v.astype(np.complex128) for v in (q, r, x))
        kappa = np.linalg.cond(a[:, :p]) ** ORTHOGONALITY_LOSS.get(method, 0)
        assert np.abs(q64.conj().T @ q64 - eye).max() < tol * kappa
        scale = np.abs(x64).max()
        assert np.abs(q64 @ r64 - x64).max() <= tol * scale * max(m, n)
        assert np.all(np.tril(r64, -1) == 0) and np.all(np.abs(np.diag(r64).imag) <= tol * scale)
        assert np.all(np.diag(r64).real > 0)


@profile
@given(matrices())
def test_projection_and_its_gradient_agree_or_name_the_problem(case):
    A, magnitude, dtype, rank, method = case
    method = "cgs2" if method == "givens" else method
    rng = np.random.default_rng(1)
    y = draw_matrix(rng, A.shape[:-1], dtype)
    gz = draw_matrix(rng, A.shape[:-1], dtype)
    X = at(A, magnitude, dtype)
    try:
        z = P.project(X, y.astype(dtype), method=method)
        gA, gy = P.project_vjp(X, y.astype(dtype), gz.astype(dtype), method=method)
    except NAMED:
        assert rank != "full" or not well_conditioned(A), "well-conditioned full-rank input was refused"
        return
    assert z.shape == y.shape and gA.shape == X.shape and gy.shape == y.shape
    flat = flatten
    tol = tolerance(dtype)
    for b, (Ab, yb, zb, gb) in enumerate(zip(flat(A, 2), flat(y, 1), flat(z, 1), flat(gA, 2))):
        want = svd_projection(Ab.astype(np.complex128), yb)
        assert np.abs(zb - want).max(initial=0) <= tol * 10 * max(1.0, np.abs(yb).max(initial=0))
        if Ab.shape[1] and Ab.shape[0] > Ab.shape[1] and well_conditioned(Ab[None]):
            # the gradient at magnitude 1 against central differences; here scaled by 1/magnitude
            V = draw_matrix(rng, Ab.shape, dtype)
            gzb = flat(gz, 1)[b]
            loss = lambda M: real_inner(gzb, svd_projection(M, yb))  # noqa: E731
            fd = directional(loss, Ab.astype(np.complex128 if np.iscomplexobj(V) else np.float64), V)
            got = real_inner(gb.astype(np.complex128) * magnitude, V)
            assert abs(got - fd) <= gradient_tolerance(dtype) * np.linalg.cond(Ab) * max(1.0, abs(fd)), (got, fd)


@profile
@given(matrices(wide=False))
def test_least_squares_and_its_gradient_agree_or_name_the_problem(case):
    A, magnitude, dtype, rank, method = case
    method = "cgs2" if method == "givens" else method
    rng = np.random.default_rng(2)
    y = draw_matrix(rng, A.shape[:-1], dtype)
    gx = draw_matrix(rng, A.shape[:-2] + A.shape[-1:], dtype)
    X = at(A, magnitude, dtype)
    try:
        x = P.lstsq(X, y.astype(dtype), method=method)
        gA, gy = P.lstsq_vjp(X, y.astype(dtype), gx.astype(dtype), method=method)
    except revdiff.ResultOverflowError:
        # x(cA) = x(A) / c and gA(cA) = gA(A) / c^2: refused only where that leaves the dtype's range
        unit = [np.linalg.lstsq(a, b, rcond=None)[0] for a, b in zip(flatten(A, 2), flatten(y, 1))]
        biggest = max(np.abs(u).max(initial=0) for u in unit) * max(1.0, np.abs(gx).max(initial=0))
        assert biggest * np.linalg.cond(flatten(A, 2)).max() / min(magnitude, 1.0) ** 2 > 1e-3 * np.finfo(dtype).max
        return
    except revdiff.RankDeficientError:
        assert rank != "full" or not well_conditioned(A), "well-conditioned full-rank input was refused"
        return
    assert x.shape == A.shape[:-2] + A.shape[-1:] and gA.shape == A.shape
    tol = tolerance(dtype)
    flat = flatten
    for b, (Ab, yb, xb, gb) in enumerate(zip(flat(A, 2), flat(y, 1), flat(x, 1), flat(gA, 2))):
        if Ab.size == 0:
            continue
        want = np.linalg.lstsq(Ab.astype(np.complex128), yb.astype(np.complex128), rcond=None)[0] / magnitude
        scale = np.abs(want).max() + 1e-300
        cond = np.linalg.cond(Ab)
        assert np.abs(xb - want).max() <= 100 * eps(dtype) * cond ** 2 * scale + tol * scale
        if well_conditioned(Ab[None]):  # x(cA) = x(A) / c: gA(cA) = gA(A) / c^2
            V = draw_matrix(rng, Ab.shape, dtype)
            gxb = flat(gx, 1)[b]
            loss = lambda M: real_inner(gxb, np.linalg.lstsq(M, yb, rcond=None)[0])  # noqa: E731
            fd = directional(loss, Ab.astype(np.complex128 if np.iscomplexobj(V) else np.float64), V)
            got = real_inner(gb.astype(np.complex128) * magnitude, V) * magnitude
            # a gradient ~ 1 / magnitude^2 may be subnormal, with only the digits that leaves it
            subnormal = float(np.finfo(dtype).smallest_subnormal) * magnitude * magnitude * np.abs(V).sum()
            assert abs(got - fd) <= gradient_tolerance(dtype) * cond ** 2 * max(1.0, abs(fd)) + subnormal, (got, fd)


@profile
@given(st.sampled_from(DTYPES), st.sampled_from([(), (3,), (0,), (2, 2)]), st.integers(0, 6),
       st.integers(-300, 300), st.integers(0, 2 ** 31))
def test_normalize_and_its_gradient_agree_or_name_the_problem(dtype, batch, n, exponent, seed):
    rng = np.random.default_rng(seed)
    exponent = exponent if np.finfo(dtype).bits == 64 else exponent // 10
    x0 = draw_matrix(rng, batch + (n,), dtype)
    x = (x0 * 10.0 ** exponent).astype(dtype)
    g = draw_matrix(rng, batch + (n,), dtype).astype(dtype)
    if n and x.size and np.any(np.abs(x).max(axis=-1) == 0):  # underflowed to zero: no direction
        with pytest.raises(ValueError, match="no direction"):
            P.normalize(x)
        return
    y = P.normalize(x)
    gx = P.normalize_vjp(x, g)
    assert y.shape == x.shape and gx.shape == x.shape and y.dtype == dtype
    if x.size == 0:
        return
    big = np.abs(x0).max(axis=-1, keepdims=True)
    unit = x0 / big
    want = unit / np.linalg.norm(unit, axis=-1, keepdims=True)
    tol = tolerance(dtype)
    assert np.abs(y - want).max() <= 10 * tol
    # d(x / |x|) = (I - y y^H) dx / |x|, the cotangent (g - y Re<y, g>) / |x| at unit magnitude
    norm = np.linalg.norm(unit, axis=-1, keepdims=True)
    expected = (g - want * np.real(np.sum(want.conj() * g, axis=-1, keepdims=True))) / norm
    got = gx * (big * 10.0 ** exponent)
    assert np.abs(got - expected).max() <= 100 * tol * max(1.0, np.abs(expected).max())
