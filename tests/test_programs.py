"""QR, projection, least squares and sphere programs written in the language: gradients pass the
inner-product test, agree with the closed-form adjoints, and handle wide, complex, batched and
rank-deficient input."""
import numpy as np
import pytest

import revdiff
from helpers import assert_gradient, assert_round_trip, leaves
from revdiff import formulas
from revdiff import programs as P
from revdiff.tools.compare import matrix_with_condition

rng = np.random.default_rng(7)


def rand(shape, cplx=False):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if cplx else x


@pytest.mark.parametrize("program", [P.cgs2, P.mgs, P.cgs])
@pytest.mark.parametrize("m,n,cplx", [(6, 4, False), (4, 6, False), (5, 3, True)])
def test_qr_program_gradient_and_round_trip(program, m, n, cplx):
    p = min(m, n)
    dt = complex if cplx else float
    draw = np.random.default_rng(100 * m + 10 * n + cplx)  # the same matrix whatever ran before (cgs loses
    A = draw.standard_normal((m, n)) + (1j * draw.standard_normal((m, n)) if cplx else 0)  # digits as kappa grows)
    args = (np.zeros((m, p), dt), np.zeros((p, n), dt), A)
    Q, R, A = assert_round_trip(program, *args, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Q @ R, A, atol=1e-13)
    assert np.all(np.real(np.diag(R)) > 0) and np.allclose(np.imag(np.diag(R)), 0)
    assert_gradient(program, *args)


@pytest.mark.parametrize("m,n,cplx", [(70, 40, False), (36, 70, False), (40, 35, True)])
def test_block_cgs2_over_several_panels(m, n, cplx):
    """Two or more panels of 32 columns: the block projections (matrix products), the panel's QR
    written in place, round trip, gradient, and agreement with column-by-column cgs2."""
    p = min(m, n)
    dt = complex if cplx else float
    args = (np.zeros((m, p), dt), np.zeros((p, n), dt), rand((m, n), cplx))
    Q, R, A = assert_round_trip(P.bcgs2, *args, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Q @ R, A, atol=1e-13)
    np.testing.assert_allclose(Q.conj().T @ Q, np.eye(p), atol=1e-13)
    Q2, R2, _ = P.cgs2(*(a.copy() for a in args))
    np.testing.assert_allclose(Q, Q2, atol=1e-12)
    np.testing.assert_allclose(R, R2, atol=1e-12)
    assert_gradient(P.bcgs2, *args)


@pytest.mark.parametrize("m,n,cplx", [(6, 4, False), (4, 6, False), (5, 3, True), (3, 5, True)])
def test_householder_program_gradient_and_round_trip(m, n, cplx):
    p = min(m, n)
    dt = complex if cplx else float
    args = (np.zeros((m, p), dt), np.zeros((p, n), dt), rand((m, n), cplx))
    Q, R, A = assert_round_trip(P.householder, *args, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Q @ R, A, atol=1e-13)
    assert np.all(np.real(np.diag(R)) > 0) and np.allclose(np.imag(np.diag(R)), 0)
    assert_gradient(P.householder, *args)


@pytest.mark.parametrize("m,n,q,cplx", [(70, 40, 40, False), (36, 70, 36, False), (40, 35, 35, True),
                                        (70, 40, 70, False)])
def test_blocked_householder_over_several_panels(m, n, q, cplx):
    """Panels of 32 columns, their block reflections applied to the rest of A and to Q (thin, wide,
    complex, complete): round trip, gradient, and the factorisation of column-by-column Householder."""
    p = min(m, n)
    dt = complex if cplx else float
    args = (np.zeros((m, q), dt), np.zeros((q, n), dt), rand((m, n), cplx))
    Q, R, A = assert_round_trip(P.blocked_householder, *args, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Q @ R, A, atol=1e-13)
    np.testing.assert_allclose(Q.conj().T @ Q, np.eye(q), atol=1e-14)
    assert np.all(np.real(np.diag(R)) >= 0) and np.all(np.imag(np.diag(R)) == 0)
    Q1, R1, _ = P.householder(*(a.copy() for a in args))
    np.testing.assert_allclose(Q, Q1, atol=1e-13)
    np.testing.assert_allclose(R, R1, atol=1e-13)
    assert_gradient(P.blocked_householder, *args)


