"""Gradients by running programs backwards: inner-product tests for every instruction and
control-flow construct, float64 and complex128, both backends; the vjp/grad API; memory."""
import numpy as np
import pytest

import revdiff
from helpers import assert_gradient, both_backends
from revdiff import reversible, routine, zero, zeros
from test_statements import (add_sub, ancillas, complex_ops, conditionals, float32_ops, inner, loops, mul_div,
                             outer_calls, rotations, swap_neg, while_loop)

rng = np.random.default_rng(1)


def cvec(n):
    return rng.standard_normal(n) + 1j * rng.standard_normal(n)


@reversible
def all_functions(y, x, z):
    y += np.sin(x) * np.cos(z) + np.tan(x / 4) + np.exp(z / 3) + np.log(2.0 + x * x) + np.sqrt(3.0 + z)
    y += np.sinh(x / 2) * np.cosh(z / 2) + np.tanh(x) + np.arctan(z) + x ** 3 / (1.5 + z * z)
    y += x ** z + (x if x > z else z) - (-x)


@reversible
def complex_functions(y, z, w):
    y += np.sin(z) * np.cos(w) + np.exp(z / 3) + np.log(2.0 + z * z) + np.sqrt(3.0 + w) + z ** 3
    y += np.conj(z) * abs(w) + z.real * w.imag + np.sinh(w) / (2.0 + np.cosh(z))


@reversible
def binding_gradient(y, dt, x):
    h = 0.5 * dt
    h2 = h * h
    y += x * h2 + h


@reversible
def calls_with_expressions(y, x, c):
    scale_by(y, 2.0 * c + x * x)
    scale_by(y, c)


@reversible
def scale_by(v, s):
    v *= s


@reversible
def xor_and_ints(x, k, flag):
    flag ^= k > 1
    x += k * 0.5
    x *= 1.0 + k


REAL_CASES = [
    (add_sub, (0.5, 0.7, -1.3)),
    (all_functions, (0.1, 0.6, 0.4)),
    (mul_div, (3.0, 0.4)),
    (swap_neg, (1.5, -2.5, np.array([1.0, 2.0, 3.0]))),
    (rotations, (1.0, 0.5, np.array([1.0, 2.0, 3.0]), 0.3)),
    (loops, (0.3, np.arange(1.0, 8.0))),
    (conditionals, (1.0, 0.5, 1)),
    (conditionals, (-1.0, 0.5, -1)),
    (while_loop, (1.2, 0, 4)),
    (ancillas, (0.0, 2.0, np.arange(6.0).reshape(2, 3))),
    (outer_calls, (0.5, np.arange(12.0).reshape(3, 4), np.array([1.0, -1.0, 2.0]), 2)),
    (binding_gradient, (0.1, 0.3, 1.7)),
    (calls_with_expressions, (0.8, 0.6, 1.3)),
    (xor_and_ints, (0.7, 3, False)),
]

COMPLEX_CASES = [
    (complex_functions, (0.1 + 0.2j, 0.6 - 0.3j, 0.4 + 0.1j)),
    (complex_ops, (1 + 2j, 0.5 - 1j, 0.7)),
    (mul_div, (3.0 + 1j, 0.4 - 0.2j)),
    (swap_neg, (1.5 + 1j, -2.5j, cvec(3))),
    (rotations, (1.0 + 1j, 0.5 - 2j, cvec(3), 0.3)),
    (loops, (0.3j, cvec(7))),
    (ancillas, (0.0j, 2.0 + 0.5j, cvec(6).reshape(2, 3))),
    (outer_calls, (0.5j, cvec(12).reshape(3, 4), cvec(3), 2)),
    (calls_with_expressions, (0.8 + 0.1j, 0.6 - 0.2j, 1.3 + 0.5j)),
]


def _id(case):
    return case[0].__name__


@pytest.mark.parametrize("backend", ["llvm", "python"])
@pytest.mark.parametrize("case", REAL_CASES, ids=[_id(c) for c in REAL_CASES])
def test_gradient_real(case, backend):
    f, args = case
    assert_gradient(f.with_options(backend=backend), *args)


@pytest.mark.parametrize("backend", ["llvm", "python"])
@pytest.mark.parametrize("case", COMPLEX_CASES, ids=[_id(c) for c in COMPLEX_CASES])
def test_gradient_complex(case, backend):
    f, args = case
    assert_gradient(f.with_options(backend=backend), *args)


def test_gradient_of_inverse_function():
    assert_gradient(~mul_div, 3.0, 0.4)
    assert_gradient(~loops, 0.3, np.arange(1.0, 8.0))


def test_float32_gradient():
    # float32 differences: eps 1e-2 keeps rounding error (u/eps ~ 1e-5) small; the map is linear
    assert_gradient(float32_ops, np.arange(4, dtype=np.float32), 0.5, tol=1e-3, eps=1e-2)


def test_backends_give_identical_gradients():
    args = (0.5, np.arange(12.0).reshape(3, 4), np.array([1.0, -1.0, 2.0]), 2)
    a, b = (revdiff.vjp(f, *args)[1](1.0, np.ones((3, 4)), np.ones(3), None) for f in both_backends(outer_calls))
    for x, y in zip(a, b):
        if x is not None:
            np.testing.assert_allclose(x, y, rtol=1e-14)


