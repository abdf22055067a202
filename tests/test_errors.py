"""Every static and runtime rule: the exception, the user's line, and the wording users see.

Each offending line carries a marker comment (``# E:name``); the test finds that line in this file
and asserts the error points exactly there."""
import math

import numpy as np
import pytest
from numpy import sin

import revdiff
from revdiff import ReversibilityError, ancilla, release, reversible, routine, zero, zeros

from helpers import assert_error_at, fused_vjp, marked_line

THIS_FILE = __file__


def line_of(marker: str) -> int:
    return marked_line(THIS_FILE, marker)


def assert_error(exc_info, marker: str, *phrases: str):
    assert_error_at(exc_info, THIS_FILE, marker, *phrases)
    assert f"line {line_of(marker)}" in str(exc_info.value)


@reversible
def helper(a, b):
    a += b


def not_reversible(x):
    return x


# ----------------------------------------------------------------------------- static rules


def test_target_read_by_right_hand_side():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, x):
            y += y * x  # E:self_read
    assert_error(e, "self_read", "target 'y' is read by its own right-hand side")


def test_same_array_element_read_by_right_hand_side():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(a, i):
            a[i] *= a[i] + 1.0  # E:self_elem
    assert_error(e, "self_elem", "target 'a[i]' is read by its own right-hand side")


def test_plain_assignment_to_parameter():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(x):
            x = 1.0  # E:assign_param
    assert_error(e, "assign_param", "plain assignment to the parameter 'x' is not reversible")


def test_plain_assignment_to_element():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(a):
            a[0] = 1.0  # E:assign_elem
    assert_error(e, "assign_elem", "plain assignment to an array element is not reversible")


def test_binding_reads_modified_value():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(x, y):
            h = 2.0 * x  # E:bind_reads
            x += y
            y += h
    assert_error(e, "bind_reads", "reads 'x', which the function modifies", "zero()")


def test_binding_modified_later():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(x, dt):
            h = 0.5 * dt
            h += x  # E:bind_modified
    assert_error(e, "bind_modified", "'h' is a constant binding and cannot be modified")


def test_loop_variable_modified():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(x):
            for i in range(3):
                i += 1  # E:loopvar
    assert_error(e, "loopvar", "loop variable 'i' is modified")


def test_loop_bounds_modified():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(x, n):
            for i in range(n):  # E:bounds
                n += 1
    assert_error(e, "bounds", "loop bounds read 'n', which the loop body modifies")


def test_condition_changed_without_post():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(x):
            if x > 0:  # E:cond
                x += 1.0
    assert_error(e, "cond", "the condition reads 'x', which a branch modifies", "if (pre, post)")


def test_while_needs_pre_post():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(x):
            while x < 3:  # E:while
                x += 1.0
    assert_error(e, "while", "needs (pre, post) conditions")


def test_ancilla_used_before_allocation():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y):
            y += t  # E:before_alloc
            t = zero()
            del t
    assert_error(e, "before_alloc", "'t' is used before it is allocated")


def test_ancilla_allocated_twice():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y):
            t = zero()
            t = 0.0  # E:twice
            del t
    assert_error(e, "twice", "'t' is already a live ancilla")


