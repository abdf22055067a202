"""Vector instructions (y += A @ x, A.T, A.conj().T, np.dot, np.vdot, y += a * x): values against
NumPy, round trips, finite-difference inner-product gradients for each instruction (real and
complex), the compiled backend equal to the Python backend, and every error rule at the user's line."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import assert_error_at, assert_gradient, assert_round_trip, copy_args, marked_line
import revdiff
from revdiff import ReversibilityError, reversible, routine, zero

rng = np.random.default_rng(7)
THIS_FILE = __file__


def assert_error(exc_info, marker: str, *phrases: str):
    assert_error_at(exc_info, THIS_FILE, marker, *phrases)


def rand(*shape, cplx=False):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if cplx else x


@reversible
def matvec_view(y, A, x):
    y[1:4] += A[1:4, 2:5] @ x[0:3]


@reversible
def matvec_sub(y, A, x):
    y[:] -= A @ x


@reversible
def matvec_t(y, A, x):
    y[:] += A.T @ x


@reversible
def matvec_h(y, A, x, k):
    y[:k] -= A[:, :k].conj().T @ x  # E:vector_slice


@reversible
def matvec_h_np(y, A, x):
    y[:] += np.conj(A).T @ x


@reversible
def dot(s, x, y):
    s += np.dot(x, y)


@reversible
def vdot_from_end(s, x, y):
    s -= np.vdot(x[1:], y[:-1])


@reversible
def dot_matmul(r, x, Q, j):
    r[j] += x @ Q[:, j]


@reversible
def axpy(y, a, x):
    y[1:] += a * x[1:]


@reversible
def axpy_expression(y, a, x):
    y[:] -= x * np.sin(a)


@reversible
def matmat_view(Y, A, B):
    Y[1:3, :] += A[1:3, 0:2] @ B[0:2, :]


@reversible
def matmat_t(Y, A, B):
    Y[:, :] -= A.T @ B


@reversible
def matmat_h(Y, A, B, k):
    Y[:k, :] += A[:, :k].conj().T @ B


@reversible
def add_vector(y, x):
    y[:] += x


@reversible
def dot_in_ancilla(out, x, y):
    s = zero(x.dtype)
    with routine:
        s += x @ y
    out += s * s
    ~routine
    del s


def cases(cplx: bool):
    c = cplx
    scalar = complex(0.3, -0.2) if c else 0.3
    return {
        "matvec_view": (matvec_view, (rand(5, cplx=c), rand(5, 6, cplx=c), rand(4, cplx=c)),
                        lambda y, A, x: np.r_[y[:1], y[1:4] + A[1:4, 2:5] @ x[:3], y[4:]]),
        "matvec_sub": (matvec_sub, (rand(5, cplx=c), rand(5, 3, cplx=c), rand(3, cplx=c)),
                       lambda y, A, x: y - A @ x),
        "matvec_t": (matvec_t, (rand(3, cplx=c), rand(5, 3, cplx=c), rand(5, cplx=c)),
                     lambda y, A, x: y + A.T @ x),
        "matvec_h": (matvec_h, (rand(4, cplx=c), rand(5, 4, cplx=c), rand(5, cplx=c), 3),
                     lambda y, A, x, k: np.r_[y[:3] - A[:, :3].conj().T @ x, y[3:]]),
        "matvec_h_np": (matvec_h_np, (rand(3, cplx=c), rand(5, 3, cplx=c), rand(5, cplx=c)),
                        lambda y, A, x: y + A.conj().T @ x),
        "dot": (dot, (scalar, rand(7, cplx=c), rand(7, cplx=c)), lambda s, x, y: s + np.dot(x, y)),
        "vdot_from_end": (vdot_from_end, (scalar, rand(7, cplx=c), rand(7, cplx=c)),
                          lambda s, x, y: s - np.vdot(x[1:], y[:-1])),
        "dot_matmul": (dot_matmul, (rand(4, cplx=c), rand(5, cplx=c), rand(5, 4, cplx=c), 2),
                       lambda r, x, Q, j: np.r_[r[:2], r[2] + x @ Q[:, 2], r[3:]]),
        "axpy": (axpy, (rand(6, cplx=c), scalar, rand(6, cplx=c)),
                 lambda y, a, x: np.r_[y[:1], y[1:] + a * x[1:]]),
        "axpy_expression": (axpy_expression, (rand(6, cplx=c), 0.4, rand(6, cplx=c)),
                            lambda y, a, x: y - x * np.sin(a)),
        "matmat_view": (matmat_view, (rand(4, 3, cplx=c), rand(4, 5, cplx=c), rand(2, 3, cplx=c)),
                        lambda Y, A, B: np.r_[Y[:1], Y[1:3] + A[1:3, :2] @ B[:2], Y[3:]]),
        "matmat_t": (matmat_t, (rand(3, 2, cplx=c), rand(5, 3, cplx=c), rand(5, 2, cplx=c)),
                     lambda Y, A, B: Y - A.T @ B),
        "matmat_h": (matmat_h, (rand(4, 2, cplx=c), rand(5, 4, cplx=c), rand(5, 2, cplx=c), 3),
                     lambda Y, A, B, k: np.r_[Y[:3] + A[:, :3].conj().T @ B, Y[3:]]),
        "add_vector": (add_vector, (rand(6, cplx=c), rand(6, cplx=c)), lambda y, x: y + x),
        "dot_in_ancilla": (dot_in_ancilla, (scalar, rand(6, cplx=c), rand(6, cplx=c)),
                           lambda out, x, y: out + np.dot(x, y) ** 2),
    }


@pytest.mark.parametrize("cplx", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("name", list(cases(False)))
def test_vector_instruction(name, cplx):
    """Value against NumPy, round trip, and the finite-difference gradient (Python backend)."""
    f, args, numpy_value = cases(cplx)[name]
    f = f.with_options(backend="python")
    out = assert_round_trip(f, *args, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(out[0], numpy_value(*copy_args(args)), rtol=1e-13, atol=1e-13)
    assert_gradient(f, *args)


def test_compiled_equals_python_backend_bit_for_bit():
    """The compiled code runs the same arithmetic in the same order (no fastmath, no contraction)."""
    for name in ("matvec_view", "matvec_h", "vdot_from_end", "axpy"):
        f, args, _ = cases(True)[name]
        got = f.with_options(backend="llvm")(*copy_args(args))
        want = f.with_options(backend="python")(*copy_args(args))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        first = args[0]
        cot = (rand(*first.shape, cplx=True) if isinstance(first, np.ndarray) else 0.5,) + (None,) * (len(args) - 1)
        pull_n = revdiff.vjp(f.with_options(backend="llvm"), *copy_args(args))[1]
        pull_p = revdiff.vjp(f.with_options(backend="python"), *copy_args(args))[1]
        for g, w in zip(pull_n(*cot), pull_p(*cot)):
            if g is not None:
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 9), n=st.integers(1, 9), k=st.integers(0, 9), cplx=st.booleans(), seed=st.integers(0, 99))
def test_matvec_round_trip_and_gradient_any_shape(m, n, k, cplx, seed):
    """Lengths that are not multiples of the four partial sums, empty views (k = 0) included."""
    k = min(k, n)
    r = np.random.default_rng(seed)
    draw = (lambda *s: r.standard_normal(s) + 1j * r.standard_normal(s)) if cplx else \
        (lambda *s: r.standard_normal(s))
    f = matvec_h.with_options(backend="python")
    args = (draw(n), draw(m, n), draw(m), k)
    out = assert_round_trip(f, *args, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(out[0][:k], args[0][:k] - args[1][:, :k].conj().T @ args[2], atol=1e-13)
    assert_gradient(f, *args)
    g = matvec_sub.with_options(backend="python")
    args = (draw(m), draw(m, n), draw(n))
    assert_round_trip(g, *args, rtol=1e-13, atol=1e-13)
    assert_gradient(g, *args)


@pytest.mark.parametrize("m", [31, 32, 33, 48])
def test_real_gradients_outside_blas_walk_columns_of_short_and_rows_of_tall_matrices(m):
    """Real A @ x up to BLAS_MIN_ELEMENTS: the gradient walks A's columns up to 32 rows and its rows
    above (a column walk of tall matrices in SIMD lanes thrashes the L1 cache); both walks give
    NumPy's gradients, and the generated adjoint holds both, chosen by the number of rows."""
    A, x, y, gy = rand(m, 10), rand(10), rand(m), rand(m)
    _, pullback = revdiff.vjp(matvec_sub, y, A, x)
    _, gA, gx = pullback(gy, None, None)
    np.testing.assert_allclose(gA, -np.outer(gy, x), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(gx, -A.T @ gy, rtol=1e-13, atol=1e-13)
    _, pullback = revdiff.vjp(matvec_h, x, A, y, 7)
    gx7 = rand(10)
    _, gA, gy_, _ = pullback(gx7, None, None, None)
    np.testing.assert_allclose(gA[:, :7], -np.outer(y, gx7[:7]), rtol=1e-13, atol=1e-13)
    assert not gA[:, 7:].any()
    np.testing.assert_allclose(gy_, -A[:, :7] @ gx7[:7], rtol=1e-13, atol=1e-13)
    assert "A.shape[0] > 32" in matvec_sub.source("adjoint", y, A, x)


def _four_partial_sums(terms):
    """The sum generated code forms: four interleaved partial sums, the terms left over added to the
    first, combined as (a0 + a1) + (a2 + a3) (``primitives/vector.py``)."""
    acc = [0.0] * 4
    bulk = len(terms) - len(terms) % 4
    for i in range(bulk):
        acc[i % 4] += terms[i]
    for i in range(bulk, len(terms)):
        acc[0] += terms[i]
    return (acc[0] + acc[1]) + (acc[2] + acc[3])


def _sequential_sum(terms):
    total = 0.0
    for t in terms:
        total += t
    return total


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("m", [1, 4, 7, 40])
@pytest.mark.parametrize("n", range(10))
def test_small_products_compute_in_the_documented_order_bit_for_bit(n, m, cplx):
    """Small matrices walk A column by column: ``y -= A @ x`` subtracts one column after another, a
    column sum (``A^H x``, and real gradients up to 32 rows) adds four interleaved partial sums
    combined as (a0 + a1) + (a2 + a3); complex gradients, and real ones of more than 32 rows, walk
    the rows. The results and gradients are bit for bit that order evaluated in Python's numbers (no
    fused multiply-add, which NumPy's complex loops may use), for 0 to 9 columns and 1 to 40 rows:
    a faster loop shape must keep it (lanes and inverses are held to one element elsewhere)."""
    A, x, y, gy = rand(m, n, cplx=cplx), rand(n, cplx=cplx), rand(m, cplx=cplx), rand(m, cplx=cplx)
    a, xs, ys, gys = A.tolist(), x.tolist(), y.tolist(), gy.tolist()
    conj = (lambda v: v.conjugate()) if cplx else (lambda v: v)  # noqa: E731
    (z, _, _), pullback = revdiff.vjp(matvec_sub, y, A, x)
    want = list(ys)
    for j in range(n):  # y -= A[:, j] x[j], column after column
        want = [want[i] - a[i][j] * xs[j] for i in range(m)]
    assert z.tolist() == want
    _, gA, gx = pullback(gy, None, None)
    assert gA.tolist() == [[-gys[i] * conj(xs[j]) for j in range(n)] for i in range(m)]
    rows_walk = cplx or m > 32
    column_sum = _sequential_sum if rows_walk else _four_partial_sums
    assert gx.tolist() == [-column_sum([conj(a[i][j]) * gys[i] for i in range(m)]) for j in range(n)]
    # w[:k] -= A[:, :k]^H y: a sum per column; its adjoint adds A[:, j] gw[j] into gy column after
    # column on the column walk, as four partial sums along each row on the row walk
    w, gw = rand(n, cplx=cplx), rand(n, cplx=cplx)
    ws, gws = w.tolist(), gw.tolist()
    (z, _, _, _), pullback = revdiff.vjp(matvec_h, w, A, y, n)
    assert z.tolist() == [ws[j] - _four_partial_sums([conj(a[i][j]) * ys[i] for i in range(m)]) for j in range(n)]
    _, gA, gy_, _ = pullback(gw, None, None, None)
    row_sum = _four_partial_sums if rows_walk else _sequential_sum
    assert gy_.tolist() == [row_sum([a[i][j] * -gws[j] for j in range(n)]) for i in range(m)]
    assert gA.tolist() == [[conj(-gws[j]) * ys[i] for j in range(n)] for i in range(m)]


# ----------------------------------------------------------------------------- host BLAS

BIG = (64, 40)  # 2560 elements: above BLAS_MIN_ELEMENTS, so real A @ x calls BLAS on the CPU


def _layouts(dtype):
    """The same matrix C-ordered, F-ordered, and strided along both axes (BLAS declines it)."""
    a = rng.standard_normal(BIG).astype(dtype)
    wide = np.zeros((BIG[0], 2 * BIG[1]), dtype)
    wide[:, ::2] = a
    return {"C": a, "F": np.asfortranarray(a), "strided": wide[:, ::2]}


def _large_products(dtype, A):
    """(function, arguments, NumPy value, host routine) of every large real product form on A."""
    m, n = BIG
    vec = lambda *s: rng.standard_normal(s).astype(dtype)  # noqa: E731
    return (
        (matvec_sub, (vec(m), A, vec(n)), lambda y, A, x: y - A @ x, "matvec"),
        (matvec_t, (vec(n), A, vec(m)), lambda y, A, x: y + A.T @ x, "matvec"),
        (matvec_h, (vec(n), A, vec(m), 37), lambda y, A, x, k: np.r_[y[:k] - A[:, :k].T @ x, y[k:]], "matvec"),
        (matmat_t, (vec(n, 6), A, vec(m, 6)), lambda Y, A, B: Y - A.T @ B, "matmat"),
        (matmat_h, (vec(n, 6), A, vec(m, 6), 37), lambda Y, A, B, k: np.r_[Y[:k] + A[:, :k].T @ B, Y[k:]], "matmat"))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_large_real_products_through_blas(dtype, layout):
    """A @ x, A.T @ x, A[:, :k].T @ x and the matrix products through BLAS, on views BLAS takes (C and F
    order) and one it declines (its loops run): values against NumPy, round trips, gradients;
    the compiled and the Python backend agree bit for bit, in values and in the vjp."""
    tol = 1e-12 if dtype == np.float64 else 2e-4
    for f, args, want, routine_name in _large_products(dtype, _layouts(dtype)[layout]):
        assert f"_host_{routine_name}(" in f.source("adjoint", *args)
        got = f(*copy_args(args))
        np.testing.assert_allclose(got[0], want(*copy_args(args)), rtol=tol, atol=tol)
        assert_round_trip(f, *args, rtol=tol, atol=tol)
        if dtype == np.float64:
            assert_gradient(f, *args)
        python = f.with_options(backend="python")
        np.testing.assert_array_equal(python(*copy_args(args))[0], got[0])
        cot = (rng.standard_normal(args[0].shape).astype(dtype),) + (None,) * (len(args) - 1)
        for g, w in zip(revdiff.vjp(f, *copy_args(args))[1](*cot), revdiff.vjp(python, *copy_args(args))[1](*cot)):
            if g is not None:
                np.testing.assert_array_equal(g, w)


def test_matrix_products_need_two_slices_on_the_target():
    @reversible
    def whole(Y, A, B):
        Y += A @ B  # E:matmat_target
    with pytest.raises(ReversibilityError) as e:
        whole(np.zeros((2, 2)), np.ones((2, 2)), np.ones((2, 2)))
    assert_error(e, "matmat_target", "must be a vector", "Y[:, :] += A @ B")


@reversible
def add_column(y, A, k):
    y[:] += A[:, k]  # E:fixed_index


def test_an_integer_index_of_a_view_is_checked():
    """``A[:, k]`` with k outside A: IndexError at the user's line, in every program, not a read
    past the array by the instruction's unchecked loops."""
    A = rand(3, 2)
    np.testing.assert_array_equal(add_column(np.zeros(3), A, -1)[0], A[:, 1])
    for program in (add_column, ~add_column):
        with pytest.raises(IndexError, match=r"index k is out of bounds for axis 1 of 'A' \(index = 2, size = 2\)") as e:
            program(np.zeros(3), A, 2)
        assert f"line {marked_line(THIS_FILE, 'fixed_index')}" in str(e.value)
    with pytest.raises(IndexError, match="index k is out of bounds"):
        revdiff.vjp(add_column, np.zeros(3), A, -3)


def test_matrix_product_shapes_are_checked():
    @reversible
    def product(Y, A, B):
        Y[:, :] += A @ B  # E:matmat_shape
    with pytest.raises(ReversibilityError) as e:
        product(np.zeros((2, 3)), np.ones((2, 4)), np.ones((5, 3)))
    assert_error(e, "matmat_shape", "rows of B and columns of op(A) differ")


def test_blas_products_are_deterministic_in_parallel_batches():
    """Concurrent BLAS calls from parallel threads return bit for bit what one serial call returns,
    above OpenBLAS's own threading threshold too: the inverse subtracts what the forward added."""
    from concurrent.futures import ThreadPoolExecutor

    from revdiff.targets.llvm import host_routines as host

    Q = rng.standard_normal((500, 250))
    for k in (5, 250):
        for transpose in (False, True):
            x = rng.standard_normal(500 if transpose else k)
            serial = np.zeros(k if transpose else 500)
            assert host.matvec(serial, Q[:, :k], x, transpose, 1)
            for _ in range(5):
                Y = np.zeros((8, len(serial)))
                with ThreadPoolExecutor(4) as pool:
                    assert all(pool.map(lambda b: host.matvec(Y[b], Q[:, :k], x, transpose, 1), range(8)))
                np.testing.assert_array_equal(Y, np.tile(serial, (8, 1)))


def test_blas_is_host_only():
    """The CUDA source of the same program runs the instruction's loops."""
    args = (np.zeros(BIG[0]), np.zeros(BIG), np.zeros(BIG[1]))
    assert "_host_" not in matvec_sub.source("adjoint", *args, backend="cuda")
    assert "_host_outer_update(" in matvec_sub.source("adjoint", *args)
    assert "_host_matvec_input_gradient(" in matvec_sub.source("adjoint", *args)


def test_host_routines_decline_what_blas_cannot_take():
    from revdiff.targets.llvm import host_routines as host
    y, M, x = np.zeros(4), np.ones((4, 3)), np.ones(3)
    assert host.matvec(y, M, x, False, 1) and (y == 3).all()
    assert not host.matvec(y.astype(complex), M.astype(complex), x.astype(complex), False, 1)  # complex
    assert not host.matvec(y, M.astype(np.float32), x, False, 1)  # mixed dtypes
    assert not host.matvec(y, np.ones((4, 6))[:, ::2], x, False, 1)  # strided along both axes
    assert not host.matvec(np.zeros(0), np.ones((0, 3)), x, False, 1)  # empty
    assert (y == 3).all()  # untouched by the declined calls
    G, u, v = np.zeros((4, 3)), np.arange(8.0)[::2], np.arange(3.0)  # a strided vector is fine
    assert host.outer_update(G, u, v, -1) and (G == -np.outer(u, v)).all()


def test_matrix_product_gradients_accumulate_into_the_gradient():
    """``G += sign op(A) op(B)`` straight into G (BLAS beta = 1, no scratch): every transpose,
    G and the operands in C or F order, against NumPy; a G strided along both axes is declined."""
    from revdiff.targets.llvm import host_routines as host
    for g_order, operand_order in (("C", "C"), ("F", "C"), ("C", "F"), ("F", "F")):
        for ta in (False, True):
            for tb in (False, True):
                A = np.asarray(rng.standard_normal((4, 5) if ta else (5, 4)), order=operand_order)
                B = np.asarray(rng.standard_normal((3, 4) if tb else (4, 3)), order=operand_order)
                G0 = np.asarray(rng.standard_normal((5, 3)), order=g_order)
                G = G0.copy(order=g_order)
                assert host.matmat_gradient(G, A, B, ta, tb, -1)
                want = G0 - (A.T if ta else A) @ (B.T if tb else B)
                np.testing.assert_allclose(G, want, rtol=1e-13, atol=1e-13)
    strided = np.zeros((5, 6))[:, ::2]
    assert not host.matmat_gradient(strided, np.ones((5, 4)), np.ones((4, 3)), False, False, 1)
    assert (strided == 0).all()


def test_largest_magnitude_is_a_running_max_over_any_view():
    """The ancillas' scale scan (four running maxima per row) equals ``max(scale, |x|)`` over the
    elements in order, NaN elements ignored as ``max`` ignores them, for vectors, matrices in C and
    F order, strided views, complex, empty and rank-3 arrays. A complex modulus is a hypot, which
    libm and NumPy's loops round within an ulp each: equal within 2 ulps there."""
    import math
    from revdiff.targets.llvm import host_routines as host

    def running(scale, V):
        for x in np.abs(V).ravel():
            scale = max(scale, x)
        return scale

    def same(got, want, V):
        if math.isnan(got) or math.isnan(want):
            return math.isnan(got) and math.isnan(want)
        return got == want or (np.iscomplexobj(V) and abs(got - want) <= 2 * np.spacing(want))
    wide = rng.standard_normal((9, 30))
    for V in (rng.standard_normal(7), wide[:, 3], wide[:, 1:23], np.asfortranarray(rng.standard_normal((6, 5))),
              wide[::2, ::3], rng.standard_normal((5, 3)) + 1j * rng.standard_normal((5, 3)), np.zeros((0, 3)),
              rng.standard_normal((3, 4, 5)), np.array([1.0, math.nan, 3.0, 0.5, 2.0, -4.0])):
        for scale in (0.0, 2.5, math.nan):
            got, want = host.largest_magnitude(scale, V), running(scale, V)
            assert same(got, want, V), (V.shape, scale, got, want)
            if V.ndim == 1:  # the compiled programs' scan of a vector, as the generated code calls it
                got = host.compiled_largest(scale, V)
                assert same(got, want, V), (V.shape, scale, got, want)
            elif V.ndim == 2:
                got = scale
                for row in V:
                    got = host.compiled_largest(got, row)
                assert same(got, want, V), (V.shape, scale, got, want)


# ----------------------------------------------------------------------------- errors


def test_overlapping_target_and_operand():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, A):
            y[1:] += A @ y[:-1]  # E:vector_overlap
    assert_error(e, "vector_overlap", "'y' is both updated and read", "may overlap")


