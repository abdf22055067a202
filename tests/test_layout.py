"""Ancilla arrays of the CPU target whose rows would crowd a few sets of the L1 cache are allocated
with one entry of padding per row (``targets/llvm/memory.py``, ``padded_layout``): every program
that reads them, column walks, whole-array statements, BLAS products, views passed to callees and
allocations cleared for reuse in a loop, gets the numbers of the unpadded layout."""
import numpy as np
import pytest

import revdiff
from revdiff import formulas
from revdiff import programs as P
from revdiff import reversible, zeros
from revdiff.programs.householder import householder


@reversible
def column_sums(out, A, rounds):
    """out[j] += rounds * sum_i A[i, j]^2 through a work copy allocated, walked down its columns and
    uncomputed in each round (an allocation in a loop: cleared and reused)."""
    m, n = A.shape
    for t in range(rounds):
        W = zeros((m, n), A.dtype)
        W[:, :] += A
        for j in range(n):
            for i in range(m):
                out[j] += W[i, j] * A[i, j]
        W[:, :] -= A
        del W


@pytest.mark.parametrize("m, n, dtype", [(80, 64, np.float64), (72, 128, np.float32), (9, 512, np.float64),
                                         (64, 64, np.float64), (0, 64, np.float64), (80, 0, np.float64)])
def test_padded_ancillas_hold_what_was_written(m, n, dtype):
    """Integer-valued entries, so that every sum is exact whatever the order: rows of 512 bytes and
    more (padded when the rows outnumber the sets' ways: 80 x 64 float64, 72 x 128 float32, 9 rows
    of 4 KiB) and the shapes at and beside the rule's edges (64 x 64: exactly 32 KiB, empty ones)."""
    A = np.random.default_rng(m * n).integers(-8, 9, (m, n)).astype(dtype)
    out = column_sums(np.zeros(n, dtype), A, 3)[0]
    np.testing.assert_array_equal(out, 3 * (A.astype(np.float64) ** 2).sum(axis=0))


def test_padded_lane_ancillas_give_each_element_its_own_bits():
    """In lanes a matrix of 8 float64 columns has rows of 512 bytes: Householder's work copies of 72
    rows are padded there and not in one element's program, whose rows are 64 bytes."""
    A = np.random.default_rng(5).standard_normal((11, 72, 8))
    Q, R, _ = revdiff.batched(householder, ("Q", "R", "A"), layout="lanes")(
        np.zeros((11, 72, 8)), np.zeros((11, 8, 8)), A)
    y, gz = np.random.default_rng(6).standard_normal((2, 11, 72))
    gA, gy = P.project_vjp(A, y, gz, method="householder")
    for b in range(11):
        one = householder(np.zeros((72, 8)), np.zeros((8, 8)), A[b])
        np.testing.assert_array_equal(Q[b], one[0])
        np.testing.assert_array_equal(R[b], one[1])
        single = P.project_vjp(A[b], y[b], gz[b], method="householder")
        np.testing.assert_array_equal(gA[b], single[0])
        np.testing.assert_array_equal(gy[b], single[1])


@pytest.mark.parametrize("m, n", [(200, 64), (600, 512)])
def test_padded_matrices_in_blas_products_give_the_closed_form_gradient(m, n):
    """The blocked program's panels and trailing products (BLAS, with the padded row stride as the
    leading dimension) on work copies of 64 and 512 float64 columns: the projection's gradient as
    the closed form gives it."""
    r = np.random.default_rng(m + n)
    A = r.standard_normal((m, n)) + 3 * np.eye(m, n)
    y, gz = r.standard_normal((2, m))
    gA, gy = P.project_vjp(A, y, gz, method="blocked_householder")
    want_gA, want_gy = formulas.project_vjp(A, y, gz)
    np.testing.assert_allclose(gA, want_gA, rtol=0, atol=1e-10 * np.abs(want_gA).max())
    np.testing.assert_allclose(gy, want_gy, rtol=0, atol=1e-10 * np.abs(want_gy).max())


@reversible
def weighted_columns(out, X, w):
    """out[..., i, j] += w[j] * X[..., i, j] over a stack of matrices, walking each down its columns."""
    s, m, n = X.shape
    for a in range(s):
        for j in range(n):
            for i in range(m):
                out[a, i, j] += w[j] * X[a, i, j]


@pytest.mark.parametrize("dtype, n", [(np.float64, 8), (np.float32, 16), (np.float64, 5)])
def test_padded_lane_buffers_are_filled_and_emptied_row_by_row(dtype, n):
    """A batch of 19 stacks of three 80 x n matrices (rows of 512 bytes in lanes: the entry's lane
    buffers padded, the copies made a row at a time; 5 columns: unpadded, one copy) in lanes, a
    partial last group among them: the bits of one element at a time, values and gradients."""
    r = np.random.default_rng(n)
    X, out, gout = (r.standard_normal((19, 3, 80, n)).astype(dtype) for _ in range(3))
    w = r.standard_normal(n).astype(dtype)
    results = {}
    for layout in ("lanes", "elements"):
        f = revdiff.batched(weighted_columns, ("out", "X"), layout=layout)
        results[layout] = (f(out.copy(), X, w), f.vjp((out.copy(), X, w), (gout, None, None)))
    (lane_value, (lane_outs, lane_grads)), (value, (outs, grads)) = results["lanes"], results["elements"]
    np.testing.assert_array_equal(lane_value[0], value[0])
    np.testing.assert_array_equal(lane_outs[0], outs[0])
    for got, want in zip(lane_grads, grads):
        if want is not None:
            np.testing.assert_array_equal(got, want)