def test_names_beginning_with_an_underscore_are_the_users():
    """Generated code names its own variables with a leading underscore (``_err``, ``_t3``, ``_b``);
    a user's ``_err``, ``_t``, ``_i`` or ``_`` is compiled under another name (``user_names``), so it
    meets none of them, runs as written, is bound by keyword, and messages name it as written."""
    @reversible
    def g(_err, _b, u_b, _t3, _scale_x):
        for _i in range(3):
            _err += _b * _t3
        _t = ancilla(_b)
        u_b += _t * 2.0
        release(_t, _b)
        for _ in range(2):
            _scale_x += 1.0

    out = g(1.0, 2.0, 3.0, 4.0, _scale_x=5.0)
    assert out == (25.0, 2.0, 7.0, 4.0, 7.0)
    assert (~g)(*out) == (1.0, 2.0, 3.0, 4.0, 5.0)
    assert g.with_options(backend="python")(1.0, 2.0, 3.0, 4.0, 5.0) == out
    grads = revdiff.vjp(g, 1.0, 2.0, 3.0, 4.0, 5.0)[1](1.0, 1.0, 1.0, 1.0, 1.0)
    assert grads == (1.0, 1.0 + 3 * 4.0 + 2.0, 1.0, 1.0 + 3 * 2.0, 1.0)
    batch = revdiff.batched(g, ["_err", "_b", "u_b", "_t3", "_scale_x"])(np.ones(4), np.full(4, 2.0), np.zeros(4), np.ones(4), np.zeros(4))
    np.testing.assert_array_equal(batch[0], np.full(4, 7.0))
    with pytest.raises(TypeError, match="unexpected keyword argument 'u_err'.*parameters: _err, _b, u_b"):
        g(1.0, 2.0, 3.0, 4.0, u_err=5.0)

    @reversible
    def h(x, _y):
        _t = ancilla(_y)
        x += _t
        _y += 1.0
        release(_t, _y)  # E:underscore_release
    with pytest.raises(ReversibilityError) as e:
        h(0.0, 1.0)
    assert_error(e, "underscore_release", "ancilla '_t' no longer equals _y")
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def k(_x):
            _t = zero()
            _t = 0.0  # E:underscore_twice
            del _t
    assert_error(e, "underscore_twice", "'_t' is already a live ancilla")
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def m(y, _z):
            y += u_helper(_z)  # E:global_u_name
    assert_error(e, "global_u_name", "'u_helper' is not a pure function")  # a global keeps its name

    @reversible
    def reads_global(_t, y):  # the local _t compiles as u_t: the global u_t must stay the global
        y += u_t * _t
    assert reads_global(2.0, 0.0) == (2.0, 200.0)
    assert revdiff.grad(reads_global, "y")(2.0, 0.0) == (100.0, 1.0)
    with pytest.raises(ReversibilityError, match="variable named 'np': the generated Python calls the module"):
        shadows_numpy.with_options(backend="python")(1.0, 2.0)
    assert shadows_numpy(1.0, 2.0) == (1.0 + 2.0 * math.sin(2.0), 2.0)  # the compiled backend reads no module


u_t = 100.0
GLOBAL_WEIGHTS = np.ones(3)


def test_a_global_array_is_refused_as_state_behind_the_parameters():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, x):
            y += GLOBAL_WEIGHTS[0] * x  # E:global_array
    assert_error(e, "global_array", "'GLOBAL_WEIGHTS' is a global ndarray", "pass 'GLOBAL_WEIGHTS' as an argument")


def u_helper(y):
    return y


@reversible
def shadows_numpy(y, np):
    y += np * sin(np)  # printed as np.sin(np) in the generated Python


def test_ancilla_never_deallocated():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y):
            t = zero()  # E:leak
            y += t
    assert_error(e, "leak", "ancilla 't' is never deallocated", "del t")


def test_ancilla_deallocated_twice():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y):
            t = zero()
            del t
            del t  # E:dealloc2
    assert_error(e, "dealloc2", "'t' is not a live ancilla here")


def test_deallocate_parameter():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y):
            del y  # E:del_param
    assert_error(e, "del_param", "'y' is a parameter")


def test_unmatched_routine():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, x):
            with routine:  # E:routine_open
                y += x
    assert_error(e, "routine_open", "never undone", "~routine")


def test_uncompute_without_routine():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, x):
            ~routine  # E:routine_close
    assert_error(e, "routine_close", "'~routine' has no matching 'with routine:'")


def test_same_variable_passed_twice():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, x):
            helper(y, y)  # E:alias_call
    assert_error(e, "alias_call", "'y' is passed twice to 'helper'")


