"""The outer-product update ``Y[:, :] += np.outer(u, v)`` (``-=`` its inverse): Y[i, j] += u[i] v[j],
the rank-one update of a Householder reflection (C -= u (C^T v)^T) as one instruction. Its loops walk
Y by rows (in SIMD lanes a block of rows at a time, each v[j] loaded once for the block,
``loops.index_blocks``), and its gradient is one walk over the cotangent of Y: gu[i] += sum_j gY[i, j]
conj(v[j]) and gv[j] += sum_i conj(u[i]) gY[i, j] from the same loads of gY. As written element by
element, each Y[i, j] gains exactly one rounded product, so the inverse subtracts the value the
forward added. No BLAS here: a library's rank-one update may fuse the multiply and the add, which the
inverse could not undo (the gradient of ``y += A @ x`` may call one: no inverse reads a gradient).
"""
from __future__ import annotations

from revdiff.ir import algebra as A
from revdiff.ir import views as V
from revdiff.ir.high import Const
from revdiff.ir.low import AugAssign
from revdiff.primitives.loops import (any_complex, check_lengths, check_views, element, index_blocks, length, rank_of,
                                      signed)
from revdiff.primitives.table import Instruction, instruction

SYNTAX = "Y[:, :] += np.outer(u, v)"


def _syntax(sign: int) -> str:
    return SYNTAX if sign > 0 else SYNTAX.replace("+=", "-=")


def _shapes(ctx, ops, sign: int) -> tuple:
    """(rows, columns) of Y, checked against len(u) and len(v) (messages name the statement's sign)."""
    Y, u, v = ops
    syntax = _syntax(sign)
    check_views(ctx, syntax, Y, u, v)
    rows, cols = V.lengths(Y, rank_of(ctx, Y))
    check_lengths(ctx, syntax, length(ctx, u), "len(u)", rows, "rows of Y")
    check_lengths(ctx, syntax, length(ctx, v), "len(v)", cols, "columns of Y")
    return rows, cols


def _forward(sign: int):
    op = "+" if sign > 0 else "-"

    def rule(ops, ctx):
        Y, u, v = ops
        rows, cols = _shapes(ctx, ops, sign)

        def block(block_rows):  # Y[i, :] op= u[i] v for a block of rows, v[j] loaded once for the block
            us = [ctx.temp(element(ctx, u, i), "u") for i in block_rows]
            ctx.loop(Const(0), cols, lambda j: [ctx.emit(AugAssign(element(ctx, Y, i, j), op,
                                                                   A.mul(ui, element(ctx, v, j))))
                                                for i, ui in zip(block_rows, us)], "j")
        index_blocks(ctx, rows, block, "i")

    return rule


def _gradient(sign: int):
    def rule(ops, ctx):
        Y, u, v = ops
        gY = ctx.grad(Y)
        gu, gv = ctx.grad(u), ctx.grad(v)
        if gY is None or (gu is None and gv is None):
            return
        rows, cols = V.lengths(Y, rank_of(ctx, Y))
        cplx = any_complex(ctx, Y, u, v)
        conj = lambda e: A.conj_if(e, cplx)  # noqa: E731

        def block(block_rows):
            # gu[i] += sign sum_j gY[i, j] conj(v[j]), a plain running sum per row (a gradient shares
            # no bits with an inverse; in lanes the rows of a block are independent chains);
            # gv[j] += sign conj(u[i]) gY[i, j], row by row in order
            sums = [ctx.accumulator("acc", gY) for _ in block_rows] if gu is not None else []
            us = [ctx.temp(signed(sign, conj(element(ctx, u, i))), "u") for i in block_rows] if gv is not None else []

            def column(j):
                for k, i in enumerate(block_rows):
                    g = ctx.temp(element(ctx, gY, i, j), "g")
                    if gu is not None:
                        ctx.emit(AugAssign(sums[k], "+", A.mul(g, conj(element(ctx, v, j)))))
                    if gv is not None:
                        ctx.push(element(ctx, v, j), A.mul(us[k], g))
            ctx.loop(Const(0), cols, column, "j")
            for i, total in zip(block_rows, sums):
                ctx.push(element(ctx, u, i), signed(sign, total))
        index_blocks(ctx, rows, block, "i")

    return rule


for _op, _inverse, _sign in (("add", "sub", 1), ("sub", "add", -1)):
    instruction(Instruction(f"outer_{_op}", _syntax(_sign),
                            ("target", "expr", "expr"), f"outer_{_inverse}", _forward(_sign), _gradient(_sign),
                            ("int", "float", "complex"), operand_ranks=(2, 1, 1), additive=True,
                            rank_hints={(0, 1): "the target of an outer product is a matrix view: Y[:, :] += "
                                                "np.outer(u, v)"}))

#: the surface form the parser recognises -> instruction names (op is "add" or "sub")
OUTER = {"add": "outer_add", "sub": "outer_sub"}

__all__ = ["OUTER"]
