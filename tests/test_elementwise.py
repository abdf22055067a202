"""Whole-array statements (``y[:] += x * np.sin(z)``, ``Y[a:b, :] -= A * B``, ``y[:] *= w``,
``y[:] /= w``) and ancillas that start from a value (``t = ancilla(e)`` ... ``release(t, e)``):
values against NumPy, round trips, gradients against central differences, the compiled backend
against plain Python, lanes against one element at a time, every static and runtime rule with its
message, and the leapfrog programs (written with them) against the same programs written with loops."""
from __future__ import annotations

import numpy as np
import pytest

import revdiff
from revdiff import ReversibilityError, ancilla, release, reversible, routine, zeros
from revdiff.programs import leapfrog as L
from revdiff.programs.leapfrog import gravity

rng = np.random.default_rng(11)


def rand(*shape, cplx=False):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if cplx else x


@reversible
def statements(y, Y, x, z, A, B, w, s):
    y[:] += x * np.sin(z)
    Y[1:3, :] -= A * B + 2.0
    y[:] *= w
    y[1:] /= w[:-1] * s
    Y[0, :] += s * A[1, :]


def _numpy(y, Y, x, z, A, B, w, s):
    y, Y = y + x * np.sin(z), Y.copy()
    Y[1:3, :] -= A * B + 2.0
    y = y * w
    y[1:] = y[1:] / (w[:-1] * s)
    Y[0, :] += s * A[1, :]
    return y, Y


def _args(cplx=False):
    w = np.abs(rand(4)) + 0.5
    return (rand(4, cplx=cplx), rand(4, 3, cplx=cplx), rand(4), rand(4), rand(2, 3, cplx=cplx),
            rand(2, 3), w + (0.25j * rand(4) if cplx else 0), 1.5)