def test_call_of_non_reversible_function():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y):
            not_reversible(y)  # E:nonrev
    assert_error(e, "nonrev", "'not_reversible' is not a reversible function")


def test_unknown_function_in_expression():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, x):
            y += not_reversible(x)  # E:impure
    assert_error(e, "impure", "is not a pure function revdiff knows")


def test_non_invertible_update():
    with pytest.raises(ReversibilityError) as e:
        @reversible
        def f(y, x):
            y **= x  # E:pow
    assert_error(e, "pow", "'**=' is not invertible")


@pytest.mark.parametrize("marker,phrase", [
    ("ret", "'return' is not allowed"),
    ("brk", "'break' is not allowed"),
    ("try", "'try' is not allowed"),
    ("glob", "'global' is not allowed"),
    ("comp", "a list comprehension is not allowed"),
])
def test_unsupported_syntax(marker, phrase):
    with pytest.raises(ReversibilityError) as e:
        if marker == "ret":
            @reversible
            def f(y):
                return y  # E:ret
        elif marker == "brk":
            @reversible
            def f(y):
                for i in range(3):
                    break  # E:brk
        elif marker == "try":
            @reversible
            def f(y):
                try:  # E:try
                    y += 1.0
                finally:
                    y -= 1.0
        elif marker == "glob":
            @reversible
            def f(y):
                global THIS_FILE  # E:glob
        else:
            @reversible
            def f(y):
                y += abs([1.0 for i in range(3)])  # E:comp
    assert_error(e, marker, phrase)


def test_xor_on_floats_is_a_type_error_at_first_call():
    @reversible
    def f(y, x):
        y ^= x  # E:xor
    with pytest.raises(ReversibilityError) as e:
        f(1.0, 2.0)
    assert_error(e, "xor", "'t ^= e' does not apply to float values")


def test_arithmetic_updates_of_bools_are_refused_at_first_call():
    """NumPy's bool + is a logical or, which loses its operand (True + True is True), and a bool
    scalar would become the integer 2: bools update with ^= only."""
    @reversible
    def element(x, a):
        x[0] += a[0]  # E:bool_element

    @reversible
    def whole(x, a):
        x[:] += a  # E:bool_whole

    @reversible
    def add(x, a):
        x += a  # E:bool_add

    @reversible
    def sub(x, a):
        x -= a  # E:bool_sub

    @reversible
    def mul(x, a):
        x *= a  # E:bool_mul

    @reversible
    def div(x, a):
        x /= a  # E:bool_div

    arrays = (np.array([True, False]), np.array([True, True]))
    for f, marker, args in ((element, "bool_element", arrays), (whole, "bool_whole", arrays),
                            (add, "bool_add", (True, True)), (sub, "bool_sub", (True, True)),
                            (mul, "bool_mul", (True, True)), (div, "bool_div", (True, True))):
        with pytest.raises(ReversibilityError) as e:
            f(*args)
        assert_error(e, marker, "does not apply to bool values", "bools update with ^=")


def test_masks_index_arrays_and_bool_indices_are_refused_by_name():
    """NumPy reads a bool (array) index as a mask and an integer array as a gather; the error names
    the user's line, not the generated code."""
    @reversible
    def f(y, x, m):
        y[m] += x[0]  # E:mask

    for m, what in ((np.array([True, False, True]), "an array of bool"), (True, "a bool"),
                    (np.array([0, 1]), "an array of int64"), (1.0, "a float64")):
        with pytest.raises(ReversibilityError) as e:
            f(np.zeros(3), np.ones(3), m)
        assert_error(e, "mask", f"an index of 'y' is not an integer: 'm' is {what}")