@reversible
def weighted_products(out, A, B, W, rounds):
    """out += rounds * sum(W * (A @ B)) through S = A @ B allocated in each round: the adjoint leaves
    out the undo of S's first write (a product into a fresh ancilla), so the next allocation it
    meets going backwards is cleared, not found zero: the clear must span the padded rows."""
    m = A.shape[0]
    n = B.shape[1]
    for t in range(rounds):
        S = zeros((m, n), A.dtype)
        S[:, :] += A @ B
        for i in range(m):
            for j in range(n):
                out += W[i, j] * S[i, j]
        S[:, :] -= A @ B
        del S


@pytest.mark.parametrize("m, k, n", [(80, 3, 64), (70, 5, 128)])
def test_a_padded_ancilla_cleared_for_reuse_in_the_adjoint_gives_the_gradient(m, k, n):
    """Integer-valued entries: the gradients are exact sums, rounds * W @ B^T and rounds * A^T W."""
    r = np.random.default_rng(m)
    A, B, W = (r.integers(-4, 5, s).astype(np.float64) for s in ((m, k), (k, n), (m, n)))
    _, pullback = revdiff.vjp(weighted_products, 0.0, A, B, W, 3)
    _, gA, gB, gW, _ = pullback(1.0, None, None, None, None)
    np.testing.assert_array_equal(gA, 3 * W @ B.T)
    np.testing.assert_array_equal(gB, 3 * A.T @ W)
    np.testing.assert_array_equal(gW, 3 * A @ B)


@reversible
def growing_sums(out, x, big):
    """out[0] += sum_k sum_{i <= k} x[i]^2 through a work copy of x[:k + 1] made in each round (a new
    shape each time: the call's share of its frame fills up, and calloc takes over), and
    out[1] += sum big^2 through a work copy too large for the frame."""
    n = len(x)
    B = zeros(len(big), x.dtype)
    B[:] += big
    for k in range(n):
        w = zeros(k + 1, x.dtype)
        w[:] += x[:k + 1]
        for i in range(k + 1):
            out[0] += w[i] * x[i]
        w[:] -= x[:k + 1]
        del w
    for i in range(len(big)):
        out[1] += B[i] * big[i]
    B[:] -= big
    del B


@pytest.mark.parametrize("n", [0, 3, 200])
def test_ancillas_from_the_frame_and_from_the_heap_hold_what_was_written(n):
    """Ancillas come from the call's stack frame while their total fits (``FRAME_ANCILLA_BYTES``),
    else from calloc: 200 work copies of growing length outgrow it, a 4000-entry one never fits
    it; integer-valued entries give exact sums, and the gradient is the closed form's."""
    from revdiff.targets.llvm.memory import FRAME_ANCILLA_BYTES
    assert 4000 * 8 > FRAME_ANCILLA_BYTES and 200 * 201 // 2 * 8 > FRAME_ANCILLA_BYTES
    rng = np.random.default_rng(n)
    x, big = rng.integers(-8, 9, n).astype(float), rng.integers(-8, 9, 4000).astype(float)
    out = growing_sums(np.zeros(2), x, big)[0]
    assert out[0] == sum((x[:k + 1] ** 2).sum() for k in range(n)) and out[1] == (big ** 2).sum()
    _, pullback = revdiff.vjp(growing_sums, np.zeros(2), x, big)
    _, gx, gbig = pullback(np.array([1.0, 1.0]), np.zeros(n), np.zeros(4000))
    np.testing.assert_array_equal(gx, 2 * x * np.arange(n, 0, -1))
    np.testing.assert_array_equal(gbig, 2 * big)


@reversible
def _chain_leaf(out, x):
    for i in range(len(x)):
        out[0] += x[i] * x[i]


def _chain_level(inner):
    @reversible
    def level(out, x):
        w = zeros(len(x), x.dtype)
        w[:] += x
        inner(out, w)
        w[:] -= x
        del w

    return level


_CHAIN = _chain_leaf
for _ in range(16):
    _CHAIN = _chain_level(_CHAIN)


def test_a_deep_chain_of_calls_with_ancillas_runs_in_a_thread_with_a_small_stack():
    """Ancillas take from a call's frame only what they use (``FRAME_ANCILLA_BYTES`` is a cap, not a
    reservation): 17 nested calls, each with a small ancilla, run in a thread of 96 KiB of stack (8 KiB
    reserved in each call would overflow it: a segfault), and give what the main thread gives."""
    import threading
    x = np.arange(1.0, 51.0)
    want = _CHAIN(np.zeros(1), x)[0]
    assert want[0] == (x ** 2).sum()
    got = []
    previous = threading.stack_size(96 * 1024)
    try:
        worker = threading.Thread(target=lambda: got.append(_CHAIN(np.zeros(1), x)[0]))
        worker.start()
        worker.join()
    finally:
        threading.stack_size(previous)
    np.testing.assert_array_equal(got[0], want)
