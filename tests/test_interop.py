"""revdiff.torch and revdiff.jax: gradients through revdiff equal the framework's own autograd
through its QR on well-conditioned input (batches, float32, complex), gradcheck in float64, and
the frameworks stay optional."""
import subprocess
import sys

import numpy as np
import pytest

from helpers import scaled_norm

rng = np.random.default_rng(11)


def rand(shape, cplx=False):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if cplx else x


def test_importing_revdiff_imports_neither_framework():
    code = ("import sys, revdiff, revdiff.programs, revdiff.tools.compare, revdiff.tools.peers; "
            "assert 'torch' not in sys.modules and 'jax' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)


# ----------------------------------------------------------------------------- PyTorch

@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def rt(torch):
    import revdiff.torch
    return revdiff.torch


def _torch_positive_qr(torch, A):
    Q, R = torch.linalg.qr(A)
    d = torch.diagonal(R, dim1=-2, dim2=-1)
    phase = d / d.abs()
    return Q * phase.unsqueeze(-2), R * phase.conj().unsqueeze(-1)


def _torch_grads(torch, loss, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    loss(*ts).backward()
    return [t.grad.numpy() for t in ts]


def _weights(torch, like):
    """Fixed random weights so that the loss touches every output entry differently."""
    w = torch.from_numpy(rand(tuple(like.shape), like.is_complex())).to(like.dtype)
    return w


@pytest.mark.parametrize("shape,dtype", [((6, 4), np.float64), ((3, 6, 4), np.float64), ((2, 4, 6), np.float64),
                                         ((2, 5, 3), np.complex128), ((6, 4), np.float32), ((5, 3), np.complex64)])
def test_torch_qr_matches_torch_linalg_qr(torch, rt, shape, dtype):
    A = rand(shape, np.dtype(dtype).kind == "c").astype(dtype)

    def loss(qr):
        def f(A):
            Q, R = qr(A)
            return torch.real(torch.sum(_weights(torch, Q).conj() * Q) + torch.sum(_weights(torch, R).conj() * R))
        return f

    state = rng.bit_generator.state
    (mine,) = _torch_grads(torch, loss(rt.qr), A)
    rng.bit_generator.state = state
    (theirs,) = _torch_grads(torch, loss(lambda a: _torch_positive_qr(torch, a)), A)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-11
    assert mine.dtype == dtype
    np.testing.assert_allclose(mine, theirs, atol=tol * np.abs(theirs).max())


@pytest.mark.parametrize("cplx", [False, True])
def test_torch_project_matches_torch_linalg_qr(torch, rt, cplx):
    A, y = rand((3, 7, 3), cplx), rand((3, 7), cplx)

    def through(Q, y):
        return Q @ (Q.mH @ y.unsqueeze(-1))

    mine = _torch_grads(torch, lambda A, y: torch.sum(torch.abs(rt.project(A, y)) ** 3), A, y)
    theirs = _torch_grads(torch, lambda A, y: torch.sum(torch.abs(through(torch.linalg.qr(A)[0], y)) ** 3), A, y)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_torch_lstsq_normalize_tangent_match_torch(torch, rt):
    A, y = rand((2, 8, 3)), rand((2, 8))
    mine = _torch_grads(torch, lambda A, y: torch.sum(rt.lstsq(A, y) ** 2), A, y)
    theirs = _torch_grads(torch, lambda A, y: torch.sum(torch.linalg.lstsq(A, y.unsqueeze(-1)).solution ** 2), A, y)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, b, atol=1e-12)
    x, g = rand((3, 5)), rand((3, 5))

    def unit(x):
        return x / torch.linalg.norm(x, dim=-1, keepdim=True)

    w = torch.from_numpy(rand((3, 5)))
    np.testing.assert_allclose(_torch_grads(torch, lambda x: torch.sum(w * rt.normalize(x)), x)[0],
                               _torch_grads(torch, lambda x: torch.sum(w * unit(x)), x)[0], atol=1e-14)

    def tangent(g, z):
        zh = unit(z)
        return g - torch.sum(zh * g, -1, keepdim=True) * zh

    mine = _torch_grads(torch, lambda g, z: torch.sum(w * rt.tangent_project(g, z) ** 2), g, x)
    theirs = _torch_grads(torch, lambda g, z: torch.sum(w * tangent(g, z) ** 2), g, x)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, b, atol=1e-13)


def test_torch_gradcheck_float64(torch, rt):
    A = torch.tensor(rand((2, 5, 3)), requires_grad=True)
    y = torch.tensor(rand((2, 5)), requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: rt.project(a, b), (A, y))
    assert torch.autograd.gradcheck(lambda a: rt.qr(a, method="householder"), (A,))
    C = torch.tensor(rand((4, 3), True), requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: rt.qr(a), (C,))


