"""QR modes: the complete Q (m x m) constructed by the Householder and Givens programs, with its
gradient; R alone (mode "r") with its gradient; the same modes in revdiff.torch and revdiff.jax."""
import numpy as np
import pytest

from helpers import assert_gradient, assert_round_trip
from revdiff import programs as P

rng = np.random.default_rng(24)
COMPLETE = [("householder", False), ("householder", True), ("givens", False)]
SHAPES = [(6, 3), (4, 4), (3, 5)]


def rand(shape, cplx=False):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if cplx else x


def eye_like(Q):
    return np.broadcast_to(np.eye(Q.shape[-1]), Q.shape)


def hermitian(X):
    return np.conj(np.swapaxes(X, -1, -2))


@pytest.mark.parametrize("method, cplx", COMPLETE)
@pytest.mark.parametrize("shape", SHAPES)
def test_complete_q_is_orthogonal_and_reconstructs_a(method, cplx, shape):
    m, n = shape
    A = rand((2, m, n), cplx)
    Q, R = P.qr(A, method, mode="complete")
    assert Q.shape == (2, m, m) and R.shape == (2, m, n)
    np.testing.assert_allclose(hermitian(Q) @ Q, eye_like(Q), rtol=0, atol=1e-14)
    np.testing.assert_allclose(Q @ R, A, rtol=0, atol=1e-14 * np.abs(A).max() * m)
    assert not np.any(np.tril(R, -1)) and np.all(np.diagonal(R, axis1=1, axis2=2).real >= 0)
    Q_thin, R_thin = P.qr(A, method)  # the first p columns are the thin Q, bit for bit
    p = min(m, n)
    np.testing.assert_array_equal(Q[..., :p], Q_thin)
    np.testing.assert_array_equal(R[:, :p], R_thin)
    assert not np.any(R[:, p:])


@pytest.mark.parametrize("method, cplx", COMPLETE)
def test_complete_program_gradient_and_round_trip(method, cplx):
    """The program's own gradient of the complete Q, inner-product test against central differences,
    and its inverse, on a tall matrix (the completion columns are outputs)."""
    m, n = 5, 3
    program = P.QR_METHODS[method]
    A = rand((m, n), cplx)
    outputs = (np.zeros((m, m), A.dtype), np.zeros((m, n), A.dtype))
    outputs += (np.zeros((m, n)),) if method == "givens" else ()
    assert_gradient(program, *outputs, A)
    assert_round_trip(program, *outputs, A)


@pytest.mark.parametrize("method, cplx", COMPLETE)
@pytest.mark.parametrize("shape", [(5, 3), (3, 4)])
def test_complete_qr_vjp_equals_central_differences(method, cplx, shape):
    """Re<gQ, Q(A)> + Re<gR, R(A)> along a random direction: the derivative of the complete Q of a
    tall matrix is that of the program (smooth where no Householder sign flips)."""
    m, n = shape
    A, dA = rand((2, m, n), cplx), rand((2, m, n), cplx)
    gQ, gR = rand((2, m, m), cplx), rand((2, m, n), cplx)

    def loss(X):
        Q, R = P.qr(X, method, mode="complete")
        return np.sum(np.real(np.conj(gQ) * Q)) + np.sum(np.real(np.conj(gR) * R))

    gA = P.qr_vjp(A, gQ, gR, method, mode="complete")
    h = 1e-6
    central = (loss(A + h * dA) - loss(A - h * dA)) / (2 * h)
    assert abs(np.sum(np.real(np.conj(gA) * dA)) - central) < 1e-7 * max(1.0, abs(central))


def test_complete_mode_of_a_tall_matrix_needs_householder_or_givens():
    A = rand((5, 3))
    for method in ("cgs2", "bcgs2", "mgs", "cgs"):
        with pytest.raises(ValueError, match="'householder', 'blocked_householder' or 'givens'.*first 3 columns"):
            P.qr(A, method, mode="complete")
        with pytest.raises(ValueError, match="'householder', 'blocked_householder' or 'givens'"):
            P.qr_vjp(A, None, np.ones((5, 3)), method, mode="complete")
    W = rand((3, 5))  # a wide (or square) Q is complete already: every method
    for method in ("cgs2", "mgs"):
        Q, R = P.qr(W, method, mode="complete")
        np.testing.assert_array_equal(Q, P.qr(W, method)[0])


