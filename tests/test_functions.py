"""The inverse trigonometric and hyperbolic functions, the accurate logarithms and exponentials and
the error functions: values against Python's math module (NumPy and math spellings alike), gradients
against central differences, the compiled backend against plain Python, lanes against one element
at a time, and the domain and complex-argument errors, each naming the user's line."""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import revdiff
from revdiff import reversible


@reversible
def unit_interval(y, x):
    """Functions of an argument in (-1, 1)."""
    for i in range(x.shape[0]):
        y[i, 0] += np.arcsin(x[i])
        y[i, 1] += math.acos(x[i])
        y[i, 2] += np.arctanh(x[i])
        y[i, 3] += math.erf(x[i])
        y[i, 4] += math.erfc(x[i])
        y[i, 5] += np.log1p(x[i])
        y[i, 6] += np.expm1(x[i])
        y[i, 7] += math.asinh(x[i])


@reversible
def above_one(y, x):
    """Functions of an argument above 1."""
    for i in range(x.shape[0]):
        y[i, 0] += np.arccosh(x[i])
        y[i, 1] += np.log2(x[i])
        y[i, 2] += math.log10(x[i])


UNIT = (math.asin, math.acos, math.atanh, math.erf, math.erfc, math.log1p, math.expm1, math.asinh)
ABOVE = (math.acosh, math.log2, math.log10)
CASES = [(unit_interval, UNIT, np.array([-0.999999, -0.5, -1e-12, 0.0, 3e-9, 0.25, 0.75, 0.9999999])),
         (above_one, ABOVE, np.array([1.0 + 1e-10, 1.5, 2.0, 10.0, 1e5, 1e300]))]


@pytest.mark.parametrize("f, refs, x", CASES, ids=["unit_interval", "above_one"])
def test_values_match_the_math_module(f, refs, x):
    y, _ = f(np.zeros((x.size, len(refs))), x)
    want = np.array([[ref(v) for ref in refs] for v in x])
    np.testing.assert_allclose(y, want, rtol=4e-16, atol=0)
    python = f.with_options(backend="python")(np.zeros_like(y), x)[0]
    np.testing.assert_allclose(python, y, rtol=4e-16, atol=0)
    back = (~f)(y, x)[0]
    assert not back.any()


@pytest.mark.parametrize("f, refs, x", CASES, ids=["unit_interval", "above_one"])
def test_gradients_match_central_differences(f, refs, x):
    inner = x[1:-1] if f is unit_interval else x[1:4]  # away from the edges of the domain
    assert revdiff.check_grad(f, np.zeros((inner.size, len(refs))), inner) < 1e-7


def test_float32_arguments_give_float32_values():
    x = np.array([0.1, 0.5, 0.9], np.float32)
    y, _ = unit_interval(np.zeros((3, 8), np.float32), x)
    want = np.array([[ref(float(v)) for ref in UNIT] for v in x])
    np.testing.assert_allclose(y, want, rtol=3e-7, atol=1e-7)


def test_lanes_equal_one_element_at_a_time():
    rng = np.random.default_rng(5)
    x = rng.uniform(-0.99, 0.99, (20, 4))
    results = []
    for layout in ("lanes", "elements"):
        bf = revdiff.batched(unit_interval, ("y", "x"), layout=layout)
        results.append(bf(np.zeros((20, 4, 8)), x.copy())[0])
        _, grads = bf.vjp((np.zeros((20, 4, 8)), x.copy()), (np.ones((20, 4, 8)), None))
        results.append(grads[1])
    assert np.array_equal(results[0], results[2]) and np.array_equal(results[1], results[3])


@reversible
def one_of(y, x, k):
    if k == 0:
        y += np.arcsin(x)
    elif k == 1:
        y += np.arccos(x)
    elif k == 2:
        y += np.arctanh(x)
    elif k == 3:
        y += np.arccosh(x)
    elif k == 4:
        y += np.log1p(x)
    elif k == 5:
        y += np.log2(x)
    elif k == 6:
        y += np.log10(x)
    elif k == 7:
        y += np.log(x)
    else:
        y += np.sqrt(x)


