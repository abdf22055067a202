"""The tangent program: forward-mode derivatives of any lowered program, statement by statement.

Before each statement of the low IR come the statements that carry the tangents (``d_<name>``) of
what it writes, computed from the values it reads, still the old ones; then the statement itself.
Loops, branches and checks keep their primal conditions. Nothing here is a rule of its own:

- the tangent of a pure function or operator is the transpose of its cotangent rule in the function
  table (``primitives/functions.py``) under the real inner product <a, b> = Re(conj(a) b): the rule
  maps the result's cotangent c to an argument's, linearly in c, and ``_transpose`` turns the
  expression it builds into the map from the argument's tangent to the result's. For a holomorphic
  f that is f'(x) dx; conj, real, imag and abs come out as what they are;
- the tangent of an instruction is the tangent of the statements its forward rule lowers to.

Singular points. A term of a tangent that divides or calls a function with a domain beyond what
the statement's own checks cover (sqrt's rule at 0, log(x) in the rule of ``x ** e`` for x < 0)
is zero where it is singular, and a check raises there by name unless the term's direction is
zero, as lowering checks a gradient's rule: ``x ** e`` at x < 0 with e held fixed has the tangent
e x^(e-1) dx, the tangent of sqrt at 0 along a nonzero direction raises (``checks.register_derived``
numbers those checks).

So forward mode reads the table entries reverse mode reads, and the tangent of the fused vjp program
(forward over reverse) is a Hessian-vector product without a tape: its memory is that of the vjp
program twice over, whatever the number of executed instructions.

Host library calls run their loop fallbacks (their tangents are those loops' tangents), so a tangent
program computes its primal values with loops where the plain program may have called BLAS: the same
values to rounding, not bit for bit.
"""
from __future__ import annotations

from typing import Callable

from revdiff.ir import algebra as A
from revdiff.ir.checks import CheckInfo, register_derived
from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Index, Name, Select, Shape, Unary
from revdiff.ir.low import (Assign, AugAssign, Branch, Check, Comment, HostCall, Invoke, Local, Loop, LowFunction,
                            Repeat, Zero, nested_blocks)
from revdiff.ir.types import VarType, is_real, kind_of_dtype
from revdiff.passes.bounds import arithmetic_checks, reported_values
from revdiff.passes.infer import TypeEnv, expr_type
from revdiff.primitives import applied

#: the name a cotangent rule is called with: the result's cotangent, which its output is linear in
_COTANGENT = "_rd_cotangent"
#: the name a tangent term's direction stands in as while its checks are found
_DIRECTION = "_rd_direction"


def tangent_function(fn: LowFunction, name: str, callee: Callable[[str], str], fkey: int,
                     implied: Callable[[object, set], bool], check: bool = True) -> LowFunction:
    """The tangent program of ``fn``, called ``name``: ``fn``'s parameters, then ``d_<p>`` for each
    float or complex parameter ``p`` (its tangent in, the tangent of its final value out); it returns
    its scalar parameters in that order. ``callee(symbol)``: the tangent program of a called program;
    ``fkey``: the key of ``fn``'s checks, under which the tangent's own are registered (``check``:
    whether there are any); ``implied(condition, known)``: whether a check's condition holds where
    the conditions ``known`` do (the check pruner's reasoning, ``optimize/prune.py``)."""
    return _Tangent(fn, callee, fkey, implied, check).function(name)


def _names(fn: LowFunction) -> set:
    names = set(fn.params)

    def visit(body: list) -> None:
        for s in body:
            if isinstance(s, (Local, Zero)):
                names.add(s.name)
            elif isinstance(s, Loop):
                names.add(s.var)
            for block in nested_blocks(s):
                visit(block)

    visit(fn.body)
    return names


