"""Index checks of generated code: for each low-level statement, the condition under which every
integer index it evaluates lies inside its array (Python's range, -size <= i < size).

Revdiff compiles without Numba's bounds checks and emits these instead, so that an out-of-range
index names the user's line, and so that the loops of vector instructions, whose views are checked
once before the loop, run without a check per element. An index read only under a condition
(``x[i + 1] if i < n - 1 else 0.0``, the right operand of ``and``/``or``) is checked under it.
"""
from __future__ import annotations

from .. import algebra as A
from ..ir import BoolOp, Compare, Index, Select, Shape, Slice, Unary, children
from ..lowir import Assign, AugAssign, Branch, Invoke, Local, Loop, Repeat


def index_conditions(stmt) -> list:
    """(condition, element access, axis) for every integer index ``stmt`` itself evaluates."""
    out, seen = [], set()
    for e in _own_exprs(stmt):
        for node, guard in _indexed(e, None):
            if (node, guard) in seen:
                continue
            seen.add((node, guard))
            for axis, i in enumerate(node.indices):
                if isinstance(i, Slice):
                    continue
                ok = in_bounds(i, Shape(node.base, axis))
                if guard is not None:
                    ok = BoolOp("or", (Unary("not", guard), ok))
                out.append((ok, node, axis))
    return out


def in_bounds(i, size):
    """Python's range of an index into an axis of ``size`` elements: -size <= i < size."""
    return BoolOp("and", (Compare("<=", A.neg(size), i), Compare("<", i, size)))


def _indexed(e, guard):
    """(element access, condition under which it is evaluated or None) for every Index in ``e``:
    the arms of ``a if c else b`` and the later operands of ``and``/``or`` are conditional."""
    if isinstance(e, Index):
        yield e, guard
    if isinstance(e, Select):
        yield from _indexed(e.cond, guard)
        yield from _indexed(e.a, _conjunction(guard, e.cond))
        yield from _indexed(e.b, _conjunction(guard, Unary("not", e.cond)))
        return
    if isinstance(e, BoolOp):
        for k, v in enumerate(e.values):
            earlier = e.values[:k]
            conds = earlier if e.op == "and" else tuple(Unary("not", x) for x in earlier)
            g = guard
            for c in conds:
                g = _conjunction(g, c)
            yield from _indexed(v, g)
        return
    for c in children(e):
        yield from _indexed(c, guard)


def _conjunction(guard, cond):
    return cond if guard is None else BoolOp("and", (guard, cond))


def _own_exprs(stmt) -> tuple:
    """The expressions a low-level statement evaluates itself (not those of nested blocks)."""
    if isinstance(stmt, Assign):
        return tuple(stmt.targets) + tuple(stmt.exprs)
    if isinstance(stmt, AugAssign):
        return (stmt.target, stmt.expr)
    if isinstance(stmt, Local):
        return (stmt.expr,)
    if isinstance(stmt, Loop):
        return (stmt.start, stmt.stop, stmt.step)
    if isinstance(stmt, (Branch, Repeat)):
        return (stmt.cond,)
    if isinstance(stmt, Invoke):
        return tuple(stmt.args)
    return ()