def test_unknown_mode_and_cotangent_shapes_are_named():
    A = rand((5, 3))
    with pytest.raises(ValueError, match="unknown mode 'full'"):
        P.qr(A, mode="full")
    with pytest.raises(ValueError, match=r"mode='complete', 'gQ' must have shape \(5, 5\) \(complete Q\)"):
        P.qr_vjp(A, np.ones((5, 3)), None, "householder", mode="complete")
    with pytest.raises(ValueError, match="mode='r' has no Q output"):
        P.qr_vjp(A, np.ones((5, 3)), np.ones((3, 3)), mode="r")


@pytest.mark.parametrize("method", ["cgs2", "householder"])
def test_mode_r_returns_r_with_its_gradient(method):
    A, gR = rand((2, 6, 4)), np.triu(rand((2, 4, 4)))
    R = P.qr(A, method, mode="r")
    np.testing.assert_array_equal(R, P.qr(A, method)[1])
    gA = P.qr_vjp(A, None, gR, method, mode="r")
    np.testing.assert_array_equal(gA, P.qr_vjp(A, None, gR, method))
    dA, h = rand(A.shape), 1e-6
    central = np.sum(gR * (P.qr(A + h * dA, method, mode="r") - P.qr(A - h * dA, method, mode="r"))) / (2 * h)
    assert abs(np.sum(gA * dA) - central) < 1e-7 * abs(central)


def test_empty_matrices_in_every_mode():
    """As NumPy: the complete Q of an m x 0 matrix is the identity; empty batches stay empty."""
    Q, R = P.qr(np.zeros((2, 4, 0)), "householder", mode="complete")
    np.testing.assert_array_equal(Q, np.broadcast_to(np.eye(4), (2, 4, 4)))
    assert R.shape == (2, 4, 0)
    want_q, want_r = np.linalg.qr(np.zeros((4, 0)), mode="complete")
    assert Q[0].shape == want_q.shape and R[0].shape == want_r.shape
    Q, R = P.qr(np.zeros((0, 5, 3)), "givens", mode="complete")
    assert Q.shape == (0, 5, 5) and R.shape == (0, 5, 3)
    assert P.qr(np.zeros((3, 0)), mode="r").shape == (0, 0)
    gA = P.qr_vjp(np.zeros((4, 0)), np.zeros((4, 4)), np.zeros((4, 0)), "householder", mode="complete")
    assert gA.shape == (4, 0)


# ----------------------------------------------------------------------------- frameworks

def _positive(torch, Q, R):
    """Q D, D^H R with D the phases of diag(R): torch's QR in revdiff's sign convention."""
    d = torch.diagonal(R, dim1=-2, dim2=-1)
    phase = d / d.abs()
    k = phase.shape[-1]
    return torch.cat([Q[..., :k] * phase.unsqueeze(-2), Q[..., k:]], -1), R * phase.conj().unsqueeze(-1)


@pytest.mark.parametrize("cplx", [False, True])
def test_torch_complete_mode_gradient_equals_torch_where_torch_has_one(cplx):
    """torch.linalg.qr differentiates mode="complete" only for m <= n, where Q is square."""
    torch = pytest.importorskip("torch")
    import revdiff.torch as rt
    A = rand((2, 3, 5), cplx)
    gQ, gR = rand((2, 3, 3), cplx), rand((2, 3, 5), cplx)

    def gradient(qr):
        a = torch.tensor(A, requires_grad=True)
        Q, R = qr(a)
        torch.real(torch.sum(torch.tensor(gQ).conj() * Q) + torch.sum(torch.tensor(gR).conj() * R)).backward()
        return a.grad.numpy()

    mine = gradient(lambda a: rt.qr(a, "householder", mode="complete"))
    theirs = gradient(lambda a: _positive(torch, *torch.linalg.qr(a, mode="complete")))
    np.testing.assert_allclose(mine, theirs, atol=1e-12)


