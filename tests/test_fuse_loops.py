"""Loop fusion (``revdiff/optimize/fuse_loops.py``): crafted loops that must and must not fuse, and
every program computing bit-for-bit what it computes with its loops as written."""
import numpy as np
import pytest

import revdiff
from revdiff import programs as P
from revdiff.ir.high import BinOp, Compare, Const, Index, Name, Shape
from revdiff.ir.low import (AugAssign, Branch, Check, Comment, HostCall, Invoke, Local, Loop, LowFunction, Zero,
                            walk_statements)
from revdiff.optimize.fuse_loops import fuse_loops

i, j, n = Name("i"), Name("j"), Name("n")


def at(array, *indices):
    return Index(array, tuple(indices))


def loop(var, *body, stop=n, step=Const(1)):
    return Loop(var, Const(0), stop, step, list(body))


def fused(*body) -> list:
    return fuse_loops(LowFunction("f", [], list(body), [])).body


def loops(body) -> int:
    return sum(isinstance(s, Loop) for s in walk_statements(body))


# ------------------------------------------------------------------------------ must fuse

def test_loops_over_different_arrays_fuse_and_the_second_takes_the_first_variable():
    body = fused(loop("i", AugAssign(at("x", i), "+", at("a", i))),
                 loop("j", AugAssign(at("y", j), "+", at("a", j))))
    assert len(body) == 1 and body[0].var == "i"
    assert body[0].body == [AugAssign(at("x", i), "+", at("a", i)), AugAssign(at("y", i), "+", at("a", i))]


def test_an_array_written_and_read_only_at_the_loop_index_fuses():
    """x[i] written, then read in the same iteration: the later loop's iteration i sees it done."""
    body = fused(loop("i", AugAssign(at("x", i), "*", Const(2.0))),
                 loop("j", AugAssign(at("y", j), "+", at("x", j))))
    assert loops(body) == 1


def test_the_loop_index_may_index_any_one_dimension_shared_by_every_access():
    """Columns: ``g[k, i]`` written by one body, ``g[k, i]`` read by the other, k an inner loop."""
    k = Name("k")
    first = loop("i", Loop("k", Const(0), Name("m"), Const(1), [AugAssign(at("g", k, i), "+", at("q", k, i))]))
    second = loop("j", Loop("l", Const(0), Name("m"), Const(1), [AugAssign(at("v", Name("l")), "+",
                                                                           at("g", Name("l"), j))]))
    assert loops(fused(first, second)) == 2  # the column loops fused, and in them the inner loops


def test_reductions_keep_their_own_accumulators():
    first = loop("i", Local("s1", Const(0.0)), loop("k", AugAssign(Name("s1"), "+", at("q", Name("k"), i))),
                 AugAssign(at("r", i), "+", Name("s1")))
    second = loop("j", Local("s2", Const(0.0)), loop("l", AugAssign(Name("s2"), "+", at("p", Name("l"), j))),
                  AugAssign(at("t", j), "+", Name("s2")))
    body = fused(first, second)
    assert len(body) == 1
    inner = body[0].body
    # both accumulators set first, one loop summing both, then the two stores
    assert [type(s).__name__ for s in inner] == ["Local", "Local", "Loop", "AugAssign", "AugAssign"]


def test_an_accumulator_set_to_zero_between_loops_moves_before_them():
    """The gradient of an outer product sets its row sums to zero between the restore's loop and
    its own: the zero moves first, and the loops fuse."""
    body = fused(loop("i", AugAssign(at("x", i), "+", at("a", i))),
                 Zero("s", None, "float64"),
                 loop("j", AugAssign(Name("s"), "+", at("g", j)), AugAssign(at("h", j), "+", at("g", j))))
    assert [type(t).__name__ for t in body] == ["Zero", "Loop"] and len(body[1].body) == 3
    # an array allocated between them still keeps them apart (it can fail)
    assert loops(fused(loop("i", AugAssign(at("x", i), "+", at("a", i))), Zero("t", (n,), "float64"),
                       loop("j", AugAssign(at("t", j), "+", at("g", j))))) == 2


def test_a_check_in_one_body_fuses():
    body = fused(loop("i", Check(Compare(">", at("a", i), Const(0.0)), 1, 1, ()), AugAssign(at("x", i), "+", Const(1.0))),
                 loop("j", AugAssign(at("y", j), "+", Const(1.0))))
    assert loops(body) == 1


