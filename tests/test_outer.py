"""The outer-product update ``Y[:, :] += np.outer(u, v)`` (``primitives/outer.py``): NumPy's values
(bit for bit on real data), round trips to rounding, the closed-form gradient at any shape (empty
ones included), SIMD lanes (blocks of rows and a row left over) equal to single calls bit for bit,
and a named error for each misuse."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import assert_error_at, assert_gradient, assert_round_trip
import revdiff
from revdiff import ReversibilityError, reversible

THIS_FILE = __file__


@reversible
def rank_one_update(Y, u, v):
    Y[:, :] -= np.outer(u, v)


@reversible
def leading_block_update(Y, u, v, k):
    Y[:k, 1:] += np.outer(u[:k], v[1:])


def _draw(r, cplx):
    return (lambda *s: r.standard_normal(s) + 1j * r.standard_normal(s)) if cplx else (lambda *s: r.standard_normal(s))


@settings(max_examples=30, deadline=None)
@given(m=st.integers(0, 9), n=st.integers(0, 7), cplx=st.booleans(), seed=st.integers(0, 99))
def test_numpy_values_round_trip_and_gradient_at_any_shape(m, n, cplx, seed):
    draw = _draw(np.random.default_rng(seed), cplx)
    Y, u, v = draw(m, n), draw(m), draw(n)
    out = assert_round_trip(rank_one_update, Y, u, v, rtol=1e-13, atol=1e-13)
    if cplx:  # NumPy's complex product may round its parts differently
        np.testing.assert_allclose(out[0], Y - np.outer(u, v), rtol=1e-15, atol=1e-15)
    else:
        np.testing.assert_array_equal(out[0], Y - np.outer(u, v))  # one rounded product per element
    gY = draw(m, n)
    _, pullback = revdiff.vjp(rank_one_update, Y, u, v)
    g_Y, g_u, g_v = pullback(gY, None, None)
    np.testing.assert_array_equal(g_Y, gY)
    np.testing.assert_allclose(g_u, -gY @ v.conj(), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(g_v, -gY.T @ u.conj(), rtol=1e-13, atol=1e-13)
    if m and n:
        assert_gradient(rank_one_update, Y, u, v)


def test_views_update_only_their_block():
    r = np.random.default_rng(3)
    Y, u, v = r.standard_normal((6, 4)), r.standard_normal(6), r.standard_normal(4)
    want = Y.copy()
    want[:5, 1:] += np.outer(u[:5], v[1:])
    np.testing.assert_array_equal(leading_block_update(Y, u, v, 5)[0], want)
    assert_gradient(leading_block_update, Y, u, v, 5)


def test_a_batch_in_lanes_equals_single_calls_bit_for_bit():
    r = np.random.default_rng(4)
    Y, u, v = r.standard_normal((300, 7, 5)), r.standard_normal((300, 7)), r.standard_normal((300, 5))
    gY = r.standard_normal((300, 7, 5))
    lanes = revdiff.batched(rank_one_update, ("Y", "u", "v"), layout="lanes")
    outs, grads = lanes.vjp((Y, u, v), (gY, None, None))
    for b in (0, 123, 299):
        _, pullback = revdiff.vjp(rank_one_update, Y[b], u[b], v[b])
        np.testing.assert_array_equal(outs[0][b], rank_one_update(Y[b], u[b], v[b])[0])
        for got, want in zip(grads, pullback(gY[b], None, None)):
            np.testing.assert_array_equal(got[b], want)


def _assert_error(exc_info, marker: str, *phrases: str):
    assert_error_at(exc_info, THIS_FILE, marker, *phrases)


def test_an_outer_product_into_a_vector_view_is_refused():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, u, v):
            y[:] += np.outer(u, v)  # E:outer_vector
    _assert_error(e, "outer_vector", "np.outer(u, v) is a matrix", "Y[:, :] += np.outer(u, v)")


def test_np_outer_takes_two_vectors():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(Y, u):
            Y[:, :] += np.outer(u)  # E:outer_arity
    _assert_error(e, "outer_arity", "np.outer(u, v) takes two vectors")


def test_an_operand_reading_the_targets_array_is_refused():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(Y, v):
            Y[:, :] += np.outer(Y[:, 0], v)  # E:outer_overlap
    _assert_error(e, "outer_overlap", "'Y' is both updated and read")


def test_a_whole_array_target_and_expression_operands_are_refused():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(Y, u, v):
            Y += np.outer(u, v)  # E:outer_whole
    _assert_error(e, "outer_whole", "np.outer(u, v) is a matrix")
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def g(Y, u, v):
            Y[:, :] += np.outer(u, 2.0 * v)  # E:outer_expression
    _assert_error(e, "outer_expression", "v of np.outer must be an array or an array view")


@reversible
def mismatched(Y, u, v):
    Y[:, :] -= np.outer(u, v)  # E:outer_lengths


def test_lengths_that_do_not_match_name_the_line():
    with pytest.raises(ReversibilityError) as e:
        mismatched(np.zeros((3, 2)), np.zeros(4), np.zeros(2))
    _assert_error(e, "outer_lengths", "Y[:, :] -= np.outer(u, v): len(u)", "rows of Y")
    with pytest.raises(ReversibilityError) as e:
        mismatched(np.zeros((3, 2)), np.zeros(3), np.zeros(5))
    _assert_error(e, "outer_lengths", "len(v)", "columns of Y")
