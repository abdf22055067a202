"""The pure functions and operators expressions may use, each with its printing and its
cotangent rule (how the cotangent of the result flows to each argument).

Cotangents follow PyTorch's convention for complex values: for a real loss L the cotangent of
z = x + iy is dL/dx + i dL/dy. For a holomorphic f the rule is ``c_arg = c * conj(f'(arg))``; the
non-holomorphic functions (abs, conj, real, imag) have rules of their own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

from revdiff.ir import algebra as A
from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Expr, Select, Unary
from revdiff.ir.types import join

Rule = Callable[[Expr, tuple, Callable[[Expr], str]], tuple]


@dataclass(frozen=True)
class PureFunction:
    name: str  # canonical name, as written in the IR (Call.fn or BinOp.op)
    arity: int
    python: str  # format string over the printed arguments
    cuda: str  # format string for the CUDA C emitter
    result_kind: Callable[[tuple], str]
    cotangents: Rule | None  # None: no gradient flows through (integer-valued functions)
    aliases: tuple = field(default=())  # other spellings users write (np.arctan2 -> atan2)
    divides: bool = False  # a division by its second argument: checked nonzero at run time
    accumulates: bool = False  # ``t op= e`` adds e (or -e) to t, as a cotangent update does
    #: real arguments where the function is defined and finite, checked at run time (a ValueError
    #: naming the values and the line, as Python's math module raises): (the arguments, their kinds) ->
    #: (condition, the condition as users read it, "{0}", "{1}" standing for them), or None
    domain: Callable[..., tuple | None] | None = None
    real_only: bool = False  # complex arguments are refused when types are inferred


def _same(kinds: tuple) -> str:
    return join(*kinds)


def _floating(kinds: tuple) -> str:
    k = join(*kinds)
    return "float" if k in ("int", "bool") else k


def _real(kinds: tuple) -> str:
    return "float"


def _holomorphic(derivatives: Callable[..., tuple]) -> Rule:
    """Rule of a holomorphic function: c * conj(partial) for each argument."""

    def rule(c: Expr, args: tuple, kind_of) -> tuple:
        return tuple(None if d is None else A.mul(c, A.conj_if(d, kind_of(d) == "complex"))
                     for d in derivatives(*args))

    return rule


def _pow_partials(a: Expr, b: Expr) -> tuple:
    if isinstance(b, Const):
        if b.value == 0:  # a ** 0 is the constant 1: no a ** -1, which a = 0 would refuse
            return (None, None)
        if b.value == 2:
            return (A.mul(Const(2), a), None)
        return (A.mul(b, A.power(a, Const(b.value - 1))), None)
    # d/da a^b = b a^(b-1), and 0 for b = 0 (also at a = 0, where a^(b-1) is not defined: the
    # gradient of sum c[j] x ** j at 0); its own derivative takes the same rule, so b = 1 has a
    # second derivative 0 there. d/db a^b = log(a) a^b, whose limit at a = 0 (b > 0) is 0; at a < 0
    # it does not exist (log refuses it)
    zero = Compare("==", a, Const(0))
    return (Select(Compare("==", b, Const(0)), Const(0.0), A.mul(b, A.power(a, A.sub(b, Const(1))))),
            Select(zero, Const(0.0), A.mul(A.call("log", Select(zero, Const(1.0), a)), A.power(a, b))))


def _quotient_rule(c: Expr, args: tuple, kind_of) -> tuple:
    # c_b = -c conj(a/b) / conj(b): a/b and the cotangent first, then the division by b, not a
    # division by b*b, which overflows or underflows long before a/b does (b ~ 1e-160: b*b is 0)
    a, b = args
    q = A.div(a, b)
    conj_b = A.conj_if(b, kind_of(b) == "complex")
    return A.div(c, conj_b), A.neg(A.div(A.mul(c, A.conj_if(q, kind_of(q) == "complex")), conj_b))


def _atan2_rule(c: Expr, args: tuple, kind_of) -> tuple:
    # d atan2(y, x) = (x dy - y dx) / (x^2 + y^2), written (x / h) / h with h = hypot(y, x), which
    # neither overflows nor underflows where x^2 + y^2 would. At the origin atan2 jumps (its limit
    # depends on the direction of approach): no derivative, so the division by h = 0 raises there, as
    # hypot's own rule does (a zero there would make Givens QR's gradient wrong wherever it rotates two zeros)
    y, x = args
    h = A.call("hypot", y, x)
    return A.mul(c, A.div(A.div(x, h), h)), A.neg(A.mul(c, A.div(A.div(y, h), h)))


def _mod_rule(c: Expr, args: tuple, kind_of) -> tuple:
    # a % b = a - b * (a // b): the cotangents c and -c * (a // b) where it is smooth (PyTorch's and
    # JAX's rule for remainder; at the jumps, a // b integer, the one-sided derivative from the right)
    a, b = args
    return c, A.neg(A.mul(c, BinOp("//", a, b)))


def _abs_rule(c: Expr, args: tuple, kind_of) -> tuple:
    (x,) = args
    if kind_of(x) == "complex":
        unit = Select(Compare("!=", x, Const(0)), A.div(x, A.call("abs", x)), Const(0j))
        return (A.mul(A.real_part(c), unit),)
    return (A.mul(c, A.call("sign", x)),)


def _minmax(pick_first: str) -> Rule:
    def rule(c: Expr, args: tuple, kind_of) -> tuple:
        a, b = args
        first = Compare(pick_first, a, b)
        return (Select(first, c, Const(0)), Select(first, Const(0), c))

    return rule


def _one_over(d: Callable[[Expr], Expr]) -> Callable[[Expr], tuple]:
    """Partials ``(1 / d(x),)`` of a function of one argument."""
    return lambda x: (A.div(Const(1), d(x)),)


def _between(low: float, high: float, closed: bool) -> Callable[[Expr], Expr]:
    op = "<=" if closed else "<"
    return lambda x: BoolOp("and", (Compare(op, Const(low), x), Compare(op, x, Const(high))))


def _above(bound: float, closed: bool = False) -> Callable[[Expr], Expr]:
    return lambda x: Compare(">=" if closed else ">", x, Const(bound))


def _one_minus_square(x: Expr) -> Expr:
    """1 - x^2 as (1 - x)(1 + x): exact near |x| = 1, where 1 - x*x loses every digit."""
    return A.mul(A.sub(Const(1), x), A.add(Const(1), x))


_TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi)


def _domain(condition: Callable[[Expr], Expr], text: str, complex_pole: bool = False) -> Callable[..., tuple | None]:
    """The ``domain`` of a function of one argument: ``condition`` of a real one, and how users read
    it; a complex argument is refused only at a pole at 0 (``complex_pole``: log's)."""
    def domain(x: Expr, kinds: tuple) -> tuple | None:
        if "complex" in kinds:
            return (Compare("!=", x, Const(0)), "{0} != 0") if complex_pole else None
        return condition(x), text
    return domain


def _power_domain(a: Expr, b: Expr, kinds: tuple) -> tuple | None:
    """Real ``a ** b`` is real and finite for a > 0, for a = 0 with b >= 0, and for a < 0 with an
    integer b (NumPy gives NaN or inf elsewhere, Python a complex number or ZeroDivisionError). An
    integer to a negative power is a float in Python and wraps to an integer in compiled code, and a
    complex zero to a negative power is NaN: both refused."""
    if set(kinds) <= {"int", "bool"}:
        if isinstance(b, Const) and b.value >= 0:
            return None
        return Compare(">=", b, Const(0)), "{1} >= 0 for integers (write 1.0 * {0} for a float power)"
    if "complex" in kinds:
        if isinstance(b, Const) and not (isinstance(b.value, complex) or b.value < 0):
            return None
        return Compare("!=", a, Const(0)), "{0} != 0 (zero to a negative or complex power)"
    if isinstance(b, Const):
        value = b.value
        if float(value).is_integer():
            return None if value >= 0 else (Compare("!=", a, Const(0)), "{0} != 0 (a negative power)")
        if value < 0:
            return Compare(">", a, Const(0)), "{0} > 0 (a negative non-integer power)"
        return Compare(">=", a, Const(0)), "{0} >= 0 (a non-integer power)"
    integer = Compare("==", b, A.call("round", b))
    return (BoolOp("or", (Compare(">", a, Const(0)), BoolOp("and", (Compare("==", a, Const(0)), Compare(">=", b, Const(0)))),
                          BoolOp("and", (Compare("<", a, Const(0)), integer)))),
            "{0} > 0, {0} = 0 with {1} >= 0, or an integer {1}")


def _entry(name, arity, python, cuda, result, rule, aliases=(), **properties):
    return PureFunction(name, arity, python, cuda, result, rule, tuple(aliases), **properties)


_ENTRIES = [
    # operators
    _entry("+", 2, "{0} + {1}", "{0} + {1}", _same, _holomorphic(lambda a, b: (Const(1), Const(1))),
           accumulates=True),
    _entry("-", 2, "{0} - {1}", "{0} - {1}", _same, _holomorphic(lambda a, b: (Const(1), Const(-1))),
           accumulates=True),
    _entry("*", 2, "{0} * {1}", "{0} * {1}", _same, _holomorphic(lambda a, b: (b, a))),
    _entry("/", 2, "{0} / {1}", "{0} / {1}", _floating, _quotient_rule, divides=True),
    _entry("**", 2, "{0} ** {1}", "rd_pow({0}, {1})", _same, _holomorphic(_pow_partials),
           domain=_power_domain),
    _entry("//", 2, "{0} // {1}", "rd_floordiv({0}, {1})", _same, None, divides=True),
    _entry("%", 2, "{0} % {1}", "rd_mod({0}, {1})", _same, _mod_rule, divides=True),
    _entry("neg", 1, "-{0}", "-{0}", _same, _holomorphic(lambda a: (Const(-1),))),
    _entry("pos", 1, "+{0}", "+{0}", _same, _holomorphic(lambda a: (Const(1),))),
    # elementary functions (complex-capable through numpy's ufuncs)
    _entry("sin", 1, "np.sin({0})", "sin({0})", _floating,
           _holomorphic(lambda x: (A.call("cos", x),))),
    _entry("cos", 1, "np.cos({0})", "cos({0})", _floating,
           _holomorphic(lambda x: (A.neg(A.call("sin", x)),))),
    _entry("tan", 1, "np.tan({0})", "tan({0})", _floating,
           _holomorphic(lambda x: (A.add(Const(1), A.power(A.call("tan", x), Const(2))),))),
    _entry("exp", 1, "np.exp({0})", "exp({0})", _floating,
           _holomorphic(lambda x: (A.call("exp", x),))),
    _entry("log", 1, "np.log({0})", "log({0})", _floating,
           _holomorphic(lambda x: (A.div(Const(1), x),)), domain=_domain(_above(0), "{0} > 0", complex_pole=True)),
    _entry("sqrt", 1, "np.sqrt({0})", "sqrt({0})", _floating,
           _holomorphic(lambda x: (A.div(Const(0.5), A.call("sqrt", x)),)), domain=_domain(_above(0, True), "{0} >= 0")),
    _entry("log2", 1, "np.log2({0})", "log2({0})", _floating,
           _holomorphic(lambda x: (A.div(Const(1 / math.log(2)), x),)), domain=_domain(_above(0), "{0} > 0"), real_only=True),
    _entry("log10", 1, "np.log10({0})", "log10({0})", _floating,
           _holomorphic(lambda x: (A.div(Const(1 / math.log(10)), x),)), domain=_domain(_above(0), "{0} > 0"),
           real_only=True),
    _entry("log1p", 1, "np.log1p({0})", "log1p({0})", _floating,
           _holomorphic(_one_over(lambda x: A.add(Const(1), x))), domain=_domain(_above(-1), "{0} > -1"), real_only=True),
    _entry("expm1", 1, "np.expm1({0})", "expm1({0})", _floating,
           _holomorphic(lambda x: (A.call("exp", x),)), real_only=True),
    _entry("sinh", 1, "np.sinh({0})", "sinh({0})", _floating,
           _holomorphic(lambda x: (A.call("cosh", x),))),
    _entry("cosh", 1, "np.cosh({0})", "cosh({0})", _floating,
           _holomorphic(lambda x: (A.call("sinh", x),))),
    _entry("tanh", 1, "np.tanh({0})", "tanh({0})", _floating,
           _holomorphic(lambda x: (A.sub(Const(1), A.power(A.call("tanh", x), Const(2))),))),
    _entry("atan", 1, "np.arctan({0})", "atan({0})", _floating,
           _holomorphic(lambda x: (A.div(Const(1), A.add(Const(1), A.power(x, Const(2)))),)),
           aliases=("arctan",)),
    _entry("asin", 1, "np.arcsin({0})", "asin({0})", _floating,
           _holomorphic(_one_over(lambda x: A.call("sqrt", _one_minus_square(x)))), aliases=("arcsin",),
           domain=_domain(_between(-1, 1, True), "-1 <= {0} <= 1"), real_only=True),
    _entry("acos", 1, "np.arccos({0})", "acos({0})", _floating,
           _holomorphic(_one_over(lambda x: A.neg(A.call("sqrt", _one_minus_square(x))))), aliases=("arccos",),
           domain=_domain(_between(-1, 1, True), "-1 <= {0} <= 1"), real_only=True),
    _entry("asinh", 1, "np.arcsinh({0})", "asinh({0})", _floating,  # hypot: no overflow of x^2
           _holomorphic(_one_over(lambda x: A.call("hypot", x, Const(1.0)))), aliases=("arcsinh",), real_only=True),
    _entry("acosh", 1, "np.arccosh({0})", "acosh({0})", _floating,
           _holomorphic(_one_over(lambda x: A.mul(A.call("sqrt", A.sub(x, Const(1))),
                                                   A.call("sqrt", A.add(x, Const(1)))))),
           aliases=("arccosh",), domain=_domain(_above(1, True), "{0} >= 1"), real_only=True),
    _entry("atanh", 1, "np.arctanh({0})", "atanh({0})", _floating,
           _holomorphic(_one_over(_one_minus_square)), aliases=("arctanh",),
           domain=_domain(_between(-1, 1, False), "-1 < {0} < 1"), real_only=True),
    _entry("erf", 1, "math.erf({0})", "erf({0})", _floating,
           _holomorphic(lambda x: (A.mul(Const(_TWO_OVER_SQRT_PI), A.call("exp", A.neg(A.power(x, Const(2))))),)),
           real_only=True),
    _entry("erfc", 1, "math.erfc({0})", "erfc({0})", _floating,
           _holomorphic(lambda x: (A.mul(Const(-_TWO_OVER_SQRT_PI), A.call("exp", A.neg(A.power(x, Const(2))))),)),
           real_only=True),
    _entry("atan2", 2, "math.atan2({0}, {1})", "atan2({0}, {1})", _real, _atan2_rule,
           aliases=("arctan2",), real_only=True),
    _entry("hypot", 2, "math.hypot({0}, {1})", "hypot({0}, {1})", _real,
           _holomorphic(lambda x, y: (A.div(x, A.call("hypot", x, y)), A.div(y, A.call("hypot", x, y)))),
           real_only=True),
    _entry("abs", 1, "abs({0})", "rd_abs({0})", lambda k: "int" if k[0] in ("int", "bool") else "float",
           _abs_rule, aliases=("absolute", "fabs")),
    # nearest integer (ties to even), as an int: the exactly invertible increment of fixed-point code
    _entry("round", 1, "round({0})", "llrint({0})", lambda k: "int", None, real_only=True,
           domain=_domain(lambda x: BoolOp("and", (Compare("<=", Const(-2.0 ** 63), x), Compare("<", x, Const(2.0 ** 63)))),
                          "-2**63 <= {0} < 2**63 (round gives an int64; NaN has no nearest integer)")),
    _entry("sign", 1, "np.sign({0})", "rd_sign({0})", _same, None),
    _entry("conj", 1, "np.conj({0})", "rd_conj({0})", _same,
           lambda c, args, kind_of: (A.conj_if(c, kind_of(c) == "complex"),), aliases=("conjugate",)),
    _entry("real", 1, "({0}).real", "rd_real({0})", lambda k: "int" if k[0] in ("int", "bool") else "float",
           lambda c, args, kind_of: (A.real_part(c) if kind_of(c) == "complex" else c,)),
    _entry("imag", 1, "({0}).imag", "rd_imag({0})", lambda k: "int" if k[0] in ("int", "bool") else "float",
           lambda c, args, kind_of: (A.mul(Const(1j), A.real_part(c) if kind_of(c) == "complex" else c),)),
    # internal: the number of values of range(start, stop, step), for reversed loops
    _entry("trip_count", 3, "len(range({0}, {1}, {2}))", "rd_trip_count({0}, {1}, {2})", lambda k: "int", None),
    _entry("min", 2, "min({0}, {1})", "rd_min({0}, {1})", _same, _minmax("<="), real_only=True),
    _entry("max", 2, "max({0}, {1})", "rd_max({0}, {1})", _same, _minmax(">="), real_only=True),
]

FUNCTIONS: dict[str, PureFunction] = {e.name: e for e in _ENTRIES}
OPERATOR_NAMES = {"+", "-", "*", "/", "**", "//", "%", "neg", "pos"}
USER_FUNCTIONS: dict[str, str] = {}
for _e in _ENTRIES:
    if _e.name not in OPERATOR_NAMES and _e.name not in ("sign", "trip_count"):
        USER_FUNCTIONS[_e.name] = _e.name
        for _alias in _e.aliases:
            USER_FUNCTIONS[_alias] = _e.name



def applied(e: Expr) -> tuple | None:
    """(the table entry, its arguments) of an operator or function application, else None."""
    if isinstance(e, BinOp):
        return FUNCTIONS[e.op], (e.left, e.right)
    if isinstance(e, Unary):
        return FUNCTIONS["neg" if e.op == "-" else "pos"], (e.operand,)
    if isinstance(e, Call):
        return FUNCTIONS[e.fn], e.args
    return None
