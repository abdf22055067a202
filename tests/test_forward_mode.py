"""``revdiff.jvp``, ``hvp`` and ``hessian`` on whole programs: agreement with finite differences and
with PyTorch, the argument errors, and the generated tangent programs."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import revdiff
from revdiff import reversible, rot
from revdiff.execute import _device_cotangent


@reversible
def poly(loss, x, k):
    for i in range(x.shape[0]):
        loss += x[i] ** 3 * (k + 1) + np.sin(x[i]) * x[(i + 1) % x.shape[0]]


@reversible
def rotate_then_measure(a, b, theta, loss):
    rot(a, b, theta)
    loss += a * a * b


def test_jvp_returns_outputs_and_tangents_in_the_shape_of_jax_jvp():
    x = np.array([0.3, -0.2, 0.9])
    outs, douts = revdiff.jvp(poly, (0.0, x, 2), (0.0, np.ones(3), None))
    assert outs[0] == pytest.approx(poly(0.0, x, 2)[0], rel=1e-15)
    assert douts[2] is None and douts[1].shape == (3,)
    np.testing.assert_array_equal(douts[1], np.ones(3))  # x is read, not written: its tangent passes through
    eps = 1e-6
    central = (poly(0.0, x + eps, 2)[0] - poly(0.0, x - eps, 2)[0]) / (2 * eps)
    assert douts[0] == pytest.approx(central, rel=1e-8)


def test_hessian_is_symmetric_and_matches_differences_of_the_gradient():
    x = np.array([0.3, -0.2, 0.9, 0.4])
    H = revdiff.hessian(poly, "loss", 0.0, x, 1)
    assert H[2][2] is None and H[1][2] is None
    hxx = H[1][1]
    assert hxx.shape == (4, 4)
    np.testing.assert_allclose(hxx, hxx.T, rtol=1e-14, atol=1e-14)
    eps = 1e-6
    grad = revdiff.grad(poly, "loss")
    for j in range(4):
        e = np.zeros(4)
        e[j] = eps
        column = (grad(0.0, x + e, 1)[1] - grad(0.0, x - e, 1)[1]) / (2 * eps)
        np.testing.assert_allclose(hxx[:, j], column, rtol=1e-7, atol=1e-8)
    assert H[0][0] == 0.0 and H[0][1].shape == (4,)  # the loss's initial value enters linearly


def test_hessian_against_torch():
    torch = pytest.importorskip("torch")
    a, b, theta = 0.4, -1.3, 0.7
    H = revdiff.hessian(rotate_then_measure, "loss", a, b, theta, 0.0)

    def loss(v):
        c, s = torch.cos(v[2]), torch.sin(v[2])
        a1, b1 = c * v[0] - s * v[1], s * v[0] + c * v[1]
        return a1 * a1 * b1

    want = torch.autograd.functional.hessian(loss, torch.tensor([a, b, theta], dtype=torch.float64)).numpy()
    got = np.array([[H[i][j] for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


def test_hvp_memory_is_that_of_the_program_not_of_its_steps():
    """The hvp keeps no tape: its tangent arrays are the only extra storage (checked by the
    program's parameter list: no buffer grows with the loop's trip count)."""
    src = poly.source("hvp", 0.0, np.ones(3), 1)
    header = src.split("def poly_hvp(")[1].split(")")[0]
    assert header.split(", ") == ["loss", "x", "k", "g_loss", "g_x", "saved_loss", "d_loss", "d_x", "d_g_loss",
                                  "d_g_x", "d_saved_loss", "_err"]


def test_tangent_programs_are_readable():
    src = rotate_then_measure.source("jvp")
    assert "def rotate_then_measure_jvp(a, b, theta, loss, d_a, d_b, d_theta, d_loss, _err)" in src
    assert "d_loss += " in src and "np.cos(theta) * d_theta" in src


def test_jvp_of_the_inverse_runs_the_inverse_tangent():
    args = (0.4, -1.3, 0.7, 0.0)
    outs = rotate_then_measure(*args)
    back, dback = revdiff.jvp(~rotate_then_measure, outs, (1.0, 0.0, 0.0, 0.0))
    np.testing.assert_allclose(back, args, atol=1e-15)
    _, forward_tangent = revdiff.jvp(rotate_then_measure, args, dback)  # the inverse's Jacobian, inverted
    np.testing.assert_allclose(forward_tangent, (1.0, 0.0, 0.0, 0.0), atol=1e-14)


# ----------------------------------------------------------------------------- errors


def test_jvp_argument_errors_name_the_parameter():
    x = np.ones(3)
    with pytest.raises(TypeError, match="decorated with @revdiff.reversible"):
        revdiff.jvp(lambda x: x, (x,), (x,))
    with pytest.raises(TypeError, match="primals must be a tuple"):
        revdiff.jvp(poly, x, x)
    with pytest.raises(TypeError, match="one entry per argument"):
        revdiff.jvp(poly, (0.0, x, 1), (0.0, x))
    with pytest.raises(ValueError, match="'x' has shape"):
        revdiff.jvp(poly, (0.0, x, 1), (0.0, np.ones(4), None))
    with pytest.raises(TypeError, match="'k' is int64, which has no tangent"):
        revdiff.jvp(poly, (0.0, x, 1), (0.0, x, 1))
    with pytest.raises(TypeError, match="complex but 'x' is real"):
        revdiff.jvp(poly, (0.0, x, 1), (0.0, x * 1j, None))


def test_hvp_and_hessian_errors():
    x = np.ones(3)
    with pytest.raises(TypeError, match="must be a real scalar parameter"):
        revdiff.hvp(poly, "x", (0.0, x, 1), (0.0, x, None))
    with pytest.raises(ValueError, match="not a parameter"):
        revdiff.hvp(poly, "nope", (0.0, x, 1), (0.0, x, None))
    with pytest.raises(TypeError, match="hessian takes the arguments of poly spread"):
        revdiff.hessian(poly, "loss", (0.0, x, 1))

    @reversible
    def cplx(loss, z):
        loss += (z * z).real

    with pytest.raises(TypeError, match="use revdiff.hvp"):
        revdiff.hessian(cplx, "loss", 0.0, 1j)


def test_runtime_checks_keep_their_messages_in_tangent_programs():
    @reversible
    def divide(y, x):
        y /= x

    with pytest.raises(revdiff.ReversibilityError, match="division by zero"):
        revdiff.jvp(divide, (1.0, 0.0), (1.0, 1.0))


# ----------------------------------------------------------------------------- batches and programs


def test_batched_jvp_and_hvp_equal_the_single_calls():
    @reversible
    def weighted(loss, x, w):
        for i in range(x.shape[0]):
            loss += np.sin(x[i]) * x[i] * w[i]

    rng = np.random.default_rng(3)
    x, w, dx, dw = rng.standard_normal((5, 3)), rng.standard_normal(3), rng.standard_normal((5, 3)), rng.standard_normal(3)
    bf = revdiff.batched(weighted, ["loss", "x"])
    outs, douts = bf.jvp((np.zeros(5), x, w), (None, dx, dw))
    hv = bf.hvp("loss", (np.zeros(5), x, w), (None, dx, dw))
    shared = np.zeros(3)
    for b in range(5):
        _, d = revdiff.jvp(weighted, (0.0, x[b], w), (0.0, dx[b], dw))
        assert douts[0][b] == pytest.approx(d[0], rel=1e-14)
        h = revdiff.hvp(weighted, "loss", (0.0, x[b], w), (0.0, dx[b], dw))
        np.testing.assert_allclose(hv[1][b], h[1], rtol=1e-14, atol=1e-15)
        shared += h[2]
    np.testing.assert_allclose(hv[2], shared, rtol=1e-13)  # a shared parameter: summed over the batch
    with pytest.raises(TypeError, match="batched real scalar"):
        bf.hvp("x", (np.zeros(5), x, w), (None, dx, dw))


def test_qr_jvp_equals_torch_forward_mode():
    torch = pytest.importorskip("torch")
    from revdiff import programs as P
    rng = np.random.default_rng(5)
    A, dA = rng.standard_normal((3, 6, 4)), rng.standard_normal((3, 6, 4))
    (Q, R), (dQ, dR) = P.qr_jvp(A, dA, "cgs2")
    (tQ, tR), (tdQ, tdR) = torch.func.jvp(torch.linalg.qr, (torch.from_numpy(A),), (torch.from_numpy(dA),))
    s = np.sign(np.diagonal(tR.numpy(), axis1=-2, axis2=-1))  # LAPACK's signs to diag(R) >= 0 (constant nearby)
    np.testing.assert_allclose(Q, tQ.numpy() * s[:, None, :], atol=1e-13)
    np.testing.assert_allclose(dQ, tdQ.numpy() * s[:, None, :], atol=1e-12)
    np.testing.assert_allclose(dR, tdR.numpy() * s[:, :, None], atol=1e-12)
    R_only, dR_only = P.qr_jvp(A, dA, "cgs2", mode="r")
    np.testing.assert_array_equal(dR_only, dR)
    with pytest.raises(ValueError, match="'dA' must have the shape of A"):
        P.qr_jvp(A, dA[..., :3], "cgs2")
    with pytest.raises(ValueError, match="not finite|NaN|inf"):
        P.qr_jvp(A, np.full_like(A, np.nan), "cgs2")


def test_project_jvp_against_central_differences_complex_and_truncated():
    from revdiff import programs as P
    rng = np.random.default_rng(6)
    B = rng.standard_normal((2, 5, 2)) + 1j * rng.standard_normal((2, 5, 2))
    A = np.concatenate([B, B[..., :1] * (0.5 - 1j)], axis=-1)  # rank 2 of 3 columns
    y = rng.standard_normal((2, 5)) + 1j * rng.standard_normal((2, 5))
    X = rng.standard_normal((2, 3, 3))
    dA, dy = A @ X, rng.standard_normal((2, 5)) + 1j * rng.standard_normal((2, 5))  # keeps the rank
    (z, rank), dz = P.project_jvp(A, y, dA, dy, "cgs2", rank_deficient="truncate")
    assert list(rank) == [2, 2]
    eps = 1e-6
    curve = [P.project(A @ (np.eye(3) + s * eps * X), y + s * eps * dy, "cgs2", rank_deficient="truncate")[0]
             for s in (1, -1)]
    np.testing.assert_allclose(dz, (curve[0] - curve[1]) / (2 * eps), rtol=1e-6, atol=1e-7)
    z0, dz0 = P.project_jvp(A[..., :2], y, None, dy, "cgs2")  # linear in y
    np.testing.assert_allclose(dz0, P.project(A[..., :2], dy, "cgs2"), atol=1e-14)


def _central(f, eps=1e-6):
    """Central difference of f(s) at s = 0."""
    return (f(eps) - f(-eps)) / (2 * eps)


def test_lstsq_jvp_and_its_second_derivative_against_central_differences():
    """Columns and y of very different magnitudes (the programs see them scaled, the tangents are
    scaled back), a rank-deficient wide A truncated, and the vjp part of vjp_jvp equal to lstsq_vjp."""
    from revdiff import programs as P
    rng = np.random.default_rng(8)
    col = np.array([1e3, 1.0, 1e-4])
    A, y = rng.standard_normal((2, 7, 3)) * col, 1e5 * rng.standard_normal((2, 7))
    dA, dy, gx = rng.standard_normal(A.shape) * col, 1e5 * rng.standard_normal(y.shape), rng.standard_normal((2, 3))
    x, dx = P.lstsq_jvp(A, y, dA, dy)
    np.testing.assert_array_equal(x, P.lstsq(A, y))
    want = _central(lambda s: P.lstsq(A + s * dA, y + s * dy))
    np.testing.assert_allclose(dx, want, rtol=1e-8, atol=1e-8 * np.abs(want).max())
    (gA, gy), (dgA, dgy), dx2 = P.lstsq_vjp_jvp(A, y, gx, dA, dy)
    for got, expected in zip((gA, gy), P.lstsq_vjp(A, y, gx)):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(dx2, dx, rtol=1e-12, atol=1e-12 * np.abs(dx).max())
    for got, k in ((dgA, 0), (dgy, 1)):
        want = _central(lambda s: P.lstsq_vjp(A + s * dA, y + s * dy, gx)[k])
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-7 * np.abs(want).max())

    B = rng.standard_normal((2, 5, 2))  # 5x4 of rank 3: column 2 = column 0 / 2
    W = np.concatenate([B, B[..., :1] * 0.5, rng.standard_normal((2, 5, 1))], axis=-1)
    X, v, gw = rng.standard_normal((2, 4, 4)), rng.standard_normal((2, 5)), rng.standard_normal((2, 4))
    curve = lambda s: (W @ (np.eye(4) + s * X), y[:, :5] + s * v)  # noqa: E731  (keeps the rank)
    (w, rank), dw = P.lstsq_jvp(W, y[:, :5], W @ X, v, rank_deficient="truncate")
    assert list(rank) == [3, 3]
    want = _central(lambda s: P.lstsq(*curve(s), rank_deficient="truncate")[0])
    np.testing.assert_allclose(dw, want, rtol=1e-7, atol=1e-7 * np.abs(want).max())
    _, (dgW, _), _ = P.lstsq_vjp_jvp(W, y[:, :5], gw, W @ X, v, rank_deficient="truncate")
    want = _central(lambda s: P.lstsq_vjp(*curve(s), gw, rank_deficient="truncate")[0])
    np.testing.assert_allclose(dgW, want, rtol=1e-7, atol=1e-7 * np.abs(want).max())

    empty, dempty = P.lstsq_jvp(np.zeros((0, 4, 2)), np.zeros((0, 4)), None, None)
    assert empty.shape == dempty.shape == (0, 2)
    with pytest.raises(ValueError, match="'dA' must have the shape of A"):
        P.lstsq_jvp(A, y, dA[..., :2], None)


def test_lstsq_forward_mode_in_torch_equals_torch_linalg_lstsq():
    torch = pytest.importorskip("torch")
    import revdiff.torch as rt
    rng = np.random.default_rng(9)
    A, y, dA, dy = (torch.from_numpy(rng.standard_normal(s)) for s in ((2, 6, 3), (2, 6), (2, 6, 3), (2, 6)))
    mine = torch.func.jvp(rt.lstsq, (A, y), (dA, dy))
    theirs = torch.func.jvp(lambda a, b: torch.linalg.lstsq(a, b[..., None]).solution[..., 0], (A, y), (dA, dy))
    for a, b in zip(mine, theirs):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_sphere_jvps_and_second_derivatives_against_central_differences(dtype):
    """normalize and tangent_project: tangents and second derivatives against central differences
    (complex: the real derivative), the vjp parts equal to the vjps bit for bit, magnitudes near
    the ends of the exponent range scaled away and back, empty batches, and errors by name."""
    from revdiff import programs as P
    rng = np.random.default_rng(10)

    def vectors(scale=1.0):
        v = rng.standard_normal((3, 5))
        return scale * (v + 1j * rng.standard_normal((3, 5)) if dtype == np.complex128 else v)

    x, dx, gy = vectors(), vectors(), vectors()
    y, dy = P.normalize_jvp(x, dx)
    np.testing.assert_array_equal(y, P.normalize(x))
    want = _central(lambda s: P.normalize(x + s * dx))
    np.testing.assert_allclose(dy, want, rtol=1e-8, atol=1e-9)
    gx, dgx, dy2 = P.normalize_vjp_jvp(x, gy, dx)
    np.testing.assert_array_equal(gx, P.normalize_vjp(x, gy))
    np.testing.assert_allclose(dy2, dy, rtol=1e-13, atol=1e-14)
    want = _central(lambda s: P.normalize_vjp(x + s * dx, gy))
    np.testing.assert_allclose(dgx, want, rtol=1e-7, atol=1e-8)
    big, small = 2.0 ** 900, 2.0 ** -900  # y(c x) = y(x): dy(c x, c dx) = dy, dgx(c x, g, c dx) = dgx / c
    np.testing.assert_allclose(P.normalize_jvp(x * small, dx * small)[1], dy, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(P.normalize_vjp_jvp(x * big, gy, dx * big)[1] * big, dgx, rtol=1e-13, atol=1e-14)

    g, z, dg, dz, gout = vectors(), vectors(), vectors(), vectors(), vectors()
    out, dout = P.tangent_project_jvp(g, z, dg, dz)
    np.testing.assert_array_equal(out, P.tangent_project(g, z))
    want = _central(lambda s: P.tangent_project(g + s * dg, z + s * dz))
    np.testing.assert_allclose(dout, want, rtol=1e-8, atol=1e-9)
    grads, dgrads, dout2 = P.tangent_project_vjp_jvp(g, z, gout, dg, dz)
    for got, expected in zip(grads, P.tangent_project_vjp(g, z, gout)):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(dout2, dout, rtol=1e-13, atol=1e-14)
    for k in (0, 1):
        want = _central(lambda s: P.tangent_project_vjp(g + s * dg, z + s * dz, gout)[k])
        np.testing.assert_allclose(dgrads[k], want, rtol=1e-7, atol=1e-8)
    # g near overflow, z near underflow (out(c g, z / c) = c out(g, z)), dg as g or far below it
    _, d_far = P.tangent_project_jvp(g * big, z * small, dg * big, dz * small)
    np.testing.assert_allclose(d_far * small, dout, rtol=1e-13, atol=1e-14)
    _, d_far = P.tangent_project_jvp(g * big, z * small, dg, dz * small)
    np.testing.assert_allclose(d_far * small, P.tangent_project_jvp(g, z, dg * small, dz)[1], rtol=1e-13, atol=1e-14)

    # g, z, dg, dz each scaled by 2**k, k in -1000..1000: dout = 2**c T(z) dg + 2**(a - b + d) J(g, z) dz,
    # the tangents scaled into range in one step, never as their values first (which underflowed)
    along_g, along_z = P.tangent_project_jvp(g, z, dg, None)[1], P.tangent_project_jvp(g, z, None, dz)[1]
    for a, b, c, d in itertools.product((-1000, 0, 1000), repeat=4):
        want = np.ldexp(along_g.real, c) + np.ldexp(along_z.real, a - b + d)
        if not np.all(np.isfinite(want)) or dtype == np.complex128:
            continue
        got = P.tangent_project_jvp(np.ldexp(g, a), np.ldexp(z, b), np.ldexp(dg, c), np.ldexp(dz, d))[1]
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * np.abs(want).max() + 1e-300)

    e, de = P.normalize_jvp(np.zeros((0, 4), dtype), None)
    assert e.shape == de.shape == (0, 4)
    assert [a.shape for a in P.tangent_project_vjp_jvp(*(np.zeros((2, 0, 3), dtype),) * 3, None, None)[1]] == \
        [(2, 0, 3)] * 2
    with pytest.raises(ValueError, match="'x' at batch index \\(1,\\) is zero"):
        P.normalize_jvp(np.array([[1.0, 2.0], [0.0, 0.0]]), None)
    with pytest.raises(ValueError, match="'dz' has shape"):
        P.tangent_project_jvp(g, z, None, dz[:, :2])
    with pytest.raises(ValueError, match="'dx'"):
        P.normalize_jvp(x, np.full(x.shape, np.nan))
    if dtype == np.float64:
        with pytest.raises(TypeError, match="'dx' is complex but the value it is the tangent of is real"):
            P.normalize_jvp(x, dx + 1j)
    with pytest.raises(TypeError, match="'gy' is None; pass an array"):
        P.normalize_vjp_jvp(x, None, dx)


@reversible
def power_of(loss, x, e):
    loss += x ** e


@reversible
def roots(loss, x):
    for i in range(x.shape[0]):
        loss += np.sqrt(x[i]) * x[i] + np.hypot(x[i], x[i])


@reversible
def length(loss, v):
    loss += np.linalg.norm(v)


def test_tangents_at_singular_points_are_zero_along_zero_directions_and_raise_along_others():
    """A tangent term that divides by zero or leaves a domain the statement's checks let through
    counts only along a direction that moves it, and raises by name there, as the gradient does."""
    assert revdiff.jvp(power_of, (0.0, -1.5, 3.0), (None, 1.0, None))[1][0] == 6.75  # e fixed: no log(x)
    assert revdiff.jvp(power_of, (0.0, 2.0, 3.0), (None, 1.0, 1.0))[1][0] == pytest.approx(12 + 8 * np.log(2))
    with pytest.raises(ValueError, match=r"test_forward_mode.py\", line \d+.*math domain error: np.log"):
        revdiff.jvp(power_of, (0.0, -1.5, 3.0), (None, 0.0, 1.0))
    with pytest.raises(ValueError, match="math domain error"):
        revdiff.grad(power_of, "loss")(0.0, -1.5, 3.0)
    # x ** 1.5 at 0: a gradient (0), no second derivative; held fixed, none is needed
    assert revdiff.hvp(power_of, "loss", (0.0, 0.0, 1.5), (None, 0.0, None))[1] == 0.0
    with pytest.raises(ValueError, match=r"math domain error: x \*\* "):
        revdiff.hvp(power_of, "loss", (0.0, 0.0, 1.5), (None, 1.0, None))

    x = np.array([0.0, 4.0, 9.0])
    moving = np.array([0.0, 1.0, -1.0])  # x[0] = 0 held fixed: sqrt and hypot are singular only there
    _, (dloss, _) = revdiff.jvp(roots, (0.0, x), (None, moving))
    assert dloss == pytest.approx(1.5 * 2 + np.sqrt(2) - (1.5 * 3 + np.sqrt(2)), rel=1e-14)
    for call in (lambda: revdiff.jvp(roots, (0.0, x), (None, np.ones(3))),
                 lambda: revdiff.hvp(roots, "loss", (0.0, x), (None, np.ones(3))),
                 lambda: revdiff.batched(roots, ["loss", "x"]).jvp((np.zeros(2), np.stack([x + 1, x])),
                                                                  (None, np.ones((2, 3))))):
        with pytest.raises(ZeroDivisionError, match=r"line \d+.*division by zero: np.sqrt\(x\[i\]\) is 0"):
            call()
    with pytest.raises(ZeroDivisionError, match="in batch element 1"):
        revdiff.batched(roots, ["loss", "x"]).jvp((np.zeros(2), np.stack([x + 1, x])), (None, np.ones((2, 3))))

    # the norm's gradient is 0 at 0 (PyTorch's convention), and so is its Hessian (PyTorch's is NaN)
    np.testing.assert_array_equal(revdiff.hessian(length, "loss", 0.0, np.zeros(2))[1][1], np.zeros((2, 2)))
    v = np.array([3.0, 4.0])
    np.testing.assert_allclose(revdiff.hessian(length, "loss", 0.0, v)[1][1], (np.eye(2) - np.outer(v, v) / 25) / 5,
                               rtol=1e-14, atol=1e-16)


@reversible
def single_precision_dot(s, x, y):
    for i in range(len(x)):
        s[0] += x[i] * y[i]


def test_a_tangent_or_cotangent_beyond_the_arrays_dtype_is_refused_by_name():
    """A float64 tangent of a float32 array that float32 cannot hold would become inf (NumPy only
    warns), as a float64 value stored in a float32 array is refused in the program."""
    args = (np.zeros(1, np.float32), np.ones(2, np.float32), np.ones(2, np.float32))
    with pytest.raises(ValueError, match="tangent for 'x' has values beyond the range of float32"):
        revdiff.jvp(single_precision_dot, args, (None, np.array([1e-50, 1e300]), None))
    _, pullback = revdiff.vjp(single_precision_dot, *args)
    with pytest.raises(ValueError, match="cotangent for 's' has values beyond the range of float32"):
        pullback(np.array([1e300]), None, None)
    _, tangents = revdiff.jvp(single_precision_dot, args, (None, np.array([1.0, 2.0]), None))
    assert tangents[0].dtype == np.float32 and tangents[0][0] == 3.0
    batched = revdiff.batched(single_precision_dot, ("s", "x", "y"))
    with pytest.raises(ValueError, match="tangent for 'x' has values beyond the range of float32"):
        batched.jvp(tuple(np.stack([a, a]) for a in args), (None, np.full((2, 2), 1e300), None))
    # the GPU arguments' path (CuPy's array module there), with NumPy's arrays as its stand-in
    with pytest.raises(ValueError, match="cotangent for 's' has values beyond the range of float32"):
        _device_cotangent(np, "s", np.zeros(1, np.float32), np.array([1e300]))
    assert _device_cotangent(np, "s", np.zeros(1, np.float32), np.array([2.0])).dtype == np.float32