def test_branches_on_the_same_condition_merge_and_their_loops_fuse():
    cond = Compare(">", Shape("q", 0), Const(32))
    body = fused(Branch(cond, [loop("i", AugAssign(at("x", i), "+", Const(1.0)))], [loop("j", AugAssign(at("x", j), "+", Const(2.0)))]),
                 Comment("next statement"),
                 Branch(cond, [loop("k", AugAssign(at("y", Name("k")), "+", Const(1.0)))], [loop("l", AugAssign(at("y", Name("l")), "+", Const(2.0)))]))
    assert len(body) == 1 and isinstance(body[0], Branch)
    for arm in (body[0].then, body[0].orelse):
        assert len(arm) == 1 and isinstance(arm[0].body[1], Comment)  # the comment moved inside


def test_a_loop_moves_into_a_branch_where_it_fuses():
    cond = Compare(">", Shape("q", 0), Const(32))
    body = fused(loop("i", AugAssign(at("x", i), "+", Const(1.0))),
                 Branch(cond, [loop("j", AugAssign(at("y", j), "+", Const(1.0)))],
                        [loop("k", AugAssign(at("z", Name("k")), "+", Const(1.0)), stop=Name("m"))]))
    assert len(body) == 1 and isinstance(body[0], Branch)
    assert loops(body[0].then) == 1 and loops(body[0].orelse) == 2


def _walk_in_blocks(var, left_var, target, source, stop=n):
    """A walk over pairs of columns and then the column left over (``primitives/loops.index_blocks``):
    x[c] += a[c] for c = var and var + 1, then c = (n - n % 2) + left_var."""
    bulk = BinOp("-", stop, BinOp("%", stop, Const(2)))
    v, w = Name(var), Name(left_var)
    return [Loop(var, Const(0), bulk, Const(2), [AugAssign(at(target, v), "+", at(source, v)),
                                                 AugAssign(at(target, BinOp("+", v, Const(1))), "+",
                                                           at(source, BinOp("+", v, Const(1))))]),
            Loop(left_var, Const(0), BinOp("%", stop, Const(2)), Const(1),
                 [AugAssign(at(target, BinOp("+", bulk, w)), "+", at(source, BinOp("+", bulk, w)))])]


def test_walks_in_blocks_fuse_block_with_block_and_leftover_with_leftover():
    """The second walk's block loop moves before the first's leftover loop (they commute) to fuse
    with the first's block loop; then the leftover loops fuse. (A leftover index ``bulk + k`` is not
    the loop variable itself: leftovers writing and reading one array stay apart.)"""
    body = fused(*_walk_in_blocks("i", "k", "x", "a"), *_walk_in_blocks("j", "l", "y", "a"))
    assert len(body) == 2 and [s.step for s in body] == [Const(2), Const(1)]
    assert [len(s.body) for s in body] == [4, 2]
    # reading x, which the first walk's leftover loop writes, the second walk's blocks stay after it
    assert len(fused(*_walk_in_blocks("i", "k", "x", "a"), *_walk_in_blocks("j", "l", "y", "x"))) == 4


def test_indices_within_a_block_belong_to_its_iteration():
    """x[i] and x[i + 1] written by a loop counting by 2, read at the same indices by the next:
    iteration i touches only its own two elements, so the loops fuse; x[i + 2] is the next block's."""
    own = fused(loop("i", AugAssign(at("x", BinOp("+", i, Const(1))), "+", Const(1.0)), step=Const(2)),
                loop("j", AugAssign(at("y", j), "+", at("x", BinOp("+", j, Const(1)))), step=Const(2)))
    assert loops(own) == 1
    other = fused(loop("i", AugAssign(at("x", BinOp("+", i, Const(2))), "+", Const(1.0)), step=Const(2)),
                  loop("j", AugAssign(at("y", j), "+", at("x", BinOp("+", j, Const(2)))), step=Const(2)))
    assert loops(other) == 2


def test_a_walk_in_blocks_moves_into_a_branch_where_it_fuses():
    cond = Compare(">", Shape("q", 0), Const(32))
    body = fused(*_walk_in_blocks("i", "k", "x", "a"),
                 Branch(cond, _walk_in_blocks("j", "l", "y", "a"),
                        [loop("m", AugAssign(at("z", Name("m")), "+", Const(1.0)), stop=Name("m"))]))
    assert len(body) == 1 and isinstance(body[0], Branch)
    assert loops(body[0].then) == 2 and loops(body[0].orelse) == 3