def test_torch_function_from_any_reversible_function(torch, rt):
    f = rt.function(scaled_norm, outputs="out")
    x = torch.tensor(rand(4), requires_grad=True)
    c = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    out = f(torch.tensor(1.0, dtype=torch.float64), x, c)
    assert torch.isclose(out, 1 + 2.5 * torch.linalg.norm(x.detach()))
    out.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2.5 * x.detach().numpy() / np.linalg.norm(x.detach().numpy()))
    np.testing.assert_allclose(c.grad.item(), np.linalg.norm(x.detach().numpy()))
    assert torch.autograd.gradcheck(lambda x, c: f(torch.tensor(0.0, dtype=torch.float64), x, c), (x, c))
    with pytest.raises(ValueError, match=r"'y' is not a parameter of .*scaled_norm \(out, x, c\)"):
        rt.function(scaled_norm, outputs=("y",))


def test_torch_meta_tensors_get_meta_results_of_the_right_shapes(torch, rt):
    """Meta tensors (and torch.compile's fake tensors) go through the operations' fake
    implementations: shapes and dtypes without computing."""
    A = torch.empty((2, 4, 3), dtype=torch.float32, device="meta")
    Q, R = rt.qr(A)
    assert (Q.device.type, Q.shape, R.shape, Q.dtype) == ("meta", (2, 4, 3), (2, 3, 3), torch.float32)
    z = rt.project(A, torch.empty((2, 4), dtype=torch.float64, device="meta"))
    assert (z.shape, z.dtype) == ((2, 4), torch.float64)


# ----------------------------------------------------------------------------- JAX

@pytest.fixture(scope="module")
def jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


@pytest.fixture(scope="module")
def rj(jax):
    import revdiff.jax
    return revdiff.jax


def _jax_positive_qr(jnp, A):
    Q, R = jnp.linalg.qr(A)
    d = jnp.diagonal(R, axis1=-2, axis2=-1)
    phase = d / jnp.abs(d)
    return Q * phase[..., None, :], R * jnp.conj(phase)[..., :, None]


@pytest.mark.parametrize("shape,dtype", [((6, 4), np.float64), ((3, 4, 6), np.float64), ((5, 3), np.complex128),
                                         ((6, 4), np.float32)])
def test_jax_qr_matches_jnp_linalg_qr_under_jit(jax, rj, shape, dtype):
    import jax.numpy as jnp
    cplx = np.dtype(dtype).kind == "c"
    A = jnp.asarray(rand(shape, cplx).astype(dtype))
    m, n = shape[-2:]
    wQ = jnp.asarray(rand(shape[:-1] + (min(m, n),), cplx).astype(dtype))
    wR = jnp.asarray(rand(shape[:-2] + (min(m, n), n), cplx).astype(dtype))

    def loss(qr):
        def f(A):
            Q, R = qr(A)
            return jnp.real(jnp.sum(jnp.conj(wQ) * Q) + jnp.sum(jnp.conj(wR) * R))
        return f

    mine = jax.jit(jax.grad(loss(rj.qr)))(A)
    theirs = jax.grad(loss(lambda a: _jax_positive_qr(jnp, a)))(A)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    assert mine.dtype == A.dtype
    np.testing.assert_allclose(mine, theirs, atol=tol * float(jnp.abs(theirs).max()))


def test_jax_functions_take_integer_and_bool_arrays_as_floats(jax, rj):
    """As jnp.linalg: integers and bools compute in JAX's default float (qr checks its tolerance
    against the float dtype it computes in, not the integer one, which NumPy's finfo refuses)."""
    import jax.numpy as jnp

    from revdiff import programs as P
    A = jnp.array([[1, 2], [3, 4], [5, 7]])
    Q, R = rj.qr(A)
    assert Q.dtype == jnp.result_type(float) and R.dtype == Q.dtype
    np.testing.assert_allclose(Q @ R, np.asarray(A, float), atol=1e-5)
    assert rj.qr(A, mode="r").shape == (2, 2)
    Qb, Rb = rj.qr(jnp.array([[True, False], [True, True]]))
    np.testing.assert_allclose(Qb @ Rb, [[1.0, 0.0], [1.0, 1.0]], atol=1e-6)
    np.testing.assert_allclose(rj.project(A, jnp.array([1, 0, 2])), P.project(np.asarray(A, float), np.array([1.0, 0, 2])),
                               atol=1e-5)


@pytest.mark.parametrize("cplx", [False, True])
def test_jax_project_under_vmap_and_jit(jax, rj, cplx):
    import jax.numpy as jnp
    A, y = jnp.asarray(rand((4, 7, 3), cplx)), jnp.asarray(rand((4, 7), cplx))

    def mine(A, y):
        return jnp.sum(jnp.abs(rj.project(A, y)) ** 3)

    def theirs(A, y):
        Q, _ = jnp.linalg.qr(A)
        return jnp.sum(jnp.abs(Q @ (jnp.conj(Q.T) @ y)) ** 3)

    a = jax.jit(jax.vmap(jax.grad(mine, (0, 1))))(A, y)
    b = jax.vmap(jax.grad(theirs, (0, 1)))(A, y)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, atol=1e-12)


