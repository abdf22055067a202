"""Checks that cannot fail are left out of the generated code (``optimize/prune.py``), checks that
can fail stay and still name the user's line; small arguments compile programs without BLAS
branches (``function.blas_for``) and give the same results."""
import numpy as np
import pytest

from helpers import assert_gradient, assert_round_trip
from revdiff import reversible, routine, zero, zeros
from revdiff.ir.high import BinOp, BoolOp, Compare, Const, Index, Name, Shape, Unary
from revdiff.ir.low import AugAssign, Check, LowFunction, Loop, walk_statements
from revdiff.optimize.prune import prune_checks

THIS_FILE = __file__
rng = np.random.default_rng(11)


def checks(f, program: str, *args) -> list:
    spec = f.specialize(f.argument_types(args))
    return [s for s in walk_statements(spec.low_function(program).body) if isinstance(s, Check)]


def index_checks_on(found: list, array: str) -> list:
    return [c for c in found if any(isinstance(n, Shape) and n.base == array for n in _walk(c.ok))]


def _walk(e):
    from revdiff.ir.high import walk_expr
    return walk_expr(e)


@reversible
def sum_of_squares(s, v):
    for i in range(len(v)):
        s += v[i] * v[i]


@reversible
def copy_into(y, x):
    for i in range(len(x)):
        y[i] += x[i]
        y[i] += 2.0 * x[i]


@reversible
def bump(y, x, k):
    y[k] += x[0]
    k += 1
    y[k] += x[0]  # E:second


def test_loop_ranges_prove_indices_in_every_program():
    """``v[i]`` for i in range(len(v)) needs no check: forward, inverse (reversed loop) and adjoint
    (``g_v`` has v's shape)."""
    for program in ("forward", "inverse", "adjoint", "vjp"):
        assert index_checks_on(checks(sum_of_squares, program, 0.0, np.ones(5)), "v") == [], program
        assert index_checks_on(checks(sum_of_squares, program, 0.0, np.ones(5)), "g_v") == [], program
    assert_round_trip(sum_of_squares, 0.0, rng.standard_normal(5))
    assert_gradient(sum_of_squares, 0.5, rng.standard_normal(5))


def test_an_index_bounded_by_another_array_is_checked_once_per_iteration():
    """``y[i]`` with i bounded by len(x) can fail: checked, once per iteration (the second read in
    the same iteration is implied by the first), and the failure names the first line."""
    found = index_checks_on(checks(copy_into, "forward", np.zeros(3), np.ones(3)), "y")
    assert len(found) == 1
    with pytest.raises(IndexError, match=r"index i is out of bounds for axis 0 of 'y' \(index = 2, size = 2\)"):
        copy_into(np.zeros(2), np.ones(3))
    np.testing.assert_array_equal(copy_into(np.zeros(3), np.ones(3))[0], [3.0, 3.0, 3.0])


def test_a_check_after_its_index_changes_is_kept():
    with open(THIS_FILE) as fh:
        line = next(n for n, text in enumerate(fh, 1) if text.rstrip().endswith("# E:second"))
    assert len(index_checks_on(checks(bump, "forward", np.zeros(3), np.ones(1), 0), "y")) == 2
    with pytest.raises(IndexError, match=r"index k is out of bounds for axis 0 of 'y' \(index = 3, size = 3\)") as e:
        bump(np.zeros(3), np.ones(1), 2)
    assert f"line {line}" in str(e.value)


def _check(ok, idx):
    return Check(ok, 1, idx, ())