@pytest.mark.parametrize("cplx", [False, True], ids=["real", "complex"])
def test_values_match_numpy_round_trip_and_gradients(cplx):
    args = _args(cplx)
    y, Y = statements(*(a.copy() if isinstance(a, np.ndarray) else a for a in args))[:2]
    want_y, want_Y = _numpy(*args)
    np.testing.assert_allclose(y, want_y, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(Y, want_Y, rtol=1e-15, atol=1e-15)
    back = (~statements)(y, Y, *args[2:])
    np.testing.assert_allclose(back[0], args[0], atol=1e-14)
    np.testing.assert_allclose(back[1], args[1], atol=1e-14)
    assert revdiff.check_grad(statements, *args) < 1e-7


def test_compiled_equals_plain_python():
    args = _args()
    compiled = statements(*(a.copy() if isinstance(a, np.ndarray) else a for a in args))
    python = statements.with_options(backend="python")(*(a.copy() if isinstance(a, np.ndarray) else a for a in args))
    for a, b in zip(compiled, python):
        assert np.array_equal(a, b)


@reversible
def scaled(y, x, a, w):
    y[:] += a * x
    y[:] -= x * np.exp(w)
    y[:] *= w * w + 1.0


def test_lanes_equal_one_element_at_a_time():
    B = 24
    args = (rand(B, 6), rand(B, 6), rand(B), rand(B, 6))
    results = []
    for layout in ("lanes", "elements"):
        bf = revdiff.batched(scaled, ("y", "x", "a", "w"), layout=layout)
        results.append(bf(*(a.copy() for a in args))[0])
        _, grads = bf.vjp(tuple(a.copy() for a in args), (np.ones((B, 6)), None, None, None))
        results += list(grads)
    half = len(results) // 2
    for a, b in zip(results[:half], results[half:]):
        assert np.array_equal(a, b)


@reversible
def mismatched(y, x):
    y[:] += x * 2.0


@reversible
def mismatched_2d(Y, A):
    Y[:, :] += A * np.cos(A)


@reversible
def wrong_rank(Y, x):
    Y[:, :] += x


@reversible
def scaled_by(y, w):
    y[:] *= w


def test_runtime_and_static_rules_name_the_line():
    with pytest.raises(ReversibilityError, match=r"len\(y\) and len\(x\) differ \(len\(y\) = 3, len\(x\) = 4\)"):
        mismatched(np.zeros(3), np.ones(4))
    with pytest.raises(ReversibilityError, match=r"view \+= e: axis 1 of 'Y' and axis 1 of 'A' differ") as info:
        mismatched_2d(np.zeros((2, 3)), np.ones((2, 4)))
    assert "test_elementwise.py" in str(info.value) and "Y[:, :] += A * np.cos(A)" in str(info.value)
    with pytest.raises(ReversibilityError, match=r"'x' has 1 axes and the target 'Y\[:, :\]' 2.*broadcasting"):
        wrong_rank(np.zeros((2, 3)), np.ones(3))
    with pytest.raises(ReversibilityError, match="multiplication by zero"):
        scaled_by(np.ones(3), np.array([1.0, 0.0, 2.0]))
    with pytest.raises(ReversibilityError, match="read by") as info:
        @reversible
        def overlapping(y):
            y[1:] += y[:-1]
    with pytest.raises(ReversibilityError, match="step 1"):
        @reversible
        def strided(y, x):
            y[:] += x[::2]
    with pytest.raises(ReversibilityError, match=r"updated with \+=, -=, \*= and /="):
        @reversible
        def modulo(y, x):
            y[:] %= x


@reversible
def valued(y, x, A):
    t = ancilla(x[0] * 2.0)
    y[0] += t * t
    release(t, x[0] * 2.0)
    v = ancilla(x[:])
    y[:] += v * v
    release(v, x[:])
    M = ancilla(A[:, 1:3])
    y[0:2] += M[:, 0] * 3.0
    release(M, A[:, 1:3])


@reversible
def released_changed(y, x):
    t = ancilla(x[0])
    x[0] += 1.0
    y += t
    release(t, x[0])


def test_ancillas_that_start_from_a_value():
    y, x, A = rand(4), rand(4), rand(2, 4)
    out = valued(y.copy(), x, A)[0]
    want = y.copy()
    want[0] += (2 * x[0]) ** 2
    want += x * x
    want[0:2] += A[:, 1] * 3.0
    np.testing.assert_array_equal(out, want)
    np.testing.assert_allclose((~valued)(out, x, A)[0], y, atol=1e-14)
    assert revdiff.check_grad(valued, y, x, A) < 1e-8
    with pytest.raises(ReversibilityError, match=r"no longer equals x\[0\]") as info:
        released_changed(0.0, np.ones(2))
    assert "release(t, x[0])" in str(info.value)
    with pytest.raises(ReversibilityError, match=r"copy an array as a view with a slice or index per axis, ancilla\(x\[:\]\)"):
        @reversible
        def whole(y, x):
            v = ancilla(x)
            y += v[0]
            release(v, x)

        whole(0.0, np.ones(2))


# ------------------------------------------------------------------ the leapfrog, against loops


@reversible
def kick_loops(v, x, m, G, soft, h):
    N, d = x.shape
    acc = zeros((N, d), float)
    with routine:
        gravity(acc, x, m, G, soft, 1.0)
    for i in range(N):
        for k in range(d):
            v[i, k] += h * acc[i, k]
    ~routine
    del acc


@reversible
def leapfrog_loops(x, v, m, G, soft, dt, steps):
    N, d = x.shape
    h = 0.5 * dt
    for s in range(steps):
        kick_loops(v, x, m, G, soft, h)
        for i in range(N):
            for k in range(d):
                x[i, k] += dt * v[i, k]
        kick_loops(v, x, m, G, soft, h)


def test_the_leapfrog_written_with_whole_arrays_equals_its_loops_bit_for_bit():
    args = (rand(4, 3), 0.1 * rand(4, 3), np.abs(rand(4)) + 0.5, 1.0, 0.1, 1e-3, 6)
    copies = lambda: tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)  # noqa: E731
    for got, want in zip(L.nbody_leapfrog(*copies()), leapfrog_loops(*copies())):
        assert np.array_equal(got, want)
    cots = (rand(4, 3), rand(4, 3)) + (None,) * 5
    grads = revdiff.vjp(L.nbody_leapfrog, *copies())[1](*cots)
    loops = revdiff.vjp(leapfrog_loops, *copies())[1](*cots)
    for got, want in zip(grads, loops):
        assert (got is None and want is None) or np.array_equal(got, want)