def test_complex_convention_matches_pytorch():
    # L = |z|^2 = x^2 + y^2: PyTorch's gradient is dL/dx + i dL/dy = 2 z
    @reversible
    def sq(L, z):
        L += (z * np.conj(z)).real

    g = revdiff.grad(sq, "L")(0.0, 1.0 + 2.0j)
    assert g[0] == 1.0
    assert g[1] == pytest.approx(2.0 + 4.0j)


def test_vjp_does_not_modify_inputs_and_recovers_them():
    x = np.arange(1.0, 5.0)
    outs, pullback = revdiff.vjp(inner, 0.0, x, x * 2)
    np.testing.assert_array_equal(x, np.arange(1.0, 5.0))
    assert outs[0] == pytest.approx(2 * (x @ x))
    gs, gx, gy = pullback(1.0, None, None)
    assert gs == 1.0
    np.testing.assert_allclose(gx, 2 * x)
    np.testing.assert_allclose(gy, x)
    again = pullback(2.0, np.zeros(4), np.zeros(4))  # the pullback can be called again
    np.testing.assert_allclose(again[1], 4 * x)


def test_grad_returns_none_for_integers():
    g = revdiff.grad(conditionals, loss="x")(1.0, 0.5, 1)
    assert g == (2.0, 2.0, None)
    assert revdiff.grad(conditionals, loss=0)(1.0, 0.5, 1) == g


def test_grad_argument_errors():
    with pytest.raises(ValueError, match="not a parameter"):
        revdiff.grad(conditionals, loss="q")
    with pytest.raises(TypeError, match="must be a real scalar"):
        revdiff.grad(inner, loss="x")(0.0, np.ones(2), np.ones(2))
    outs, pullback = revdiff.vjp(inner, 0.0, np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match="shape"):
        pullback(1.0, np.ones(3), None)
    with pytest.raises(TypeError, match="takes 3 cotangents"):
        pullback(1.0)


def test_adjoint_source_is_inspectable():
    src = binding_gradient.source("adjoint")
    assert "def binding_gradient_adjoint(y, dt, x, g_y, g_dt, g_x, _err):" in src
    assert "g_h" in src and "g_dt +=" in src


def test_runtime_checks_stay_on_in_the_adjoint():
    @reversible
    def drifting(y, x):
        t = zero()
        t += x
        y += t * 2.0
        t -= x * 1.0000001  # not exactly undone
        del t

    with pytest.raises(revdiff.ReversibilityError, match="not zero at deallocation"):
        revdiff.vjp(drifting, 0.0, 1.0)


def test_an_ancilla_left_holding_an_infinity_fails_its_check():
    """x * 1e30 in float64 stored into a float32 ancilla overflows to inf, and inf - x * 1e30 is inf
    again: a tolerance relative to the largest magnitude held, uncapped, would be infinite and let it
    pass. The same program where nothing overflows answers, and so does an ancilla back to zero whose
    scale an infinite operand raised (min(x, cap) with cap = inf; a dot product of max and 0)."""
    @reversible
    def scaled_square(y, x):
        t = zero(x.dtype)
        with routine:
            t += x * 1e30
        y += t * t
        ~routine
        del t

    y = np.zeros(1, np.float32)[0]
    assert np.isfinite(scaled_square(y, np.float32(1e-20))[0])
    with pytest.raises(revdiff.ReversibilityError, match="at most the largest float"):
        scaled_square(y, np.float32(1e10))
    assert capped_square(0.0, 2.0, np.inf)[0] == 4.0
    big = np.finfo(np.float64).max
    assert dot_square(0.0, np.array([big, 0.0]), np.array([0.0, 1e10]))[0] == 0.0


@reversible
def clipped_into(t, x, cap):
    t += min(x, cap)


@reversible
def capped_square(y, x, cap):
    t = zero()
    with routine:
        clipped_into(t, x, cap)
    y += t * t
    ~routine
    del t


@reversible
def dot_square(y, a, b):
    s = zero(a.dtype)
    with routine:
        s += np.dot(a, b)
    y += s * s
    ~routine
    del s


@reversible
def long_loop(s, x, n):
    for i in range(n):
        t = zero()
        with routine:
            t += np.sin(x * i)
        s += t * t
        ~routine
        del t


def _peak_pullback_memory(n):
    import tracemalloc
    outs, pullback = revdiff.vjp(long_loop, 0.0, 0.3, n)
    pullback(1.0, 0.0, None)  # compile outside the measurement
    tracemalloc.start()
    pullback(1.0, 0.0, None)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def test_pullback_memory_does_not_grow_with_iterations():
    small, large = _peak_pullback_memory(10 ** 3), _peak_pullback_memory(10 ** 6)
    assert large <= small * 1.1 + 1024, (small, large)


def test_long_loop_gradient_matches_closed_form():
    n = 50
    g = revdiff.grad(long_loop, "s")(0.0, 0.3, n)[1]
    want = sum(2 * np.sin(0.3 * i) * np.cos(0.3 * i) * i for i in range(n))
    assert g == pytest.approx(want, rel=1e-12)


def test_array_ancilla_gradient():
    @reversible
    def f(y, x):
        v = zeros(len(x), x.dtype)
        with routine:
            for i in range(len(x)):
                v[i] += x[i] * x[i]
        for i in range(len(x)):
            y += v[i] * x[i]
        ~routine
        del v

    assert_gradient(f, 0.0, np.arange(1.0, 4.0))
