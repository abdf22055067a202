"""Fuse adjacent loops over the same range, so that one sweep over a matrix does the work of several.

A gradient runs statements that each sweep the same matrix: undoing ``v += Q r`` and pushing
``g_Q -= g_v rᵀ`` and ``g_r -= Qᵀ g_v`` walk the columns of Q three times, each loading them again.
Fused, one loop does the three bodies one after the other for each column.

The rule. Adjacent loops ``for a in range(s, e, k): B1`` and ``for b in range(s, e, k): B2`` (the
same three expressions, which neither body changes) become ``for a in range(s, e, k): B1; B2[b := a]``
when running B2's iteration i before B1's later iterations changes nothing. That holds when

1. no scalar either body assigns (a variable, a temporary, a loop variable, an allocated array, a
   call's result) is named in the other body;
2. an array either body writes and the other reads or writes is accessed in both bodies only element by
   element, with the loop variable itself as the index of one same dimension in every access:
   iteration i touches only slice i of it, never what another iteration of the other loop touches.
   An array passed whole (to a generated function or a host routine) counts as accessed everywhere;
3. at most one body can stop the program (a check, a call, an allocation, a while loop), so an input
   that fails reports the same error, with the same values.

Every element then sees the same operations in the same order, so the fused program's results are
bit-for-bit those of the loops as written; a reduction stays in its own accumulators (temporaries of
its body), summed in its own order. Arrays of different names are different memory: the calls check it
(``function.py``, ``passes/aliasing.py``).

Branches. Two adjacent ``if c`` of the same condition, whose first arms change nothing ``c`` reads, are
one branch. A loop just before a branch (changing nothing ``c`` reads) or just after it moves into both
arms when it fuses there with a loop of at least one of them; the instruction rules branch on shapes
(rows against columns walks), so the loops of consecutive statements meet in the same arms.

Between two loops. Comments move inside the fused loop, before the statements they describe. A
temporary computed between the loops (``x = -r[j]``) moves before the first when it commutes with
it and that loop cannot stop the program; any other statement moves after the second when it
commutes with it. Otherwise the loops stay apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from revdiff.ir.high import Index, Name, Shape, Slice, walk_expr
from revdiff.ir.low import (Assign, AugAssign, Branch, Check, Comment, HostCall, Invoke, Local, Loop, LowFunction,
                            Repeat, Zero, rename_statement, with_blocks)


def fuse_loops(fn: LowFunction) -> LowFunction:
    """``fn`` with every fusible pair of adjacent loops fused, at every depth."""
    return replace(fn, body=_fuse_block(fn.body))


def _fuse_block(body: list) -> list:
    out: list = []
    for s in body:
        _append(out, with_blocks(s, _fuse_block))
    return out


def _append(out: list, s) -> None:
    """Append ``s`` (its nested blocks already fused) to the fused block ``out``, merging it with the
    statement before it for as long as they merge."""
    out.append(s)
    while True:
        k = len(out) - 2
        while k >= 0 and not isinstance(out[k], (Loop, Branch)):
            k -= 1
        if k < 0:
            return
        arranged = _around(out[k], out[k + 1:-1], s)
        if arranged is None:
            return
        before, comments, after = arranged
        merged = _merge(out[k], comments, s)
        if merged is None:
            return
        out[k:] = before + [merged] + after
        if after:
            return
        s = merged


def _around(p, between: list, s) -> "tuple[list, list, list] | None":
    """The statements between ``p`` and ``s`` split into temporaries computed before ``p``, comments
    and statements run after ``s``, or None when they cannot all move so. A temporary moves before
    ``p`` when it commutes with ``p`` and with the statements before it that stay, none of which can
    stop the program (which would have kept it from being computed); a statement moves after ``s``
    when it commutes with ``s``. Only loops pull statements apart."""
    if all(isinstance(t, Comment) for t in between):
        return [], between, []
    if not isinstance(s, Loop) or not isinstance(p, Loop):
        return None
    before, comments, after = [], [], []
    stays = _Effects()
    first, second = _effects([p]), _effects([s])
    for t in between:
        fx = _effects([t])
        if isinstance(t, Comment):
            comments.append(t)
        elif isinstance(t, Local) and _hoistable(fx, first) and _hoistable(fx, stays):
            before.append(t)
        elif _commute(fx, second):
            after.append(t)
            _statement_effects(t, stays)
        else:
            return None
    return before, comments, after


def _concat(first: list, then: list) -> list:
    """Fused block ``first`` followed by the fused statements ``then``."""
    out = list(first)
    for s in then:
        _append(out, s)
    return out


def _merge(p, comments: list, s):
    """One statement doing ``p``, ``comments``, ``s``, or None when they do not merge."""
    if isinstance(p, Loop) and isinstance(s, Loop):
        return _fused(p, comments, s)
    if isinstance(p, Branch) and isinstance(s, Branch):
        if p.cond == s.cond and not _changes(_effects(p.then + p.orelse), p.cond):
            return replace(p, then=_concat(p.then, comments + s.then), orelse=_concat(p.orelse, comments + s.orelse))
        return None
    if isinstance(p, Loop) and isinstance(s, Branch) and not _changes(_effects([p]), s.cond):
        then, orelse = _concat([p], comments + s.then), _concat([p], comments + s.orelse)
        if len(then) < 1 + len(comments) + len(s.then) or len(orelse) < 1 + len(comments) + len(s.orelse):
            return replace(s, then=then, orelse=orelse)
        return None
    if isinstance(p, Branch) and isinstance(s, Loop):
        then, orelse = _concat(p.then, comments + [s]), _concat(p.orelse, comments + [s])
        if len(then) < len(p.then) + len(comments) + 1 or len(orelse) < len(p.orelse) + len(comments) + 1:
            return replace(p, then=then, orelse=orelse)
    return None


def _fused(p: Loop, comments: list, s: Loop) -> "Loop | None":
    if (p.start, p.stop, p.step) != (s.start, s.stop, s.step):
        return None
    if s.var != p.var and p.var in _effects(s.body).named:
        return None
    body = [rename_statement(t, lambda n: p.var if n == s.var else n) for t in s.body]
    first, second = _effects(p.body), _effects(body)
    if p.var in first.assigned | second.assigned or not _commute(first, second, p.var):
        return None
    changed = first.assigned | second.assigned | first.written | second.written | first.whole | second.whole
    if any(_reads(e) & changed for e in (p.start, p.stop, p.step)):
        return None
    return replace(p, body=_concat(p.body, comments + body))


@dataclass
class _Effects:
    """What a statement list reads and writes, for deciding whether it commutes with another."""

    named: set = field(default_factory=set)  # every variable and array it names (shapes' arrays too)
    assigned: set = field(default_factory=set)  # scalars, temporaries, loop variables, allocated arrays
    written: set = field(default_factory=set)  # arrays it writes elements of
    whole: set = field(default_factory=set)  # names passed whole to a call or a host routine
    elements: dict = field(default_factory=dict)  # array -> the index tuples of its element accesses
    stops: bool = False  # it can stop the program: a check, a call, an allocation, a while loop


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
        _read(fx, s.target, s.expr)
    elif isinstance(s, Local):
        fx.assigned.add(s.name)
        fx.named.add(s.name)
        _read(fx, s.expr)
    elif isinstance(s, Loop):
        fx.assigned.add(s.var)
        fx.named.add(s.var)
        _read(fx, s.start, s.stop, s.step)
    elif isinstance(s, Branch):
        _read(fx, s.cond)
    elif isinstance(s, Repeat):
        fx.stops = True
        _read(fx, s.cond)
    elif isinstance(s, Check):
        fx.stops = True
        _read(fx, s.ok, *s.values)
    elif isinstance(s, Zero):
        fx.assigned.add(s.name)
        fx.named.add(s.name)
        fx.stops |= s.shape is not None
        _read(fx, *(s.shape or ()))
    elif isinstance(s, (Invoke, HostCall)):
        fx.stops |= isinstance(s, Invoke)
        for a in s.args:
            _whole(a, fx)
        if isinstance(s, Invoke):
            for r in s.results:
                if r is not None:
                    _target(r, fx)
        else:
            _read(fx, *([s.when] if s.when is not None else []))
            if s.result is not None:
                fx.assigned.add(s.result)
                fx.named.add(s.result)
    for block in ([s.body] if isinstance(s, (Loop, Repeat)) else [s.then, s.orelse] if isinstance(s, Branch)
                  else [s.fallback] if isinstance(s, HostCall) else []):
        for t in block:
            _statement_effects(t, fx)


def _target(t, fx: _Effects) -> None:
    if isinstance(t, Name):
        fx.assigned.add(t.id)
        fx.named.add(t.id)
    else:
        fx.written.add(t.base)
        _read(fx, t)


def _whole(a, fx: _Effects) -> None:
    """An argument of a call or host routine: the names in it, passed whole (views and scalars alike)."""
    if isinstance(a, Index) and a.is_element:
        _read(fx, a)
        return
    names = _reads(a)
    fx.whole |= names
    fx.named |= names
    if isinstance(a, Index):  # a view: the callee may write through it
        fx.written.add(a.base)
    _read(fx, *(i for i in (a.indices if isinstance(a, Index) else ()) if not isinstance(i, Slice)))


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


def _reads(e) -> set:
    fx = _Effects()
    _read(fx, e)
    return fx.named


def _hoistable(temporary: _Effects, passed: _Effects) -> bool:
    return not passed.stops and _commute(temporary, passed)


def _commute(a: _Effects, b: _Effects, var: "str | None" = None) -> bool:
    """Whether statements with effects ``a`` and ``b`` give the same results in either order; with
    ``var`` (two loops' variable: the rule), arrays both access only in slice ``var`` of one
    dimension do not count."""
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
            if not any(all(ix[d] == Name(var) for ix in accesses) for d in range(rank)):
                return False
    return True


def _changes(fx: _Effects, cond) -> bool:
    """Whether statements with effects ``fx`` may change the value of expression ``cond``."""
    return bool(_reads(cond) & (fx.assigned | fx.written | fx.whole))


__all__ = ["fuse_loops"]