# ------------------------------------------------------------------------------ must not fuse

@pytest.mark.parametrize("first,second,why", [
    (loop("i", AugAssign(at("x", i), "+", Const(1.0))), loop("j", AugAssign(at("y", j), "+", Const(1.0)), stop=Name("m")),
     "different ranges"),
    (loop("i", AugAssign(at("x", i), "+", Const(1.0))), loop("j", AugAssign(at("y", j), "+", Const(1.0)), step=Const(2)),
     "different steps"),
    (loop("i", AugAssign(at("x", i), "+", Const(1.0))),
     loop("j", AugAssign(at("y", j), "+", at("x", BinOp("+", j, Const(1))))),
     "reads an element a later iteration of the first writes"),
    (loop("i", AugAssign(at("x", i), "+", Const(1.0))),
     loop("j", loop("k", AugAssign(at("y", j), "+", at("x", Name("k"))))),
     "reads the whole array the first writes"),
    (loop("i", AugAssign(Name("s"), "+", at("a", i))), loop("j", AugAssign(Name("s"), "+", at("b", j))),
     "two sums into one scalar would interleave"),
    (loop("i", AugAssign(Name("s"), "+", at("a", i))), loop("j", AugAssign(at("y", j), "+", Name("s"))),
     "reads a scalar the first is still summing"),
    (loop("i", AugAssign(Name("n"), "+", Const(1))), loop("j", AugAssign(at("y", j), "+", Const(1.0))),
     "the first changes the bound"),
    (loop("i", Check(Compare(">", at("a", i), Const(0.0)), 1, 1, ())),
     loop("j", Check(Compare(">", at("b", j), Const(0.0)), 1, 2, ())),
     "both can fail: the first failure must stay the one reported"),
    (loop("i", Invoke("g", (Name("x"),), (None,))), loop("j", AugAssign(at("y", j), "+", at("x", j))),
     "an array passed whole to a call"),
    (loop("i", HostCall("gemv", (Name("x"),), [])), loop("j", AugAssign(at("y", j), "+", at("x", j))),
     "an array passed whole to a host routine"),
    (loop("i", Zero("t", (n,), "float64"), AugAssign(at("t", i), "+", Const(1.0))),
     loop("j", AugAssign(at("y", j), "+", at("t", j))),
     "an array allocated by the first"),
    (loop("i", AugAssign(at("g", i, Name("c")), "+", Const(1.0))),
     loop("j", AugAssign(at("y", j), "+", at("g", Name("c"), j))),
     "the index in another dimension"),
])
def test_loops_that_must_not_fuse(first, second, why):
    assert loops(fused(first, second)) == loops([first, second]), why


def test_branches_whose_first_arm_changes_the_condition_stay_apart():
    cond = Compare(">", Name("s"), Const(0.0))
    body = fused(Branch(cond, [AugAssign(Name("s"), "-", Const(1.0))], []),
                 Branch(cond, [AugAssign(Name("t"), "-", Const(1.0))], []))
    assert len(body) == 2


def test_a_loop_stays_out_of_a_branch_where_it_fuses_nowhere():
    cond = Compare(">", Shape("q", 0), Const(32))
    body = fused(loop("i", AugAssign(at("x", i), "+", Const(1.0))),
                 Branch(cond, [loop("j", AugAssign(at("y", j), "+", Const(1.0)), stop=Name("m"))], []))
    assert len(body) == 2


def test_a_temporary_stays_after_a_loop_that_can_fail():
    body = fused(loop("i", Check(Compare(">", at("a", i), Const(0.0)), 1, 1, ())),
                 Local("t", BinOp("/", Const(1.0), at("a", Const(0)))),
                 loop("j", AugAssign(at("y", j), "+", Name("t"))))
    assert loops(body) == 2


def test_a_temporary_reading_what_the_loop_writes_stays_after_it():
    body = fused(loop("i", AugAssign(at("a", i), "+", Const(1.0))),
                 Local("t", at("a", Const(0))),
                 loop("j", AugAssign(at("y", j), "+", Name("t"))))
    assert loops(body) == 2


