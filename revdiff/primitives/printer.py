"""Python source of IR expressions, with the parentheses precedence requires: printed by the
Python emitter and by every error message and comment that quotes an expression. Calls print from
the function table (``FUNCTIONS[name].python``)."""
from __future__ import annotations

from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Index, Name, Select, Shape, Slice, Unary
from revdiff.primitives.functions import FUNCTIONS

# Python precedence, higher binds tighter.
_PREC = {"or": 1, "and": 2, "not": 3, "cmp": 4, "|": 5, "^": 6, "&": 7, "+": 9, "-": 9, "*": 10, "/": 10,
         "//": 10, "%": 10, "unary": 11, "**": 12, "atom": 14, "select": 0}


def _prec(e) -> int:
    if isinstance(e, BinOp):
        return _PREC[e.op]
    if isinstance(e, Unary):
        return _PREC["not"] if e.op == "not" else _PREC["unary"]
    if isinstance(e, Compare):
        return _PREC["cmp"]
    if isinstance(e, BoolOp):
        return _PREC[e.op]
    if isinstance(e, Select):
        return _PREC["select"]
    if isinstance(e, Const) and (isinstance(e.value, complex) or (not isinstance(e.value, bool) and e.value < 0)):
        return _PREC["unary"]
    if isinstance(e, Call) and FUNCTIONS[e.fn].python.startswith("("):
        return _PREC["atom"]
    return _PREC["atom"]


def _wrap(e, min_prec: int) -> str:
    s = expr_source(e)
    return f"({s})" if _prec(e) < min_prec else s


def const_source(v) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, complex):
        return f"complex({v.real!r}, {v.imag!r})" if v.real else f"{v.imag!r}j"
    if isinstance(v, float):
        return repr(v) if v == v and v not in (float("inf"), float("-inf")) else f"float('{v}')"
    return repr(v)


def expr_source(e) -> str:
    """Python source of an IR expression, with the parentheses precedence requires."""
    if isinstance(e, Const):
        return const_source(e.value)
    if isinstance(e, Name):
        return e.id
    if isinstance(e, Index):
        return f"{e.base}[{', '.join(_index_source(i) for i in e.indices)}]"
    if isinstance(e, Shape):
        return f"{e.base}.shape[{e.axis}]"
    if isinstance(e, BinOp):
        p = _PREC[e.op]
        if e.op == "**":  # right associative
            return f"{_wrap(e.left, p + 1)} ** {_wrap(e.right, p)}"
        return f"{_wrap(e.left, p)} {e.op} {_wrap(e.right, p + 1)}"
    if isinstance(e, Unary):
        if e.op == "not":
            return f"not {_wrap(e.operand, _PREC['not'])}"
        return f"{e.op}{_wrap(e.operand, _PREC['unary'])}"
    if isinstance(e, Compare):
        return f"{_wrap(e.left, _PREC['cmp'] + 1)} {e.op} {_wrap(e.right, _PREC['cmp'] + 1)}"
    if isinstance(e, BoolOp):
        return f" {e.op} ".join(_wrap(v, _PREC[e.op] + 1) for v in e.values)
    if isinstance(e, Select):
        return f"{_wrap(e.a, 1)} if {_wrap(e.cond, 1)} else {_wrap(e.b, 0)}"
    if isinstance(e, Call):
        fn = FUNCTIONS[e.fn]
        args = [_wrap(a, _PREC["atom"]) if fn.python.startswith("(") else expr_source(a) for a in e.args]
        if fn.python.startswith("("):
            return fn.python.replace("({0})", "{0}").format(*args)
        return fn.python.format(*args)
    if isinstance(e, Slice):
        return _index_source(e)
    raise TypeError(f"cannot print {e!r}")


def _index_source(i) -> str:
    if isinstance(i, Slice):
        parts = ["" if x is None else expr_source(x) for x in (i.lower, i.upper)]
        text = ":".join(parts)
        return text + (":" + expr_source(i.step) if i.step is not None else "")
    return expr_source(i)
