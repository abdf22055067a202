"""QR with column pivoting (the gradient of QR of A[:, perm] with perm fixed) and rank-revealing
projection and least squares (rank_deficient="truncate"): against SciPy's
pivoted QR, SVD projections of rank-r matrices, and central differences and the Golub-Pereyra
formula along directions that keep the rank."""
import numpy as np
import pytest
import scipy.linalg

from revdiff import formulas
from revdiff.errors import RankDeficientError
from revdiff.programs.pivoting import column_pivots
from revdiff import programs as P

rng = np.random.default_rng(31)


def rand(shape, cplx=False):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if cplx else x


def of_rank(b, m, n, r, cplx=False):
    return rand((b, m, r), cplx) @ rand((b, r, n), cplx)


def svd_projection(A, y, r):
    U = np.linalg.svd(A, full_matrices=False)[0][..., :r]
    return (U @ (np.conj(np.swapaxes(U, -1, -2)) @ y[..., None]))[..., 0]


def columns(A, perm):
    return np.take_along_axis(A, perm[..., None, :], axis=-1)


@pytest.mark.parametrize("method, cplx", [("cgs2", False), ("householder", True), ("bcgs2", False)])
@pytest.mark.parametrize("shape", [(7, 4), (4, 6)])
def test_pivoted_qr_matches_scipy(method, cplx, shape):
    A = rand((3,) + shape, cplx) * np.geomspace(1e-3, 1e3, shape[1])  # norms far apart: pivoting moves them
    Q, R, perm = P.qr(A, method, pivoting=True)
    assert perm.dtype == np.int64 and perm.shape == (3, shape[1])
    for b in range(3):
        np.testing.assert_array_equal(perm[b], scipy.linalg.qr(A[b], pivoting=True)[2])
    np.testing.assert_allclose(Q @ R, columns(A, perm), rtol=0, atol=1e-13 * np.abs(A).max())
    d = np.abs(np.diagonal(R, axis1=1, axis2=2))
    assert np.all(d[:, 1:] <= d[:, :-1] * (1 + 1e-12))
    R_only, perm_r = P.qr(A, method, mode="r", pivoting=True)  # scipy's (R, P) for mode "r"
    np.testing.assert_array_equal(R_only, R)
    np.testing.assert_array_equal(perm_r, perm)


def test_pivoted_qr_and_its_gradient_are_those_of_qr_of_the_permuted_matrix():
    A = rand((2, 6, 4)) * np.array([1.0, 10.0, 0.1, 3.0])
    gQ, gR = rand((2, 6, 4)), np.triu(rand((2, 4, 4)))
    Q, R, perm = P.qr(A, "cgs2", pivoting=True)
    permuted = columns(A, perm)
    Q0, R0 = P.qr(permuted, "cgs2")
    np.testing.assert_array_equal(Q, Q0)
    np.testing.assert_array_equal(R, R0)
    gA = P.qr_vjp(A, gQ, gR, "cgs2", pivoting=True)
    np.testing.assert_array_equal(columns(gA, perm), P.qr_vjp(permuted, gQ, gR, "cgs2"))


def test_column_pivots_match_scipy_and_keep_ties_and_noise_in_order():
    """Equal residuals (an orthogonal matrix's) and residuals at rounding level (a rank-deficient
    matrix's) are where a choice recomputed from rounded values would differ: the first of equal
    ones is taken, as LAPACK takes it, and the residuals are |R[k, k]| of the pivoted factor."""
    A = np.concatenate([rand((50, 7, 5)) * np.geomspace(0.1, 10, 5), of_rank(50, 7, 5, 2),
                        np.linalg.qr(rand((50, 7, 5)))[0], np.broadcast_to(np.eye(7, 5), (50, 7, 5))])
    perm, residuals = column_pivots(A)
    for b in range(len(A)):
        R, want = scipy.linalg.qr(A[b], pivoting=True, mode="r")
        kept = 5 if b < 50 else 2 if b < 100 else 0  # beyond the rank the residuals are rounding noise,
        np.testing.assert_array_equal(perm[b, :kept], want[:kept])  # which LAPACK's downdated norms order otherwise
        assert sorted(perm[b]) == list(range(5))
        scale = 2.0 ** np.frexp(np.abs(A[b]).max())[1]  # the scan's residuals are of A / scale, exactly
        np.testing.assert_allclose(residuals[b] * scale, np.abs(np.diag(R)), rtol=0, atol=1e-13)
    np.testing.assert_array_equal(perm[150:], np.broadcast_to(np.arange(5), (50, 5)))  # ties: in order