# ------------------------------------------------------------------------------ programs

def test_the_gram_schmidt_adjoint_sweeps_twice():
    """On the walk by columns, restoring ``v`` (``v += Q r``), ``g_Q -= g_v rᵀ`` and ``g_r -= Qᵀ g_v``
    are one sweep over Q's columns; restoring ``r`` (``r -= Qᵀ v``), ``g_Q += v g_rᵀ`` and
    ``g_v += Q g_r`` another. On the walk by rows, two pairs of the six sweep together. Lowered for
    SIMD lanes, each walk is a walk over blocks of columns (rows) and one over the columns (rows) left
    over (``primitives/loops.index_blocks``): the two sweeps by columns are four loops (blocks fused
    with blocks, leftovers with leftovers), and in the arm by rows the two restores' column walks and
    the two gradients' row walks two loops each."""
    from revdiff.programs.gram_schmidt import classical_pass
    args = (np.zeros(8), np.zeros(4), np.zeros((8, 4)), 3)

    def arms(f, lanes):
        low = f.specialize(f.argument_types(args), False, lanes).low_function("adjoint")
        branch, = [s for s in low.body if isinstance(s, Branch)]
        return [sum(isinstance(s, Loop) for s in arm) for arm in (branch.then, branch.orelse)]

    assert arms(classical_pass, False) == [4, 2]
    assert arms(classical_pass, True) == [8, 4]
    assert "fuse_loops=True" in classical_pass.source("adjoint", *args)
    unfused = classical_pass.with_options(fuse_loops=False)
    for lanes, statements in ((False, 6), (True, 8)):  # the two restores' walks: two loops each in lanes
        low = unfused.specialize(unfused.argument_types(args), False, lanes).low_function("adjoint")
        assert sum(isinstance(s, (Loop, Branch)) for s in low.body) == statements


def _rand(rng, shape, cplx=False):
    x = rng.standard_normal(shape)
    return x + 1j * rng.standard_normal(shape) if cplx else x


def _program_cases():
    """(program, arguments) with the rows walk (more than 32 rows) and the columns walk."""
    cases = []
    for m, n, cplx in ((40, 5, False), (7, 4, True)):
        dt = complex if cplx else float
        for program in (P.cgs2, P.mgs, P.cgs, P.bcgs2, P.householder):
            cases.append((program, lambda rng, m=m, n=n, dt=dt, c=cplx: (
                np.zeros((m, n), dt), np.zeros((n, n), dt), _rand(rng, (m, n), c))))
        for program in (P.project_cgs2, P.project_householder, P.lstsq_cgs2):
            size = n if program is P.lstsq_cgs2 else m
            cases.append((program, lambda rng, m=m, n=n, dt=dt, c=cplx, size=size: (
                np.zeros(size, dt), np.zeros((n, n), dt), _rand(rng, (m, n), c), _rand(rng, m, c))))
    cases.append((P.givens, lambda rng: (np.zeros((6, 4)), np.zeros((4, 4)), np.zeros((6, 4)), _rand(rng, (6, 4)))))
    cases.append((P.normalize_program, lambda rng: (np.zeros(5), _rand(rng, 5))))
    cases.append((P.tangent_project_program, lambda rng: (np.zeros(5, complex), _rand(rng, 5, True), _rand(rng, 5, True))))
    return cases


def _outputs(f, args, seed):
    """Forward outputs, the inverse of them, a pullback and a tangent: every program of ``f`` the
    interfaces run."""
    rng = np.random.default_rng(seed)
    outs = f(*[np.copy(a) for a in args])
    back = (~f)(*[np.copy(o) for o in outs])
    cotangents = [_rand(rng, np.shape(o), np.iscomplexobj(o)) for o in outs]
    _, pullback = revdiff.vjp(f, *[np.copy(a) for a in args])
    grads = pullback(*cotangents)
    tangents = [_rand(rng, np.shape(a), np.iscomplexobj(a)) for a in args]
    _, jv = revdiff.jvp(f, [np.copy(a) for a in args], tangents)
    return [np.asarray(x) for x in (*outs, *back, *grads, *jv)]


@pytest.mark.parametrize("program,make", [pytest.param(p, make, id=f"{p.__name__}-{k}")
                                          for k, (p, make) in enumerate(_program_cases())])