def test_ordering_comparisons_of_complex_values_are_refused_by_name():
    @reversible
    def branch(y, z):
        if z > 0:  # E:complex_branch
            y += 1.0

    @reversible
    def select(y, z):
        y += 1.0 if 0.5 <= z else 0.0  # E:complex_select

    @reversible
    def equal(y, z):
        if z == 1j:
            y += 1.0

    for f, marker, op in ((branch, "complex_branch", ">"), (select, "complex_select", "<=")):
        with pytest.raises(ReversibilityError) as e:
            f(0.0, 1j)
        assert_error(e, marker, f"'{op}' orders real numbers, and 'z' is complex")
    assert equal(0.0, 1j)[0] == 1.0 and equal(0.0, 2j)[0] == 0.0


def test_an_array_updated_as_a_number_is_shown_its_view():
    @reversible
    def f(v, u):
        v += u  # E:whole

    with pytest.raises(ReversibilityError) as e:
        f(np.zeros(3), np.ones(3))
    assert_error(e, "whole", "'v' is an array", "'v[:] += ...'")


def test_integer_values_in_messages_are_printed_as_integers():
    @reversible
    def f(y, n, s):
        for i in range(0, n, s):  # E:step
            y += 1.0

    @reversible
    def g(k, j):
        k /= j  # E:remainder

    with pytest.raises(ReversibilityError) as e:
        f(0.0, 5, 0)
    assert_error(e, "step", "(value 0)")
    with pytest.raises(ReversibilityError) as e:
        g(2 ** 40 + 1, 2)
    assert_error(e, "remainder", f"(value {2 ** 40 + 1})")


def test_silent_conversion_is_refused():
    @reversible
    def f(k, x):
        k += x  # E:convert
    with pytest.raises(ReversibilityError) as e:
        f(1, 2.5)
    assert_error(e, "convert", "float value of the right-hand side would be silently converted to int")


# ----------------------------------------------------------------------------- runtime rules


@reversible
def leaky(y, x):
    t = zero()
    t += x
    y += t
    del t  # E:not_zero


@reversible
def bad_post(x):
    if (x > 0, x > 10):  # E:post
        x += 1.0
    else:
        x -= 1.0


@reversible
def divide(y, x):
    y /= x  # E:div0


@reversible
def multiply(y, x):
    y *= x  # E:mul0


@reversible
def element_alias(a, i, j):
    a[i] += a[j] * 2.0  # E:elem_alias


@reversible
def bad_while(x, k):
    while (k < 3, k > 1):  # E:while_rt
        k += 1


def test_ancilla_not_zero_at_deallocation():
    with pytest.raises(ReversibilityError) as e:
        leaky(0.0, 0.5)
    assert_error(e, "not_zero", "ancilla 't' is not zero at deallocation", "value 0.5")


def test_ancilla_tolerance_is_configurable():
    loose = leaky.with_options(atol=1.0)
    assert loose(0.0, 0.5) == (0.5, 0.5)


def test_post_condition_mismatch():
    with pytest.raises(ReversibilityError) as e:
        bad_post(1.0)
    assert_error(e, "post", "post-condition x > 10 does not match the branch taken")


def test_division_by_zero():
    with pytest.raises(ReversibilityError) as e:
        divide(1.0, 0.0)
    assert_error(e, "div0", "division by zero")


def test_multiplication_by_zero():
    with pytest.raises(ReversibilityError) as e:
        multiply(1.0, 0.0)
    assert_error(e, "mul0", "multiplication by zero")


def test_element_alias_at_run_time():
    a = np.ones(3)
    assert element_alias(a, 0, 1)[0][0] == 3.0
    with pytest.raises(ReversibilityError) as e:
        element_alias(a, 2, 2)
    assert_error(e, "elem_alias", "'a[j]' is the same element as the target 'a[i]'")


def test_while_post_condition_on_entry():
    with pytest.raises(ReversibilityError) as e:
        bad_while(0.0, 2)
    assert_error(e, "while_rt", "must be false on entry")


def test_while_post_condition_after_iteration():
    with pytest.raises(ReversibilityError) as e:
        bad_while(0.0, 0)
    assert_error(e, "while_rt", "must be true after every iteration")