@pytest.mark.parametrize("k, outside, inside, text", [
    (0, 1.0000001, 1.0, "np.arcsin(x) needs -1 <= x <= 1"),
    (1, -1.5, -1.0, "np.arccos(x) needs -1 <= x <= 1"),
    (2, 1.0, 0.5, "np.arctanh(x) needs -1 < x < 1"),
    (3, 0.999, 1.0, "np.arccosh(x) needs x >= 1"),
    (4, -1.0, -0.5, "np.log1p(x) needs x > -1"),
    (5, 0.0, 1e-300, "np.log2(x) needs x > 0"),
    (6, -2.0, 3.0, "np.log10(x) needs x > 0"),
    (7, 0.0, 5e-324, "np.log(x) needs x > 0"),
    (8, -1e-300, 0.0, "np.sqrt(x) needs x >= 0"),
    (8, math.nan, math.inf, "np.sqrt(x) needs x >= 0"),
])
def test_arguments_outside_the_domain_raise_a_value_error_at_the_users_line(k, outside, inside, text):
    """As Python's math module: ValueError (NumPy would return NaN or an infinity with a warning)."""
    lines, start = inspect.getsourcelines(one_of.py_function)
    line = start + next(i for i, source in enumerate(lines) if text.split("(")[0] + "(" in source)
    with pytest.raises(ValueError, match="math domain error") as info:
        one_of(0.0, outside, k)
    message = str(info.value)
    assert text in message and f"test_functions.py\", line {line}" in message and "value" in message
    one_of(0.0, inside, k)


def test_complex_arguments_are_refused_where_the_function_is_real_only():
    @reversible
    def arcsine(y, z):
        y += np.arcsin(z)

    with pytest.raises(revdiff.ReversibilityError, match="asin takes real arguments, not complex") as info:
        arcsine(0j, 0.5j)
    assert "test_functions.py" in str(info.value)


def test_a_gradient_at_the_edge_of_the_domain_raises_zero_division():
    """asin has no derivative at 1 (PyTorch returns inf): the cotangent rule's division says so."""
    _, pullback = revdiff.vjp(one_of, 0.0, 1.0, 0)
    with pytest.raises(ZeroDivisionError, match=r"division by zero: np.sqrt\(\(1 - x\) \* \(1 \+ x\)\) is 0"):
        pullback(1.0, None, None)
    assert pullback is not None and revdiff.vjp(one_of, 0.0, 0.5, 0)[1](1.0, None, None)[1] == pytest.approx(
        1 / math.sqrt(0.75), rel=1e-15)


@reversible
def power(y, x, e):
    y += x ** e


@reversible
def square_root_by_power(y, x):
    y += x ** 0.5


@pytest.mark.parametrize("backend", ["llvm", "python"])
def test_real_powers_outside_their_domain_raise_on_both_backends(backend):
    """NumPy returns NaN for (-2.0) ** 0.5, plain Python a complex number: both refuse it here."""
    f, g = power.with_options(backend=backend), square_root_by_power.with_options(backend=backend)
    with pytest.raises(ValueError, match=r"x \*\* e needs x > 0, x = 0 with e >= 0, or an integer e \(x = -2.*e = 0.5\)"):
        f(0.0, -2.0, 0.5)
    with pytest.raises(ValueError, match="math domain error"):
        f(0.0, 0.0, -1.0)
    with pytest.raises(ValueError, match=r"x \*\* 0.5 needs x >= 0 \(a non-integer power\)"):
        g(0.0, -4.0)
    assert f(0.0, -2.0, 3.0)[0] == -8.0 and g(0.0, 4.0)[0] == 2.0 and f(0.0, 0.0, 2.0)[0] == 0.0


@reversible
def integer_power(y, n, k):
    y += n ** k


@reversible
def complex_power_and_log(y, z, k):
    if k == 0:
        y += z ** -1.0
    else:
        y += np.log(z)


@pytest.mark.parametrize("backend", ["llvm", "python"])
def test_integer_and_complex_powers_outside_their_domain_raise(backend):
    """2 ** -1 is 0.5 in Python but would wrap to an integer in compiled code; 0j ** -1.0 is NaN."""
    f, g = integer_power.with_options(backend=backend), complex_power_and_log.with_options(backend=backend)
    with pytest.raises(ValueError, match=r"k >= 0 for integers \(write 1.0 \* n for a float power\)"):
        f(0.0, 2, -1)
    assert f(0.0, 2, 3)[0] == 8.0
    with pytest.raises(ValueError, match=r"z != 0 \(zero to a negative or complex power\)"):
        g(0j, 0j, 0)
    with pytest.raises(ValueError, match=r"np.log\(z\) needs z != 0"):
        g(0j, 0j, 1)
    assert g(0j, 2j, 0)[0] == pytest.approx(-0.5j)