@pytest.mark.parametrize("cplx", [False, True])
def test_blocked_householder_reduces_panels_of_wide_matrices_in_a_copy(cplx):
    """From ``COPIED_PANEL_FROM`` columns each panel is reduced in a contiguous copy swapped in and out:
    a wide 40 x 520 QR (two panels, the last short) and a tall 530 x 520 projection give the
    column-by-column programs' results to rounding and round-trip; the QR's gradient."""
    from revdiff.programs.householder import COPIED_PANEL_FROM
    assert 520 >= COPIED_PANEL_FROM
    A = rand((40, 520), cplx)
    args = (np.zeros((40, 40), A.dtype), np.zeros((40, 520), A.dtype), A)
    Q, R, _ = assert_round_trip(P.blocked_householder, *args, rtol=1e-10, atol=1e-12)
    Q1, R1, _ = P.householder(*(a.copy() for a in args))
    np.testing.assert_allclose(Q, Q1, atol=1e-13)
    np.testing.assert_allclose(R, R1, atol=1e-12)
    assert_gradient(P.blocked_householder, *args)
    A, y = rand((530, 520), cplx), rand(530, cplx)
    args = (np.zeros(530, A.dtype), np.zeros((520, 520), A.dtype), A, y)
    z, _, _, _ = assert_round_trip(P.project_blocked_householder, *args, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(z, P.project_householder(*(a.copy() for a in args))[0], atol=1e-11)


@pytest.mark.parametrize("cplx", [False, True])
def test_blocked_householder_with_zero_and_dependent_columns(cplx):
    """A zero column leaves a zero reflector in its panel (T[j, j] = 0): still orthogonal Q and Q R = A."""
    A = rand((80, 50), cplx)
    A[:, 3] = 0
    A[:, 40] = A[:, 2] - A[:, 7]
    Q, R, _ = P.blocked_householder(np.zeros((80, 50), A.dtype), np.zeros((50, 50), A.dtype), A)
    np.testing.assert_allclose(Q @ R, A, atol=1e-13)
    np.testing.assert_allclose(Q.conj().T @ Q, np.eye(50), atol=1e-14)
    assert R[3, 3] == 0 and abs(R[40, 40]) < 1e-13


def test_householder_chooses_its_blocked_program_by_shape():
    """``householder`` runs the blocked program beyond one panel of BLAS-sized matrices, the
    column-by-column one below it and on GPUs (the dispatch: the same bits as naming the program)."""
    from revdiff.programs.methods import chosen_method
    assert chosen_method("householder", (5, 80, 40)) == "blocked_householder"
    assert chosen_method("householder", (64, 32)) == "householder"  # one panel
    assert chosen_method("householder", (40, 200)) == "blocked_householder"  # wide: p = 40
    assert chosen_method("householder", (33, 33)) == "householder"  # 1089 entries: no BLAS
    assert chosen_method("householder", (80, 40), gpu=True) == "householder"
    assert chosen_method("cgs2", (500, 250)) == "cgs2"
    A, y = rand((2, 90, 45)), rand((2, 90))
    np.testing.assert_allclose(P.project_vjp(A, y, y, "householder")[0],
                               P.project_vjp(A, y, y, "blocked_householder")[0], rtol=0, atol=0)
    Q1, R1 = P.qr(A, "householder")
    Q2, R2 = P.qr(A[:, :, :32], "householder")
    np.testing.assert_allclose(Q1[:, :, :32], Q2, atol=1e-13)  # the first panel's columns: the same Q


@pytest.mark.parametrize("method", ["householder", "cgs2", "mgs"])
def test_the_diagonal_of_a_complex_r_is_exactly_real(method):
    """As LAPACK's: np.log(diag(R)) or np.isreal must not meet a rounding-level imaginary part."""
    A = rand((3, 6, 4), True)
    Q, R = P.qr(A, method=method)
    d = np.diagonal(R, axis1=-2, axis2=-1)
    assert np.all(d.imag == 0) and np.all(d.real > 0)
    np.testing.assert_allclose(Q @ R, A, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_householder_vectors_either_side_of_the_prescale_thresholds(dtype):
    """``householder_vector`` multiplies by 1 / (c |v|), c = 2^100 for a tiny |v|, 2^-100 for a huge
    one: the program itself (the high-level functions scale A's columns to magnitude 1 first) on a
    batch in SIMD lanes with a group of subnormal matrices (where 1 / |v| alone overflows), a group
    whose |v| lie about ``PRESCALE_BELOW``, one about ``PRESCALE_ABOVE`` and a mixed one (its lanes
    disagree), and on single elements, against the same matrices scaled exactly to magnitude 1;
    gradients where 1 / scale is representable."""
    from revdiff.programs.householder import PRESCALE_ABOVE, PRESCALE_BELOW
    from revdiff.targets.lanes.modules import LANES
    draw = np.random.default_rng(11)
    B, m, n = 4 * LANES, 12, 6
    v_over_entries = np.sqrt(2 * m)  # |v| of the first column over its entries' scale, roughly
    about = np.array([0.3, 1.0, 3.0]) / v_over_entries
    subnormal = -133 if dtype == np.float32 else -1030
    below, above = (np.round(np.log2(t * about)).astype(int) for t in (PRESCALE_BELOW, PRESCALE_ABOVE))
    e = np.concatenate([np.full(LANES, subnormal), draw.choice(below, LANES), draw.choice(above, LANES),
                        draw.choice(np.concatenate([[subnormal, 0], below, above]), LANES)])
    A = np.ldexp(draw.standard_normal((B, m, n)), e[:, None, None]).astype(dtype)
    unit = np.ldexp(A, -e[:, None, None])  # an exact scaling of A as rounded (float32's subnormals)
    qr = revdiff.batched(P.householder, ("Q", "R", "A"), layout="lanes")
    tol = 1e-12 if dtype == np.float64 else 2e-5
    # a subnormal matrix holds fewer digits, and its norms keep only those: relative precision tiny / scale
    digits = tol + 10 * np.finfo(dtype).smallest_subnormal / np.abs(A).max(axis=(1, 2)).astype(np.float64)
    for batch in (slice(None), slice(0, 1), slice(LANES, LANES + 1)):
        zeros = (np.zeros((len(e[batch]), m, n), dtype), np.zeros((len(e[batch]), n, n), dtype))
        Q, R, _ = qr(*zeros, A[batch])
        Q1, R1, _ = qr(*zeros, unit[batch])
        assert np.all(np.abs(Q - Q1) <= digits[batch, None, None])
        assert np.all(np.abs(np.ldexp(R, -e[batch, None, None]) - R1) <= 10 * digits[batch, None, None])
    keep = -e < np.finfo(dtype).maxexp - 10  # gA ~ 1 / scale, times gz and the conditioning: representable
    assert not keep[:LANES].any() and keep[2 * LANES:3 * LANES].all()
    project = revdiff.batched(P.project_householder, ("z", "R", "A", "y"), layout="lanes")
    y, gz = draw.standard_normal((2, B, m)).astype(dtype)

    def gradient(X):
        zero_z, zero_R = np.zeros((len(X), m), dtype), np.zeros((len(X), n, n), dtype)
        grads = project.vjp((zero_z, zero_R, X, y[keep]), (gz[keep], None, None, None), wrt=("A", "y"))[1]
        return grads[2], grads[3]

    (gA, gy), (gA1, gy1) = gradient(A[keep]), gradient(unit[keep])
    np.testing.assert_allclose(np.ldexp(gA, e[keep, None, None]), gA1, atol=100 * tol)
    np.testing.assert_allclose(gy, gy1, atol=10 * tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_householder_on_columns_of_subnormal_norm_answers_or_refuses(dtype):
    """The program itself (the high-level functions scale columns to magnitude 1 first) on matrices
    whose column norms are subnormal, alone and in SIMD lanes. A column holding one subnormal, down to
    the smallest, has an exact norm: it answers, with Q's column the unit vector there and R's entry
    that subnormal (halving a subnormal norm made |v| 0: no reflection, Q[:, 0] = e_1). Random
    matrices answer with an orthonormal Q and Q R = A to the precision their digits hold, or are
    refused by the uncompute's checks; 2^-4 of the smallest normal (four bits lost) answers."""
    tiny = np.finfo(dtype).smallest_subnormal
    eps = np.finfo(dtype).eps
    m, n = 6, 3
    singles = []
    for row in range(m):
        A = np.eye(m, n, dtype=dtype)
        A[:, 0] = 0
        A[row, 0] = tiny
        singles.append(A)
    draw = np.random.default_rng(5)
    exponents = np.arange(np.finfo(dtype).minexp - 4, np.finfo(dtype).minexp - np.finfo(dtype).nmant, -3)
    scaled = [np.ldexp(draw.standard_normal((m, n)), e).astype(dtype) for e in exponents]
    qr = revdiff.batched(P.householder, ("Q", "R", "A"), layout="lanes")

    def factors(A):
        """(Q, R) alone and (Q, R) of the first of eight copies run in lanes; None for a refusal."""
        runs = []
        for run in (lambda: P.householder(np.zeros((m, n), dtype), np.zeros((n, n), dtype), A),
                    lambda: tuple(x[0] for x in qr(np.zeros((8, m, n), dtype), np.zeros((8, n, n), dtype),
                                                   np.repeat(A[None], 8, axis=0)))):
            try:
                runs.append(run()[:2])
            except revdiff.ReversibilityError:
                runs.append(None)
        return runs

    for row, A in enumerate(singles):
        for Q, R in factors(A):
            np.testing.assert_allclose(np.abs(Q[:, 0]), np.eye(m)[row], atol=10 * eps)
            assert R[0, 0] == tiny
            np.testing.assert_allclose(Q.T.astype(np.float64) @ Q, np.eye(n), atol=10 * eps)
    for k, A in enumerate(scaled):
        scale = np.abs(A).max(axis=0)
        tol = 100 * (eps + tiny / scale.min())  # the relative precision of A's smallest column
        for got in factors(A):
            assert got is not None or k > 0
            if got is not None:
                Q, R = (x.astype(np.float64) for x in got)
                np.testing.assert_allclose(Q.T @ Q, np.eye(n), atol=tol)
                np.testing.assert_allclose((Q @ R) / scale, A / scale, atol=tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_householder_on_columns_near_the_largest_float_answers_or_refuses(dtype):
    """The program itself on a column of norm f * max (f = 0.9: beyond the largest float): |v| up to
    twice that is never formed (c |v| is), so the column is reflected, not passed over as if |v|
    were infinite; where the reflection's own products overflow, the checks refuse it. Up to f = 0.45
    it answers, to the dtype's precision."""
    big = np.finfo(dtype).max
    for f in (0.9, 0.6, 0.45, 0.1):
        A = np.array([[f * big, 0], [0.5 * f * big, 1], [0, 1]], dtype)
        try:
            Q, R, _ = P.householder(np.zeros((3, 2), dtype), np.zeros((2, 2), dtype), A)
        except revdiff.ReversibilityError:
            assert f > 0.45
            continue
        reference = np.linalg.qr(A.astype(np.float64) / big)[1] * big
        eps = np.finfo(dtype).eps
        np.testing.assert_allclose(R[0, 0], abs(reference[0, 0]), rtol=10 * eps)
        np.testing.assert_allclose(Q.T.astype(np.float64) @ Q, np.eye(2), atol=10 * eps)
        np.testing.assert_allclose((Q.astype(np.float64) @ R) / big, A / big, atol=10 * eps)


def test_householder_gradient_on_triangular_input():
    """The reflector of a column already zero below the diagonal is a multiple of e_1, of either sign.
    Its own matrix, not the module's random stream: a diagonal entry near 0 (1e-3, drawn by some test
    orders) makes central differences too inexact for the check's tolerance."""
    A = np.triu(np.random.default_rng(12).standard_normal((5, 3)))
    A[[0, 1, 2], [0, 1, 2]] = [1.3, -0.7, 0.9]
    assert_gradient(P.householder, np.zeros((5, 3)), np.zeros((3, 3)), A)


@pytest.mark.parametrize("m,n", [(6, 4), (4, 6)])
def test_givens_program_gradient_round_trip_and_angles(m, n):
    p = min(m, n)
    args = (np.zeros((m, p)), np.zeros((p, n)), np.zeros((m, p)), rand((m, n)))
    Q, R, angles, A = assert_round_trip(P.givens, *args, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Q @ R, A, atol=1e-13)
    assert np.all(np.diag(R) > 0)
    strictly_lower = np.tril(np.ones((m, p), bool), -1)
    assert np.all(angles[~strictly_lower] == 0) and np.all(angles[strictly_lower] != 0)
    assert_gradient(P.givens, *args)


@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (3, 5)])
def test_givens_gradient_on_identity_and_triangular_input(shape):
    """Entries already zero below the diagonal: each is rotated into a nonzero diagonal entry at angle
    0, where atan2 has a derivative (rotating two zeros into each other, it has none)."""
    m, n = shape
    for A in (np.eye(m, n), np.triu(rand(shape)) + np.eye(m, n)):
        gQ, gR = rand((m, min(m, n))), rand((min(m, n), n))
        np.testing.assert_allclose(P.qr_vjp(A, gQ, gR, method="givens"), P.qr_vjp(A, gQ, gR, method="cgs2"),
                                   rtol=1e-12, atol=1e-13)


def test_givens_gradient_where_a_rotation_meets_two_zeros_raises_by_name():
    """A zero diagonal entry with a zero below it: the rotation's angle, atan2 at the origin, jumps
    with the direction of approach, so the program has no gradient there and says so."""
    A = np.array([[0.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    Q, R = P.qr(A, method="givens")
    np.testing.assert_allclose(Q @ R, A, atol=1e-15)
    with pytest.raises(ZeroDivisionError, match=r"givens.py\", line \d+.*math.hypot\(W\[i, k\], W\[k, k\]\) is 0"):
        P.qr_vjp(A, np.ones((3, 2)), np.ones((2, 2)), method="givens")


def test_givens_rejects_complex_input_by_name():
    with pytest.raises(TypeError, match="'givens' takes real matrices"):
        P.qr(rand((4, 3), True), method="givens")


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("program", [P.project_cgs2, P.lstsq_cgs2, P.project_householder, P.lstsq_householder,
                                     P.project_blocked_householder, P.lstsq_blocked_householder])
def test_projection_and_lstsq_gradients(program, cplx):
    A, y = rand((7, 3), cplx), rand(7, cplx)
    out = np.zeros(3 if program.__name__.startswith("lstsq") else 7, A.dtype)
    assert_gradient(program, out, np.zeros((3, 3), A.dtype), A, y)


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("loss", ["project", "lstsq"])
def test_blocked_projection_and_lstsq_over_several_panels(loss, cplx):
    """The blocked programs over two panels, the last one short, and with a zero column (a zero
    reflector, whose row and column of T are zero): the column-by-column programs' result to
    rounding, a round trip and the gradient."""
    A, y = rand((70, 40), cplx), rand(70, cplx)
    blocked, columns = (P.project_blocked_householder, P.project_householder) if loss == "project" else \
        (P.lstsq_blocked_householder, P.lstsq_householder)
    out = np.zeros(70 if loss == "project" else 40, A.dtype)
    for a in (A, np.where(np.arange(40) == 35, 0, A)):
        args = (out, np.zeros((40, 40), A.dtype), a, y)
        got = assert_round_trip(blocked, *args, rtol=1e-10, atol=1e-12)
        want = columns(*(x.copy() for x in args))
        np.testing.assert_allclose(got[0], want[0], atol=1e-12)
        np.testing.assert_allclose(got[1], want[1], atol=1e-12)
    assert_gradient(blocked, out, np.zeros((40, 40), A.dtype), A, y)


@pytest.mark.parametrize("cplx", [False, True])
def test_a_vector_is_reflected_as_a_one_column_matrix(cplx):
    """``reflect_vector_kept`` (the reflections back to z in the Householder projections) reflects as
    ``reflect_columns`` does a one-column matrix (the same bits for real data), keeps u^H x in d and
    round-trips, for a zero reflector too. (Its gradient needs a unit u, which differences leave: the
    programs' gradient tests above check it inside the Householder projections.)"""
    import importlib
    H = importlib.import_module("revdiff.programs.householder")  # P.householder is the QR program
    x = rand(9, cplx)
    for u in (rand(9, cplx), np.zeros(9, x.dtype)):
        u = u / (np.linalg.norm(u) or 1)
        reflected, _, d = H.reflect_vector_kept(x.copy(), u, np.zeros(1, x.dtype))
        as_matrix, _, _ = H.reflect_columns(x.copy()[:, None], u, True)
        if cplx:
            np.testing.assert_allclose(reflected, as_matrix[:, 0], rtol=0, atol=1e-15)
        else:
            np.testing.assert_array_equal(reflected, as_matrix[:, 0])
        np.testing.assert_allclose(d[0], np.vdot(u, x), rtol=1e-14, atol=1e-15)
        assert_round_trip(H.reflect_vector_kept, x, u, np.zeros(1, x.dtype), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("cplx", [False, True])
def test_a_kept_reflection_reflects_as_the_self_uncomputing_one(cplx):
    """``reflect_columns_kept`` (the triangularisation's) gives C the bits ``reflect_columns`` gives it,
    leaves its coefficients tau C^T conj(u) in d, and its inverse restores C and d = 0 exactly (the
    gradient is tested inside the Householder programs above: it needs a unit u)."""
    import importlib
    H = importlib.import_module("revdiff.programs.householder")
    C = rand((9, 5), cplx)
    for u in (rand(9, cplx), np.zeros(9, C.dtype)):
        u = u / (np.linalg.norm(u) or 1)
        kept, _, d = H.reflect_columns_kept(C.copy(), u, np.zeros(5, C.dtype))
        np.testing.assert_array_equal(kept, H.reflect_columns(C.copy(), u, False)[0])
        tau = 2 * u[0].real / u[0] if u[0] != 0 else 0.0
        np.testing.assert_allclose(d, tau * (C.T @ np.conj(u)), rtol=1e-14, atol=1e-15)
        back = (~H.reflect_columns_kept)(kept, u, d)
        np.testing.assert_allclose(back[0], C, rtol=1e-14, atol=1e-15)
        assert not np.any(back[2])

def test_sphere_gradients():
    assert_gradient(P.normalize_program, np.zeros(5), rand(5))
    assert_gradient(P.tangent_project_program, np.zeros(5, complex), rand(5, True), rand(5, True))


@pytest.mark.parametrize("kappa", [1.0, 1e4, 1e8])
def test_qr_vjp_agrees_with_formula_to_kappa(kappa):
    A = np.stack([matrix_with_condition(8, 4, kappa, rng, np.float64) for _ in range(2)])
    gQ, gR = rand((2, 8, 4)), np.triu(rand((2, 4, 4)))
    a, b = P.qr_vjp(A, gQ, gR), formulas.qr_vjp(A, gQ, gR)
    # both are backward stable for the same function; gradients differ by O(u kappa^2) relative
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-14 * kappa ** 2 + 1e-13


@pytest.mark.parametrize("shape,cplx", [((3, 6, 4), False), ((2, 4, 6), False), ((2, 5, 3), True)])
def test_qr_vjp_wide_complex_batched(shape, cplx):
    A = rand(shape, cplx)
    m, n = shape[1:]
    p = min(m, n)
    gQ, gR = rand((shape[0], m, p), cplx), np.triu(rand((shape[0], p, n), cplx))
    np.testing.assert_allclose(P.qr_vjp(A, gQ, gR), formulas.qr_vjp(A, gQ, gR), atol=1e-12)


def test_projection_gradient_is_golub_pereyra():
    A, y, gz = rand((2, 9, 4)), rand((2, 9)), rand((2, 9))
    gA, gy = P.project_vjp(A, y, gz)
    fA, fy = formulas.project_vjp(A, y, gz)
    np.testing.assert_allclose(gA, fA, atol=1e-13)
    np.testing.assert_allclose(gy, fy, atol=1e-13)


def test_thin_q_loss_has_gradient_of_a_shape():
    A = rand((10, 3))
    Q, R = P.qr(A)
    assert Q.shape == (10, 3) and R.shape == (3, 3)
    gA = P.qr_vjp(A, np.ones_like(Q), None)
    assert gA.shape == A.shape
    with pytest.raises(ValueError, match="thin Q"):
        P.qr_vjp(A, np.ones((10, 10)), None)


@pytest.mark.parametrize("method", ["cgs2", "householder", "givens"])
def test_orthonormal_to_unit_roundoff_up_to_kappa_1e12(method):
    for kappa in (1e4, 1e8, 1e12):
        A = matrix_with_condition(32, 16, kappa, rng, np.float64)
        Q, R = P.qr(A, method)
        assert np.linalg.norm(Q.T @ Q - np.eye(16)) < 50 * np.finfo(float).eps
        assert np.linalg.norm(Q @ R - A) < 50 * np.finfo(float).eps * np.linalg.norm(A)


@pytest.mark.parametrize("method", ["householder", "givens"])
def test_qr_vjp_methods_agree_with_formula(method):
    A = np.stack([matrix_with_condition(8, 4, 1e3, rng, np.float64) for _ in range(2)])
    gQ, gR = rand((2, 8, 4)), np.triu(rand((2, 4, 4)))
    a, b = P.qr_vjp(A, gQ, gR, method=method), formulas.qr_vjp(A, gQ, gR)
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < 1e-14 * 1e3 ** 2 + 1e-13


def test_rank_deficient_input_raises():
    A = rand((6, 3))
    A[:, 2] = A[:, 0] + A[:, 1]
    with pytest.raises(revdiff.RankDeficientError, match="column 2"):
        P.qr(A)
    B = np.stack([rand((6, 3)), A])
    with pytest.raises(revdiff.RankDeficientError, match=r"batch index \(1,\)"):
        P.qr_vjp(B, np.ones((2, 6, 3)), None)
    Z = rand((6, 3))
    Z[:, 1] = 0
    with pytest.raises(revdiff.RankDeficientError, match="column 1 is zero"):
        P.project_vjp(Z, rand(6), rand(6))


def test_nan_input_is_named():
    A = rand((4, 2))
    A[1, 1] = np.nan
    with pytest.raises(ValueError, match="'A' contains NaN"):
        P.qr(A)
    with pytest.raises(ValueError, match="'gz' contains NaN"):
        P.project_vjp(rand((4, 2)), rand(4), np.full(4, np.inf))


def test_float32_and_complex64():
    A = rand((2, 6, 3)).astype(np.float32)
    Q, R = P.qr(A)
    assert Q.dtype == np.float32
    np.testing.assert_allclose(Q @ R, A, atol=1e-5)
    C = rand((6, 3), True).astype(np.complex64)
    Q, R = P.qr(C)
    assert Q.dtype == np.complex64 and np.allclose(Q @ R, C, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
@pytest.mark.parametrize("method, shape", [("cgs2", (32, 16)), ("bcgs2", (80, 70)), ("householder", (80, 70))])
def test_ancilla_checks_pass_at_any_scale_and_precision(dtype, method, shape):
    """CGS2's second coefficients are of rounding size: their zero check must be relative to the
    vector they came from, or float32 gradients fail spuriously (they did, for 32x16; and for block
    CGS2's second coefficient matrix, computed by a matrix product, on 100 x 500x250; blocked
    Householder's coefficients uncompute to rounding as CGS2's second ones). The scales
    run in one test, so that one process compiles the programs of a method and dtype."""
    for scale in (1e-6, 1.0, 1e6):
        A = (scale * rand((3,) + shape, np.dtype(dtype).kind == "c")).astype(dtype)
        y = rand((3, shape[0]), np.dtype(dtype).kind == "c").astype(dtype)
        gA, gy = P.project_vjp(A, y, y, method=method)
        assert gA.dtype == dtype and np.all(np.isfinite(gA)), scale
        assert np.all(np.isfinite(P.qr_vjp(A, A, None, method=method))), scale


def test_sphere_high_level():
    x, g = rand((3, 4)), rand((3, 4))
    np.testing.assert_allclose(P.normalize(x), x / np.linalg.norm(x, axis=1, keepdims=True))
    np.testing.assert_allclose(P.normalize_vjp(x, g), formulas.normalize_vjp(x, g), atol=1e-14)
    t = P.tangent_project(g, x)
    xh = x / np.linalg.norm(x, axis=1, keepdims=True)
    np.testing.assert_allclose(np.sum(t * xh, axis=1), 0, atol=1e-14)


def test_lstsq_high_level():
    A, y = rand((2, 8, 3)), rand((2, 8))
    x = P.lstsq(A, y)
    np.testing.assert_allclose(x[1], np.linalg.lstsq(A[1], y[1], rcond=None)[0], atol=1e-13)
    gA, gy = P.lstsq_vjp(A, y, np.ones((2, 3)))
    assert gA.shape == A.shape and gy.shape == y.shape


def test_compare_runs_and_reports(capsys):
    from revdiff.tools import compare
    res = compare.run(shape=(8, 4), conds=(1.0, 1e6), repeats=1, methods=["cgs2", "formula", "pinv"])
    out = capsys.readouterr().out
    assert "| kappa |" in out and "revdiff cgs2" in out
    assert res["revdiff cgs2"][0][1] < 1e-13 and res["revdiff cgs2"][1][1] < 1e-7


def test_compare_qr_loss_against_reference():
    from revdiff.tools import compare
    res = compare.run(shape=(6, 4), conds=(1.0, 1e4), repeats=1, loss="qr",
                      methods=["cgs2", "householder", "givens", "formula"])
    for name in ("revdiff cgs2", "revdiff householder", "revdiff givens", "formula"):
        assert res[name][0][1] < 1e-13 and res[name][1][1] < 1e-8, (name, res[name])


def test_reference_qr_gradient_matches_formula_wide_and_complex():
    from revdiff.tools import reference
    for m, n, cplx in [(4, 6, False), (5, 3, True)]:
        A = rand((m, n), cplx)
        p = min(m, n)
        gQ, gR = rand((m, p), cplx), np.triu(rand((p, n), cplx))
        np.testing.assert_allclose(reference.qr_grad(A, gQ, gR), formulas.qr_vjp(A, gQ, gR), atol=1e-12)


@pytest.mark.parametrize("peer", ["torch", "jax"])
def test_compare_includes_installed_peers(peer):
    pytest.importorskip(peer)
    from revdiff.tools import compare
    for loss in ("projection", "qr"):
        res = compare.run(shape=(6, 4), conds=(1.0,), repeats=1, loss=loss, methods=[peer], batch=2)
        assert res[peer][0][1] < 1e-13


def test_compare_plot(tmp_path):
    pytest.importorskip("matplotlib")
    from revdiff.tools import compare
    path = tmp_path / "errors.png"
    compare.run(shape=(6, 3), conds=(1.0, 1e4), repeats=1, methods=["cgs2", "formula"], plot=str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_command_line(capsys):
    from revdiff.tools.cli import main
    main(["compare", "--loss", "qr", "--shape", "5x3", "--conds", "1,1e3", "--methods", "cgs2,formula",
          "--repeats", "1"])
    out = capsys.readouterr().out
    assert "qr loss, A 5x3 float64" in out and "| 1e+03 |" in out and "every method on 1 thread" in out
    with pytest.raises(SystemExit):
        main(["compare", "--loss", "nonsense"])


def test_reflection_coefficients_are_checked_against_the_reflected_matrix():
    """A reflection's coefficients d = C^H u of a C nearly orthogonal to u are of rounding size and
    uncompute to within rounding of C's size: their zero check must scale with C, which is the
    caller's ancilla (in float32, 1 or 2 of 50 random 64x32 matrices failed it when it scaled with d)."""
    draw = np.random.default_rng(11)
    A = draw.standard_normal((50, 64, 32)).astype(np.float32)
    y = draw.standard_normal((50, 64)).astype(np.float32)
    gA, gy = P.project_vjp(A, y, y, "householder")
    assert np.all(np.isfinite(gA)) and np.all(np.isfinite(gy))
    assert np.all(np.isfinite(P.qr_vjp(A, A, None, "householder")))


@pytest.mark.parametrize("method", ["householder", "blocked_householder"])
@pytest.mark.parametrize("leading", [0.0, 1e-4j, 5e-4 * (1 + 1j)])
def test_complex_householder_with_a_small_or_zero_leading_entry(method, leading):
    """A complex column whose first entry is zero or below |x| / 1000: the reflector maps it to a
    real multiple of e_1 (LAPACK's larfg, complex tau); a Hermitian reflector with phase 1 left
    |Im x[0]| below the diagonal (QR off by 1e-3) and gradients off by 12-41 % at x[0] = 0."""
    draw = np.random.default_rng(4)
    for m, n in ((8, 3), (80, 40)):
        A = draw.standard_normal((m, n)) + 1j * draw.standard_normal((m, n))
        A[0, 0] = leading * np.linalg.norm(A[:, 0])
        y, gz = (draw.standard_normal(m) + 1j * draw.standard_normal(m) for _ in range(2))
        Q, R = P.qr(A, method)
        np.testing.assert_allclose(Q @ R, A, atol=1e-14 * abs(A).max())
        gA, gy = P.project_vjp(A, y, gz, method)
        want = formulas.project_vjp(A, y, gz)
        np.testing.assert_allclose(gA, want[0], atol=1e-13 * abs(want[0]).max())
        np.testing.assert_allclose(gy, want[1], atol=1e-13 * abs(want[1]).max())
        np.testing.assert_allclose(P.lstsq(A, y, method), np.linalg.lstsq(A, y, rcond=None)[0], atol=1e-13)
        gx = draw.standard_normal(n) + 1j * draw.standard_normal(n)
        for got, cgs2 in zip(P.lstsq_vjp(A, y, gx, method), P.lstsq_vjp(A, y, gx, "cgs2")):
            np.testing.assert_allclose(got, cgs2, atol=1e-12 * abs(cgs2).max())
        gQ, gR = draw.standard_normal(Q.shape), draw.standard_normal(R.shape)
        np.testing.assert_allclose(P.qr_vjp(A, gQ, gR, method), formulas.qr_vjp(A, gQ, gR), atol=1e-12)


# ------------------------------------------------------------------------------ method="auto"

def test_auto_runs_householder_on_large_matrices_and_for_complete_q_else_cgs2():
    """The rule, at its edges: Householder on real matrices from min(m, n) = 128 on (also for a wide
    A), for projections and least squares also on real tall matrices from 16 columns,
    and for the complete Q of a tall A at any size and dtype (cgs2 cannot complete Q); cgs2
    elsewhere, on complex matrices (whose Householder QR gradients measured 1.8-3.3× slower) and on GPUs."""
    from revdiff.programs.methods import AUTO_HOUSEHOLDER_MIN_COLUMNS as P_MIN
    from revdiff.programs.methods import resolved
    assert resolved("auto", (P_MIN, P_MIN)) == resolved("auto", (3, P_MIN, 500)) == "householder"
    assert resolved("auto", (P_MIN - 1, 500)) == resolved("auto", (500, P_MIN - 1)) == "cgs2"
    assert resolved("auto", (P_MIN, P_MIN), gpu=True) == "cgs2"
    assert resolved("auto", (P_MIN, P_MIN), dtype=np.float32) == "householder"
    assert resolved("auto", (P_MIN, P_MIN), dtype=np.complex128) == resolved("auto", (500, 500), dtype="complex64") \
        == "cgs2"
    assert resolved("auto", (5, 3), mode="complete", dtype=np.complex64) == "householder"
    from revdiff.programs.methods import AUTO_PROJECTION_MIN_COLUMNS as Q_MIN
    # projections and least squares: also tall real matrices from Q_MIN columns
    assert resolved("auto", (2 * Q_MIN, Q_MIN), projection=True) == resolved("auto", (96, 48), projection=True) \
        == resolved("auto", (Q_MIN, Q_MIN), dtype=np.float32, projection=True) == "householder"
    assert resolved("auto", (64, 32)) == "cgs2"  # QR gradients form Q: cgs2 there
    for shape in ((2 * Q_MIN, Q_MIN - 1), (Q_MIN, 2 * Q_MIN)):
        assert resolved("auto", shape, projection=True) == "cgs2", shape
    assert resolved("auto", (64, 32), dtype=np.complex128, projection=True) == "cgs2"
    assert resolved("auto", (64, 32), gpu=True, projection=True) == "cgs2"
    assert resolved("auto", (5, 3), mode="complete") == resolved("auto", (5, 3), gpu=True, mode="complete") \
        == "householder"
    assert resolved("auto", (3, 5), mode="complete") == resolved("auto", (4, 4), mode="complete") == "cgs2"
    assert resolved("auto", (5, 3), mode="r") == "cgs2"  # a square Q, or none, needs no completion
    assert resolved("mgs", (500, 500)) == "mgs"
    from revdiff.programs.methods import chosen_method, q_columns
    assert q_columns("auto", "complete", (5, 3)) == 5 and q_columns("auto", "reduced", (5, 3)) == 3
    with pytest.raises(ValueError, match="resolves to"):  # past a call's start, only the method that runs
        chosen_method("auto", (5, 3))


def test_auto_is_the_default_and_equals_the_method_it_chooses_bit_for_bit(monkeypatch):
    """Every high-level function defaults to method="auto"; its results are those of the method the
    rule picks, bit for bit, and that method (not "auto") reaches the rank and refusal handling
    (``ranked``: Householder's refused matrices are retried in other row orders)."""
    import inspect

    from revdiff.programs import api, tangents
    functions = [P.qr, P.qr_vjp, P.qr_jvp, P.qr_vjp_jvp, P.project, P.project_vjp, P.project_jvp,
                 P.project_vjp_jvp, P.lstsq, P.lstsq_vjp, P.lstsq_jvp, P.lstsq_vjp_jvp]
    for name in ("torch", "jax", "dask"):  # the wrappers too, where installed
        try:
            wrapper = __import__(f"revdiff.{name}", fromlist=["qr"])
        except ImportError:
            continue
        functions += [getattr(wrapper, f) for f in ("qr", "project", "lstsq")]
    assert all(inspect.signature(f).parameters["method"].default == "auto" for f in functions)
    monkeypatch.setattr(api, "run_plan", lambda *a: None)  # a warm call's plan would run no ``ranked``
    seen = []
    for module in (api, tangents):
        original = module.ranked
        monkeypatch.setattr(module, "ranked", lambda call, M, tol, method, *a, _o=original, **k:
                            seen.append(method) or _o(call, M, tol, method, *a, **k))
    r = np.random.default_rng(5)
    for shape, for_qr, for_projection in (((140, 128), "householder", "householder"), ((20, 9), "cgs2", "cgs2"),
                                          ((64, 32), "cgs2", "householder")):
        A, y, gz = r.standard_normal(shape), r.standard_normal(shape[0]), r.standard_normal(shape[0])
        dA, dy = r.standard_normal(shape), r.standard_normal(shape[0])
        for call, chosen in ((lambda m: P.qr(A, method=m), for_qr),
                             (lambda m: P.project_vjp(A, y, gz, method=m), for_projection),
                             (lambda m: P.lstsq(A, y, method=m), for_projection),
                             (lambda m: P.project_jvp(A, y, dA, dy, method=m), for_projection)):
            seen.clear()
            got, want = call("auto"), call(chosen)
            assert seen == [chosen, chosen]
            for g, w in zip(leaves(got), leaves(want)):
                np.testing.assert_array_equal(g, w)
    seen.clear()
    P.qr(r.standard_normal((140, 128)) + 1j * r.standard_normal((140, 128)))  # complex: cgs2 at any size
    assert seen == ["cgs2"]
    A = r.standard_normal((6, 4))  # the default completes Q of a tall A: Householder
    for call in (lambda: P.qr(A, mode="complete"), lambda: P.qr_vjp(A, None, np.ones((6, 4)), mode="complete"),
                 lambda: P.qr_jvp(A, A, mode="complete")):
        seen.clear()
        call()
        assert seen == ["householder"]
    with pytest.raises(ValueError, match="choose one of auto, cgs2"):
        P.project(A, y, method="fastest")


def test_a_zero_column_under_givens_gradients_and_tangents_is_named_rank_deficient():
    """The derivative of a Givens angle divides by the entries' modulus: a zero column fails that
    check in the gradient and tangent programs, and the call names the matrix, as the other methods
    do (RankDeficientError), not the division."""
    A = np.random.default_rng(12).standard_normal((2, 6, 3))
    A[1, :, 1] = 0
    for call in (lambda: P.qr_vjp(A, np.ones((2, 6, 3)), None, method="givens"),
                 lambda: P.qr_jvp(A, np.ones((2, 6, 3)), method="givens"),
                 lambda: P.qr_vjp_jvp(A, np.ones((2, 6, 3)), None, np.ones((2, 6, 3)), method="givens"),
                 lambda: P.qr(A, method="givens")):
        with pytest.raises(revdiff.RankDeficientError, match=r"batch index \(1,\)"):
            call()
