"""Every statement form: forward equals numpy, the round trip restores the state, backends agree."""
import math

import numpy as np
import pytest

import revdiff
import revdiff as rd
from numpy import sin

from helpers import assert_backends_agree, assert_round_trip, copy_args
from revdiff import irot, reversible, rot, routine, zero, zeros

ALPHA = 0.25  # a numeric global, read as a constant


@reversible
def add_sub(y, x, z):
    y += x * sin(z) / 2.0 + math.atan2(x, z) + np.hypot(x, z) + ALPHA
    y -= np.exp(-x * x) + abs(z) ** 1.5 + min(x, z) - max(x, z) + np.tanh(z) + np.sqrt(np.cosh(z))


def add_sub_ref(y, x, z):
    y = y + x * np.sin(z) / 2.0 + math.atan2(x, z) + np.hypot(x, z) + ALPHA
    y = y - (np.exp(-x * x) + abs(z) ** 1.5 + min(x, z) - max(x, z) + np.tanh(z) + np.sqrt(np.cosh(z)))
    return y, x, z


@reversible
def mul_div(y, x):
    y *= 2.0 + np.cos(x)
    y /= x


@reversible
def int_ops(k, j, flag):
    k += 3 * j
    k *= j
    k ^= 5
    flag ^= j > 2
    k -= j // 2


@reversible
def int_div(k, j):
    k /= j


@reversible
def swap_neg(a, b, v):
    a, b = b, a
    v[0], v[2] = v[2], v[0]
    a = -a
    v[1] = -v[1]


@reversible
def rotations(a, b, v, theta):
    rot(a, b, theta)
    irot(v[0], v[1], 2 * theta)
    rot(v[1], v[2], theta + a.real * 0)


@reversible
def loops(s, x):
    n = len(x)
    for i in range(n):
        s += x[i]
    for i in range(1, n, 3):  # a step that does not divide the span
        s += i * x[i]
    for i in range(n - 1, -1, -2):
        s *= 1.5
    for i in range(5, 5):  # empty
        s += 1.0


@reversible
def conditionals(x, y, k):
    if k > 0:
        x += y
    else:
        x -= y
    if (x > 0, x > 0):
        x *= 2.0
    else:
        x *= 3.0


@reversible
def while_loop(x, k, n):
    while (k < n, k > 0):
        x *= 1.5
        k += 1


@reversible
def ancillas(y, x, A):
    m, n = A.shape
    t = zero(A.dtype)
    c = zero(complex)
    i = 0
    v = zeros((m, n), A.dtype)
    with routine:
        t += x * x
        for r in range(m):
            for q in range(n):
                v[r, q] += A[r, q] * t
    y += v[0, 0] + v[m - 1, n - 1]
    ~routine
    del v
    del i
    del c
    del t


@reversible
def inner(s, x, y):
    for i in range(len(x)):
        s += x[i] * y[i]


@reversible
def outer_calls(s, X, w, k):
    inner(s, X[:, k], w)
    ~inner(s, X[:, 0], w)
    inner(s, X[1], X[2])
    scaled(X[0, 0], 2.0 * k + 1.0)


@reversible
def scaled(x, c):
    x *= c


@reversible
def complex_ops(z, w, x):
    z += np.conj(w) * x + w.real - 1j * w.imag
    z *= 1 + 0.5j
    w -= z.conjugate() * 0.5


@reversible
def float32_ops(v, s):
    for i in range(len(v)):
        v[i] += s * 2.0


def test_add_sub_matches_numpy():
    args = (0.5, 0.7, -1.3)
    out = assert_round_trip(add_sub, *args)
    np.testing.assert_allclose(out, add_sub_ref(*args), rtol=1e-14)
    assert_backends_agree(add_sub, *args)


def test_mul_div():
    out = assert_round_trip(mul_div, 3.0, 0.4)
    np.testing.assert_allclose(out[0], 3.0 * (2.0 + np.cos(0.4)) / 0.4, rtol=1e-15)
    assert_backends_agree(mul_div, 3.0, 0.4)


def test_integer_instructions_are_exact():
    out = assert_round_trip(int_ops, 7, 4, False, exact=True)
    k = ((7 + 12) * 4) ^ 5
    assert out == (k - 2, 4, True)
    assert_backends_agree(int_ops, 7, 4, False)


def test_integer_division_exact_only():
    assert int_div(12, 4) == (3, 4)
    from revdiff import ReversibilityError
    with pytest.raises(ReversibilityError, match="remainder"):
        int_div(13, 4)


def test_swap_and_negate_exact():
    v = np.array([1.0, 2.0, 3.0])
    out = assert_round_trip(swap_neg, 1.5, -2.5, v, exact=True)
    assert out[0] == 2.5 and out[1] == 1.5
    np.testing.assert_array_equal(out[2], [3.0, -2.0, 1.0])