@pytest.mark.parametrize("method", ["mgs", "givens"])
def test_every_method_pivots(method):
    A = rand((2, 6, 4)) * np.array([1.0, 10.0, 0.1, 3.0])
    Q, R, perm = P.qr(A, method, pivoting=True)
    np.testing.assert_allclose(Q @ R, columns(A, perm), atol=1e-13 * np.abs(A).max())


def test_complete_pivoted_householder():
    A = rand((2, 6, 3))
    Q, R, perm = P.qr(A, "householder", mode="complete", pivoting=True)
    assert Q.shape == (2, 6, 6) and R.shape == (2, 6, 3)
    np.testing.assert_allclose(Q @ R, columns(A, perm), atol=1e-14 * 6)
    with pytest.raises(ValueError, match="'householder', 'blocked_householder' or 'givens'"):
        P.qr(A, "cgs2", mode="complete", pivoting=True)


def test_pivoting_and_truncation_options_are_checked_by_name():
    A = rand((5, 3))
    with pytest.raises(TypeError, match="pivoting must be True or False"):
        P.qr(A, pivoting="yes")
    with pytest.raises(ValueError, match="unknown rank_deficient 'drop'"):
        P.project(A, A[:, 0], rank_deficient="drop")


def test_pivoted_qr_of_extreme_magnitudes_keeps_the_order_of_the_norms():
    """One power of two per matrix (not per column) keeps the pivot order SciPy finds unscaled."""
    A = rand((6, 4)) * np.array([1.0, 8.0, 0.25, 2.0])
    for scale in (1e-300, 1e300):
        Q, R, perm = P.qr(A * scale, "householder", pivoting=True)
        np.testing.assert_array_equal(perm, scipy.linalg.qr(A, pivoting=True)[2])
        R0 = P.qr(A, "householder", pivoting=True)[1]  # A * scale is rounded: equal to rounding
        np.testing.assert_allclose(R / scale, R0, rtol=0, atol=1e-14 * np.abs(R0).max())


@pytest.mark.parametrize("method", ["cgs2", "householder"])
@pytest.mark.parametrize("m, n, r, cplx", [(8, 5, 3, False), (9, 4, 2, True), (3, 5, 2, False)])
def test_truncated_projection_equals_the_svd_projection_onto_the_rank(method, m, n, r, cplx):
    A, y = of_rank(2, m, n, r, cplx), rand((2, m), cplx)
    z, rank = P.project(A, y, method, rank_deficient="truncate")
    np.testing.assert_array_equal(rank, [r, r])
    np.testing.assert_allclose(z, svd_projection(A, y, r), rtol=0, atol=1e-13 * np.abs(y).max())
    with pytest.raises(RankDeficientError):
        P.project(A, y, method)  # the default still raises


def test_wide_matrix_with_dependent_leading_columns():
    """[[1, 1, 0], [1, 1, 1]] spans the plane, which Gram-Schmidt without pivoting cannot see."""
    W, y = np.array([[1.0, 1, 0], [1, 1, 1]]), np.array([3.0, 4.0])
    z, rank = P.project(W, y, rank_deficient="truncate")
    np.testing.assert_allclose(z, y, rtol=1e-15)
    assert rank == 2
    x, rank = P.lstsq(W, y, rank_deficient="truncate")
    np.testing.assert_allclose(x, [3.0, 0.0, 1.0], rtol=1e-15)  # the basic solution: column 1 left out


@pytest.mark.parametrize("method, cplx", [("cgs2", False), ("householder", True)])
def test_truncated_projection_gradient_along_directions_that_keep_the_rank(method, cplx):
    """<gA, dA> for dA = A X + Y A equals central differences of the SVD projection along A + t dA
    and the Golub-Pereyra formula's; gy equals P gz."""
    m, n, r = 7, 5, 3
    A, y, gz = of_rank(2, m, n, r, cplx), rand((2, m), cplx), rand((2, m), cplx)
    dA = A @ rand((2, n, n), cplx) + rand((2, m, m), cplx) @ A
    gA, gy = P.project_vjp(A, y, gz, method, rank_deficient="truncate")

    def loss(t):
        return np.sum(np.real(np.conj(gz) * svd_projection(A + t * dA, y, r)))

    h = 1e-6
    central = (loss(h) - loss(-h)) / (2 * h)
    mine = np.sum(np.real(np.conj(gA) * dA))
    assert abs(mine - central) < 1e-7 * abs(central)
    gp_A, gp_y = formulas.project_vjp_rank(A, y, gz, r)
    assert abs(np.sum(np.real(np.conj(gp_A) * dA)) - mine) < 1e-10 * abs(mine)
    np.testing.assert_allclose(gy, gp_y, atol=1e-13)