@reversible
def dot_into_element(a, x, y, k):
    a[k] += np.dot(x, y)


@reversible
def scaled_by_element(y, x, w, k):
    y[:] += w[k] * x


@reversible
def times_element(y, x, w, k):
    y[:] += x * np.sin(w[k])


@pytest.mark.parametrize("f, args", [
    (dot_into_element, (np.zeros(2), np.ones(3), np.ones(3))),
    (scaled_by_element, (np.zeros(3), np.ones(3), np.ones(2))),
    (times_element, (np.zeros(3), np.ones(3), np.ones(2))),
])
def test_single_elements_among_vector_operands_are_checked(f, args):
    """An element read or written beside the views (a[k] += np.dot(x, y)) lies in its array: the
    instruction's loops run unchecked, so an index out of range would read or write past the array."""
    name = "a" if f is dot_into_element else "w"
    for k in (5, -3, 10 ** 9):
        with pytest.raises(IndexError, match=f"index k is out of bounds for axis 0 of '{name}'"):
            f(*(a.copy() for a in args), k)
    assert np.isfinite(f(*(a.copy() for a in args), 1)[0]).all()


@reversible
def guarded_element(y, x, w, k):
    y[:] += x * (w[k] if k < w.shape[0] else 0.0)


def test_a_guarded_element_is_checked_under_its_guard():
    y, x, w = np.zeros(3), np.ones(3), np.array([2.0, 3.0])
    np.testing.assert_array_equal(guarded_element(y.copy(), x, w, 2)[0], np.zeros(3))
    np.testing.assert_array_equal(guarded_element(y.copy(), x, w, 1)[0], 3 * np.ones(3))


@reversible
def row_update(Y, X, k):
    Y[k, :] += X[k, :] * 2.0 + 1.0


def test_length_errors_name_the_axes_of_the_arrays():
    with pytest.raises(ReversibilityError, match="axis 1 of 'Y' and axis 1 of 'X' differ"):
        row_update(np.zeros((2, 3)), np.ones((2, 4)), 0)


def test_array_copies_name_every_axis_and_releases_say_what_changed():
    with pytest.raises(ReversibilityError, match=r"'A' has 2 axes; copy it with a slice or index for each"):
        @reversible
        def half(y, A):
            v = ancilla(A[:])
            y[0] += v[0, 0]
            release(v, A[:])

        half(np.zeros(2), np.ones((2, 2)))
    with pytest.raises(ReversibilityError, match=r"ancilla\(x\[:, :\]\)"):
        @reversible
        def whole(y, x):
            v = ancilla(x)
            y += v[0, 0]
            release(v, x)

        whole(0.0, np.ones((2, 2)))
    with pytest.raises(ReversibilityError, match=r"ancilla 't' no longer equals x\[0\], the value it was allocated "
                                                 r"as a copy of .*\(difference = -1\)"):
        released_changed(0.0, np.ones(2))
    with pytest.raises(ReversibilityError, match="release.* has no '~'"):
        @reversible
        def undone(y, x):
            t = ancilla(x)
            y += t
            ~release(t, x)


@reversible
def changed_small_element(y, x):
    v = ancilla(x[:])
    v[1] += 0.5
    y[:] += v
    release(v, x[:])


@reversible
def scaled_by_scalar(y, w):
    y *= w


def test_release_compares_each_element_and_factors_must_be_finite():
    """A change of 0.5 in an element of magnitude 1 is caught beside an element of 1e9."""
    with pytest.raises(ReversibilityError, match=r"ancilla array 'v' no longer equals x\[:\]"):
        changed_small_element(np.zeros(2), np.array([1e9, 1.0]))
    for w in (np.inf, -np.inf, np.nan):
        with pytest.raises(ReversibilityError, match="not finite"):
            scaled_by(np.ones(3), np.array([1.0, w, 2.0]))
        with pytest.raises(ReversibilityError, match="not finite"):
            scaled_by_scalar(1.0, w)