def test_step_slices_are_refused():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, x):
            y[::2] += x  # E:vector_step
    assert_error(e, "vector_step", "slices of step 1")


def test_views_are_updated_only_by_add_sub_mul_and_div():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y):
            y[:] %= 2.0  # E:vector_scale
    assert_error(e, "vector_scale", "updated with +=, -=, *= and /=")


def test_a_whole_array_expression_may_not_read_its_target():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, x):
            y[1:] += np.sin(y[:-1]) * x  # E:vector_expression
    assert_error(e, "vector_expression", "'y' is both updated and read by 'view += e'")


def test_dot_into_a_view():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, x):
            y[:] += np.dot(x, x)  # E:vector_dot_view
    assert_error(e, "vector_dot_view", "is a number")


@reversible
def matvec_into(y, A, x):
    y += A @ x  # E:vector_rank


def test_operand_ranks_are_checked():
    with pytest.raises(ReversibilityError) as e:
        matvec_into(np.zeros(3), np.ones(3), np.ones(3))
    assert_error(e, "vector_rank", "'A' must be a matrix (2-D view), but it is a vector")
    with pytest.raises(ReversibilityError) as e:
        matvec_into(0.0, np.ones((3, 3)), np.ones(3))
    assert_error(e, "vector_rank", "'y' must be a vector", "s += np.dot(x, y)")