@pytest.mark.parametrize("smallest, rank", [(1e-6, 4), (1e-10, 4), (1e-15, 3), (0.0, 3)])
def test_rank_of_nearly_deficient_matrices(smallest, rank):
    U = np.linalg.qr(rand((8, 4)))[0]
    V = np.linalg.qr(rand((4, 4)))[0]
    A = U @ np.diag([1.0, 0.5, 0.1, smallest]) @ V.T
    y = rand(8)
    z, r = P.project(A, y, rank_deficient="truncate")
    assert r == rank
    kappa = 1 / smallest if rank == 4 else 10.0  # of the kept part: the error is O(u kappa_r)
    np.testing.assert_allclose(z, svd_projection(A, y, rank), rtol=0, atol=1e-14 * kappa * np.abs(y).max())


def test_truncated_least_squares_and_its_gradient():
    m, n, r = 8, 5, 3
    A, y = of_rank(2, m, n, r), rand((2, m))
    x, rank = P.lstsq(A, y, rank_deficient="truncate")
    np.testing.assert_array_equal(rank, [r, r])
    np.testing.assert_allclose((A @ x[..., None])[..., 0], svd_projection(A, y, r), atol=1e-12)
    perm = np.stack([scipy.linalg.qr(a, pivoting=True)[2] for a in A])  # qr itself refuses a deficient A
    assert not np.any(np.take_along_axis(x, perm[:, r:], axis=1))  # the columns left out get zero
    gx, X, Y, dy = rand((2, n)), rand((2, n, n)), rand((2, m, m)), rand((2, m))
    dA = A @ X + Y @ A
    gA, gy = P.lstsq_vjp(A, y, gx, rank_deficient="truncate")
    h = 1e-6

    def loss(t):  # A(t) = (I + tY) A (I + tX) keeps the rank (A + t dA only to first order); the pivots stay
        At = (np.eye(m) + t * Y) @ A @ (np.eye(n) + t * X)
        return np.sum(gx * P.lstsq(At, y + t * dy, rank_deficient="truncate")[0])

    central = (loss(h) - loss(-h)) / (2 * h)
    assert abs(np.sum(gA * dA) + np.sum(gy * dy) - central) < 1e-7 * abs(central)


def test_truncation_of_empty_and_zero_matrices():
    z, rank = P.project(np.zeros((2, 4, 3)), np.ones((2, 4)), rank_deficient="truncate")
    assert not np.any(z) and list(rank) == [0, 0]
    z, rank = P.project(np.zeros((0, 4, 3)), np.ones((0, 4)), rank_deficient="truncate")
    assert z.shape == (0, 4) and rank.shape == (0,)
    x, rank = P.lstsq(np.zeros((4, 0)), np.ones(4), rank_deficient="truncate")
    assert x.shape == (0,) and rank == 0
    gA, gy = P.project_vjp(np.zeros((4, 3)), np.ones(4), np.ones(4), rank_deficient="truncate")
    assert not np.any(gA) and not np.any(gy)