def test_rotations():
    v = np.array([1.0, 2.0, 3.0])
    out = assert_round_trip(rotations, 1.0, 0.5, v, 0.3)
    c, s = np.cos(0.3), np.sin(0.3)
    assert np.allclose(out[:2], [c * 1.0 - s * 0.5, s * 1.0 + c * 0.5])
    c2, s2 = np.cos(0.6), np.sin(0.6)
    w0, w1 = c2 * 1.0 + s2 * 2.0, -s2 * 1.0 + c2 * 2.0
    np.testing.assert_allclose(out[2], [w0, c * w1 - s * 3.0, s * w1 + c * 3.0])
    assert_backends_agree(rotations, 1.0, 0.5, v, 0.3)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 10])
def test_loops_any_step(n):
    x = np.arange(1.0, n + 1)
    s = x.sum() + sum(i * x[i] for i in range(1, n, 3))
    s *= 1.5 ** len(range(n - 1, -1, -2))
    out = assert_round_trip(loops, 0.0, x)
    assert out[0] == pytest.approx(s, rel=1e-14)
    assert_backends_agree(loops, 0.0, x)


@pytest.mark.parametrize("x,k", [(1.0, 1), (-1.0, 1), (1.0, -1), (-1.0, -1)])
def test_conditionals(x, k):
    out = assert_round_trip(conditionals, x, 0.5, k)
    y = x + 0.5 if k > 0 else x - 0.5
    assert out[0] == (y * 2.0 if y > 0 else y * 3.0)
    assert_backends_agree(conditionals, x, 0.5, k)


def test_while():
    out = assert_round_trip(while_loop, 1.0, 0, 4)
    assert out == (1.5 ** 4, 4, 4)
    assert_backends_agree(while_loop, 1.0, 0, 4)


def test_ancillas_and_routines():
    A = np.arange(6.0).reshape(2, 3)
    out = assert_round_trip(ancillas, 0.0, 2.0, A)
    assert out[0] == (A[0, 0] + A[1, 2]) * 4.0
    assert_backends_agree(ancillas, 0.0, 2.0, A)


def test_calls_views_and_inverse_calls():
    X = np.arange(12.0).reshape(3, 4)
    w = np.array([1.0, -1.0, 2.0])
    out = assert_round_trip(outer_calls, 0.5, X, w, 2)
    s = 0.5 + X[:, 2] @ w - X[:, 0] @ w + X[1] @ X[2]
    assert out[0] == pytest.approx(s)
    assert out[1][0, 0] == X[0, 0] * 5.0
    assert_backends_agree(outer_calls, 0.5, X, w, 2)


def test_complex():
    out = assert_round_trip(complex_ops, 1 + 2j, 0.5 - 1j, 0.7)
    z = (1 + 2j + np.conj(0.5 - 1j) * 0.7 + 0.5 - 1j * -1.0) * (1 + 0.5j)
    assert out[0] == pytest.approx(z)
    assert_backends_agree(complex_ops, 1 + 2j, 0.5 - 1j, 0.7)


def test_float32_arrays_keep_precision():
    v = np.arange(4, dtype=np.float32)
    out = assert_round_trip(float32_ops, v, 0.5, rtol=1e-6)
    assert out[0].dtype == np.float32
    np.testing.assert_allclose(out[0], np.arange(4) + 1.0)


def test_forward_mutates_arrays_in_place_and_returns_all_parameters():
    x = np.arange(3.0)
    out = loops(0.0, x)
    assert out[1] is x and len(out) == 2


def test_inverse_of_inverse_is_forward():
    assert ~~loops is loops
    assert loops.inverse is ~loops
    assert (~loops).programs == ("inverse", "inverse_adjoint")


@reversible
def squares_into(x, y):
    """x += 2 y²: a function whose inverse is easy to write down."""
    for i in range(len(x)):
        x[i] += 2.0 * y[i] * y[i]


