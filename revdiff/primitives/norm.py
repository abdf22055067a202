"""The vector instruction ``s += np.linalg.norm(x)`` (and ``-=``, its inverse): the 2-norm of a
vector view at any finite magnitude, into a real number, with its gradient x / ||x|| as a rule of
its own, so the adjoint never differentiates through the scaling that keeps the squares in range.
"""
from __future__ import annotations

from revdiff.ir import algebra as A
from revdiff.ir.high import Compare, Const, Select
from revdiff.ir.low import Assign, AugAssign
from revdiff.primitives.table import Instruction, instruction
from revdiff.primitives.loops import any_complex, check_views, element, length, signed

SYNTAX = "s += np.linalg.norm(x)"


def _norm(ctx, x):
    """The expression of ||x||_2 at any finite magnitude, after the loops it needs: the squares are
    summed as |x_i / t|^2 with t = max |x_i|, so none overflows or underflows (as LAPACK's nrm2
    scales), and ||x|| = t sqrt(sum); zero for x = 0 (x_i / t is then x_i itself: no 0 / 0). Two
    passes and one division per element, in x's precision (no float constant, which would widen
    float32 to float64), the same in the instruction, its inverse and its gradient, so the inverse
    subtracts exactly what the forward added. A NaN or infinite x_i gives NaN (the high-level
    functions refuse them)."""
    n = length(ctx, x)
    t = ctx.accumulator("scale", A.call("abs", element(ctx, x, Const(0))))
    ctx.loop(Const(0), n, lambda i: ctx.emit(Assign((t,), (A.call("max", t, A.call("abs", element(ctx, x, i))),))), "i")
    scaled = Compare(">", t, Const(0))
    cplx = any_complex(ctx, x)

    def square(i):
        q = ctx.temp(Select(scaled, A.div(element(ctx, x, i), t), element(ctx, x, i)), "q")
        return A.real_part(A.mul(q, A.conj_if(q, True))) if cplx else A.mul(q, q)

    total = ctx.accumulator("sumsq", t)
    ctx.loop(Const(0), n, lambda i: ctx.emit(AugAssign(total, "+", square(i))), "i")
    return ctx.temp(Select(Compare(">", total, Const(0)), A.mul(t, A.call("sqrt", total)), total), "norm")


def _norm_forward(sign: int):
    def rule(ops, ctx):
        s, x = ops
        check_views(ctx, SYNTAX, x)
        ctx.emit(AugAssign(s, "+" if sign > 0 else "-", _norm(ctx, x)))

    return rule


def _norm_gradient(sign: int):
    # s += ||x||:  gx_i += gs x_i / ||x|| (0 at x = 0, where the norm has no derivative: PyTorch's choice;
    # written x_i - x_i, a zero whose tangent is zero too: the Hessian there is 0 by the same convention,
    # where PyTorch's double backward gives NaN; x_i itself would make it the identity)
    def rule(ops, ctx):
        s, x = ops
        gs = ctx.grad(s)
        if gs is None:
            return
        nrm = _norm(ctx, x)
        positive = Compare(">", nrm, Const(0))
        g = ctx.temp(signed(sign, gs), "gs")  # s is real

        def push(i):
            xi = element(ctx, x, i)
            ctx.push(xi, A.mul(g, Select(positive, A.div(xi, nrm), A.sub(xi, xi))))

        ctx.loop(Const(0), length(ctx, x), push, "i")

    return rule


for _op, _inverse, _sign in (("add", "sub", 1), ("sub", "add", -1)):
    instruction(Instruction(f"norm_{_op}", SYNTAX if _sign > 0 else SYNTAX.replace("+=", "-="),
                            ("target", "expr"), f"norm_{_inverse}", _norm_forward(_sign), _norm_gradient(_sign),
                            ("float",), operand_ranks=(0, 1), additive=True, real_result=True,
                            rank_hints={(1, 2): "np.linalg.norm here is the 2-norm of a vector: "
                                                "s += np.linalg.norm(A[:, k])"}))

NORM = {"add": "norm_add", "sub": "norm_sub"}  # the surface form the parser recognises -> instruction names