def test_arguments_sharing_memory():
    a = np.ones(4)
    with pytest.raises(ReversibilityError, match="arguments 'a' and 'b' .* share memory"):
        @reversible
        def two(a, b):
            a[0] += b[1]
        two(a, a[1:])


def test_runtime_errors_also_on_python_backend():
    with pytest.raises(ReversibilityError) as e:
        divide.with_options(backend="python")(1.0, 0.0)
    assert_error(e, "div0", "division by zero")


def test_argument_too_small_raises_instead_of_crashing():
    @reversible
    def copy_into(y, x):
        for i in range(len(x)):
            y[i] += x[i]  # E:index

    # the bound check runs once before the loop, for the largest index the loop reaches
    with pytest.raises(IndexError, match=r"index i is out of bounds for axis 0 of 'y' \(index = 4, size = 2\)"
                                         r".*shapes: \(2,\), \(5,\)") as e:
        copy_into(np.zeros(2), np.ones(5))
    assert f"{THIS_FILE}\", line {line_of('index')}" in str(e.value)
    with pytest.raises(IndexError, match=r"index i is out of bounds for axis 0 of 'y'"):  # the inverse too
        (~copy_into)(np.zeros(2), np.ones(5))


@reversible
def neighbours(y, x):
    n = len(x)
    for i in range(n):
        y[i] += (x[i + 1] if i < n - 1 else 0.0) + (i > 0 and x[i - 1] > 0.0)  # E:guarded_index


@reversible
def shifted(y, x):
    for i in range(len(x)):
        y[i] += x[i + 1]  # E:unguarded_index


def test_index_checks_follow_conditional_evaluation():
    """An index read only under a condition is checked only under it; an unguarded one is reported."""
    out = neighbours(np.zeros(4), np.arange(4.0))[0]
    np.testing.assert_array_equal(out, [1.0, 2.0, 4.0, 1.0])
    with pytest.raises(IndexError, match=r"index i \+ 1 is out of bounds for axis 0 of 'x' \(index = 4, size = 4\)"):
        shifted(np.zeros(4), np.arange(4.0))


@reversible
def ancilla_inside_a_routine(s, A):
    c = zero(float)
    with routine:
        u = zeros(A.shape[0], float)
        u[:] += A[:, 0]
        u[:] += A[:, 1]
        c += u[0]
        u[:] -= A[:, 1]  # (a + b) - b differs from a by rounding of b's size
        u[:] -= A[:, 0]
        del u
    s += c
    ~routine
    del c


def test_an_ancilla_allocated_inside_a_routine_is_measured_again_when_uncomputed():
    """The uncompute of a routine does not rescan the ancillas that outlive it (the compute saw the
    same magnitudes), but one allocated inside restarts from zero there: its zero check still
    scales with the 1e8 it held, in the inverse and the adjoint alike."""
    A = np.array([[0.1, 1e8], [0.3, -1e8]])
    assert "_scale_u = _host_largest_magnitude(_scale_u, u)" in ancilla_inside_a_routine.source("inverse", 0.0, A)
    s = ancilla_inside_a_routine(0.0, A)[0]
    assert s == pytest.approx(1e8)
    assert ancilla_inside_a_routine.inverse(s, A)[0] == pytest.approx(0.0, abs=1e-6)
    for gA in (revdiff.vjp(ancilla_inside_a_routine, 0.0, A)[1](1.0, None)[1],
               fused_vjp(ancilla_inside_a_routine, (0.0, A), (1.0, None))[1][1]):
        np.testing.assert_array_equal(gA, [[1.0, 1.0], [0.0, 0.0]])


@reversible
def ratios(y, x, d):
    for i in range(len(x)):
        y[i] += x[i] / d[i]  # E:expression_division
        y[i] += x[i] / d[i] if d[i] != 0 else 0.0  # evaluated only where d[i] is not zero


