"""Index, division and domain checks of generated code: for each low-level statement, the condition
under which every integer index it evaluates lies inside its array (Python's range, -size <= i <
size), the divisors of its divisions (``/``, ``//``, ``%``) that must not be zero, and the real
arguments of functions defined on part of the line (``log``, ``sqrt``, ``asin``, ...: their table
entry's ``domain``).

Compiled code has no bounds checks of its own; revdiff emits these, so that an out-of-range
index names the user's line, and so that the loops of vector instructions, whose views are checked
once before the loop, run without a check per element. An index read only under a condition
(``x[i + 1] if i < n - 1 else 0.0``, the right operand of ``and``/``or``) is checked under it.
"""
from __future__ import annotations

from revdiff.ir import algebra as A
from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Index, Select, Shape, Slice, Unary, children
from revdiff.ir.low import Assign, AugAssign, Branch, Invoke, Local, Loop, Repeat
from revdiff.primitives.functions import FUNCTIONS
from revdiff.primitives.printer import expr_source


def index_conditions(stmt) -> list:
    """(condition, element access, axis) for every integer index ``stmt`` itself evaluates."""
    return _index_conditions(_own_exprs(stmt), lambda n: isinstance(n, Index))


def element_conditions(exprs) -> list:
    """(condition, element, axis) for every integer index of the single elements (``a[k]``, not
    views) that ``exprs`` read, under the conditions they are read under."""
    return _index_conditions(exprs, lambda n: isinstance(n, Index) and not any(isinstance(i, Slice) for i in n.indices))


def _index_conditions(exprs, wanted) -> list:
    out, seen = [], set()
    for e in exprs:
        for node, guard in _guarded(e, None, wanted):
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


def division_conditions(stmt) -> list:
    """(condition, divisor) for every division ``stmt`` itself evaluates by a divisor not known to be
    nonzero: Python raises ZeroDivisionError there, and generated code must say so with the user's
    line. Compiled code divides without raising (an integer divisor of 0 gives 0, a float one inf or
    NaN)."""
    out, seen = [], set()
    for e in _own_exprs(stmt):
        for node, guard in _guarded(e, None, _is_division):
            ok = Compare("!=", node.right, Const(0))
            if guard is not None:
                ok = BoolOp("or", (Unary("not", guard), ok))
            if ok not in seen:
                seen.add(ok)
                out.append((ok, node.right))
    return out


def domain_conditions(stmt, kind_of) -> list:
    """(condition, call, what the domain is) for every call or power ``stmt`` itself evaluates whose
    table entry has a domain (which reads the arguments' kinds, ``kind_of``): outside it NumPy
    returns NaN or an infinity with a warning, and Python's math module raises ValueError, as
    generated code does."""
    out, seen = [], set()
    for e in _own_exprs(stmt):
        for node, guard in _guarded(e, None, _has_domain):
            args = node.args if isinstance(node, Call) else (node.left, node.right)
            found = FUNCTIONS[_function(node)].domain(*args, tuple(kind_of(a) for a in args))
            if found is None:
                continue
            ok, text = found
            if guard is not None:
                ok = BoolOp("or", (Unary("not", guard), ok))
            if ok not in seen:
                seen.add(ok)
                out.append((ok, node, text))
    return out


def arithmetic_checks(stmt, kind_of) -> list:
    """(condition, message, values, labels, error) of every division and domain check ``stmt``
    needs: what lowering emits before a statement and the tangent pass before a tangent's singular
    terms. ``values`` (at most two) are reported with the error under ``labels`` (None: one value)."""
    out = [(ok, f"division by zero: {expr_source(divisor)} is 0", (), None, ZeroDivisionError)
           for ok, divisor in division_conditions(stmt)]
    for ok, call, domain in domain_conditions(stmt, kind_of):
        args = call.args if isinstance(call, Call) else (call.left, call.right)
        values = [a for a in args if not isinstance(a, Const)][:2]
        if any(kind_of(v) == "complex" for v in values):  # one complex value: its two parts
            values = values[:1]
        labels = tuple(expr_source(a) for a in values) if len(values) > 1 else None
        message = f"math domain error: {expr_source(call)} needs {domain.format(*(expr_source(a) for a in args))}"
        out.append((ok, message, tuple(values), labels, ValueError))
    return out


def reported_values(values: tuple, labels, kind_of) -> tuple:
    """(values, labels) as a check's record holds them: without labels one value, named "value",
    whose two parts are reported where it is complex ("integer value" where it is an integer, which
    the float64 record would print as a float)."""
    if labels is not None:
        return tuple(values), labels
    if values and kind_of(values[0]) == "complex":
        return (Call("real", (values[0],)), Call("imag", (values[0],))), ("value",)
    if values and kind_of(values[0]) in ("int", "bool"):
        return tuple(values), ("integer value",)
    return tuple(values), ("value",) if values else ()


def _function(e) -> str:
    return e.fn if isinstance(e, Call) else e.op


def _has_domain(e) -> bool:
    return isinstance(e, (Call, BinOp)) and FUNCTIONS[_function(e)].domain is not None


def _is_division(e) -> bool:
    return isinstance(e, BinOp) and FUNCTIONS[e.op].divides and not (isinstance(e.right, Const) and e.right.value != 0)


def in_bounds(i, size):
    """Python's range of an index into an axis of ``size`` elements: -size <= i < size."""
    return BoolOp("and", (Compare("<=", A.neg(size), i), Compare("<", i, size)))


def _guarded(e, guard, wanted):
    """(node, condition under which it is evaluated or None) for every node of ``e`` that ``wanted``
    accepts: the arms of ``a if c else b`` and the later operands of ``and``/``or`` are conditional."""
    if wanted(e):
        yield e, guard
    if isinstance(e, Select):
        yield from _guarded(e.cond, guard, wanted)
        yield from _guarded(e.a, _conjunction(guard, e.cond), wanted)
        yield from _guarded(e.b, _conjunction(guard, Unary("not", e.cond)), wanted)
        return
    if isinstance(e, BoolOp):
        for k, v in enumerate(e.values):
            earlier = e.values[:k]
            conds = earlier if e.op == "and" else tuple(Unary("not", x) for x in earlier)
            g = guard
            for c in conds:
                g = _conjunction(g, c)
            yield from _guarded(v, g, wanted)
        return
    for c in children(e):
        yield from _guarded(c, guard, wanted)


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