def test_truncation_in_torch_and_jax_equals_the_programs():
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import revdiff.jax as rj
    import revdiff.torch as rt
    A, y, gz = of_rank(2, 7, 4, 2), rand((2, 7)), rand((2, 7))
    want_z, want_rank = P.project(A, y, rank_deficient="truncate")
    want_gA, want_gy = P.project_vjp(A, y, gz, rank_deficient="truncate")
    a, b = torch.tensor(A, requires_grad=True), torch.tensor(y, requires_grad=True)
    z, rank = rt.project(a, b, rank_deficient="truncate")
    (z * torch.tensor(gz)).sum().backward()
    np.testing.assert_array_equal(z.detach().numpy(), want_z)
    np.testing.assert_array_equal(rank.numpy(), want_rank)
    np.testing.assert_array_equal(a.grad.numpy(), want_gA)
    np.testing.assert_array_equal(b.grad.numpy(), want_gy)
    z, rank = rj.project(jnp.asarray(A), jnp.asarray(y), rank_deficient="truncate")
    np.testing.assert_array_equal(np.asarray(rank), want_rank)
    g = jax.grad(lambda a, b: jnp.sum(jnp.asarray(gz) * rj.project(a, b, rank_deficient="truncate")[0]), (0, 1))
    gA, gy = g(jnp.asarray(A), jnp.asarray(y))
    np.testing.assert_array_equal(np.asarray(gA), want_gA)
    np.testing.assert_array_equal(np.asarray(gy), want_gy)
    W = np.array([[1.0, 1, 0], [1, 1, 1]])
    x, rank = rt.lstsq(torch.tensor(W), torch.tensor([3.0, 4.0]), rank_deficient="truncate")
    np.testing.assert_allclose(x.numpy(), [3.0, 0.0, 1.0], rtol=1e-15)
    x, rank = rj.lstsq(jnp.asarray(W), jnp.asarray([3.0, 4.0]), rank_deficient="truncate")
    np.testing.assert_allclose(np.asarray(x), [3.0, 0.0, 1.0], rtol=1e-15)
    assert int(rank) == 2
    np.testing.assert_array_equal(P.rank(A), want_rank)


def test_compare_rank_deficient_table(capsys):
    from revdiff.tools import compare_rank
    table = compare_rank.run((8, 4), names=["cgs2", "formula"])
    out = capsys.readouterr().out
    assert "| rank 3 |" in out and "| sigma_min 1e-15 |" in out
    mine = table["revdiff cgs2 (truncate)"]
    exact = [float(c) for c in mine[:3]]  # ranks 3, 2, 1: the truncated projection is exact
    assert max(exact) < 1e-12, mine
    assert float(mine[-1]) < 1e-12  # below the tolerance: truncated, as the reference
    assert min(float(c) for c in table["Golub-Pereyra (QR)"][:3]) > 1e-3  # the full-rank formula is wrong there


def test_compare_rank_deficient_command_line_checks_its_options():
    from revdiff.tools import cli
    for extra in (["--loss", "qr"], ["--conds", "1,10"], ["--batch", "2"], ["--shape", "8x1"]):
        with pytest.raises(SystemExit):
            cli.main(["compare", "--rank-deficient"] + extra)


def test_householder_on_a_rank_deficient_matrix_raises_rank_deficient_error():
    """Its reflector of a residual at rounding level cannot uncompute: the program's own check fails
    before R is read, and the high-level functions name the cause instead."""
    for seed in range(10):
        local = np.random.default_rng(seed)
        A = (local.standard_normal((9, 2)) + 1j * local.standard_normal((9, 2))) @ local.standard_normal((2, 4))
        y = local.standard_normal(9)
        for call in (lambda: P.qr(A, "householder"), lambda: P.qr_vjp(A, None, np.ones((4, 4)), "householder"),
                     lambda: P.project(A, y, "householder"), lambda: P.project_vjp(A, y, y, "householder"),
                     lambda: P.lstsq(A, y, "householder"), lambda: P.lstsq_vjp(A, y, np.ones(4), "householder")):
            with pytest.raises(RankDeficientError):
                call()


def test_pivoting_keeps_each_columns_own_scaling():
    """The pivots are chosen on A itself; each column is then scaled as without pivoting, so a
    column 1e-320 times another factors as accurately, and its norm orders it."""
    x, y = rand(6), rand(6)
    for small in (1e-120, 1e-200, 1e-300):
        A = np.c_[x * 1e200, y * small]
        Q, R, perm = P.qr(A, "cgs2", pivoting=True)
        Q0, R0 = P.qr(A[:, perm], "cgs2")
        np.testing.assert_array_equal(Q, Q0)
        np.testing.assert_array_equal(R, R0)
        gA = P.qr_vjp(A, np.ones((6, 2)), None, "cgs2", pivoting=True)
        np.testing.assert_array_equal(gA[:, perm], P.qr_vjp(A[:, perm], np.ones((6, 2)), None, "cgs2"))
    Q, R, perm = P.qr(np.diag([1.0, 1e-170, 2e-170]), pivoting=True)
    np.testing.assert_array_equal(perm, [0, 2, 1])  # no square underflows in the choice


@pytest.mark.parametrize("A", [np.array([[0.0, 1.0], [1.0, 0.0]]), np.eye(5)[[3, 1, 4, 0, 2]],
                               np.array([[-2e-19, 1.0, 2.0], [1.0, 3.0, -1.0], [2.0, 0.5, 1.0], [0.0, 1.0, 1.0]])])
