"""Fuse adjacent loops over the same range, so that one sweep over a matrix does the work of several.

Gram-Schmidt's adjoint restores ``v`` (``v += Q r``, undoing the forward ``v -= Q r``) and pushes
``g_Q -= g_v rᵀ`` and ``g_r -= Qᵀ g_v``: three statements that each walk the columns of Q, loading
them again. Fused, one loop runs the three bodies one after the other for each column.

The rule. Adjacent loops ``for a in range(s, e, k): B1`` and ``for b in range(s, e, k): B2`` (the
same three expressions, whose values neither body changes, counting only up from 0 or down to 0)
become ``for a in range(s, e, k): B1; B2[b := a]`` when running B2's iteration i before B1's later
iterations changes nothing. That holds when

1. no name either body assigns (a scalar variable, a temporary, a loop variable, an allocated array,
   a call's result) or passes whole (to a generated function or a host routine, which may write it)
   is named in the other body;
2. an array either body writes elements of and the other reads or writes elements of is accessed in
   both only element by element, with the loop variable itself as the index of one same dimension
   in every access: iteration i touches only slice i of it (the variable is never negative, so
   ``x[-1]`` is not ``x[n - 1]``), never what another iteration of the other loop touches;
3. at most one body can stop the program (a check, a call, an array allocation, a while loop), so an
   input that fails reports the same error, with the same values.

Every element then sees the same operations in the same order, so the fused program's results are
bit-for-bit those of the loops as written; a reduction stays in its own accumulators (temporaries of
its body), summed in its own order. Arrays of different names are different memory: the calls check
it (``function.py``, ``passes/aliasing.py``).

Branches. Two adjacent ``if c`` of the same condition, where the first branch changes nothing ``c``
reads, are one branch. A loop without branches of its own just before a branch (changing nothing
``c`` reads) or just after it moves into both arms when it fuses there with a loop of at least one of
them; the instruction rules branch on shapes (walks by rows or by columns), so the loops of
consecutive statements meet in the same arms. A copied loop never holds a copy, so the code grows
by at most one copy of each loop.

Between two loops. Comments move inside the fused loop, before the statements they describe. A
temporary computed between the loops (``x = -r[j]`` between the inner loops of two column sweeps)
or an accumulator set to zero there moves before the first loop when it commutes with it and that
loop cannot stop the program; any other statement that cannot stop the program moves after the
second loop when it commutes with it (a check stays before the loops it guards). Otherwise the
loops stay apart.

Walks in blocks. A walk over blocks of columns (or rows) is two loops, the blocks and the indices
left over (``primitives/loops.index_blocks``). A loop that does not fuse with the loop just before it
moves ahead of that loop, where the two commute, and fuses with the one before: the blocks of two
walks fuse, then their leftovers. Rule 2 counts ``var + c`` (0 <= c < the step) as the loop variable: an
iteration's block is its own. The two loops of a walk move into a branch's arms together.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from revdiff.ir.high import BinOp, Const, Expr, Index, Name, Shape, walk_expr
from revdiff.ir.low import (Assign, AugAssign, Branch, Check, Comment, HostCall, Invoke, Local, Loop, LowFunction,
                            Repeat, Zero, nested_blocks, rename_statement, walk_statements, with_blocks)


def fuse_loops(fn: LowFunction) -> LowFunction:
    """``fn`` with every fusible pair of adjacent loops fused, at every depth."""
    return replace(fn, body=_fuse_block(fn.body, frozenset()))


def _fuse_block(body: list, counters: frozenset) -> list:
    """``body`` fused; ``counters``: the names known to be never negative here (loop variables
    counting from 0 and temporaries computed from them)."""
    out: list = []
    for s in body:
        inner = counters | {s.var} if isinstance(s, Loop) and _counts_from_zero(s, counters) else counters
        _append(out, with_blocks(s, lambda b: _fuse_block(b, inner)), counters)
        if isinstance(s, Local) and _non_negative(s.expr, counters):
            counters = counters | {s.name}
    return out


def _append(out: list, s, counters: frozenset) -> None:
    """Append ``s`` (its nested blocks already fused) to the fused block ``out``, merging it with the
    last loop or branch before it, again and again while they merge, until a merge moves statements
    after the merged loop. Only loops and branches merge: other statements are appended without
    looking back, so that a long straight block fuses in linear time."""
    out.append(s)
    while isinstance(s, (Loop, Branch)):
        k = len(out) - 2
        while k >= 0 and not isinstance(out[k], (Loop, Branch)):
            k -= 1
        if k < 0:
            return
        arranged = _arranged(out[k], out[k + 1:-1], s)
        if arranged is None:
            return
        before, comments, after = arranged
        if _two_loops_last(out, k) and isinstance(s, Branch) and not comments:  # both loops of the walk
            merged = _loops_into_branch(out[k - 1:k + 1], [], s, counters)
            if merged is not None:
                out[k - 1:] = [merged]
                s = merged
                continue
        merged = _merge(out[k], comments, s, counters)
        if merged is None:
            _fuse_past_previous_loop(out, k, s, counters)
            return
        out[k:] = before + [merged] + after
        if after:
            return
        s = merged


def _fuse_past_previous_loop(out: list, k: int, s, counters: frozenset) -> None:
    """Loop ``s`` (last in ``out``) that did not fuse with the loop ``out[k]`` just before it: where
    the two commute, ``s`` moves before ``out[k]`` and fuses with the loop just before that. A walk in
    blocks is two loops, the blocks and the indices left over (``primitives/loops.index_blocks``): so
    the blocks of consecutive walks fuse, and then their leftovers."""
    if not (isinstance(s, Loop) and _two_loops_last(out, k) and _commute(_effects([out[k]]), _effects([s]))):
        return
    merged = _merge(out[k - 1], [], s, counters)
    if merged is not None:
        out[k - 1:] = [merged, out[k]]


def _concat(first: list, then: list, counters: frozenset) -> tuple[list, bool]:
    """Fused block ``first`` followed by the fused statements ``then``, and whether any merged."""
    out = list(first)
    for s in then:
        _append(out, s, counters)
    return out, len(out) < len(first) + len(then)


def _arranged(p, between: list, s) -> "tuple[list, list, list] | None":
    """The statements between ``p`` and ``s`` split into temporaries computed before ``p``, comments,
    and statements run after ``s``; None when they cannot all move so (the rule in the docstring).
    Only two loops pull statements apart."""
    if all(isinstance(t, Comment) for t in between):
        return [], between, []
    if not isinstance(s, Loop) or not isinstance(p, Loop):
        return None
    before, comments, after = [], [], []
    moved_after = _Effects()  # of the statements before this one that go after ``s``
    first, second = _effects([p]), _effects([s])
    for t in between:
        fx = _effects([t])
        if isinstance(t, Comment):
            comments.append(t)
        elif _temporary(t) and _hoistable(fx, first) and _hoistable(fx, moved_after):
            before.append(t)
        elif not fx.stops and _commute(fx, second):
            after.append(t)
            _statement_effects(t, moved_after)
        else:
            return None
    return before, comments, after


def _temporary(t) -> bool:
    """A temporary: a Local, or a number set to zero (an accumulator, ``Zero`` without a shape)."""
    return isinstance(t, Local) or (isinstance(t, Zero) and t.shape is None)


def _merge(p, comments: list, s, counters: frozenset):
    """One statement doing ``p``, ``comments``, ``s``, or None when they do not merge."""
    if isinstance(p, Loop) and isinstance(s, Loop):
        return _fused(p, comments, s, counters)
    if isinstance(p, Branch) and isinstance(s, Branch):
        if p.cond != s.cond or _changes(_effects(p.then + p.orelse), p.cond):
            return None
        return replace(p, then=_concat(p.then, comments + s.then, counters)[0],
                       orelse=_concat(p.orelse, comments + s.orelse, counters)[0])
    if isinstance(p, Loop) and isinstance(s, Branch):  # the loop into both arms, first
        return _loops_into_branch([p], comments, s, counters)
    if isinstance(p, Branch) and isinstance(s, Loop) and not _branches(s):  # the loop into both arms, last
        arms = [_concat(arm, comments + [s], counters) for arm in (p.then, p.orelse)]
        if any(merged for _, merged in arms):
            return replace(p, then=arms[0][0], orelse=arms[1][0])
    return None


def _loops_into_branch(loops: list, comments: list, s: Branch, counters: frozenset):
    """Branch ``s`` with ``loops`` (run just before it) moved to the start of both arms, where they
    fuse with a loop of at least one arm; None otherwise."""
    if any(_changes(_effects([p]), s.cond) or _branches(p) for p in loops):
        return None
    arms = [_concat(list(loops), comments + arm, counters) for arm in (s.then, s.orelse)]
    if not any(merged for _, merged in arms):
        return None
    return replace(s, then=arms[0][0], orelse=arms[1][0])


def _two_loops_last(out: list, k: int) -> bool:
    """Whether ``out[k - 1]`` and ``out[k]`` are loops and the last two statements before the one being
    appended (as a walk in blocks and its indices left over are, ``primitives/loops.index_blocks``)."""
    return k == len(out) - 2 and k > 0 and isinstance(out[k - 1], Loop) and isinstance(out[k], Loop)


def _branches(loop: Loop) -> bool:
    """Whether ``loop`` contains a branch: such a loop is never copied into two arms, so that copies
    never contain copies and the code grows at most by one copy of each loop."""
    return any(isinstance(t, Branch) for t in walk_statements(loop.body))


def _fused(p: Loop, comments: list, s: Loop, counters: frozenset) -> "Loop | None":
    if (p.start, p.stop, p.step) != (s.start, s.stop, s.step) or not _counts_from_zero(p, counters):
        return None
    if s.var != p.var and p.var in _effects(s.body).named:
        return None
    body = [rename_statement(t, lambda n: p.var if n == s.var else n) for t in s.body]
    first, second = _effects(p.body), _effects(body)
    if p.var in first.assigned | second.assigned or not _commute(first, second, p.var, _step(p)):
        return None
    both = _effects(p.body + body)
    if any(_changes(both, e) for e in (p.start, p.stop, p.step)):
        return None
    return replace(p, body=_concat(p.body, comments + body, counters | {p.var})[0])


# ------------------------------------------------------------------------------ signs of loop counters

def _counts_from_zero(loop: Loop, counters: frozenset) -> bool:
    """Whether every value of ``loop``'s variable is known to be >= 0: a constant step, and a
    non-negative start counting up or a stop of at least -1 counting down."""
    step = loop.step.value if isinstance(loop.step, Const) and type(loop.step.value) is int else 0
    if step > 0:
        return _non_negative(loop.start, counters)
    if step < 0:
        return _non_negative(loop.stop, counters) or loop.stop == Const(-1)
    return False


def _non_negative(e: Expr, counters: frozenset) -> bool:
    """Whether integer expression ``e`` is >= 0 whatever the values of its variables: sizes,
    non-negative constants and counters, their sums, products and quotients, and ``a - a % c``."""
    if isinstance(e, Const):
        return type(e.value) is int and e.value >= 0
    if isinstance(e, Shape):
        return True
    if isinstance(e, Name):
        return e.id in counters
    if isinstance(e, BinOp):
        if e.op in ("+", "*", "//", "%"):
            return _non_negative(e.left, counters) and _non_negative(e.right, counters)
        if e.op == "-":  # a rounded down to a multiple of c
            r = e.right
            return (isinstance(r, BinOp) and r.op == "%" and r.left == e.left and isinstance(r.right, Const)
                    and type(r.right.value) is int and r.right.value > 0 and _non_negative(e.left, counters))
    return False


# ------------------------------------------------------------------------------ effects of statements

@dataclass
class _Effects:
    """What a statement list reads and writes, for deciding whether it commutes with another."""

    named: set[str] = field(default_factory=set)  # every variable and array it names (shapes' too)
    assigned: set[str] = field(default_factory=set)  # scalars, temporaries, loop variables, allocations
    written: set[str] = field(default_factory=set)  # arrays it writes elements of (or through a view)
    whole: set[str] = field(default_factory=set)  # names passed whole to a call or routine, or read as views
    elements: dict[str, list[tuple]] = field(default_factory=dict)  # array -> index tuples of its element accesses
    stops: bool = False  # it can stop the program: a check, a call, an array allocation, a while loop


def _effects(body: list) -> _Effects:
    fx = _Effects()
    for s in body:
        _statement_effects(s, fx)
    return fx


def _statement_effects(s, fx: _Effects) -> None:
    if isinstance(s, Assign):
        for t in s.targets:
            _target(t, fx)
        _read(fx, *s.exprs)
    elif isinstance(s, AugAssign):
        _target(s.target, fx)
        _read(fx, s.expr)
    elif isinstance(s, (Local, Zero)):
        _assign(s.name, fx)
        _read(fx, *([s.expr] if isinstance(s, Local) else s.shape or ()))
        fx.stops |= isinstance(s, Zero) and s.shape is not None
    elif isinstance(s, Loop):
        _assign(s.var, fx)
        _read(fx, s.start, s.stop, s.step)
    elif isinstance(s, (Branch, Repeat)):
        _read(fx, s.cond)
        fx.stops |= isinstance(s, Repeat)
    elif isinstance(s, Check):
        _read(fx, s.ok, *s.values)
        fx.stops = True
    elif isinstance(s, Invoke):
        for a in s.args:
            _whole(a, fx)
        for r in s.results:
            if r is not None:
                _target(r, fx)
        fx.stops = True
    elif isinstance(s, HostCall):
        for a in s.args:
            _whole(a, fx)
        _read(fx, *([s.when] if s.when is not None else []))
        if s.result is not None:
            _assign(s.result, fx)
    for block in nested_blocks(s):
        for t in block:
            _statement_effects(t, fx)


def _assign(name: str, fx: _Effects) -> None:
    fx.assigned.add(name)
    fx.named.add(name)


def _target(t, fx: _Effects) -> None:
    if isinstance(t, Name):
        _assign(t.id, fx)
    else:
        fx.written.add(t.base)
        _read(fx, t)


def _whole(a, fx: _Effects) -> None:
    """An argument of a call or a host routine: what it names is passed whole (scalars, arrays and
    views alike: ``A[i]`` may be a row), and an indexed one may be written through."""
    _read(fx, a)
    fx.whole |= _names(a)
    if isinstance(a, Index):
        fx.written.add(a.base)


def _read(fx: _Effects, *exprs) -> None:
    for e in exprs:
        for node in walk_expr(e):
            if isinstance(node, Name):
                fx.named.add(node.id)
            elif isinstance(node, Shape):
                fx.named.add(node.base)
            elif isinstance(node, Index):
                fx.named.add(node.base)
                if node.is_element:
                    fx.elements.setdefault(node.base, []).append(node.indices)
                else:
                    fx.whole.add(node.base)


def _names(e) -> set[str]:
    fx = _Effects()
    _read(fx, e)
    return fx.named


def _hoistable(temporary: _Effects, passed: _Effects) -> bool:
    """Whether a temporary may be computed before statements with effects ``passed``."""
    return not passed.stops and _commute(temporary, passed)


def _commute(a: _Effects, b: _Effects, var: "str | None" = None, step: int = 1) -> bool:
    """Whether statements with effects ``a`` and ``b`` may run in either order: the same results and,
    on a failing input, the same error. With ``var`` (both loops' variable, counting by ``step``),
    whether their iterations may interleave: arrays both access only in the slices ``var + c``
    (0 <= c < step) of one dimension do not count."""
    if a.stops and b.stops:
        return False
    for x, y in ((a, b), (b, a)):
        if (x.assigned | x.whole) & y.named:
            return False
        for array in x.written & set(y.elements):
            if var is None:
                return False
            accesses = x.elements.get(array, []) + y.elements[array]
            rank = min(len(ix) for ix in accesses)
            if not any(all(_in_iteration(ix[d], var, step) for ix in accesses) for d in range(rank)):
                return False
    return True


def _step(loop: Loop) -> int:
    """The step of a loop counting up by a constant (1 otherwise: the slices it owns are then only ``var``)."""
    step = loop.step.value if isinstance(loop.step, Const) and type(loop.step.value) is int else 1
    return max(step, 1)


def _in_iteration(index: Expr, var: str, step: int) -> bool:
    """Whether ``index`` is ``var + c`` with 0 <= c < step: of the iteration at ``var`` alone, for a
    loop counting by ``step`` (iterations own disjoint slices of ``step`` indices)."""
    if index == Name(var):
        return True
    return (isinstance(index, BinOp) and index.op == "+" and index.left == Name(var)
            and isinstance(index.right, Const) and type(index.right.value) is int and 0 <= index.right.value < step)


def _changes(fx: _Effects, e: Expr) -> bool:
    """Whether statements with effects ``fx`` may change the value of expression ``e``: they assign
    or pass whole a name it reads, or write elements of an array it reads elements of (an array's
    shape changes only when it is allocated again)."""
    values, shapes = set(), set()
    for node in walk_expr(e):
        if isinstance(node, Name):
            values.add(node.id)
        elif isinstance(node, Index):
            values.add(node.base)
        elif isinstance(node, Shape):
            shapes.add(node.base)
    return bool(values & (fx.assigned | fx.written | fx.whole) or shapes & fx.assigned)


__all__ = ["fuse_loops"]