@reversible
def window(y, x, k):
    t = zeros(k - 1, float)  # E:negative_size
    for i in range(k - 1):
        t[i] += x[i]
    for i in range(k - 1):
        y[i] += t[i]
    for i in range(k - 1):
        t[i] -= x[i]
    del t


def test_division_by_zero_and_negative_sizes_name_the_line_in_every_batch_element():
    """Python raises ZeroDivisionError for x / 0; generated code says so with the user's line, also
    in batch element 2 of a batched call, where compiled code would divide without raising (the
    batch once returned element 2 half computed). A guarded division is checked only under its guard."""
    d = np.array([[1.0, 2.0], [4.0, 0.5], [1.0, 0.0], [2.0, 2.0]])
    x = np.ones((4, 2))
    with pytest.raises(ZeroDivisionError, match=r"division by zero: d\[i\] is 0") as e:
        ratios(np.zeros(2), x[2], d[2])
    assert f"{THIS_FILE}\", line {line_of('expression_division')}" in str(e.value)
    bf = revdiff.batched(ratios, ("y", "x", "d"))
    with pytest.raises(ZeroDivisionError, match=r"d\[i\] is 0 in batch element 2"):
        bf(np.zeros((4, 2)), x, d)
    np.testing.assert_array_equal(bf(np.zeros((2, 2)), x[:2], d[:2])[0], 2 / d[:2])
    with pytest.raises(ValueError, match=r"ancilla 't' gets a negative size k - 1 \(size = -1\)") as e:
        window(np.zeros(3), np.ones(3), 0)
    assert f"{THIS_FILE}\", line {line_of('negative_size')}" in str(e.value)
    np.testing.assert_array_equal(window(np.zeros(3), np.ones(3), 3)[0], [1.0, 1.0, 0.0])


def test_failure_codes_name_function_and_check_exactly():
    """A failed check writes one code (function key and check index) into a float64 record: exact
    for every key (below 2**31) and index, and an index past the limit is refused when lowering."""
    from revdiff.errors import SourceLocation
    from revdiff.ir import checks
    for fkey, idx in ((0, 1), (2**31 - 1, 2**20 - 1), (123456789, 4321)):
        code = float(checks.failure_code(fkey, idx))
        assert code != 0.0 and checks.decode(code) == (fkey, idx)
    info = checks.CheckInfo("m", SourceLocation("f.py", 1, 0, "x += 1"))
    with pytest.raises(ValueError, match="cannot have more than"):
        checks.register(5, 2**20, info)


@reversible
def ancilla_in_a_column(A, y):
    t = zeros(len(y), float)
    with routine:
        t[:] += A[:, 1]
    y[:] += t  # the scale of t's zero check: the largest magnitude of the column it held
    ~routine
    del t


def test_ancilla_scales_are_the_largest_magnitude_of_what_was_written():
    from revdiff.targets.llvm.host_routines import compiled_largest, largest_magnitude
    A = np.arange(12.0).reshape(4, 3) - 6.0
    for view in (A, A[:, 1], A[1:3, ::2], A.T, A.astype(np.float32)[:, 2], A * (1 - 2j)):
        assert largest_magnitude(0.5, view) == max(0.5, np.abs(view).max())
        rows = view.reshape(-1, view.shape[-1]) if view.ndim == 2 else view[None]
        scale = 0.5
        for row in rows:
            scale = compiled_largest(scale, row)
        assert scale == max(0.5, np.abs(view).max())
    assert largest_magnitude(100.0, A) == 100.0
    src = ancilla_in_a_column.source("forward", A, np.zeros(4))
    assert src.count("_scale_t = _host_largest_magnitude(_scale_t, t)") == 1  # the uncompute rescans nothing
    y = ancilla_in_a_column(A, np.zeros(4))[1]
    np.testing.assert_array_equal(y, A[:, 1])
