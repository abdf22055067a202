"""Inlining in the fused vjp (``optimize/inline.py``): a function the vjp calls once runs as part of
the vjp's own code, with the same values and errors as the call, and only where that is valid."""
import re

import numpy as np
import pytest

import revdiff
from helpers import assert_gradient, copy_args, fused_vjp
from revdiff import reversible, routine, zeros

rng = np.random.default_rng(11)


@reversible
def weighted_sum(s, t, x):
    w = zeros(len(x), float)  # the caller has a w and an i too: the inlined names must not clash
    with routine:
        for i in range(len(x)):
            w[i] += x[i] * t
    for i in range(len(x)):
        s += w[i] * x[i]
    ~routine
    del w


@reversible
def calls_once(out, R, t, x):
    w = zeros(len(x), float)
    with routine:
        for i in range(len(x)):
            w[i] += np.sin(x[i])
    weighted_sum(R[0, 1], t, w)  # a scalar it modifies, passed as an element
    out += R[0, 1] * t
    ~routine
    del w


@reversible
def calls_twice(out, t, x):
    weighted_sum(out, t, x)
    weighted_sum(out, t, x)


@reversible
def calls_with_a_view(out, t, x):
    weighted_sum(out, t, x[1:])


def _args():
    return (0.0, rng.standard_normal((2, 3)), 0.7, rng.standard_normal(5))


def _inlined(src: str, name: str) -> bool:
    return bool(re.search(rf"\b{name}_\w+ inlined", src)) and not re.search(rf"\b{name}_\w+\(", src)


def test_a_function_the_vjp_calls_once_is_inlined():
    assert _inlined(calls_once.source("vjp", *_args()), "weighted_sum")
    assert not _inlined(calls_once.source("adjoint", *_args()), "weighted_sum")  # other programs call it


def test_inlined_vjp_equals_forward_then_adjoint_and_finite_differences():
    args = _args()
    cots = (1.3, rng.standard_normal((2, 3)), None, None)
    outs, pullback = revdiff.vjp(calls_once, *copy_args(args))
    want = [w for w in pullback(*cots) if w is not None]
    saved, got = fused_vjp(calls_once, args, cots)
    np.testing.assert_allclose(saved[0].item(), outs[0], rtol=1e-15)
    np.testing.assert_allclose(saved[1], outs[1], rtol=1e-15)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-15)
    assert_gradient(calls_once, *args)


def test_calls_made_twice_or_on_views_stay_calls():
    args = (0.0, 0.7, rng.standard_normal(5))
    for f in (calls_twice, calls_with_a_view):
        src = f.source("vjp", *args)
        assert re.search(r"\bweighted_sum_\w+_(forward|adjoint)\(", src), f
        saved, got = fused_vjp(f, args, (1.0, None, None))
        outs, pullback = revdiff.vjp(f, *copy_args(args))
        np.testing.assert_allclose(saved[0].item(), outs[0], rtol=1e-15)
        for g, w in zip(got, [w for w in pullback(1.0, None, None) if w is not None]):
            np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-15)


@reversible
def dot_into(s, x, y):
    for i in range(len(x)):
        s += x[i] * y[i]


@reversible
def calls_dot_once(out, x, y):
    dot_into(out, x, y)


def test_a_failed_check_inside_an_inlined_function_names_its_line():
    line = dot_into.ir.loc.lineno + 2
    assert _inlined(calls_dot_once.source("vjp", 0.0, np.ones(4), np.ones(3)), "dot_into")
    with pytest.raises(IndexError, match=rf"test_inline.py\", line {line}, .* in dot_into: .*\(index = 3, size = 3\)"):
        fused_vjp(calls_dot_once, (0.0, np.ones(4), np.ones(3)), (1.0, None, None))


def test_inlined_vjp_on_the_python_backend_equals_the_compiled_one():
    args = _args()
    cots = (1.3, rng.standard_normal((2, 3)), None, None)
    py = calls_once.with_options(backend="python")
    assert _inlined(py.source("vjp", *args), "weighted_sum")
    for a, b in zip(fused_vjp(py, args, cots), fused_vjp(calls_once, args, cots)):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