def test_pass_keeps_checks_whose_facts_were_reassigned():
    """Low-level cases: a loop bound the body changes proves nothing; a fact about a scalar dies
    when it is reassigned; a fact learnt inside a loop does not hold after it (zero iterations)."""
    i, n, k = Name("i"), Name("n"), Name("k")
    size = Shape("y", 0)
    in_range = Compare("<", i, size)
    bounded = [Loop("i", Const(0), size, Const(1), [_check(in_range, 1)])]
    assert [s for s in walk_statements(prune_checks(LowFunction("f", [], bounded, [])).body) if isinstance(s, Check)] == []
    changing = [Loop("i", Const(0), n, Const(1), [AugAssign(n, "+", Const(1)), _check(Compare("<", i, n), 1)])]
    assert len([s for s in walk_statements(prune_checks(LowFunction("f", [], changing, [])).body)
                if isinstance(s, Check)]) == 1
    ok_k = Compare("<", k, size)
    reassigned = [_check(ok_k, 1), AugAssign(k, "+", Const(1)), _check(ok_k, 2)]
    assert len(prune_checks(LowFunction("f", [], reassigned, [])).body) == 3
    repeated = [_check(ok_k, 1), AugAssign(Index("y", (k,)), "+", Const(1.0)), _check(ok_k, 2)]
    assert len(prune_checks(LowFunction("f", [], repeated, [])).body) == 2  # element writes change no fact
    inside = [Loop("i", Const(0), n, Const(1), [_check(ok_k, 1)]), _check(ok_k, 2)]
    out = prune_checks(LowFunction("f", [], inside, [])).body
    assert isinstance(out[-1], Check) and out[-1].ok == ok_k  # the loop may run zero times
    partly = [_check(Compare("<=", Const(0), k), 1), _check(BoolOp("and", (Compare("<=", Const(0), k), ok_k)), 2)]
    out = prune_checks(LowFunction("f", [], partly, [])).body
    assert out[1].ok == ok_k  # the implied conjunct is dropped, the other kept


def test_loop_invariant_checks_run_once_before_the_loop():
    """A check that reads nothing the loop writes and no element moves before the loop, guarded by
    the loop running at all; one that reads an element or a name the body writes, or reads the
    loop variable other than through sums and differences, stays in the body."""
    i, n, d = Name("i"), Name("n"), Name("d")
    nonzero = Compare("!=", d, Const(0))
    in_z = Compare("<", BinOp("*", i, i), Shape("z", 0))
    body = [AugAssign(Index("y", (i,)), "+", Const(1.0)), _check(nonzero, 1), _check(in_z, 2)]
    out = prune_checks(LowFunction("f", [], [Loop("i", Const(0), n, Const(1), body)], [])).body
    assert out[0] == _check(BoolOp("or", (Unary("not", Compare("<", Const(0), n)), nonzero)), 1)
    assert [s for s in out[1].body if isinstance(s, Check)] == [_check(in_z, 2)]
    backwards = prune_checks(LowFunction("f", [], [Loop("i", n, Const(-1), Const(-1), body)], [])).body
    assert backwards[0].ok == BoolOp("or", (Unary("not", Compare(">", n, Const(-1))), nonzero))
    element = _check(Compare("!=", Index("y", (Const(0),)), Const(0)), 3)
    stays = [element, AugAssign(d, "+", Const(1.0)), _check(nonzero, 4)]
    out = prune_checks(LowFunction("f", [], [Loop("i", Const(0), n, Const(1), stays)], [])).body
    assert len(out) == 1 and out[0].body == stays


def test_bound_checks_monotone_in_the_loop_variable_run_once_at_the_extreme_iteration():
    """``k + i < s`` holds for every i of range(a, n) when it holds for i = n - 1, and ``-s <= k + i``
    when it holds for i = a; a reversed loop range(last, -1, -1) swaps the ends. Each moves before
    the loop as its own check (same error), reporting the extreme index."""
    i, k, n, last = Name("i"), Name("k"), Name("n"), Name("last")
    size = Shape("z", 0)
    index = BinOp("+", k, i)
    both = Check(BoolOp("and", (Compare("<=", Unary("-", size), index), Compare("<", index, size))), 1, 7,
                 (index, size))
    body = [AugAssign(Index("z", (index,)), "+", Const(1.0)), both]
    out = prune_checks(LowFunction("f", [], [Loop("i", Name("a"), n, Const(1), body)], [])).body
    runs = Unary("not", Compare("<", Name("a"), n))
    low, high = BinOp("+", k, Name("a")), BinOp("+", k, BinOp("-", n, Const(1)))
    assert out[:2] == [Check(BoolOp("or", (runs, Compare("<=", Unary("-", size), low))), 1, 7, (low, size)),
                       Check(BoolOp("or", (runs, Compare("<", high, size))), 1, 7, (high, size))]
    assert [s for s in out[2].body if isinstance(s, Check)] == []
    out = prune_checks(LowFunction("f", [], [Loop("i", last, Const(-1), Const(-1), body)], [])).body
    runs = Unary("not", Compare(">", last, Const(-1)))
    assert out[:2] == [Check(BoolOp("or", (runs, Compare("<=", Unary("-", size), k))), 1, 7, (k, size)),
                       Check(BoolOp("or", (runs, Compare("<", BinOp("+", k, last), size))), 1, 7,
                             (BinOp("+", k, last), size))]
    shrinking = Check(Compare("<", BinOp("-", k, i), size), 1, 8, ())  # largest at the smallest i
    out = prune_checks(LowFunction("f", [], [Loop("i", Const(0), n, Const(1), [shrinking])], [])).body
    assert out[0].ok == BoolOp("or", (Unary("not", Compare("<", Const(0), n)), Compare("<", k, size)))
    moving_both = Check(Compare("<", i, BinOp("+", k, i)), 1, 9, ())  # both sides move: stays
    out = prune_checks(LowFunction("f", [], [Loop("i", Const(0), n, Const(1), [moving_both])], [])).body
    assert out[0].body == [moving_both]