def test_householder_where_a_leading_entry_is_zero_or_at_rounding_level(A):
    """The reflector's phase is read off x[0] only where |x[0]| is not at rounding level: read off
    a zero that the uncompute restores as +-1e-17, it flipped, and the program failed its checks."""
    for pivoting in (False, True):
        Q, R = P.qr(A, "householder", pivoting=pivoting)[:2]
        perm = P.qr(A, "householder", pivoting=True)[2] if pivoting else np.arange(A.shape[1])
        np.testing.assert_allclose(Q @ R, A[:, perm], rtol=0, atol=1e-15 * 4)
        np.testing.assert_allclose(Q.T @ Q, np.eye(Q.shape[1]), rtol=0, atol=1e-15 * 4)


def test_jax_checks_options_while_tracing():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import revdiff.jax as rj
    A, y = jnp.ones((5, 3)), jnp.ones(5)
    with pytest.raises(ValueError, match="unknown rank_deficient"):
        rj.project(A, y, "cgs2", None, None)
    with pytest.raises(ValueError, match="lstsq needs a tall or square A"):
        jax.jit(lambda a, b: rj.lstsq(a, b))(jnp.ones((3, 5)), jnp.ones(3))


def test_rank_and_truncation_of_columns_near_the_overflow_threshold():
    """The pivot scan scales each matrix by a power of two first: its norms and reflectors of
    entries near 1e308 do not overflow into a wrong rank."""
    A = np.array([[1e308, 0.0], [5e307, 1e307], [0.0, 1e307]])
    y = np.array([1.0, 2.0, 3.0])
    assert int(P.rank(A)) == 2
    z, rank = P.project(A, y, rank_deficient="truncate")
    assert int(rank) == 2
    np.testing.assert_allclose(z, P.project(A, y), rtol=1e-14)
    B = 0.5e308 * np.random.default_rng(0).standard_normal((5, 3))
    assert int(P.rank(B)) == 3


def test_a_pivoted_rank_error_names_the_column_of_A():
    A = np.c_[np.ones(4), np.zeros(4), np.arange(4.0)]
    with pytest.raises(RankDeficientError, match="column 1 is zero"):
        P.qr(A, pivoting=True)


def test_rank_checks_its_tolerance_on_empty_input_too():
    with pytest.raises(ValueError, match="rank_tol"):
        P.rank(np.zeros((0, 3)), -1.0)


def test_torch_and_jax_report_the_rank_the_truncation_used():
    torch = pytest.importorskip("torch")
    import revdiff.torch as rt
    A = torch.tensor([[1, 0], [0, 1e-6], [0, 0]], dtype=torch.float32)
    y = torch.tensor([0, 1, 0.0], dtype=torch.float64)
    z, rank = rt.project(A, y, rank_deficient="truncate")  # computed in float64: 1e-6 is far above its tolerance
    assert int(rank) == 2 and float(z[1]) == pytest.approx(1.0)
    jax = pytest.importorskip("jax")
    import revdiff.jax as rj
    with pytest.raises(ValueError, match="unknown method"):
        jax.jit(lambda a: rj.qr(a, method="lu"))(np.eye(3))


@pytest.mark.parametrize("method", ["cgs2", "householder"])
def test_pivoting_orders_columns_of_any_finite_magnitude(method):
    """|R[k, k]| non-increasing at any finite magnitude, as SciPy's: each column is scaled on its own
    for the choice (a scan scaled by the largest entry alone let 1e-200 and 1e-190 underflow to zero
    and kept them in the order given), batched and with the scan in 1e308 and subnormal ranges too."""
    for diag in ([1e200, 1e-200, 1e-190], [1e-300, 1e300, 1e-310], [1.5e308, 5e-324, 1e-320]):
        A = np.diag(diag)
        want = scipy.linalg.qr(A, pivoting=True)[2]
        R, perm = P.qr(A, method, mode="r", pivoting=True)
        np.testing.assert_array_equal(perm, want)
        d = np.abs(np.diag(R))
        assert np.all(d[:-1] >= d[1:]), d
        batch = np.stack([A, A[:, ::-1]])
        perms = P.qr(batch, method, mode="r", pivoting=True)[1]
        np.testing.assert_array_equal(perms[0], want)
        np.testing.assert_array_equal(perms[1], scipy.linalg.qr(A[:, ::-1], pivoting=True)[2])