def test_complex_into_real_is_refused():
    with pytest.raises(ReversibilityError) as e:
        matvec_into(np.zeros(2), np.ones((2, 2)) * 1j, np.ones(2))
    assert_error(e, "vector_rank", "complex values of 'A'", "silently converted")


def test_lengths_must_agree():
    with pytest.raises(ReversibilityError) as e:
        matvec_into(np.zeros(3), np.ones((4, 2)), np.ones(2))
    assert_error(e, "vector_rank", "len(y) and rows of op(A) differ", "len(y) = 3", "rows of op(A) = 4")


def test_slices_outside_the_array_are_reported():
    """NumPy would shorten A[:, :k] silently for k > 4; revdiff names the slice instead."""
    with pytest.raises(ReversibilityError) as e:
        matvec_h(np.zeros(6), np.ones((5, 4)), np.ones(5), 6)
    assert_error(e, "vector_slice", "the slice 0:k of 'A' (axis 1) is outside the array")


def test_negative_bound_from_a_variable_is_reported():
    """Only constant negative bounds count from the end (x[:-1]); k = -1 is an error."""
    with pytest.raises(ReversibilityError) as e:
        matvec_h.with_options(backend="python")(np.zeros(6), np.ones((5, 4)), np.ones(5), -1)
    assert "outside the array" in str(e.value)