@reversible
def shifted_copy(y, x, k):
    for j in range(len(x)):
        y[k + j] += x[j]  # E:shifted_copy


def test_a_hoisted_bound_check_names_the_line_and_the_last_index():
    src = shifted_copy.source("forward", np.zeros(5), np.ones(3), 1)
    assert src.index("k + (x.shape[0] - 1) < y.shape[0]") < src.index("for j in range(0, ")
    np.testing.assert_array_equal(shifted_copy(np.zeros(5), np.ones(3), 2)[0], [0, 0, 1, 1, 1])
    assert shifted_copy(np.zeros(1), np.ones(0), 5)[0].size == 1  # no iteration, no index
    with open(THIS_FILE) as fh:
        line = next(n for n, text in enumerate(fh, 1) if text.rstrip().endswith("# E:shifted_copy"))
    with pytest.raises(IndexError, match=r"out of bounds for axis 0 of 'y' \(index = 5, size = 5\)") as e:
        shifted_copy(np.zeros(5), np.ones(3), 3)
    assert f"line {line}" in str(e.value)
    assert_round_trip(shifted_copy, np.zeros(6), rng.standard_normal(3), 2)
    assert_gradient(shifted_copy, rng.standard_normal(6), rng.standard_normal(3), 2)


@reversible
def divide_all(y, x, d):
    for i in range(len(x)):
        y[i] += x[i] / d  # E:divide_all


def test_a_hoisted_division_check_fails_only_when_the_loop_runs():
    src = divide_all.source("forward", np.zeros(3), np.ones(3), 2.0)
    assert src.index("d != 0") < src.index("for i in range(0, x.shape[0]):")
    assert divide_all(np.zeros(0), np.ones(0), 0.0)[0].size == 0  # no iteration divides
    with open(THIS_FILE) as fh:
        line = next(n for n, text in enumerate(fh, 1) if text.rstrip().endswith("# E:divide_all"))
    with pytest.raises(ZeroDivisionError, match="division by zero: d is 0") as e:
        divide_all(np.zeros(3), np.ones(3), 0.0)
    assert f"line {line}" in str(e.value)
    np.testing.assert_array_equal(divide_all(np.zeros(3), np.ones(3), 2.0)[0], [0.5, 0.5, 0.5])


@reversible
def scaled_sum(s, v):
    """norm2's pattern: conditional arms that index, divide by the loop's stop and by a positive sum."""
    n = len(v)
    t = zero(v.dtype)
    with routine:
        for i in range(n):
            t += abs(v[i]) / n if abs(v[i]) > 1 else abs(v[i])
    s += v[0] / t if t > 0 else 0.0
    s += np.sqrt(t) if t > 0 else 0.0
    ~routine
    del t


@reversible
def guarded_read(t, v, w):
    for i in range(len(w)):
        t += v[i] * 2.0 if w[i] > 0 else 0.0  # E:guarded_read


