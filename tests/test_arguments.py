"""Keyword arguments and default values: calls inside reversible functions bind them when parsed,
calls from Python (``f``, ``~f``, ``vjp``, ``grad``, ``batched``) when made, as Python binds them;
every misuse is a named error at the user's line."""
from __future__ import annotations

import numpy as np
import pytest

import revdiff
from revdiff import ReversibilityError, reversible, rot
from revdiff import programs as P


@reversible
def axpy(y, x, a=2.0):
    for i in range(y.shape[0]):
        y[i] += a * x[i]


@reversible
def keywords_inside(y, x, s):
    axpy(y, x)
    axpy(y, x=x, a=0.5)
    ~axpy(y, x, a=s)


X = np.arange(3.0)


def test_calls_from_python_bind_keywords_and_defaults():
    assert np.array_equal(axpy(np.zeros(3), X)[0], 2 * X)
    assert np.array_equal(axpy(np.zeros(3), a=-1.0, x=X)[0], -X)
    y, x, a = axpy(np.zeros(3), X, 3.0)
    assert np.array_equal(y, 3 * X) and a == 3.0
    assert np.array_equal((~axpy)(2 * X, X)[0], np.zeros(3))
    _, pullback = revdiff.vjp(axpy, np.zeros(3), X, a=4.0)
    gy, gx, ga = pullback(np.ones(3), None, None)
    assert np.array_equal(gx, 4 * np.ones(3)) and ga == X.sum()
    assert revdiff.check_grad(axpy, np.zeros(3), X) < 1e-8
    batch = revdiff.batched(axpy, ("y", "x"))
    assert np.array_equal(batch(np.zeros((2, 3)), np.ones((2, 3)))[0], 2 * np.ones((2, 3)))


def test_calls_inside_bind_keywords_and_defaults_at_parse():
    y = keywords_inside(np.zeros(3), X, 1.0)[0]
    np.testing.assert_array_equal(y, 1.5 * X)  # 2x + 0.5x - 1.0x, in this order
    assert revdiff.check_grad(keywords_inside, np.zeros(3), X, 1.0) < 1e-8
    source = keywords_inside.source("forward", np.zeros(3), X, 1.0)
    assert "(y, x, 2.0, _err)" in source and "(y, x, 0.5, _err)" in source