class _Tangent:
    def __init__(self, fn: LowFunction, callee: Callable[[str], str], fkey: int,
                 implied: Callable[[object, set], bool], check: bool):
        self.fn = fn
        self.callee = callee
        self.fkey, self.implied, self.check = fkey, implied, check
        self.loc = None  # the user's line being differentiated (from the low IR's comments)
        self.known: set = set()  # conditions the checks of the statement being differentiated hold
        self.pending: list = []  # checks of the current statement's tangent, emitted before it
        self.guards: tuple = ()  # the conditions of the Select arms whose tangent is being built
        self.env = TypeEnv(fn.param_types)
        self.memo: dict = {}
        taken = _names(fn)
        self.prefix = "d_"
        while any(n.startswith(self.prefix) for n in taken):
            self.prefix = "d" + self.prefix

    # ---------------------------------------------------------------- names and kinds

    def type_of(self, e) -> VarType:
        """The type of ``e``; subexpressions typed once per statement (``expr_type``'s memo: the
        tangent of a sum of many terms types each term's part, not the whole, at every level)."""
        return expr_type(e, self.env, None, self.memo)

    def retype(self, name: str, t: VarType) -> None:
        """Set the type of placeholder ``name``; where it changes, the memo starts again (it holds the
        types of expressions that read the placeholder)."""
        if self.env.types.get(name) != t:
            self.env.types[name] = t
            self.memo = {}

    def differentiable(self, e) -> bool:
        return self.type_of(e).differentiable

    def dname(self, name: str) -> str:
        return self.prefix + name

    def dvar(self, lv):
        """The tangent of variable or element ``lv`` (same indices, in the tangent array)."""
        if isinstance(lv, Name):
            return Name(self.dname(lv.id))
        return Index(self.dname(lv.base), lv.indices)

    def define(self, name: str, t: VarType) -> None:
        self.env.types[name] = t
        if t.differentiable:
            self.env.types[self.dname(name)] = t

    def zero(self, t: VarType) -> Const:
        return Const(0j if t.kind == "complex" else 0.0)

    # ---------------------------------------------------------------- expressions

    def tangent(self, e):
        """The tangent of expression ``e``, or None where it is zero (constants, integers)."""
        t = self.type_of(e)
        if not t.differentiable:
            return None
        if isinstance(e, (Name, Index)):
            return self.dvar(e)
        if isinstance(e, (Const, Shape)):
            return None
        if isinstance(e, Select):
            a, b = (self._under(cond, lambda: self.tangent(arm)) for cond, arm in
                    ((e.cond, e.a), (Unary("not", e.cond), e.b)))
            if a is None and b is None:
                return None
            return Select(e.cond, a if a is not None else self.zero(t), b if b is not None else self.zero(t))
        application = applied(e)
        if application is None:
            return None
        fn, args = application
        if fn.cotangents is None:
            return None
        self.retype(_COTANGENT, t)
        rules = fn.cotangents(Name(_COTANGENT), args, lambda x: self.type_of(x).kind)
        total = None
        for arg, rule in zip(args, rules):
            if rule is None or not self.differentiable(arg):
                continue
            darg = self.tangent(arg)
            if darg is not None:
                total = A.add(total, self._at_singular_points(rule, darg))
        if total is not None and is_real(t.kind) and self.type_of(total).kind == "complex":
            total = A.real_part(total)
        return total

    def _transpose(self, rule, d):
        """T(d) with <rule(c), d> = <c, T(d)> for all c: ``rule`` is linear in the cotangent name."""
        if isinstance(rule, Name) and rule.id == _COTANGENT:
            return d
        if not _reads_cotangent(rule):
            raise AssertionError(f"a cotangent rule term does not depend on the cotangent: {rule!r}")
        if isinstance(rule, Unary) and rule.op == "-":
            return A.neg(self._transpose(rule.operand, d))
        if isinstance(rule, Select):
            arms = [self._transpose(arm, d) if _reads_cotangent(arm) else None for arm in (rule.a, rule.b)]
            t = self.type_of(d)
            return Select(rule.cond, *(arm if arm is not None else self.zero(t) for arm in arms))
        if isinstance(rule, Call) and rule.fn == "conj":
            return self._transpose(rule.args[0], A.conj_if(d, self.type_of(d).kind == "complex"))
        if isinstance(rule, Call) and rule.fn == "real":  # a real part, taken of a complex cotangent
            return self._transpose(rule.args[0], d)
        if isinstance(rule, BinOp) and rule.op in ("+", "-"):
            left, right = (self._transpose(x, d) if _reads_cotangent(x) else None for x in (rule.left, rule.right))
            if rule.op == "-":
                return A.sub(left if left is not None else Const(0), right) if right is not None else left
            return A.add(left, right)
        if isinstance(rule, BinOp) and rule.op == "*":
            linear, factor = (rule.left, rule.right) if _reads_cotangent(rule.left) else (rule.right, rule.left)
            return self._transpose(linear, A.mul(self._conj(factor), d))
        if isinstance(rule, BinOp) and rule.op == "/" and not _reads_cotangent(rule.right):
            return self._transpose(rule.left, A.div(d, self._conj(rule.right)))
        raise AssertionError(f"cannot transpose the cotangent rule term {rule!r}")

    def _at_singular_points(self, rule, d):
        """The term of a tangent along direction ``d`` that cotangent rule ``rule`` gives, where it
        may divide by zero or leave a function's domain at points the statement's checks let
        through: zero there, with checks (pending, for ``block`` to emit) that raise unless ``d`` is
        zero. The conditions read only primal values (``d`` stands in as a name while they are
        found), so ``d`` appears once in the term, however deeply tangents nest."""
        term = self._transpose(rule, d)
        if not self.check:
            return term
        kind = lambda e: self.type_of(e).kind
        self.retype(_DIRECTION, self.type_of(d))
        known = set(self.guards) | self.known
        conditions = [c for c in arithmetic_checks(Local("_", self._transpose(rule, Name(_DIRECTION))), kind)
                      if not self.implied(c[0], known)]
        if not conditions:
            return term
        still = Compare("==", d, self.zero(self.type_of(d)))
        if self.guards:  # the term is evaluated only in its Select arms
            still = BoolOp("or", (Unary("not", self.guards[0] if len(self.guards) == 1 else
                                        BoolOp("and", self.guards)), still))
        for ok, message, values, labels, error in conditions:
            values, labels = reported_values(values, labels, kind)
            idx = register_derived(self.fkey, CheckInfo(message, self.loc, labels, error))
            self.pending.append(Check(BoolOp("or", (still, ok)), self.fkey, idx, values))
        regular = conditions[0][0] if len(conditions) == 1 else BoolOp("and", tuple(c[0] for c in conditions))
        return Select(regular, term, self.zero(self.type_of(term)))

    def _under(self, cond, build):
        """``build()`` with ``cond`` among the guards of the terms it builds."""
        self.guards = self.guards + (cond,)
        try:
            return build()
        finally:
            self.guards = self.guards[:-1]

    def _conj(self, e):
        return A.conj_if(e, self.type_of(e).kind == "complex")

    # ---------------------------------------------------------------- statements

    def function(self, name: str) -> LowFunction:
        fn = self.fn
        dparams = [self.dname(p) for p in fn.params if fn.param_types[p].differentiable]
        for p in fn.params:
            self.define(p, fn.param_types[p])
        body = self.block(fn.body)
        params = list(fn.params) + dparams
        types = {p: self.env[p] for p in params}
        returns = [p for p in params if not types[p].is_array]
        return LowFunction(name, params, body, returns, types)

    def block(self, body: list) -> list:
        out: list = []
        for s in body:
            if isinstance(s, Comment):
                self.loc = s.loc if s.loc is not None else self.loc
            # what lowering checked for the statement (before it, before its loop, or proven)
            self.memo = {}
            self.known = {ok for ok, *_ in arithmetic_checks(s, lambda e: self.type_of(e).kind)}
            tangent = self.statement(s)
            out.extend(self.pending)
            self.pending = []
            out.extend(tangent)
        return out

    def statement(self, s) -> list:
        if isinstance(s, (Comment, Check)):
            return [s]
        if isinstance(s, Local):
            t = self.type_of(s.expr)
            self.define(s.name, t)
            if not t.differentiable:
                return [s]
            d = self.tangent(s.expr)
            return [Local(self.dname(s.name), d if d is not None else self.zero(t)), s]
        if isinstance(s, Zero):
            t = VarType(kind_of_dtype(s.dtype), len(s.shape) if s.shape is not None else 0, s.dtype)
            self.define(s.name, t)
            return [s, Zero(self.dname(s.name), s.shape, s.dtype, s.reuse, s.alloc)] if t.differentiable else [s]
        if isinstance(s, AugAssign):
            return self.update(s) + [s]
        if isinstance(s, Assign):
            for lv, e in zip(s.targets, s.exprs):
                if isinstance(lv, Name) and lv.id not in self.env:  # an inlined callee's scalar parameter,
                    self.define(lv.id, self.type_of(e))  # specialised on the argument's type
            pairs = [(self.dvar(lv), self.tangent(e), self.type_of(lv)) for lv, e in zip(s.targets, s.exprs)
                     if self.differentiable(lv)]
            if not pairs:
                return [s]
            return [Assign(tuple(p[0] for p in pairs),
                           tuple(d if d is not None else self.zero(t) for _, d, t in pairs)), s]
        if isinstance(s, Loop):
            self.env.types[s.var] = VarType("int", 0, "int64")
            return [Loop(s.var, s.start, s.stop, s.step, self.block(s.body))]
        if isinstance(s, Branch):
            return [Branch(s.cond, self.block(s.then), self.block(s.orelse))]
        if isinstance(s, Repeat):
            return [Repeat(s.cond, self.block(s.body))]
        if isinstance(s, HostCall):  # a library routine has no tangent here: its loops do
            return self.block(s.fallback)
        if isinstance(s, Invoke):
            return [self.invoke(s)]
        raise TypeError(f"no tangent for low-level statement {s!r}")

    def update(self, s: AugAssign) -> list:
        """The tangent of ``t op= e``, read before it runs."""
        if not self.differentiable(s.target):
            return []
        dt = self.dvar(s.target)
        if s.op in ("+", "-"):
            d = self.tangent(s.expr)
            return [] if d is None else [AugAssign(dt, s.op, d)]
        d = self.tangent(BinOp(s.op, s.target, s.expr))
        return [Assign((dt,), (d if d is not None else self.zero(self.type_of(s.target)),))]

    def invoke(self, s: Invoke) -> Invoke:
        """The called program's tangent: its arguments, then the tangent of each float or complex one
        (a view of the tangent array, or the tangent of a scalar expression), returned like the values."""
        dargs, dresults = [], []
        for a, r in zip(s.args, s.results):
            t = self.type_of(a)
            if not t.differentiable:
                continue
            d = self.tangent(a)
            dargs.append(d if d is not None else self.zero(t))
            dresults.append(None if r is None or t.is_array else self.dvar(r))
        return Invoke(self.callee(s.fn), tuple(s.args) + tuple(dargs), tuple(s.results) + tuple(dresults))


def _reads_cotangent(e) -> bool:
    if isinstance(e, Name):
        return e.id == _COTANGENT
    if isinstance(e, BinOp):
        return _reads_cotangent(e.left) or _reads_cotangent(e.right)
    if isinstance(e, Unary):
        return _reads_cotangent(e.operand)
    if isinstance(e, Call):
        return any(_reads_cotangent(a) for a in e.args)
    if isinstance(e, Select):
        return _reads_cotangent(e.a) or _reads_cotangent(e.b)
    return False