def test_every_method_of_f_works_on_its_inverse():
    """``~f`` is a reversible function like any other: each public method of ``f`` runs on it, with
    what ``~f`` means (its forward program is ``f``'s inverse; options give ``~`` of ``f`` with them)."""
    g = ~squares_into
    x, y = np.array([3.0, 5.0]), np.array([1.0, 2.0])
    types = g.argument_types((x, y))
    exercised = {
        "argument_types": types == squares_into.argument_types((x, y)),
        "bind": g.bind((), {"x": 1.0, "y": 2.0}) == (1.0, 2.0),
        "default_types": g.default_types() == squares_into.default_types(),
        "forward_function": g.forward_function is squares_into,
        "fused_vjp": g.fused_vjp == "inverse_vjp",
        "inverse": g.inverse is squares_into,
        "modified_positions": g.modified_positions() == {0},
        "parameter_names": g.parameter_names == ("x", "y"),
        "partial_note": "'x'" in g.partial_note((x, y)),
        "programs": g.programs == ("inverse", "inverse_adjoint"),
        "source": "the inverse program of squares_into" in g.source()
                  and "the forward program" in g.source("inverse")
                  and "the inverse_adjoint program" in g.source("adjoint", x, y),
        "specialize": g.specialize(types) is squares_into.specialize(types),
        "validate": g.validate((x, y)) is None,
        "version": g.version() == squares_into.version(),
        "unchanged": g.unchanged() is squares_into.unchanged() is True,
        "with_options": g.with_options(check=False) is ~squares_into.with_options(check=False)
                        and not g.with_options(check=False).options.check,
    }
    public = {n for n in dir(type(squares_into)) if not n.startswith("_")}
    assert set(exercised) == public, "a method of f left out of this test"
    assert all(exercised.values()), [name for name, ok in exercised.items() if not ok]
    np.testing.assert_array_equal(g(x.copy(), y)[0], x - 2.0 * y * y)
    with pytest.raises(ValueError, match="must be one of"):
        g.source("vjp_forward")  # f's forward half of a fused vjp has no inverse counterpart
    with pytest.raises(ValueError, match="read-only"):
        g.validate((np.broadcast_to(1.0, (2,)), y))


def test_check_false_drops_runtime_checks():
    fast = mul_div.with_options(check=False)
    assert "_err[0] = " not in fast.source("forward")
    assert "_err[0] = " in mul_div.source("forward")
    assert fast(3.0, 0.4) == pytest.approx(mul_div(3.0, 0.4))


def test_check_false_reaches_callees():
    from revdiff.programs.gram_schmidt import cgs2
    A = np.random.default_rng(0).standard_normal((6, 3))
    args = (np.zeros((6, 3)), np.zeros((3, 3)), A)
    fast = cgs2.with_options(check=False)
    spec = fast.specialize(fast.argument_types(args))
    assert "_err[0] = " not in spec.source("adjoint")
    assert spec.dependencies and all(not dep.options.check for dep, _ in spec.dependencies.values())
    for dep, program in spec.dependencies.values():
        assert "_err[0] = " not in dep.source(program), program
    assert "_err[0] = " in cgs2.specialize(cgs2.argument_types(args)).source("forward")
    np.testing.assert_array_equal(fast(*args)[0], cgs2(*args)[0])


def test_source_is_readable_python():
    src = loops.source("inverse")
    assert "def loops_inverse(s, x, _err):" in src
    assert "# line" in src and "s -= x[i]" in src
    compile(src, "<generated>", "exec")


def test_bad_arguments():
    with pytest.raises(TypeError, match="takes 2 arguments"):
        loops(0.0)
    with pytest.raises(TypeError, match="argument 'x'"):
        loops(0.0, "abc")
    x = np.arange(3.0)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        swap_neg(1.0, 2.0, x)


def test_copy_args_helper_is_independent():
    x = np.zeros(2)
    assert copy_args((x,))[0] is not x


@reversible
def words_through_the_module(y, x):
    t = revdiff.zero()
    v = rd.zeros((2,), np.float64)
    with revdiff.routine:
        t += x[0] * 2.0
        v[0] += x[1]
    y += t * v[0]
    rd.rot(y, t, 0.25)
    rd.irot(y, t, 0.25)
    ~revdiff.routine
    del v
    del t


def test_the_language_words_written_through_the_revdiff_module():
    """revdiff.zero(), rd.zeros(...), revdiff.routine, rd.rot(...) read as the bare words do."""
    x = np.array([1.5, 2.0])
    assert words_through_the_module(0.0, x)[0] == 6.0
    assert_round_trip(words_through_the_module, 0.0, x)
    g_y, g_x = revdiff.grad(words_through_the_module, "y")(0.0, x)
    np.testing.assert_allclose(g_x, [4.0, 3.0], rtol=1e-15)


@reversible
def scaled_sum_α(y, α, x):
    ä = 2.0 * α
    for ï in range(len(x)):
        y += ä * x[ï]


def test_names_outside_ascii_compile_everywhere():
    """Python allows ``α``; LLVM's names take it quoted, with the suffixes of the values derived from
    it (``.ref``, ``.shape0``) inside the quotes: calls, gradients, tangents and lanes all run."""
    x = np.arange(3.0)
    assert scaled_sum_α(0.0, 1.5, x)[0] == 9.0
    assert rd.grad(scaled_sum_α, "y")(0.0, 1.5, x)[1] == 6.0
    assert rd.jvp(scaled_sum_α, (0.0, 1.5, x), (0.0, 1.0, np.zeros(3)))[1][0] == 6.0
    lanes = rd.batched(scaled_sum_α, ["y", "α", "x"], layout="lanes")
    np.testing.assert_array_equal(lanes(np.zeros(300), np.full(300, 1.5), np.ones((300, 3)))[0], np.full(300, 9.0))
    assert scaled_sum_α.with_options(backend="python")(0.0, 1.5, x)[0] == 9.0