@pytest.mark.parametrize("call, message", [
    (lambda: axpy(np.zeros(3)), "missing 'x'"),
    (lambda: axpy(np.zeros(3), X, b=1.0), "unexpected keyword argument 'b'"),
    (lambda: axpy(np.zeros(3), X, y=1.0), "multiple values for argument 'y'"),
    (lambda: axpy(np.zeros(3), X, 1.0, 2.0), "takes 3 arguments"),
])
def test_calls_from_python_that_do_not_fit_raise_type_errors(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_keyword_errors_inside_name_the_line():
    with pytest.raises(ReversibilityError, match="unexpected keyword argument 'b'") as info:
        @reversible
        def unknown(y, x):
            axpy(y, x, b=1.0)
    assert "test_arguments.py" in str(info.value) and "axpy(y, x, b=1.0)" in str(info.value)

    with pytest.raises(ReversibilityError, match="name each keyword"):
        @reversible
        def spread(y, x):
            axpy(y, x, **{"a": 1.0})

    with pytest.raises(ReversibilityError, match=r"instruction rot\(a, b, theta\) takes no keyword"):
        @reversible
        def rotate(a, b):
            rot(a, b, theta=0.5)


def test_a_default_must_be_a_number_and_its_parameter_unmodified():
    with pytest.raises(ReversibilityError, match="default value of 'x' must be a number") as info:
        @reversible
        def shared(y, x=np.zeros(3)):
            y += x[0]
    assert "test_arguments.py" in str(info.value)

    with pytest.raises(ReversibilityError, match="parameter 'a' has a default value, so .* may not modify it"):
        @reversible
        def modifies(y, a=1.0):
            a += y

    with pytest.raises(ReversibilityError, match="parameter 'a' has a default value"):
        @reversible
        def through_a_call(y, x, a=1.0):
            axpy(y, x, a)  # not modified: fine
            modify_first(a, y)


@reversible
def modify_first(p, q):
    p += q


def test_keywords_need_the_callee_defined_first():
    with pytest.raises(ReversibilityError, match="need 'later' defined before this function"):
        @reversible
        def early(y, x):
            later(y, x=x)  # noqa: F821


def _refusal(make) -> str:
    with pytest.raises(ReversibilityError) as info:
        make()
    assert "test_arguments.py" in str(info.value)
    return str(info.value)


def test_refused_constructs_say_what_to_write_instead():
    def over_elements():
        @reversible
        def f(y, x):
            for v in x:
                y += v

    def enumerated():
        @reversible
        def f(y, x):
            for i, v in enumerate(x):
                y += v

    def tuple_target():
        @reversible
        def f(y, x):
            y, x = x + 1.0, y

    def function_value():
        @reversible
        def f(y, x):
            y += np.sin

    def reversible_value():
        @reversible
        def f(y, x):
            y += axpy

    assert "write 'for i in range(len(x)):' and read x[i]" in _refusal(over_elements)
    assert "'for i in range(len(x)):', and read x[i]" in _refusal(enumerated)
    assert "update each variable in a statement of its own" in _refusal(tuple_target)
    assert "np.sin is a function, not a value: call it on numbers (np.sin(x))" in _refusal(function_value)
    assert "'axpy' is a reversible function, not a value: call it as a statement" in _refusal(reversible_value)


def test_recursion_is_refused_with_what_to_write_instead():
    @reversible
    def countdown(y, n):
        if n > 0:
            countdown(y, n - 1)

    with pytest.raises(ReversibilityError, match="recursion is not supported .* write it as a loop"):
        countdown(0.0, 3)


@reversible
def early_caller(y, x):
    defined_later(y, x)


@reversible
def defined_later(y, x, a=2.0):
    y[:] += a * x


def test_numpy_scalars_are_defaults_too_and_late_callees_get_a_hint():
    @reversible
    def scaled(y, a=np.float64(0.5)):
        y += a

    assert scaled(1.0)[0] == 1.5
    with pytest.raises(ReversibilityError, match="default values and keywords are bound where 'defined_later' is "
                                                 "defined before its caller"):
        early_caller(np.zeros(2), np.ones(2))


def test_batched_calls_check_grad_and_vjp_take_keywords():
    Y, Xb = np.zeros((3, 4)), np.ones((3, 4))
    for layout in ("elements", "lanes"):
        out = revdiff.batched(axpy, ("y", "x"), layout=layout)(Y, Xb, a=5.0)
        assert np.array_equal(out[0], 5.0 * Xb)
    assert revdiff.check_grad(axpy, np.zeros(3), X, a=0.5) < 1e-8

    @reversible
    def named_f(y, f=1.0):
        y += f

    outs, _ = revdiff.vjp(named_f, 0.0, f=3.0)
    assert outs == (3.0, 3.0)


def test_a_gradient_comes_back_in_its_argument_s_dtype_whatever_the_other_argument_is():
    """As PyTorch: float32 in, float32 gradient out, also beside a float64 or complex argument (the
    programs compute in the promoted dtype; a real argument gets the real part)."""
    draw = np.random.default_rng(5)
    A, y = draw.standard_normal((6, 3)), draw.standard_normal(6)
    for a_dtype, y_dtype in [(np.float32, np.float64), (np.float32, np.complex128), (np.complex64, np.float64),
                             (np.float64, np.float32), (np.complex128, np.complex64)]:
        computed = np.result_type(a_dtype, y_dtype)
        for vjp, g in ((P.project_vjp, y.astype(computed)), (P.lstsq_vjp, y[:3].astype(computed))):
            gA, gy = vjp(A.astype(a_dtype), y.astype(y_dtype), g)
            assert (gA.dtype, gy.dtype) == (np.dtype(a_dtype), np.dtype(y_dtype)), (vjp.__name__, a_dtype, y_dtype)


def test_big_endian_arguments_compute_as_native_ones():
    A = np.random.default_rng(6).standard_normal((5, 3))
    for got, want in zip(P.qr(A.astype(">f8")), P.qr(A)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(P.qr_vjp(A.astype(">f8"), A, A[:3]), P.qr_vjp(A, A, A[:3]))