def test_norm_is_a_number_of_one_vector():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def into_view(y, x):
            y[:] += np.linalg.norm(x)  # E:norm_view
    assert_error(e, "norm_view", "np.linalg.norm(x) is a number")
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def with_ord(s, x):
            s += np.linalg.norm(x, 1)  # E:norm_ord
    assert_error(e, "norm_ord", "np.linalg.norm(x) takes one vector (the 2-norm; no ord or axis)")


@reversible
def norm_of(s, x):
    s += np.linalg.norm(x)  # E:norm_rank


def test_norm_operands_are_checked():
    with pytest.raises(ReversibilityError) as e:
        norm_of(0.0, np.ones((3, 3)))
    assert_error(e, "norm_rank", "'x' must be a vector", "np.linalg.norm(A[:, k])")
    with pytest.raises(ReversibilityError) as e:
        norm_of(0j, np.ones(3))
    assert_error(e, "norm_rank", "does not apply to complex values")
    assert norm_of(0.0, np.ones(4) * 1j)[0] == 2.0  # complex x, real s: a real number, no conversion


def test_norm_at_extreme_magnitudes_and_zero():
    """Scaled by the largest magnitude: no square overflows or underflows; zero has gradient zero."""
    x = np.array([3.0, -4.0, 0.0, 12.0])
    for scale in (1.0, 1e300, 1e-300, 2.0 ** -1070):
        assert norm_of(0.0, x * scale)[0] == pytest.approx(13 * scale, rel=1e-15)
    assert norm_of(0.0, np.zeros(3))[0] == 0.0
    np.testing.assert_array_equal(revdiff.grad(norm_of, "s")(0.0, np.zeros(3))[1], np.zeros(3))
    np.testing.assert_allclose(revdiff.grad(norm_of, "s")(0.0, x * 1e-300)[1], x / 13, rtol=1e-15)