def test_torch_complete_and_r_modes_of_a_tall_matrix():
    """Where torch refuses the gradient (complete Q of a tall matrix, mode "r"), revdiff's is the
    program's; shapes as torch.linalg.qr's, also under vmap, and opcheck passes."""
    torch = pytest.importorskip("torch")
    import revdiff.torch as rt
    A, gQ, gR = rand((2, 5, 3)), rand((2, 5, 5)), rand((2, 5, 3))
    a = torch.tensor(A, requires_grad=True)
    Q, R = rt.qr(a, "givens", mode="complete")
    (torch.sum(torch.tensor(gQ) * Q) + torch.sum(torch.tensor(gR) * R)).backward()
    np.testing.assert_allclose(a.grad.numpy(), P.qr_vjp(A, gQ, gR, "givens", mode="complete"), rtol=1e-15)

    a = torch.tensor(A, requires_grad=True)
    Q, R = rt.qr(a, "householder", mode="r")
    want_q, want_r = torch.linalg.qr(torch.tensor(A), mode="r")
    assert Q.shape == want_q.shape and R.shape == want_r.shape
    (torch.sum(torch.tensor(gR[:, :3]) * R)).backward()
    np.testing.assert_allclose(a.grad.numpy(), P.qr_vjp(A, None, gR[:, :3], "householder", mode="r"), rtol=1e-15)

    Q, R = torch.func.vmap(lambda x: rt.qr(x, "householder", mode="r"))(torch.tensor(A))
    assert Q.numel() == 0 and R.shape == (2, 3, 3)  # an empty Q (torch's own vmap gives shape (0,))
    grads = torch.func.vmap(torch.func.grad(lambda x: rt.qr(x, "householder", mode="r")[1].sum()))(torch.tensor(A))
    np.testing.assert_allclose(grads.numpy(), P.qr_vjp(A, None, np.ones((2, 3, 3)), "householder", mode="r"),
                               rtol=1e-14)
    with pytest.raises(ValueError, match="'householder', 'blocked_householder' or 'givens'"):
        rt.qr(torch.empty((5, 3), dtype=torch.float64, device="meta"), "cgs2", mode="complete")
    for mode in ("complete", "r"):
        torch.library.opcheck(torch.ops.revdiff.qr.default,
                              (torch.tensor(A, requires_grad=True), "householder", None, mode))
        torch.library.opcheck(torch.ops.revdiff.qr_vjp.default,
                              (torch.tensor(A), torch.tensor(gQ if mode == "complete" else np.zeros(0)),
                               torch.tensor(gR if mode == "complete" else gR[:, :3]), "householder", None, mode))


def test_jax_modes_and_gradients():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import revdiff.jax as rj
    A, gQ = rand((2, 5, 3)), rand((2, 5, 5))
    Q, R = rj.qr(jnp.asarray(A), "householder", mode="complete")
    assert Q.shape == (2, 5, 5) and R.shape == (2, 5, 3)
    g = jax.grad(lambda a: jnp.sum(jnp.asarray(gQ) * rj.qr(a, "householder", mode="complete")[0]))(jnp.asarray(A))
    np.testing.assert_allclose(np.asarray(g), P.qr_vjp(A, gQ, None, "householder", mode="complete"), rtol=1e-14)
    R = rj.qr(jnp.asarray(A), "cgs2", mode="r")
    assert R.shape == jnp.linalg.qr(jnp.asarray(A), mode="r").shape
    g = jax.jit(jax.grad(lambda a: jnp.sum(rj.qr(a, "cgs2", mode="r") ** 2)))(jnp.asarray(A))
    np.testing.assert_allclose(np.asarray(g), P.qr_vjp(A, None, 2 * np.asarray(R), "cgs2", mode="r"), rtol=1e-14)
