"""Smart constructors for expressions: fold the zeros and ones that derivative rules produce,
so that generated gradient code reads like what a person would write."""
from __future__ import annotations

from revdiff.ir.high import BinOp, Call, Const, Expr, Unary


def is_const(e: Expr, value: object) -> bool:
    return isinstance(e, Const) and not isinstance(e.value, bool) and e.value == value


def add(a: Expr | None, b: Expr | None) -> Expr | None:
    if a is None or is_const(a, 0):
        return b
    if b is None or is_const(b, 0):
        return a
    if isinstance(b, Unary) and b.op == "-":
        return BinOp("-", a, b.operand)
    return BinOp("+", a, b)


def sub(a: Expr, b: Expr) -> Expr:
    if is_const(b, 0):
        return a
    if is_const(a, 0):
        return neg(b)
    return BinOp("-", a, b)


def neg(a: Expr) -> Expr:
    if isinstance(a, Unary) and a.op == "-":
        return a.operand
    if isinstance(a, Const) and not isinstance(a.value, bool):
        return Const(-a.value)
    return Unary("-", a)


def mul(a: Expr, b: Expr) -> Expr:
    if is_const(a, 1):
        return b
    if is_const(b, 1):
        return a
    if is_const(a, -1):
        return neg(b)
    if is_const(b, -1):
        return neg(a)
    if isinstance(a, Unary) and a.op == "-":
        return neg(mul(a.operand, b))
    if isinstance(b, Unary) and b.op == "-":
        return neg(mul(a, b.operand))
    return BinOp("*", a, b)


def div(a: Expr, b: Expr) -> Expr:
    if is_const(b, 1):
        return a
    if isinstance(a, Unary) and a.op == "-":
        return neg(div(a.operand, b))
    return BinOp("/", a, b)


def power(a: Expr, b: Expr) -> Expr:
    if is_const(b, 1):
        return a
    if is_const(b, 0):
        return Const(1)
    return BinOp("**", a, b)


def call(fn: str, *args: Expr) -> Expr:
    return Call(fn, tuple(args))


def conj_if(e: Expr, complex_valued: bool) -> Expr:
    """conj(e) where e may be complex; e itself where it is real (conj is the identity there)."""
    if not complex_valued:
        return e
    if isinstance(e, Call) and e.fn == "conj":
        return e.args[0]
    if isinstance(e, Const):
        return Const(complex(e.value).conjugate()) if isinstance(e.value, complex) else e
    return Call("conj", (e,))


def real_part(e: Expr) -> Expr:
    """real(e), without wrapping twice."""
    if isinstance(e, Call) and e.fn == "real":
        return e
    return Call("real", (e,))
