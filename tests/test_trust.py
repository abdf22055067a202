"""Degenerate, extreme and faulty inputs: each gets the right answer or a named error saying what is
wrong and where (batch element, column, the user's line). One test per failure mode."""
from __future__ import annotations

import io
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import revdiff
from revdiff import programs as P
from revdiff import reversible, zeros
from revdiff.programs.gram_schmidt import norm2

rng = np.random.default_rng(23)
RANK_METHODS = ["cgs2", "bcgs2", "mgs", "cgs", "householder"]


def dependent(shape=(6, 3), column=2):
    A = rng.standard_normal(shape)
    A[:, column] = A[:, 0] - 2 * A[:, 1]
    return A


# ----------------------------------------------------------------------------- rank deficiency

@pytest.mark.parametrize("method", RANK_METHODS)
def test_projection_and_least_squares_of_a_rank_deficient_matrix_raise(method):
    A, y = dependent(), rng.standard_normal(6)
    for call in (lambda: P.project(A, y, method=method), lambda: P.project_vjp(A, y, y, method=method),
                 lambda: P.lstsq(A, y, method=method), lambda: P.lstsq_vjp(A, y, np.ones(3), method=method)):
        with pytest.raises(revdiff.RankDeficientError, match=r"column 2 is linearly dependent"):
            call()
    batch = np.stack([rng.standard_normal((6, 3)), rng.standard_normal((6, 3)), A])
    with pytest.raises(revdiff.RankDeficientError, match=r"batch index \(2,\): column 2"):
        P.project_vjp(batch, rng.standard_normal((3, 6)), rng.standard_normal((3, 6)), method=method)


def test_a_wide_matrix_whose_leading_columns_are_dependent_raises():
    A = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    with pytest.raises(revdiff.RankDeficientError, match="column 1"):
        P.project(A, np.array([1.0, 2.0]))
    np.testing.assert_allclose(P.project(np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]]), np.array([1.0, 2.0])),
                               [1.0, 2.0], atol=1e-15)


