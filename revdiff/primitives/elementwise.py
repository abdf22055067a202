"""Whole-array statements: ``y[:] += x * np.sin(z)``, ``Y[a:b, :] -= A * B + 2.0``, ``y[:] *= w``,
``y[:] /= w``. Each is the scalar instruction of its operator (``t += e``, ``t *= e``, ...) applied to
every element of the target view, every array operand of the expression read at the same
coordinates: NumPy's rules with equal shapes (checked at run time) and numbers broadcast.

Forward, inverse and gradient are the scalar entries' rules run inside the loops, so there is no
second rule set; elements are independent (the target is not read by its own expression, a static
rule), so the loops' order does not matter. On a vector (one sliced axis), ``y[:] += a * x`` and
``y[:] += x`` with a number ``a`` run the rules of ``y += a * x`` (``vector.py``: one sweep, the
gradient of ``a`` a reduction in four partial sums); elsewhere the gradient of a number the
expression reads is summed element by element, in the order the adjoint of the loops written out
would sum it.
"""
from __future__ import annotations

from typing import Callable

from revdiff.ir import algebra as A
from revdiff.ir import views as V
from revdiff.ir.high import BinOp, Const, Expr, Index, Name, Shape, Slice, rewrite_expr
from revdiff.primitives.table import INSTRUCTIONS, Instruction, instruction
from revdiff.primitives.loops import check_lengths, check_views
from revdiff.primitives.vector import axpy_forward, axpy_gradient

RankOf = Callable[[str], int]


def view_rank(e: Expr, rank_of: RankOf) -> int:
    """Axes of ``e`` as an operand of a whole-array statement: 0 for a number (an element, a scalar
    variable), the array's rank for a whole array, the number of sliced axes for a view."""
    if isinstance(e, Name):
        return rank_of(e.id)
    if isinstance(e, Index) and any(isinstance(i, Slice) for i in e.indices):
        return rank_of(e.base) - sum(not isinstance(i, Slice) for i in e.indices)
    return 0


def array_operands(e: Expr, rank_of: RankOf) -> list:
    """The arrays and views an expression reads as whole arrays, in order of appearance."""
    found: list = []

    def leaf(node):
        if isinstance(node, (Name, Index)):
            if view_rank(node, rank_of) > 0 and node not in found:
                found.append(node)
            return node
        return node if isinstance(node, Shape) else None

    rewrite_expr(e, leaf)
    return found


def at(e: Expr, coords: tuple, rank_of: RankOf) -> Expr:
    """``e`` read at view coordinates ``coords``: each array operand replaced by its element."""
    def leaf(node):
        if isinstance(node, (Name, Index)):
            rank = view_rank(node, rank_of)
            return V.element(node, rank_of(V.base(node)), coords) if rank > 0 else node
        return node if isinstance(node, Shape) else None

    return rewrite_expr(e, leaf)


def _scaled_view(e: Expr, rank_of: RankOf) -> tuple | None:
    """(a, x) when ``e`` is ``a * x``, ``x * a`` or ``x`` with ``x`` a vector view and ``a`` a number."""
    if view_rank(e, rank_of) == 1:
        return Const(1), e
    if isinstance(e, BinOp) and e.op == "*":
        for a, x in ((e.left, e.right), (e.right, e.left)):
            if view_rank(x, rank_of) == 1 and not array_operands(a, rank_of):
                return a, x
    return None


def _loops(ctx, lengths: list, body: Callable[[tuple], None], backwards: bool, coords: tuple = ()) -> None:
    """Nested loops over ``lengths``, the last axis innermost (contiguous in C order); ``backwards``:
    each from its end, as the adjoint of the same loops written out runs them, so that a gradient
    summed over the elements (of a number the expression reads) adds in the same order."""
    def inner(i):
        _loops(ctx, lengths, body, backwards, coords + (i,))

    n = lengths[len(coords)] if len(coords) < len(lengths) else None
    if n is None:
        body(coords)
    elif backwards:
        ctx.loop(A.sub(n, Const(1)), Const(-1), inner, "i", Const(-1))
    else:
        ctx.loop(Const(0), n, inner, "i")


def _rule(entry_name: str, scalar: str, phase: str):
    """The forward or gradient rule of whole-array ``entry_name``: ``scalar``'s, element by element."""
    def rule(ops, ctx):
        target, e = ops
        rank_of = ctx.rank
        if scalar in ("add", "sub") and view_rank(target, rank_of) == 1:
            scaled = _scaled_view(e, rank_of)
            if scaled is not None:
                sign = 1 if scalar == "add" else -1
                make = axpy_forward if phase == "forward" else axpy_gradient
                return make(sign)((target, scaled[0], scaled[1]), ctx)
        syntax = INSTRUCTIONS[entry_name].syntax
        target_rank = rank_of(V.base(target))
        lengths = V.lengths(target, target_rank)
        arrays = array_operands(e, rank_of)
        if phase == "forward":
            check_views(ctx, syntax, target, *arrays)
            target_axes = V.view_axes(target, target_rank)
            for x in arrays:
                for (axis, _, n), (x_axis, _, m) in zip(target_axes, V.view_axes(x, rank_of(V.base(x)))):
                    check_lengths(ctx, syntax, n, f"axis {axis} of '{V.base(target)}'", m, f"axis {x_axis} of '{V.base(x)}'")
        rules = INSTRUCTIONS[scalar]
        step = rules.forward if phase == "forward" else rules.gradient
        _loops(ctx, lengths, lambda coords: step((V.element(target, target_rank, coords), at(e, coords, rank_of)), ctx),
               backwards=phase == "gradient")

    return rule


#: whole-array statement per operator, and the scalar instruction it applies to every element
ELEMENTWISE = {"add": "elementwise_add", "sub": "elementwise_sub", "mul": "elementwise_mul", "div": "elementwise_div"}
_SYNTAX = {"add": "view += e", "sub": "view -= e", "mul": "view *= e", "div": "view /= e"}

for _op, _name in ELEMENTWISE.items():
    _scalar = INSTRUCTIONS[_op]
    instruction(Instruction(_name, _SYNTAX[_op], ("target", "expr"), ELEMENTWISE[_scalar.inverse],
                            _rule(_name, _op, "forward"), _rule(_name, _op, "gradient"), _scalar.target_kinds,
                            additive=_scalar.additive, elementwise=_op))