def test_programs_are_bit_for_bit_those_with_loops_as_written(program, make):
    args = make(np.random.default_rng(7))
    fast = program.with_options(backend="python")
    plain = program.with_options(backend="python", fuse_loops=False)
    for got, want in zip(_outputs(fast, args, 1), _outputs(plain, args, 1)):
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), program.__name__


def test_fuse_loops_option_is_checked_and_reaches_callees():
    with pytest.raises(TypeError, match="fuse_loops must be True or False"):
        revdiff.reversible(fuse_loops="no")
    plain = P.cgs2.with_options(fuse_loops=False)
    assert plain.options.fuse_loops is False and P.cgs2.options.fuse_loops is True
    assert plain._callee("classical_pass").options.fuse_loops is False


# ------------------------------------------------------------------------------ hostile programs

@revdiff.reversible(backend="python")
def _double(r):
    for k in range(len(r)):
        r[k] *= 2.0


@revdiff.reversible(backend="python")
def _rows_then_column(A, y):
    n = len(y)
    for i in range(n):
        _double(A[i])  # a row passed to a call, which writes it: A[2, i] changes in a later iteration
    for i in range(n):
        y[i] += A[2, i]


@revdiff.reversible(backend="python")
def _rows_then_branch(A, y, c):
    n = len(y)
    y[0] += A[0, 0]
    for i in range(n):
        _double(A[i])
    if A[0, 0] > c:  # reads what the loop writes: the loop cannot move into the arms
        for i in range(n):
            y[i] += 1.0
    else:
        for i in range(n):
            y[i] -= 1.0


@revdiff.reversible(backend="python")
def _negative_counter(a):
    n = len(a)
    for i in range(-n, n):  # a[i] and a[i - n] are one element
        a[i] *= 2.0
    for i in range(-n, n):
        a[i] += 1.0


@revdiff.reversible(backend="python")
def _checked_between(x, y, a):
    n = len(a)
    for i in range(n):
        x[i] += a[i]
    for i in range(n):  # its index checks stand between the loops and must run before it
        y[i] += a[i - 1]


@pytest.mark.parametrize("f,args", [
    (_rows_then_column, (np.arange(9.0).reshape(3, 3), np.zeros(3))),
    (_rows_then_branch, (np.ones((3, 3)), np.zeros(3), 1.5)),
    (_negative_counter, (np.ones(3),)),
])
def test_hostile_programs_give_the_numbers_of_their_loops_as_written(f, args):
    copies = lambda: [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731
    fused = f(*copies())
    plain = f.with_options(fuse_loops=False)(*copies())
    for got, want in zip(fused, plain):
        assert np.array_equal(got, want)
    for got, want in zip((~f)(*fused), args):
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_a_failing_index_check_between_loops_reports_the_same_error():
    args = (np.zeros(4), np.zeros(3), np.arange(4.0))
    errors = []
    for f in (_checked_between, _checked_between.with_options(fuse_loops=False)):
        with pytest.raises(IndexError) as info:
            f(*[np.copy(a) for a in args])
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "out of bounds" in errors[0]


def test_code_grows_at_most_linearly_with_nested_loops_and_branches():
    """A loop holding a branch is never copied into two arms: ``d`` nested levels of a loop followed
    by a branch over another loop would otherwise make 2**d copies."""
    import importlib.util
    import tempfile
    from pathlib import Path

    def level(k, indent):
        if k == 0:
            return [indent + "y[0] += 1.0"]
        return ([indent + f"for i{k} in range(n):"] + level(k - 1, indent + "    ") +
                [indent + "if c:", indent + f"    for j{k} in range(n):", indent + f"        z{k}[j{k}] += 1.0"])

    d = 8
    src = ["from revdiff import reversible", "", "@reversible(backend='python')",
           f"def f(y, c, {', '.join(f'z{k}' for k in range(1, d + 1))}):", "    n = len(y)"] + level(d, "    ")
    path = Path(tempfile.mkdtemp()) / "nested_branches.py"
    path.write_text("\n".join(src) + "\n")
    spec = importlib.util.spec_from_file_location("nested_branches", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = (np.zeros(3), True) + tuple(np.zeros(3) for _ in range(d))
    fused = module.f.source("forward", *args).count("\n")
    plain = module.f.with_options(fuse_loops=False).source("forward", *args).count("\n")
    assert fused <= 2 * plain