def test_checks_under_a_condition_are_proven_with_the_condition():
    """``not g or c`` goes when c follows from what holds together with g: an arm's index read
    already checked by the condition's own read, ``n != 0`` inside ``range(n)``, ``t != 0`` and
    ``t >= 0`` (sqrt's domain) under ``t > 0``. No loop body checks anything."""
    for program in ("forward", "inverse", "adjoint", "vjp"):
        spec = scaled_sum.specialize(scaled_sum.argument_types((0.0, np.ones(5))))
        statements = list(walk_statements(spec.low_function(program).body))
        loops = [s for s in statements if isinstance(s, Loop)]
        assert loops and not [s for loop in loops for s in walk_statements(loop.body) if isinstance(s, Check)]
        found = [s for s in statements if isinstance(s, Check)]
        assert not [c for c in found if Compare("!=", Name("t"), Const(0)) in _walk(c.ok)
                    or Compare(">=", Name("t"), Const(0)) in _walk(c.ok)], program
    v = np.array([3.0, -0.5, 2.0, 0.25])
    t = np.abs(v[np.abs(v) > 1]).sum() / 4 + np.abs(v[np.abs(v) <= 1]).sum()
    np.testing.assert_allclose(scaled_sum(0.0, v)[0], v[0] / t + np.sqrt(t), rtol=1e-15)
    assert scaled_sum(0.0, np.zeros(3))[0] == 0.0
    assert_round_trip(scaled_sum, 0.5, rng.standard_normal(6) * 3)
    assert_gradient(scaled_sum, 0.5, rng.standard_normal(6) * 3)


def test_a_guarded_check_that_can_fail_is_kept_and_fails_only_under_its_condition():
    with open(THIS_FILE) as fh:
        line = next(n for n, text in enumerate(fh, 1) if text.rstrip().endswith("# E:guarded_read"))
    found = index_checks_on(checks(guarded_read, "forward", 0.0, np.ones(3), np.ones(5)), "v")
    assert len(found) == 1 and isinstance(found[0].ok, BoolOp) and found[0].ok.op == "or"
    with pytest.raises(IndexError, match=r"index i is out of bounds for axis 0 of 'v' \(index = 3, size = 3\)") as e:
        guarded_read(0.0, np.ones(3), np.ones(5))
    assert f"line {line}" in str(e.value)
    assert guarded_read(0.0, np.ones(3), -np.ones(5))[0] == 0.0  # the arm that reads v never runs


@reversible
def gram(y, x):
    """y += (x x^T) x through an n x n ancilla: 40 x 40 = 1600 entries from a 40-vector."""
    n = len(x)
    M = zeros((n, n), x.dtype)
    with routine:
        for i in range(n):
            for j in range(n):
                M[i, j] += x[i] * x[j]
    y[:] += M @ x
    ~routine
    del M


def test_small_arguments_compile_without_blas_branches():
    """All arrays at most BLAS_MIN_ELEMENTS entries: no BLAS branch in the code; an ancilla larger
    than every argument then runs its product in loops, consistently in every program."""
    x = rng.standard_normal(40)
    src = gram.source("adjoint", np.zeros(40), x)
    assert "_host_" not in src and "blas=False" in src
    big = rng.standard_normal(2100)
    assert "_host_matvec(" in gram.source("forward", np.zeros(2100), big)
    out = gram(np.zeros(40), x.copy())
    np.testing.assert_allclose(out[0], np.outer(x, x) @ x, rtol=1e-12)
    assert_round_trip(gram, np.zeros(40), x)
    assert_gradient(gram, rng.standard_normal(40), x)


@reversible
def apply_shared(y, M, x):
    y[:] += M @ x


def test_a_large_shared_array_keeps_a_batch_out_of_lanes():
    """A shared 50 x 50 matrix makes each element's programs call BLAS: "auto" then runs one element
    per iteration (lanes never call BLAS), and equals single calls bit for bit."""
    import revdiff
    B, n = 300, 50
    M, X = rng.standard_normal((n, n)), rng.standard_normal((B, n))
    bf = revdiff.batched(apply_shared, ("y", "x"))
    arrays = (np.zeros((B, n)), M, X)
    assert bf.lanes("call", apply_shared.argument_types((np.zeros(n), M, X[0])), arrays) is None
    got = bf(*arrays)[0]
    for b in (0, 7, B - 1):
        np.testing.assert_array_equal(got[b], apply_shared(np.zeros(n), M, X[b].copy())[0])
