"""The instructions of the language: forward rule, inverse, and gradient rule of each.

Gradient rules run after the inverse has restored the operands (see ``table.py``): ``t`` below is
the old value, ``gt`` the cotangent of the new value, to be replaced by that of the old value.
"""
from __future__ import annotations

import numpy as np

from revdiff.ir import algebra as A
from revdiff.ir.high import BoolOp, Call, Compare, Const, Name, Unary, base_name
from revdiff.ir.low import Assign, AugAssign
from revdiff.ir.types import is_real
from revdiff.primitives.table import Instruction, instruction


def _no_gradient(ops: tuple, ctx) -> None:
    return None


# ---------------------------------------------------------------- t += e, t -= e


def _add_forward(ops, ctx):
    ctx.emit(AugAssign(ops[0], "+", ops[1]))


def _sub_forward(ops, ctx):
    ctx.emit(AugAssign(ops[0], "-", ops[1]))


def _add_gradient(ops, ctx):
    gt = ctx.grad(ops[0])
    if gt is not None:
        ctx.push(ops[1], gt)


def _sub_gradient(ops, ctx):
    gt = ctx.grad(ops[0])
    if gt is not None:
        ctx.push(ops[1], A.neg(gt))


# Not on bools: NumPy's bool + is a logical or, which loses the operand (True + True is True), and a
# bool scalar would become the integer 2. ``^=`` is the invertible update of bools.
_ARITHMETIC_KINDS = ("int", "float", "complex")
instruction(Instruction("add", "t += e", ("target", "expr"), "sub", _add_forward, _add_gradient, additive=True,
                        target_kinds=_ARITHMETIC_KINDS))
instruction(Instruction("sub", "t -= e", ("target", "expr"), "add", _sub_forward, _sub_gradient, additive=True,
                        target_kinds=_ARITHMETIC_KINDS))

# ---------------------------------------------------------------- t *= e, t /= e


def _nonzero(ops, ctx, verb: str):
    """``t *= e`` and ``t /= e`` undo each other only for a nonzero, finite factor (t * inf / inf is NaN)."""
    e = ops[1]
    if isinstance(e, Const) and e.value != 0 and np.isfinite(e.value):
        return
    ctx.require(Compare("!=", e, Const(0)), f"{verb} by zero: the factor is 0 (not invertible)")
    if ctx.kind(e) in ("float", "complex"):
        ctx.require(Compare("<=", Call("abs", (e,)), Const(np.finfo(np.float64).max)),
                    f"{verb} by a factor that is not finite (inf or NaN: not invertible)", e)


def _integer_range(ctx, t):
    """(iinfo of integer target ``t``'s dtype: uint64 is refused with the arguments, ``kind_of_dtype``)."""
    return np.iinfo(np.dtype(ctx.dtype(base_name(t))))


def _mul_forward(ops, ctx):
    t, e = ops
    _nonzero(ops, ctx, "multiplication")
    if ctx.kind(t) == "int":  # modulo 2**bits a product that wraps is not invertible: it must fit
        info = _integer_range(ctx, t)
        product = A.BinOp("*", t, e)
        # first in float64, which cannot wrap (the compiler may assume an int64 product does not
        # overflow, and fold any test of it away); within 2**-52 relative, so with a margin
        size = Call("abs", (A.BinOp("*", A.BinOp("*", Const(1.0), t), e),))
        if info.bits < 64:  # then exactly, in int64, which the float test keeps from wrapping
            fits = BoolOp("and", (Compare("<", size, Const(2.0 ** 62)), Compare("<=", Const(int(info.min)), product),
                                  Compare("<=", product, Const(int(info.max)))))
        else:  # products within 4096 of 2**63 are refused too: the float test cannot tell them apart
            fits = Compare("<", size, Const(2.0 ** 63 - 4096))
        ctx.require(fits, f"the product does not fit in {info.dtype} (it would wrap around: not invertible)", t)
    ctx.emit(AugAssign(t, "*", e))


def _div_forward(ops, ctx):
    t, e = ops
    _nonzero(ops, ctx, "division")
    if ctx.kind(t) == "int":  # integers: exact only when the division leaves no remainder
        info = _integer_range(ctx, t)
        ctx.require(Compare("==", A.BinOp("%", t, e), Const(0)),
                    "integer division leaves a remainder (not invertible)", t)
        if info.min < 0:
            ctx.require(Unary("not", BoolOp("and", (Compare("==", t, Const(int(info.min))), Compare("==", e, Const(-1))))),
                        f"the quotient does not fit in {info.dtype} ({info.min} / -1 wraps around)", t)
        ctx.emit(AugAssign(t, "//", e))
    else:
        ctx.emit(AugAssign(t, "/", e))


def _complex(ctx, *exprs) -> bool:
    return any(not is_real(ctx.kind(x)) for x in exprs)


def _mul_gradient(ops, ctx):
    # t1 = t0 * e:  ge += gt * conj(t0);  gt0 = gt * conj(e)
    t, e = ops
    gt = ctx.grad(t)
    if gt is None:
        return
    cplx = _complex(ctx, t, e)
    ctx.push(e, A.mul(gt, A.conj_if(t, cplx)))
    ctx.emit(AugAssign(gt, "*", A.conj_if(e, cplx)))