@reversible
def angle(y, a, b):
    y += np.arctan2(a, b)


def test_atan2_has_no_gradient_at_the_origin():
    """atan2 jumps at (0, 0) (its limit depends on the direction of approach): the gradient raises
    there, as hypot's does, and is (b, -a) / (a^2 + b^2) elsewhere, also where a^2 + b^2 would underflow."""
    _, pullback = revdiff.vjp(angle, 0.0, 0.0, 0.0)
    with pytest.raises(ZeroDivisionError, match=r"division by zero: math.hypot\(a, b\) is 0"):
        pullback(1.0, None, None)
    _, pullback = revdiff.vjp(angle, 0.0, 3e-170, 4e-170)
    ga, gb = pullback(1.0, None, None)[1:]
    assert ga == pytest.approx(0.8 / 5e-170, rel=1e-15) and gb == pytest.approx(-0.6 / 5e-170, rel=1e-15)
    with pytest.raises(ZeroDivisionError):
        revdiff.jvp(angle, (0.0, 0.0, 0.0), (None, 1.0, 0.0))
    assert revdiff.jvp(angle, (0.0, 0.0, 0.0), (None, 0.0, 0.0))[1][0] == 0.0


@reversible
def rounded(n, x):
    n += round(x)


@pytest.mark.parametrize("backend", ["llvm", "python"])
def test_round_of_nan_or_beyond_int64_raises(backend):
    """Compiled code would turn them into the integer -2**63 (Python's round raises for NaN and inf)."""
    f = rounded.with_options(backend=backend)
    for x in (math.nan, math.inf, -math.inf, 1e300, 2.0 ** 63):
        with pytest.raises(ValueError, match=r"round\(x\) needs -2\*\*63 <= x < 2\*\*63"):
            f(0, x)
    assert f(0, 2.5)[0] == 2 and f(0, -3.5)[0] == -4 and f(0, -2.0 ** 63)[0] == -2 ** 63


@reversible
def polynomial(loss, c, x):
    for j in range(len(c)):
        loss += c[j] * x ** j


@reversible
def power_zero(loss, x):
    loss += x ** 0 * 3.0 + x * x


def test_derivatives_of_powers_at_zero_where_they_exist():
    """b x^(b-1) is 0 for b = 0 (x^0 is constant), also at x = 0: the gradient, tangent and Hessian
    of a polynomial at 0 are its coefficients, with no x ** -1 evaluated at x = 0."""
    c = np.array([1.0, 2.0, 3.0, 4.0])
    assert revdiff.grad(polynomial, "loss")(0.0, c, 0.0)[2] == 2.0
    assert revdiff.jvp(polynomial, (0.0, c, 0.0), (None, None, 1.0))[1][0] == 2.0
    assert revdiff.hvp(polynomial, "loss", (0.0, c, 0.0), (None, None, 1.0))[2] == 6.0
    assert revdiff.hvp(power, "y", (0.0, 0.0, 1.0), (None, 1.0, None))[1] == 0.0  # x ** e, e = 1
    assert revdiff.grad(power_zero, "loss")(0.0, 0.0) == (1.0, 0.0)
    with pytest.raises(ValueError, match="math domain error"):  # x ** 0.5 has no derivative at 0
        revdiff.grad(power, "y")(0.0, 0.0, 0.5)


def test_gradients_of_a_power_with_a_float_exponent():
    """d/de x^e at x = 0 (e > 0) is 0, as PyTorch gives; at x < 0 it does not exist in the reals."""
    _, pullback = revdiff.vjp(power, 0.0, 0.0, 2.0)
    assert pullback(1.0, None, None)[1:] == (0.0, 0.0)
    _, pullback = revdiff.vjp(power, 0.0, 2.0, 3.0)
    gx, ge = pullback(1.0, None, None)[1:]
    assert gx == pytest.approx(12.0) and ge == pytest.approx(8.0 * math.log(2.0))
    _, pullback = revdiff.vjp(power, 0.0, -2.0, 3.0)
    with pytest.raises(ValueError, match="math domain error"):
        pullback(1.0, None, None)