def test_jax_lstsq_normalize_tangent(jax, rj):
    import jax.numpy as jnp
    A, y = jnp.asarray(rand((8, 3))), jnp.asarray(rand(8))
    a = jax.grad(lambda A, y: jnp.sum(rj.lstsq(A, y) ** 2), (0, 1))(A, y)
    b = jax.grad(lambda A, y: jnp.sum(jnp.linalg.lstsq(A, y)[0] ** 2), (0, 1))(A, y)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, atol=1e-12)
    x, g = jnp.asarray(rand((3, 5))), jnp.asarray(rand((3, 5)))

    def unit(x):
        return x / jnp.linalg.norm(x, axis=-1, keepdims=True)

    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(g * rj.normalize(x)))(x),
                               jax.grad(lambda x: jnp.sum(g * unit(x)))(x), atol=1e-14)

    def tangent(g, z):
        zh = unit(z)
        return g - jnp.sum(zh * g, -1, keepdims=True) * zh

    a = jax.grad(lambda g, z: jnp.sum(rj.tangent_project(g, z) ** 3), (0, 1))(g, x)
    b = jax.grad(lambda g, z: jnp.sum(tangent(g, z) ** 3), (0, 1))(g, x)
    for u, v in zip(a, b):
        np.testing.assert_allclose(u, v, atol=1e-13)


def test_jax_forward_mode_is_its_own_functions(jax, rj):
    """``jax.jvp`` cannot reach a custom_vjp function; ``project_jvp`` and ``qr_jvp`` equal JAX's
    own forward mode of the jnp computation, under jit and vmap, complex values included."""
    import jax.numpy as jnp
    A, dA = jnp.asarray(rand((3, 6, 3), True)), jnp.asarray(rand((3, 6, 3), True))
    y, dy = jnp.asarray(rand((3, 6), True)), jnp.asarray(rand((3, 6), True))

    def theirs(A, y):
        Q, _ = jnp.linalg.qr(A)
        return (Q @ (jnp.conj(jnp.swapaxes(Q, -1, -2)) @ y[..., None]))[..., 0]

    z, dz = jax.jit(jax.vmap(rj.project_jvp))(A, y, dA, dy)
    tz, tdz = jax.jvp(theirs, (A, y), (dA, dy))
    np.testing.assert_allclose(z, tz, atol=1e-13)
    np.testing.assert_allclose(dz, tdz, atol=1e-12)
    (Q, R), (dQ, dR) = rj.qr_jvp(A.real, dA.real)
    (_, tR), (_, tdR) = jax.jvp(lambda a: _jax_positive_qr(jnp, a), (A.real,), (dA.real,))
    np.testing.assert_allclose(dR, tdR, atol=1e-12)
    x, dx = jax.jit(jax.vmap(rj.lstsq_jvp))(A, y, dA, dy)
    tx, tdx = jax.jvp(lambda a, b: jnp.linalg.lstsq(a, b)[0], (A[0], y[0]), (dA[0], dy[0]))
    np.testing.assert_allclose(x[0], tx, atol=1e-12)
    np.testing.assert_allclose(dx[0], tdx, atol=1e-11)

    def unit(x):
        return x / jnp.linalg.norm(x, axis=-1, keepdims=True)

    v, dv = jax.jit(jax.vmap(rj.normalize_jvp))(y, dy)
    np.testing.assert_allclose(dv, jax.jvp(unit, (y,), (dy,))[1], atol=1e-13)
    out, dout = jax.jit(rj.tangent_project_jvp)(dy, y, y, dy)
    tout, tdout = jax.jvp(lambda g, z: g - jnp.sum(jnp.conj(unit(z)) * g, -1, keepdims=True) * unit(z),
                          (dy, y), (y, dy))
    np.testing.assert_allclose(out, tout, atol=1e-13)
    np.testing.assert_allclose(dout, tdout, atol=1e-12)
    z0, dz0 = rj.project_jvp(A[0], y[0], None, dy[0])  # None: a zero tangent
    np.testing.assert_allclose(dz0, jax.jvp(lambda b: theirs(A[0], b), (y[0],), (dy[0],))[1], atol=1e-12)
    with pytest.raises(TypeError, match="revdiff.jax.normalize_jvp is not differentiable"):
        jax.grad(lambda a: jnp.sum(rj.normalize_jvp(a, dy[0].real)[1]))(y[0].real)  # not zeros, silently
    with pytest.raises(TypeError, match="revdiff.jax.normalize's gradient is not differentiable"):
        jax.grad(lambda a: jnp.sum(jax.grad(lambda b: jnp.sum(rj.normalize(b) ** 3))(a)))(y[0].real)
    with pytest.raises(TypeError, match="revdiff.jax.project's gradient is not differentiable"):
        jax.jacrev(jax.grad(lambda a: jnp.sum(rj.project(a, y[0].real) ** 3)))(A[0].real)
    with pytest.raises(TypeError, match="custom_vjp"):
        jax.jvp(rj.project, (A, y), (dA, dy))