@pytest.mark.parametrize("method", RANK_METHODS + ["givens"])
def test_exactly_dependent_columns_raise_rank_deficient_not_division_by_zero(method):
    A = np.array([[1.0, 1.0, 2.0], [2.0, 2.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]])  # column 1 = column 0
    for call in (lambda: P.qr(A, method=method), lambda: P.qr_vjp(A, np.ones((4, 3)), None, method=method)):
        with pytest.raises(revdiff.RankDeficientError, match="column 1"):
            call()
    Z = np.array([[1.0, 2.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    with pytest.raises(revdiff.RankDeficientError, match="column 2 is zero"):
        P.qr(Z, method=method)


def test_projection_refuses_what_qr_refuses_at_kappa_1e17():
    from revdiff.tools.compare import matrix_with_condition
    A = matrix_with_condition(20, 6, 1e17, np.random.default_rng(0), np.float64)
    with pytest.raises(revdiff.RankDeficientError):
        P.qr(A)
    with pytest.raises(revdiff.RankDeficientError):
        P.project(A, rng.standard_normal(20))


def test_rank_tol_is_checked():
    A, y = rng.standard_normal((5, 2)), rng.standard_normal(5)
    with pytest.raises(TypeError, match="rank_tol must be a real number"):
        P.qr(A, rank_tol="x")
    for bad in (float("nan"), -1.0, 1.0):
        with pytest.raises(ValueError, match=r"rank_tol must lie in \[0, 1\)"):
            P.project(A, y, rank_tol=bad)
    np.testing.assert_allclose(P.lstsq(A, y, rank_tol=0.0), np.linalg.lstsq(A, y, rcond=None)[0], atol=1e-13)


# ----------------------------------------------------------------------------- magnitudes

@pytest.mark.parametrize("scale", [1e-310, 1e-300, 1e-160, 1e154, 1e300])
@pytest.mark.parametrize("method", ["cgs2", "householder", "givens", "mgs"])
def test_well_conditioned_input_of_any_magnitude(scale, method):
    """Against the same matrices scaled exactly (by a power of two) to magnitude 1: subnormal
    entries included, whose own rounding the comparison must not count."""
    k = int(np.floor(np.log2(scale)))
    A = rng.standard_normal((2, 8, 4)) * scale
    unit = np.ldexp(A, -k)
    Q, R = P.qr(A, method=method)
    Q1, R1 = P.qr(unit, method=method)
    np.testing.assert_allclose(Q, Q1, atol=1e-13)
    np.testing.assert_allclose(np.ldexp(R, -k), R1, rtol=1e-12, atol=1e-13 * np.abs(R1).max())
    inverse_overflows = scale < 1e-308  # gradients and solutions ~ 1 / scale: not representable
    if method != "givens":
        y, gz = rng.standard_normal((2, 8)), rng.standard_normal((2, 8))
        np.testing.assert_allclose(P.project(A, y, method=method), P.project(unit, y, method=method), atol=1e-13)
        if inverse_overflows:
            with pytest.raises(revdiff.ResultOverflowError, match="'gA' at batch index"):
                P.project_vjp(A, y, gz, method=method)
            with pytest.raises(revdiff.ResultOverflowError, match="'x' at batch index"):
                P.lstsq(A, y, method=method)
        else:
            gA, gy = P.project_vjp(A, y, gz, method=method)  # z(cA) = z(A): gA(cA) = gA(A) / c
            gA1, gy1 = P.project_vjp(unit, y, gz, method=method)
            np.testing.assert_allclose(np.ldexp(gA, k), gA1, rtol=1e-11, atol=1e-12)
            np.testing.assert_allclose(gy, gy1, atol=1e-13)
            x1 = P.lstsq(unit, y, method=method)
            np.testing.assert_allclose(np.ldexp(P.lstsq(A, y, method=method), k), x1, rtol=1e-11)
    x, g = rng.standard_normal((3, 5)) * scale, rng.standard_normal((3, 5))
    x1 = np.ldexp(x, -k)
    np.testing.assert_allclose(P.normalize(x), P.normalize(x1), atol=1e-15)
    if inverse_overflows:
        with pytest.raises(revdiff.ResultOverflowError, match="'gx'"):
            P.normalize_vjp(x, g)
    else:
        np.testing.assert_allclose(np.ldexp(P.normalize_vjp(x, g), k), P.normalize_vjp(x1, g), rtol=1e-12)


@pytest.mark.parametrize("dtype, scale", [(np.float32, 1e-30), (np.float32, 1e20), (np.float32, 1e30),
                                          (np.complex64, 1e25)])
def test_single_precision_at_extreme_magnitudes(dtype, scale):
    A = rng.standard_normal((8, 4)).astype(dtype)
    Q, R = P.qr((A * dtype(scale)).astype(dtype))
    np.testing.assert_allclose(Q, P.qr(A)[0], atol=1e-5)
    assert np.all(np.isfinite(P.qr_vjp((A * dtype(scale)).astype(dtype), Q, None)))


@pytest.mark.parametrize("scale", [1e-320, 1e-300, 1e-160, 1.0, 1e160, 1e300])
def test_the_norm_program_itself_is_scaled(scale):
    """norm2, written in the language, at magnitudes whose squares underflow or overflow (and its
    gradient, x / |x|), subnormal entries included."""
    v = np.array([3.0, -4.0, 0.0]) * scale  # subnormal at 1e-320: the exact norm is that of these values
    exact = math.hypot(v[0], v[1])
    nrm = norm2(0.0, v)[0]
    assert abs(nrm - exact) <= 2e-16 * exact + 5e-324
    _, pullback = revdiff.vjp(norm2, 0.0, v)
    # subnormal data: the gradient keeps the few digits subnormal intermediates have
    np.testing.assert_allclose(pullback(1.0, None)[1], [v[0] / exact, v[1] / exact, 0.0],
                               rtol=1e-2 if scale < 1e-307 else 1e-15)
    Q, R = P.cgs2(np.zeros((6, 3)), np.zeros((3, 3)), rng.standard_normal((6, 3)) * max(scale, 1e-300))[:2]
    np.testing.assert_allclose(Q.T @ Q, np.eye(3), atol=1e-14)


def test_results_that_overflow_are_refused_not_returned():
    A = np.array([[1e308, 1.0], [1e308, -1.0]])  # |column 0| = 1.4e308 fits; 2e308 would not
    assert np.isfinite(P.qr(A)[1]).all()
    B = np.array([[1.5e308, 1.0], [1.5e308, -1.0]])
    with pytest.raises(revdiff.ResultOverflowError, match=r"'R' at batch index \(\) is not finite"):
        P.qr(B)
    with pytest.raises(revdiff.ResultOverflowError, match="'x'"):
        P.lstsq(np.array([[1e-300], [0.0]]), np.array([1e300, 0.0]))


# ----------------------------------------------------------------------------- shapes and types

@pytest.mark.parametrize("shape", [(5, 0), (0, 3), (0, 0), (0, 4, 3), (2, 0, 0)])
def test_empty_matrices_and_batches_give_empty_results(shape):
    A = np.zeros(shape)
    m, n = shape[-2:]
    p = min(m, n)
    Q, R = P.qr(A)
    assert Q.shape == shape[:-2] + (m, p) and R.shape == shape[:-2] + (p, n)
    assert P.qr_vjp(A, np.zeros(Q.shape), np.zeros(R.shape)).shape == shape
    y = rng.standard_normal(shape[:-1])
    z = P.project(A, y)
    assert z.shape == y.shape and np.all(z == 0)  # no columns: the projection onto {0}
    gA, gy = P.project_vjp(A, y, y)
    assert gA.shape == shape and gy.shape == y.shape and not gy.any()
    if m >= n:
        assert P.lstsq(A, y).shape == shape[:-2] + (n,)
        gA, gy = P.lstsq_vjp(A, y, np.zeros(shape[:-2] + (n,)))
        assert gA.shape == shape and gy.shape == y.shape
    v = np.zeros(shape[:-1] + (0,))
    assert P.normalize(v).shape == v.shape and P.normalize_vjp(v, v).shape == v.shape


def test_batched_functions_accept_an_empty_batch():
    bf = revdiff.batched(P.cgs2, ("Q", "R", "A"))
    Q, R, A = bf(np.zeros((0, 4, 3)), np.zeros((0, 3, 3)), np.zeros((0, 4, 3)))
    assert Q.shape == (0, 4, 3)
    outs, grads = bf.vjp((np.zeros((0, 4, 3)), np.zeros((0, 3, 3)), np.zeros((0, 4, 3))), (None, None, None))
    assert grads[2].shape == (0, 4, 3)


def test_least_squares_of_a_wide_matrix_says_what_it_supports():
    with pytest.raises(ValueError, match=r"lstsq needs a tall or square A \(m >= n\)"):
        P.lstsq(rng.standard_normal((2, 3)), np.ones(2))


def test_unsupported_dtypes_are_named():
    with pytest.raises(TypeError, match="float16; .*float32, float64, complex64 and complex128"):
        P.qr(np.ones((3, 2), np.float16))

    @reversible
    def double(y, x):
        for i in range(len(x)):
            y[i] += 2 * x[i]
    with pytest.raises(TypeError, match=r"argument 'x' of .*double\(\): dtype float16 is not supported"):
        double(np.zeros(2), np.ones(2, np.float16))


def test_shape_errors_name_the_users_arguments():
    with pytest.raises(ValueError, match=r"'gy' has shape \(3,\); as the cotangent of y = x / \|x\| it needs the "
                                         r"shape of x, \(4,\)"):
        P.normalize_vjp(np.ones(4), np.ones(3))
    with pytest.raises(ValueError, match=r"'gout' has shape \(2, 3\)"):
        P.tangent_project_vjp(np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"'y' has shape \(5,\); for A of shape \(4, 2\) it needs \(4,\)"):
        P.project(np.ones((4, 2)), np.ones(5))


# ----------------------------------------------------------------------------- cotangents and types

@pytest.mark.parametrize("call", [
    lambda g: P.qr_vjp(np.eye(3), g, None),
    lambda g: P.project_vjp(np.eye(3)[:, :2], np.ones(3), g[0]),
    lambda g: P.lstsq_vjp(np.eye(3)[:, :2], np.ones(3), g[0, :2]),
    lambda g: P.normalize_vjp(np.ones(3), g[0]),
    lambda g: P.tangent_project_vjp(np.ones(3), np.ones(3), g[0])], ids=["qr", "project", "lstsq", "normalize",
                                                                         "tangent"])
def test_a_complex_cotangent_of_a_real_result_is_refused(call):
    with pytest.raises(TypeError, match="is complex but the value it is the cotangent of is real"):
        call(np.ones((3, 3)) * 1j)


def test_masked_arrays_are_refused_as_arguments_cotangents_and_tangents():
    """Their masked entries would be read as if they were data: refused by name, as the reversible
    functions' arguments are."""
    masked = np.ma.MaskedArray(np.ones(3), mask=[0, 1, 0])
    A = np.eye(3)[:, :2]
    with pytest.raises(TypeError, match="'gz' is a masked array"):
        P.project_vjp(A, np.ones(3), masked)
    with pytest.raises(TypeError, match="'y' is a masked array"):
        P.project(A, masked)
    with pytest.raises(TypeError, match="'A' is a masked array"):
        P.qr(np.ma.MaskedArray(A))

    @reversible
    def scale(y, x, a):
        for i in range(y.shape[0]):
            y[i] += a * x[i]

    pullback = revdiff.vjp(scale, np.zeros(3), np.ones(3), 2.0)[1]
    with pytest.raises(TypeError, match="cotangent for 'y' is a masked array"):
        pullback(masked, None, None)
    with pytest.raises(TypeError, match="tangent for 'x' is a masked array"):
        revdiff.jvp(scale, (np.zeros(3), np.ones(3), 2.0), (None, masked, None))
    with pytest.raises(TypeError, match="cotangent for 'y' is a masked array"):
        revdiff.batched(scale, ("y", "x")).vjp((np.zeros((1, 3)), np.ones((1, 3)), 2.0), (masked[None], None, None))


def test_updates_that_would_round_or_wrap_are_type_errors():
    @reversible
    def add(y, x):
        for i in range(len(x)):
            y[i] += x[i]

    @reversible
    def add_300(y):
        for i in range(len(y)):
            y[i] += 300

    with pytest.raises(revdiff.ReversibilityError, match="float64 values of 'x' would be silently rounded to float32"):
        add(np.zeros(2, np.float32), np.ones(2))
    with pytest.raises(revdiff.ReversibilityError, match="int64 values of 'x' would be silently truncated to uint8"):
        add(np.zeros(2, np.uint8), np.ones(2, np.int64))
    with pytest.raises(revdiff.ReversibilityError, match=r"the constant 300 does not fit in 'y\[i\]' \(uint8"):
        add_300(np.zeros(2, np.uint8))
    assert add(np.zeros(2), np.ones(2, np.float32))[0].tolist() == [1.0, 1.0]  # widening is fine
    assert add_300(np.zeros(2, np.int16))[0].tolist() == [300, 300]


def test_jax_functions_of_integer_arrays_return_floats():
    jnp = pytest.importorskip("jax.numpy")
    import revdiff.jax as rj
    z = rj.project(jnp.array([[1, 0], [0, 1], [0, 0]]), jnp.array([1, 2, 3]))
    assert jnp.issubdtype(z.dtype, jnp.floating)
    np.testing.assert_allclose(np.asarray(z), [1.0, 2.0, 0.0], atol=1e-6)


def test_grad_of_an_integer_loss_is_refused():
    @reversible
    def count(k, x):
        k += 1
    with pytest.raises(TypeError, match="must be a real scalar parameter, a float"):
        revdiff.grad(count, "k")(0, 1.0)


def test_options_are_checked_at_decoration():
    with pytest.raises(ValueError, match="atol must be a finite number >= 0"):
        reversible(atol="x")
    with pytest.raises(ValueError, match="rtol"):
        reversible(rtol=float("nan"))
    with pytest.raises(TypeError, match="check must be True or False"):
        reversible(check="yes")


# ----------------------------------------------------------------------------- PyTorch

def test_torch_double_backward_raises_instead_of_being_wrong():
    torch = pytest.importorskip("torch")
    import revdiff.torch as rt

    @reversible
    def square(s, x):
        s += x * x
    f = rt.function(square, "s")
    x = torch.tensor(5.0, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(f(torch.tensor(0.0, dtype=torch.float64), x), x, create_graph=True)
    assert g.item() == 10.0
    (gg,) = torch.autograd.grad(g * g + x, x)  # 2 g dg/dx + 1, through the tangent of the vjp program
    assert gg.item() == 41.0
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)  # a third derivative raises
    (gx,) = torch.autograd.grad((rt.normalize(x) * torch.arange(6.0, dtype=torch.float64)).sum(), x, create_graph=True)
    (ggx,) = torch.autograd.grad(gx.pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="third derivatives are not supported"):
        ggx.sum().backward()


def test_torch_tensors_of_unsupported_dtypes_are_named():
    torch = pytest.importorskip("torch")
    import revdiff.torch as rt
    with pytest.raises(TypeError, match="'x' is a torch.bfloat16 tensor"):
        rt.normalize(torch.ones(3, dtype=torch.bfloat16))


# ----------------------------------------------------------------------------- memory

@reversible
def with_scratch(y, x, n):
    t = zeros(n, float)
    for i in range(len(x)):
        y[i] += x[i]
    del t


@pytest.mark.parametrize("layout", ["elements", "lanes"])
def test_a_failed_allocation_in_a_batch_raises_naming_element_and_ancilla(layout):
    bf = revdiff.batched(with_scratch, ("y", "x"), layout=layout)
    huge = 1 << 50  # 8 PiB
    B = 300
    with pytest.raises(MemoryError, match=r"allocating ancilla 't' failed: not enough memory \(entries = \d+\) in "
                                          r"batch element 0\b"):  # every element fails: the first is named
        bf(np.zeros((B, 3)), np.ones((B, 3)), huge)
    with pytest.raises(MemoryError, match="allocating ancilla 't' failed"):
        bf.vjp((np.zeros((B, 3)), np.ones((B, 3)), huge), (np.ones((B, 3)), None, None))
    with pytest.raises(MemoryError, match="allocating ancilla 't' failed"):
        with_scratch(np.zeros(3), np.ones(3), huge)
    assert bf(np.zeros((B, 3)), np.ones((B, 3)), 4)[0].sum() == 3 * B  # and the same call works afterwards


@reversible
def add_three(y):
    """y += 3, called only by the test below: its first call compiles."""
    y += 3.0


def test_running_out_of_memory_while_compiling_is_not_called_the_programs_allocation(monkeypatch, tmp_path):
    """A MemoryError raised by the compiler at a first call passes through as it is: the program
    never ran, so no allocation of its failed. (An empty cache and a function of its own, so that
    the first call compiles.)"""
    from revdiff.targets.llvm import jit as native

    @revdiff.reversible
    def add_four(y):
        y += 4.0

    def no_memory(*args):
        raise MemoryError("the compiler ran out")

    monkeypatch.setenv("REVDIFF_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "_compile", no_memory)
    with pytest.raises(MemoryError, match="^the compiler ran out$"):
        add_four(0.0)
    monkeypatch.undo()
    assert add_four(0.0) == (4.0,)


def test_the_element_whose_allocation_fails_is_the_one_named():
    """Element entries let a failed allocation leave their loop; the caller names the element it
    stopped (the last its part of the batch started), whichever part of the batch it lies in."""
    bf = revdiff.batched(with_scratch, ("y", "x", "n"), layout="elements")
    B = 64
    for bad in (0, 5, B // 2 + 1, B - 1):
        n = np.full(B, 4)
        n[bad] = 1 << 50  # 8 PiB
        with pytest.raises(MemoryError, match=rf"allocating ancilla 't' failed.* in batch element {bad}\b"):
            bf(np.zeros((B, 3)), np.ones((B, 3)), n)
    y, x, n = bf(np.zeros((B, 3)), np.ones((B, 3)), np.full(B, 4))
    assert y.sum() == 3 * B
    for call in (lambda: bf(np.zeros((1, 3)), np.ones((1, 3)), np.full(1, 1 << 50)),  # one element: no entry
                 lambda: bf.vjp((np.zeros((1, 3)), np.ones((1, 3)), np.full(1, 1 << 50)), (np.ones((1, 3)), None, None))):
        with pytest.raises(MemoryError, match=r"allocating ancilla 't' failed.* in batch element 0\b"):
            call()


# ----------------------------------------------------------------------------- globals and calls

SCALE = 2.0


@reversible
def scaled_inner(y, x):
    for i in range(len(x)):
        y[i] += SCALE * x[i]


@reversible
def scaled_outer(y, x):
    scaled_inner(y, x)


def test_a_changed_global_is_read_again_by_calls_and_batches():
    global SCALE
    bf = revdiff.batched(scaled_outer, ("y", "x"))
    try:
        assert scaled_outer(np.zeros(2), np.ones(2))[0].tolist() == [2.0, 2.0]
        assert bf(np.zeros((3, 2)), np.ones((3, 2)))[0][0].tolist() == [2.0, 2.0]
        SCALE = 3.0
        assert scaled_outer(np.zeros(2), np.ones(2))[0].tolist() == [3.0, 3.0]
        assert bf(np.zeros((3, 2)), np.ones((3, 2)))[0][0].tolist() == [3.0, 3.0]
        _, pullback = revdiff.vjp(scaled_outer, np.zeros(2), np.ones(2))
        assert pullback(np.ones(2), None)[1].tolist() == [3.0, 3.0]
    finally:
        SCALE = 2.0


def test_recursion_is_refused_with_the_line_of_the_call():
    @reversible
    def itself(y):
        itself(y)
    with pytest.raises(revdiff.ReversibilityError, match=r"line \d+.*'itself' calls itself: recursion is not "
                                                         "supported"):
        itself(np.zeros(2))


def test_a_long_chain_of_calls_compiles(tmp_path):
    """60 levels of calls, each a callee the next one inlines or calls, compile on a cold cache (the
    passes recurse through the chain)."""
    lines = ["import numpy as np", "from revdiff import reversible", "", "@reversible", "def f0(y, x):",
             "    y += 2.0 * x"]
    for k in range(1, 60):
        lines += ["@reversible", f"def f{k}(y, x):", f"    f{k - 1}(y, x)"]
    lines += ["print(f59(0.0, 1.5)[0])"]
    script = tmp_path / "chain.py"
    script.write_text("\n".join(lines) + "\n")
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "3.0"


# ----------------------------------------------------------------------------- runtime failures

@reversible
def late_failure(y, x, d):
    for i in range(len(x)):
        y[i] += x[i]
    for i in range(len(x)):
        y[i] /= d


def test_a_late_failure_says_the_arrays_hold_partial_results():
    y = np.zeros(3)
    with pytest.raises(revdiff.ReversibilityError, match="'y', which it updates in place, may hold partial results"):
        late_failure(y, np.ones(3), 0.0)


@reversible
def spin(x, k):
    while (k > 0, x > 0):
        x += 1.0


def test_ctrl_c_stops_an_endless_while_loop():
    spin(0.0, 0)  # compiled
    # Python's own Ctrl-C handler: torch.compile's inductor, run earlier in the session, replaces it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt, match="interrupted inside a while loop"):
            spin(0.0, 1)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)


# ----------------------------------------------------------------------------- the cache directory

def test_an_unusable_cache_directory_is_named(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = textwrap.dedent("""
        import numpy as np
        from revdiff import reversible
        @reversible
        def f(y):
            y += 1.0
        f(0.0)
    """)
    script = tmp_path / "use.py"
    script.write_text(code)
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(blocker / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode != 0
    assert "CacheDirectoryError" in done.stderr and "REVDIFF_CACHE_DIR" in done.stderr


def test_the_cache_directory_error_is_public_and_an_oserror(tmp_path, monkeypatch):
    """Callers catch it as ``revdiff.CacheDirectoryError`` (or as the OSError it is)."""
    from revdiff.runtime.cache import cache_dir
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("REVDIFF_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(revdiff.CacheDirectoryError, match="REVDIFF_CACHE_DIR") as caught:
        cache_dir()
    assert isinstance(caught.value, OSError)


def test_compiled_helpers_cache_in_the_cache_directory_not_beside_the_package_or_home(tmp_path):
    """revdiff's own compiled loops (the scans of large inputs) write their cache files under
    REVDIFF_CACHE_DIR, also with no writable home, so removing that directory removes them all."""
    code = textwrap.dedent("""
        import numpy as np
        from revdiff.programs.scan import largest_per_element
        print(largest_per_element(np.ones((1 << 17, 2))).max())
    """)
    script = tmp_path / "use.py"
    script.write_text(code)
    cache = tmp_path / "cache"
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(cache), HOME=str(tmp_path / "nohome"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "1.0"
    assert any((cache / "native").glob("largest_by_row*.o"))
    assert not (tmp_path / "nohome").exists()


def test_cache_files_are_readable_by_others(tmp_path):
    from revdiff.runtime import cache
    target = tmp_path / "x.py"
    old = os.umask(0o022)
    try:
        cache.write_atomically(target, b"x = 1\n")
    finally:
        os.umask(old)
    assert target.read_bytes() == b"x = 1\n" and target.stat().st_mode & 0o777 == 0o644


def test_under_an_address_space_limit_a_batched_gradient_is_right_or_a_memory_error(tmp_path):
    """With little memory left, a batched projection gradient either returns the right values or
    raises MemoryError: never wrong values, never a hang."""
    code = textwrap.dedent("""
        import resource
        import numpy as np
        from revdiff import programs as P
        rng = np.random.default_rng(0)
        A, y = rng.standard_normal((3000, 64, 32)), rng.standard_normal((3000, 64))
        want = P.project_vjp(A[:400], y[:400], y[:400])[0]  # compiled, and the reference
        usage = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
        outcomes = []
        for extra in (20, 60, 120, 400):
            resource.setrlimit(resource.RLIMIT_AS, (usage + extra * 2 ** 20, resource.RLIM_INFINITY))
            try:
                gA = P.project_vjp(A, y, y)[0]
                outcomes.append("right" if np.array_equal(gA[:400], want) else "WRONG")
            except MemoryError:
                outcomes.append("MemoryError")
            resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print(" ".join(outcomes))
    """)
    script = tmp_path / "limited.py"
    script.write_text(code)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = done.stdout.split()
    assert len(outcomes) == 4 and "WRONG" not in outcomes, outcomes


# ----------------------------------------------------------------------------- more attacks

def test_columns_and_vectors_of_extreme_magnitudes_are_scaled_one_by_one():
    A = np.array([[1e300, 0.0], [0.0, 1e-300], [0.0, 0.0]])  # one scale per matrix would flush a column
    Q, R = P.qr(A)
    np.testing.assert_allclose(Q, np.eye(3)[:, :2], atol=1e-15)
    np.testing.assert_allclose(np.diag(R), [1e300, 1e-300], rtol=1e-15)
    np.testing.assert_allclose(P.project(np.ones((2, 1)), np.full(2, 1.5e308)), np.full(2, 1.5e308), rtol=1e-15)
    scales = np.array([1e200, 1e-250, 1e300])
    B = rng.standard_normal((6, 3))
    y = rng.standard_normal(6)
    gA, gy = P.project_vjp(B * scales, y, y)
    gA1, gy1 = P.project_vjp(B, y, y)
    np.testing.assert_allclose(gA * scales, gA1, rtol=1e-12)
    np.testing.assert_allclose(P.lstsq(B * scales, y) * scales, P.lstsq(B, y), rtol=1e-12)
    np.testing.assert_allclose(P.tangent_project(np.full(4, 1e308), np.ones(4)), 0.0, atol=1e293)


def test_a_real_argument_gets_a_real_gradient_when_the_other_is_complex():
    A, y = rng.standard_normal((4, 2)), rng.standard_normal(4) + 1j * rng.standard_normal(4)
    gA, gy = P.project_vjp(A, y, y)
    assert gA.dtype == np.float64 and gy.dtype == np.complex128
    V, h = rng.standard_normal((4, 2)), 1e-6
    loss = lambda M: np.real(np.vdot(y, P.project(M, y)))  # noqa: E731
    assert abs((loss(A + h * V) - loss(A - h * V)) / (2 * h) - np.sum(gA * V)) < 1e-8
    gg, gz = P.tangent_project_vjp(y, np.abs(y), y)
    assert gz.dtype == np.float64


def test_integer_products_and_quotients_that_would_wrap_are_refused():
    @reversible
    def scale(a, s):
        for i in range(len(a)):
            a[i] *= s

    @reversible
    def divide(a, s):
        for i in range(len(a)):
            a[i] /= s
    assert scale(np.array([3, -64], np.int8), 2)[0].tolist() == [6, -128]
    for args in ((np.array([64], np.int8), 2), (np.array([128], np.uint8), 300), (np.array([2 ** 62]), 2),
                 (np.array([-1]), -2 ** 63)):
        with pytest.raises(revdiff.ReversibilityError, match="the product does not fit"):
            scale(*args)
    with pytest.raises(revdiff.ReversibilityError, match="wraps around"):
        divide(np.array([-2 ** 63]), -1)
    for uint64 in (np.array([7], np.uint64), np.uint64(2 ** 63 + 10)):  # would compute as negative int64
        with pytest.raises(TypeError, match="uint64 is not supported .* convert it to int64"):
            scale(uint64, 2)


def test_integer_arrays_of_the_other_signedness_are_refused():
    @reversible
    def add(y, x):
        for i in range(len(x)):
            y[i] += x[i]
    with pytest.raises(revdiff.ReversibilityError, match="uint32 values of 'x'"):
        add(np.zeros(2, np.int32), np.ones(2, np.uint32))
    assert add(np.zeros(2, np.int64), np.ones(2, np.uint32))[0].tolist() == [1, 1]

    @reversible
    def gather(y, x, k):
        for i in range(len(y)):
            y[i] += x[k[i]] if k[i] >= 0 else 0.0
    out = gather(np.zeros(2, np.float32), np.ones(3, np.float32), np.array([2, -1]))[0]  # int64 indices are fine
    assert out.tolist() == [1.0, 0.0]


def test_a_pullback_keeps_the_program_its_forward_ran():
    global SCALE
    try:
        _, pullback = revdiff.vjp(scaled_outer, np.zeros(3), np.ones(3))
        SCALE = 5.0
        assert pullback(np.ones(3), None)[1].tolist() == [2.0, 2.0, 2.0]
        assert scaled_outer(np.zeros(3), np.ones(3))[0].tolist() == [5.0, 5.0, 5.0]
    finally:
        SCALE = 2.0


def test_recursion_closed_by_rebinding_a_name_is_refused(tmp_path):
    script = tmp_path / "rebind.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        import revdiff
        from revdiff import reversible

        @reversible
        def p(y):
            y[0] += 1.0

        @reversible
        def q(y):
            p(y)

        q(np.zeros(1))

        @reversible
        def p(y):
            q(y)

        try:
            q(np.zeros(1))
        except revdiff.ReversibilityError as exc:
            print(str(exc).splitlines()[0])
    """))
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert "q -> p -> q calls back into itself" in done.stdout, done.stderr[-2000:]


def test_odd_scalar_arguments_are_named():
    @reversible
    def axpy(y, x, a):
        for i in range(len(x)):
            y[i] += a * x[i]
    for a, what in ((2 ** 70, "does not fit in int64"), (np.float16(2), "dtype float16"),
                    (np.longdouble(2), "is not supported")):
        with pytest.raises(TypeError, match=f"argument 'a' of .*axpy\\(\\): .*{what}"):
            axpy(np.zeros(3), np.ones(3), a)
    with pytest.raises(MemoryError, match="allocating ancilla 't' failed"):
        with_scratch(np.zeros(3), np.ones(3), 2 ** 62)  # calloc fails: named, not a ValueError


def test_grad_and_vjp_arguments_are_checked():
    @reversible
    def dot(s, x, y):
        for i in range(len(x)):
            s += x[i] * y[i]
    x = np.ones(2)
    for loss in (None, ["s"], 1.0, True):
        with pytest.raises(TypeError, match="loss must name a parameter"):
            revdiff.grad(dot, loss)
    with pytest.raises(TypeError, match="differentiates reversible functions"):
        revdiff.grad(lambda s: s, "s")
    with pytest.raises(TypeError, match="cotangent for 's' must be a number or an array"):
        revdiff.vjp(dot, 0.0, x, x)[1]("a", None, None)


def test_torch_double_backward_through_the_cotangent():
    torch = pytest.importorskip("torch")
    import revdiff.torch as rt
    A = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    y = torch.ones(5, dtype=torch.float64)
    (gA,) = torch.autograd.grad(w * rt.project(A, y).sum(), A, create_graph=True)
    (gw,) = torch.autograd.grad(gA.sum() + w ** 2, w)  # gA is linear in w: d(sum gA)/dw = sum(gA) / w
    torch.testing.assert_close(gw, gA.sum().detach() / w.detach() + 2 * w.detach(), rtol=1e-13, atol=1e-13)
    with pytest.raises(TypeError, match="'A' is a torch.sparse_coo tensor"):
        rt.project(A.detach().to_sparse(), torch.ones(5, dtype=torch.float64))


@pytest.mark.parametrize("target", ["source", "compiled"])
def test_a_cache_entry_replaced_by_a_directory_is_rebuilt(tmp_path, target):
    script = tmp_path / "use.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        from revdiff import reversible
        @reversible
        def f(y, x):
            for i in range(len(x)):
                y[i] += 3.0 * x[i]
        print(f(np.zeros(2), np.ones(2))[0].tolist())
    """))
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    run = lambda: subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,  # noqa
                                 timeout=600)
    assert run().stdout.strip() == "[3.0, 3.0]"
    for path in (tmp_path / "cache").rglob("*.py" if target == "source" else "*.nbc"):
        path.unlink()
        path.mkdir()
    done = run()
    assert done.returncode == 0 and done.stdout.strip() == "[3.0, 3.0]", done.stderr[-2000:]


@pytest.mark.parametrize("options, message", [
    (["--seed", "-1"], "--seed must be a non-negative integer"),
    (["--shape", "100000000000x2"], "at most 250,000 entries"),
    (["--shape", "16x32"], "needs a tall A"),
    (["--shape", "32"], "--shape takes MxN"),
    (["--loss", "sphere", "--shape", "1"], "at least 2 entries"),
    (["--methods", "foo"], "unknown 'foo'"),
    (["--conds", "x"], "--conds takes condition numbers"),
    (["--batch", "0"], "--batch must be at least 1"),
    (["--threads", "0"], "--threads must be at least 1"),
    (["--plot", "out.xyz"], "name a file ending in one of"),
    (["--plot", "/nonexistent/dir/x.png"], "cannot write a file there")])
def test_compare_refuses_what_it_cannot_run_before_running(options, message, capsys):
    from revdiff.tools.cli import main
    with pytest.raises(SystemExit) as exit_info:
        main(["compare"] + options)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_version(capsys):
    from revdiff.tools.cli import main
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"revdiff {revdiff.__version__}"


def test_every_option_of_the_command_line_has_help():
    import argparse
    from revdiff.tools import bench, compare
    for add in (compare.add_arguments, bench.add_arguments):
        parser = argparse.ArgumentParser()
        add(parser)
        missing = [a.dest for a in parser._actions if not a.help]
        assert not missing, f"{add.__module__}: no help for {missing}"


@reversible
def named_like_entry_arguments(x, g_x, out_x, d_x, d_g_x, dout_x):
    x += g_x * out_x
    d_x += d_g_x * dout_x


def test_parameters_named_like_an_entry_s_arguments_run_batched_as_they_run_alone():
    """An entry's gradients, saved outputs and tangents are named in a space no user's name reaches
    (``ir/entries.ENTRY_PREFIXES``): a function whose parameters read like them batches, with the
    single calls' results, in lanes and element by element."""
    B = 9
    args = tuple(rng.standard_normal(B) for _ in range(6))
    cotangents, tangents = tuple(rng.standard_normal(B) for _ in range(6)), tuple(rng.standard_normal(B) for _ in range(6))
    for layout in ("elements", "lanes"):
        bf = revdiff.batched(named_like_entry_arguments, named_like_entry_arguments.parameter_names, layout=layout)
        outs, grads, out_tangents, grad_tangents = bf.vjp_jvp(args, cotangents, tangents)
        for b in range(B):
            single = revdiff.vjp_jvp(named_like_entry_arguments, [a[b] for a in args], [c[b] for c in cotangents],
                                     [t[b] for t in tangents])
            for got, want in zip((outs, grads, out_tangents, grad_tangents), single):
                np.testing.assert_allclose([g[b] for g in got], want, rtol=1e-15)


def test_the_default_ancilla_tolerance_admits_rounding_and_no_more():
    """rtol defaults to 1024 machine epsilons of the ancilla's type: a sum of a thousand terms
    uncomputed in the other order (rounding) passes; a release off by 1e-10 relative (a million ulps
    of nothing but a wrong program) is refused; float32 data, 1.2e-4."""
    @reversible
    def sum_and_back(x, out):
        s = zero()
        for i in range(len(x)):
            s += x[i]
        out[0] += s * 2.0
        for i in range(len(x) - 1, -1, -1):  # another order: rounding leaves s a few ulps off zero
            s -= x[i]
        del s

    x = np.random.default_rng(3).standard_normal(1000) * 1e4
    for dtype, rel in ((np.float64, 1e-12), (np.float32, 1e-4)):
        out = np.zeros(1, dtype)
        sum_and_back(x.astype(dtype), out)
        assert out[0] == pytest.approx(2 * x.sum(), rel=rel)

    @reversible
    def off_by(x, y, eps):
        t = ancilla(x)
        y += t
        x += eps
        release(t, x)

    assert off_by(1e4, 0.0, 0.0) == (1e4, 1e4, 0.0)
    with pytest.raises(revdiff.ReversibilityError, match=r"rtol=2\.27374e-13"):
        off_by(1e4, 0.0, 1e-6)
    assert revdiff.reversible(off_by.py_function, rtol=1e-9)(1e4, 0.0, 1e-7)[0] == 1e4 + 1e-7

    @reversible
    def wrong_uncompute(x, y):  # subtracts 1.5 x² where it added x²
        t = zero()
        t += x * x
        y += t * 1e6
        t -= x * x * 1.5
        del t

    for x in (1.0, 1e-3):
        with pytest.raises(revdiff.ReversibilityError, match="ancilla 't' is not zero"):
            wrong_uncompute(x, 0.0)
    wrong_uncompute(1e-7, 0.0)  # below atol (1e-12, absolute): passes, as the README says
    with pytest.raises(revdiff.ReversibilityError, match="ancilla 't' is not zero"):
        wrong_uncompute.with_options(atol=0.0)(1e-7, 0.0)


def test_numpy_scalars_keep_their_types():
    """A NumPy scalar computes in its dtype and comes back a NumPy scalar of it, from a call, its
    inverse and a vjp (as NumPy 2 keeps ``np.int32(1) + 1`` an int32); ``+=`` past its range wraps
    around as NumPy's does and the inverse wraps back; a ``*=`` that would wrap (not invertible)
    raises, as on an array element."""
    @reversible
    def bump(a, b, c, d, e):
        a += 1
        b += 1.5
        c += 1.0
        d ^= True
        e += 2.0

    args = (np.int32(1), np.float32(1), np.float64(1), np.bool_(False), np.complex64(1))
    for out in (bump(*args), (~bump)(*args), revdiff.vjp(bump, *args)[0]):
        assert [type(v) for v in out] == [type(a) for a in args]
    assert bump(*args) == (2, 2.5, 2.0, True, 3.0)
    grads = revdiff.vjp(bump, *args)[1](None, np.float32(1), 1.0, None, np.complex64(1))
    assert [type(g) for g in grads] == [type(None), np.float32, np.float64, type(None), np.complex64]
    assert revdiff.vjp(bump, *args)[1](None, None, None, None, 1 + 1j)[4] == np.complex64(1 + 1j)  # complex seed
    assert [type(v) for v in bump(1, 1.0, 1.0, False, 1j)] == [int, float, float, bool, complex]
    top = np.int32(2 ** 31 - 1)
    wrapped = bump(top, *args[1:])[0]
    assert wrapped == np.int32(-2 ** 31) and type(wrapped) is np.int32
    assert (~bump)(wrapped, *args[1:])[0] == top

    @reversible
    def scale(s, t):
        s *= t

    assert scale(np.uint8(3), 2) == (6, 2) and type(scale(np.uint8(3), 2)[0]) is np.uint8
    with pytest.raises(revdiff.ReversibilityError, match="the product does not fit in uint8"):
        scale(np.uint8(200), 2)


def _module_from_source(tmp_path, name: str, source: str):
    import importlib.util
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_deep_expressions_compile_in_time_linear_in_their_size(tmp_path):
    """A sum of 700 terms (an expression 700 levels deep, which Python compiles) decorates, runs and
    differentiates, each subexpression typed once (not twice per level: exponential), and the
    adjoint's walk types the whole once (not once per level: quadratic); 21 nested sin as well."""
    terms = " + ".join(f"x[{k % 4}] * {k + 1}.0" for k in range(700))
    nested = "x[0]"
    for _ in range(21):
        nested = f"np.sin({nested})"
    module = _module_from_source(tmp_path, "deep_sums", textwrap.dedent(f"""
        import numpy as np
        import revdiff

        @revdiff.reversible
        def long_sum(s, x):
            s += {terms}

        @revdiff.reversible
        def nested_sines(s, x):
            s += {nested}
    """))
    x = np.array([1.0, 2.0, 3.0, 4.0])
    weights = np.array([sum(k + 1.0 for k in range(700) if k % 4 == j) for j in range(4)])
    started = time.perf_counter()
    assert module.long_sum(0.0, x)[0] == pytest.approx(weights @ x, rel=1e-14)
    np.testing.assert_allclose(revdiff.grad(module.long_sum, 0)(0.0, x)[1], weights, rtol=1e-15)
    value, grad = 1.0, 1.0
    for _ in range(21):
        grad *= math.cos(value)
        value = math.sin(value)
    assert module.nested_sines(0.0, x)[0] == pytest.approx(value, rel=1e-15)
    assert revdiff.grad(module.nested_sines, 0)(0.0, x)[1][0] == pytest.approx(grad, rel=1e-13)
    tangent = revdiff.jvp(module.long_sum, (0.0, x), (0.0, np.ones(4)))[1][0]  # forward mode walks it once too
    assert tangent == pytest.approx(weights.sum(), rel=1e-14)
    assert time.perf_counter() - started < 30  # 0.5 s on a 2-core VM; the quadratic walk took minutes


def test_an_expression_too_deep_to_compile_is_refused_by_name(tmp_path):
    """Beyond the raised recursion limit, a ReversibilityError naming the function and the way out
    (split the statement), not a bare RecursionError from an AST visitor."""
    terms = " + ".join(f"x[{k % 4}]" for k in range(5000))
    source = f"import revdiff\n\n@revdiff.reversible\ndef too_deep(s, x):\n    s += {terms}\n"
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(8000)  # room for Python to compile the module (its default takes about 2000 terms)
    try:
        with pytest.raises(revdiff.ReversibilityError, match=r"too_deep nests an expression .* split it"):
            module = _module_from_source(tmp_path, "too_deep_sum", source)  # parsed and checked here
            module.too_deep(0.0, np.ones(4))  # or lowered here
    finally:
        sys.setrecursionlimit(saved)


def test_a_callee_rebound_two_calls_deep_changes_what_its_callers_modify(tmp_path):
    """outer calls middle calls inner; inner rebound to another function (with the same constants):
    outer runs the new one (its specialisations are keyed by its callees' functions, not only their
    constants), and its modified parameters follow (gradients' saved outputs and batches rely on them)."""
    module = _module_from_source(tmp_path, "rebound_deep", textwrap.dedent("""
        import revdiff

        @revdiff.reversible
        def inner(a, b):
            a += 2.0 * b

        @revdiff.reversible
        def middle(a, b):
            inner(a, b)

        @revdiff.reversible
        def outer(a, b):
            middle(a, b)
    """))
    assert module.outer(1.0, 3.0) == (7.0, 3.0) and module.outer.modified_positions() == {0}
    grads_before = revdiff.grad(module.outer, 0)(1.0, 3.0)

    @reversible
    def inner(a, b):
        b += 2.0 * a

    module.inner = inner
    assert module.outer(1.0, 3.0) == (1.0, 5.0)
    assert module.outer.modified_positions() == {1}
    assert revdiff.grad(module.outer, 1)(1.0, 3.0) == (2.0, 1.0) and grads_before == (1.0, 2.0)
    with pytest.raises(ValueError, match="'b' is modified by outer"):
        revdiff.batched(module.outer, ["a"])(np.ones(2), np.ones(2))


@reversible
def _dot_into(t, x, y):
    for i in range(len(x)):
        t += x[i] * y[i]


@reversible
def _twice_dot(out, x, y):
    t = zero()
    with revdiff.routine:
        _dot_into(t, x, y)
    out += t * 2.0
    ~revdiff.routine
    del t


def test_an_ancilla_accumulated_in_a_callee_passes_its_rounding():
    """The caller's checks do not see the partial sums inside a call: a dot product of nearly
    orthogonal vectors uncomputes to rounding of the terms' size, far above its own tiny value; the
    default atol covers it for data of order 1 (README, Options)."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        x, y = rng.standard_normal(50), rng.standard_normal(50)
        y -= (y @ x) / (x @ x) * x
        assert _twice_dot(0.0, x, y)[0] == pytest.approx(2 * (x @ y), abs=1e-13)


def test_a_name_bound_to_an_inverse_calls_the_inverse(tmp_path):
    """``hinv = ~h``; ``hinv(y, x)`` inside a function runs h's inverse and ``~hinv`` h, as from
    Python (the direction of the object the name is bound to, not only of the ``~`` written); a
    function defined before the name is bound refuses the call by name, as it does defaults and
    keywords; a later rebinding to the other direction recompiles."""
    module = _module_from_source(tmp_path, "inverse_binding", textwrap.dedent("""
        import revdiff

        @revdiff.reversible
        def defined_first(y, x):  # calls a name bound below, to ~h
            hinv(y, x)

        @revdiff.reversible
        def h(y, x):
            y += 2.0 * x
            y *= x

        hinv = ~h

        @revdiff.reversible
        def backwards(y, x):
            hinv(y, x)

        @revdiff.reversible
        def forwards(y, x):
            ~hinv(y, x)
    """))
    assert module.backwards(21.0, 3.0) == module.hinv(21.0, 3.0) == (1.0, 3.0)
    with pytest.raises(revdiff.ReversibilityError, match="'hinv' is bound to ~h, an inverse, defined after"):
        module.defined_first(21.0, 3.0)  # never h forwards, silently
    assert module.forwards(1.0, 3.0) == (21.0, 3.0)
    assert revdiff.grad(module.backwards, "y")(21.0, 3.0) == pytest.approx((1 / 3, -21 / 9 - 2))
    module.hinv = module.h
    assert module.backwards(1.0, 3.0) == (21.0, 3.0)


def test_rebound_globals_and_constants_out_of_range(tmp_path):
    """A global rebound from 0.0 to -0.0 recompiles (atan2 tells them apart); a name bound to another
    math function (``cos as sin``) is refused, not read as its name; a module rebound to something else
    re-parses; an integer constant outside int64 and a uint64 constant are refused by name."""
    module = _module_from_source(tmp_path, "rebound_globals", textwrap.dedent("""
        import math
        import math as m_
        import revdiff

        z = 0.0

        @revdiff.reversible
        def angle(y, x):
            y += math.atan2(z, x)

        @revdiff.reversible
        def sine(y, x):
            y += m_.sin(x)
    """))
    assert module.angle(0.0, -1.0)[0] == math.pi
    module.z = -0.0
    assert module.angle(0.0, -1.0)[0] == -math.pi
    assert module.sine(0.0, 1.0)[0] == math.sin(1.0)
    module.m_ = None
    with pytest.raises(revdiff.ReversibilityError, match="not a pure function"):
        module.sine(0.0, 1.0)
    for source, what in (("from math import cos as sin\n\n@revdiff.reversible\ndef f(y, x):\n    y += sin(x)\n",
                          "'sin' is not a pure function"),
                         ("@revdiff.reversible\ndef f(s, x):\n    s += x * 9223372036854775808\n",
                          "the integer constant 9223372036854775808 does not fit in int64"),
                         ("import numpy as np\nU = np.uint64(5)\n\n@revdiff.reversible\ndef f(s, x):\n    s += x * U\n",
                          "uint64 is not supported")):
        with pytest.raises(revdiff.ReversibilityError, match=what):
            _module_from_source(tmp_path, f"refused_{abs(hash(source))}", "import revdiff\n" + source).f(0.0, 1.0)


def test_a_parameter_named_like_an_hvp_entry_s_argument_runs_batched():
    """``d_g_x`` reads like the tangent of x's gradient in an hvp entry, whose arguments are named
    where no user's name reaches: it batches as it runs alone."""
    @reversible
    def f(s, x, d_g_x):
        s += x * x * d_g_x

    args = (np.zeros(3), np.arange(3.0), np.ones(3) * 2)
    got = revdiff.batched(f, ["s", "x", "d_g_x"]).hvp("s", args, (None, np.ones(3), None))
    np.testing.assert_allclose(got[1], 2 * args[2])  # d²(x² c)/dx² = 2c


def test_bench_compares_one_core_with_one_core_in_a_pinned_process():
    """``revdiff bench``'s one-core run: a fresh process on one CPU whose libraries all run one thread,
    its rows as the all-core run's."""
    from revdiff.tools import bench
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("pinning to one CPU needs os.sched_setaffinity (Linux)")
    rows, gemm = bench.one_core([(3, 6, 4)], [np.float64], ["projection"], 1, 64)
    assert list(gemm) == ["float64"] and gemm["float64"] > 0
    assert [(r["loss"], r["B"], r["dtype"]) for r in rows] == [("projection", 3, "float64")]
    assert {"revdiff cgs2", "revdiff bcgs2", "numpy formula"} <= set(rows[0]["times"])
    out = io.StringIO()  # the default's ratio, read off the method it runs at the shape (cgs2 at 6 x 4)
    bench.report(rows, gemm, {}, out)
    t = rows[0]["times"]
    fastest = min(v for k, v in t.items() if not k.startswith("revdiff"))
    assert f"| {fastest / t['revdiff cgs2']:.2f} (cgs2) |" in out.getvalue()
    row = {"loss": "qr", "dtype": "float64", "B": 2, "m": 256, "n": 128, "ran": {},  # from 128 columns: householder
           "times": {"revdiff cgs2": 4.0, "revdiff householder": 2.0, "numpy formula": 1.0}}
    out = io.StringIO()
    bench.report([row, dict(row, dtype="float32")], {"float64": 10.0, "float32": 20.0}, {}, out)
    header, rule, line, line32 = out.getvalue().strip().splitlines()[-4:]
    assert "| 0.50 (householder) |" in line and header.count("|") == rule.count("|") == line.count("|")
    rate = 2 * bench.reversible_flops("qr", 256, 128) / 4.0 / 1e9  # each dtype against its own gemm's rate
    assert f"{rate:.2f} ({100 * rate / 10:.0f}%) |" in line and f"{rate:.2f} ({100 * rate / 20:.0f}%) |" in line32


@pytest.mark.parametrize("where", ["A", "y"])
def test_a_complex_nan_with_a_finite_real_part_is_refused(where):
    A = np.array([[1, 0], [0, 1], [1, 1]], complex)
    y = np.array([1.0, 2.0, 3.0], complex)
    if where == "A":
        A[2, 1] = complex(1, np.nan)
    else:
        y[1] = complex(2, np.nan)
    for call in (lambda: P.project(A, y), lambda: P.project(A, y, rank_deficient="truncate"),
                 lambda: P.project_vjp(A, y, y), lambda: P.lstsq(A, y)):
        with pytest.raises(ValueError, match=f"'{where}' contains NaN or Inf"):
            call()
    if where == "A":
        with pytest.raises(ValueError, match="'A' contains NaN or Inf"):
            P.rank(A)
    with pytest.raises(ValueError, match="'x' contains NaN or Inf"):
        P.normalize(np.array([0, complex(0, np.nan)]))


def test_a_non_finite_cotangent_is_named_when_scanned_with_the_inputs():
    A, y, gz = rng.standard_normal((3, 6, 4)), rng.standard_normal((3, 6)), rng.standard_normal((3, 6))
    gz[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"'gz' contains NaN or Inf \(at batch index \(2,\)\)"):
        P.project_vjp(A, y, gz)
    gz[2, 1], y[1, 0] = 1.0, np.inf
    with pytest.raises(ValueError, match=r"'y' contains NaN or Inf \(at batch index \(1,\)\)"):
        P.project_vjp(A, y, gz)
    y[1, 0], gz[0] = 1.0, 2.0 ** -1000  # a cotangent below 2**-500: scaled, the gradient linear in it
    from revdiff.programs.api import _with_vector
    from revdiff.programs.arguments import Vectors, scanned
    M, Y = _with_vector(A, y, scan=False)
    G = Vectors("gz", gz, M, M.batch + (M.m,), cotangent=True, scan=False)
    with pytest.raises(AttributeError, match="scan=False and never scanned"):
        G.e
    scanned(M, Y, G)
    assert M.e is None and Y.e is None and G.e.tolist() == [-999, 0, 0]  # 2**-1000 * 2**1000 = 0.5 * 2 ...
    gA, gy = P.project_vjp(A, y, gz)
    gA1, gy1 = P.project_vjp(A[:1], y[:1], np.ones((1, 6)))
    np.testing.assert_allclose(gA[0] * 2.0 ** 1000, gA1[0], rtol=1e-13)


def test_non_native_byte_order_is_refused_by_a_batch_of_one_every_time():
    """A batch of one runs its program unchecked only when found by its arguments' kinds, which
    big-endian arrays never have: they are refused (the high-level functions convert them)."""
    x, y = rng.standard_normal((1, 3)), np.zeros((1, 3))
    f = revdiff.batched(P.gram_schmidt.norm2, ("nrm", "v"))
    for _ in range(2):  # the second time after a native call of the same kinds
        with pytest.raises(TypeError, match="non-native byte order"):
            f(np.zeros(1).astype(">f8"), x.astype(">f8"))
        f(np.zeros(1), x)
    np.testing.assert_allclose(P.project(x.T.astype(">f8"), x[0].astype(">f8")), x[0], rtol=1e-14)


@pytest.mark.parametrize("case", ["same", "view", "overlap", "read-only", "strided", "separate"])
def test_the_validation_shortcut_accepts_nothing_the_full_checks_refuse(case):
    from revdiff.calls import _separate_host_arrays, validate
    f = P.project_cgs2
    z, R, A, y = np.zeros((1, 6)), np.zeros((1, 3, 3)), rng.standard_normal((1, 6, 3)), rng.standard_normal((1, 6))
    base = np.zeros(40)
    args = {"same": (z, R, A, z), "view": (z, R, A, z[:, ::2]), "overlap": (base[:6][None], R, A, base[3:9][None]),
            "read-only": (np.zeros((1, 6)), R, A, y), "strided": (base[::2][:6][None], R, A, y),
            "separate": (z, R, A, y)}[case]
    if case == "read-only":
        args[0].flags.writeable = False
    modified = f.forward_function.modified_positions()
    try:
        validate(f, args)
        refused = False
    except (ValueError, revdiff.ReversibilityError):
        refused = True
    assert not (refused and _separate_host_arrays(args, modified))
    assert refused == (case in ("same", "view", "overlap", "read-only"))