def _div_gradient(ops, ctx):
    # t1 = t0 / e:  ge += gt * conj(-t0 / e**2);  gt0 = gt / conj(e)
    t, e = ops
    gt = ctx.grad(t)
    if gt is None:
        return
    cplx = _complex(ctx, t, e)
    # -t/e divided by e again, not by e*e (which underflows or overflows long before t/e does)
    ctx.push(e, A.neg(A.div(A.mul(gt, A.conj_if(A.div(t, e), cplx)), A.conj_if(e, cplx))))
    ctx.emit(AugAssign(gt, "/", A.conj_if(e, cplx)))


instruction(Instruction("mul", "t *= e", ("target", "expr"), "div", _mul_forward, _mul_gradient,
                        target_kinds=_ARITHMETIC_KINDS))
instruction(Instruction("div", "t /= e", ("target", "expr"), "mul", _div_forward, _div_gradient,
                        target_kinds=_ARITHMETIC_KINDS))

# ---------------------------------------------------------------- t ^= e


def _xor_forward(ops, ctx):
    ctx.emit(AugAssign(ops[0], "^", ops[1]))


instruction(Instruction("xor", "t ^= e", ("target", "expr"), "xor", _xor_forward, _no_gradient,
                        target_kinds=("bool", "int")))

# ---------------------------------------------------------------- a, b = b, a   and   t = -t


def _swap_forward(ops, ctx):
    a, b = ops
    ctx.emit(Assign((a, b), (b, a)))


def _swap_gradient(ops, ctx):
    ga, gb = ctx.grad(ops[0]), ctx.grad(ops[1])
    if ga is not None and gb is not None:
        ctx.emit(Assign((ga, gb), (gb, ga)))


def _neg_forward(ops, ctx):
    ctx.emit(Assign((ops[0],), (A.neg(ops[0]),)))


def _neg_gradient(ops, ctx):
    gt = ctx.grad(ops[0])
    if gt is not None:
        ctx.emit(Assign((gt,), (A.neg(gt),)))


instruction(Instruction("swap", "a, b = b, a", ("target", "target"), "swap", _swap_forward, _swap_gradient,
                        distinct_targets=False))
instruction(Instruction("neg", "t = -t", ("target",), "neg", _neg_forward, _neg_gradient,
                        target_kinds=_ARITHMETIC_KINDS))

# ---------------------------------------------------------------- rot(a, b, theta), irot


def _rotate(a, b, theta, sign: int, ctx) -> None:
    """(a, b) <- (c a - s b, s a + c b) with s = sign * sin(theta)."""
    c = ctx.temp(Call("cos", (theta,)), "c")
    s = ctx.temp(Call("sin", (theta,)) if sign > 0 else A.neg(Call("sin", (theta,))), "s")
    ctx.emit(Assign((a, b), (A.sub(A.mul(c, a), A.mul(s, b)), A.add(A.mul(s, a), A.mul(c, b)))))


def _rot_forward(ops, ctx):
    _rotate(*ops, 1, ctx)


def _irot_forward(ops, ctx):
    _rotate(*ops, -1, ctx)


def _rotation_gradient(sign: int):
    # new = R(sign*theta) old:  g_old = R(-sign*theta) g_new;
    # dL/dtheta = Re(conj(ga) * d a_new/dtheta + conj(gb) * d b_new/dtheta)
    def rule(ops, ctx):
        a, b, theta = ops
        ga, gb = ctx.grad(a), ctx.grad(b)
        if ga is None or gb is None:
            return
        cplx = _complex(ctx, a, b)
        c = ctx.temp(Call("cos", (theta,)), "c")
        s = ctx.temp(Call("sin", (theta,)), "s")
        da = A.neg(A.add(A.mul(s, a), A.mul(Const(sign), A.mul(c, b))))
        db = A.sub(A.mul(Const(sign), A.mul(c, a)), A.mul(s, b))
        gtheta = A.add(A.mul(A.conj_if(ga, cplx), da), A.mul(A.conj_if(gb, cplx), db))
        ctx.push(theta, A.real_part(gtheta) if cplx else gtheta)
        _rotate(ga, gb, theta, -sign, ctx)

    return rule


instruction(Instruction("rot", "rot(a, b, theta)", ("target", "target", "expr"), "irot",
                        _rot_forward, _rotation_gradient(1), target_kinds=("float", "complex"),
                        real_operands=((2, "the rotation angle"),), call_name="rot"))
instruction(Instruction("irot", "irot(a, b, theta)", ("target", "target", "expr"), "rot",
                        _irot_forward, _rotation_gradient(-1), target_kinds=("float", "complex"),
                        real_operands=((2, "the rotation angle"),), call_name="irot"))

# Surface syntax of augmented assignments -> instruction names (read by the parser).
AUGMENTED = {"Add": "add", "Sub": "sub", "Mult": "mul", "Div": "div", "BitXor": "xor"}
__all__ = ["AUGMENTED", "Name"]
