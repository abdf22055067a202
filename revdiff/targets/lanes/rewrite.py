"""Rewrite a program so that one call runs it on ``width`` batch elements at once (SIMD lanes).

Every batch element's value of a *lane* variable sits side by side: an array gains a trailing lane
axis, and a scalar becomes ``width`` scalars (``x__l0``, ``x__l1``, ...). Loops, shapes, loop
variables and shared arguments stay *uniform* (one value for every lane), so control flow is run
once for all lanes. Each statement that touches lane data is unrolled over the lanes, reading
every lane's operands before storing any lane's result, so LLVM's SLP vectoriser can turn it into
vector instructions without having to prove that the arrays do not alias: lanes never share
memory. Every lane runs exactly the scalar operations of the one-element program, in the same
order, so results are bit-identical to it. A statement that a lane-dependent ``a if c else b``
chooses runs, where every lane's c agrees, with that choice made by a constant (no branch per lane:
``stmt_with_uniform_selects``).

A program whose control flow depends on lane data (a branch or loop bound reading it) cannot run
in lanes; ``NotLaneable`` says why, and the batch runs one element per iteration instead.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from revdiff.ir.high import (BinOp, BoolOp, Call, Compare, Const, Index, Name, Select, Shape, Slice, Unary,
                             children, rewrite_expr)
from revdiff.ir.low import (Assign, AugAssign, Branch, Check, Comment, HostCall, Invoke, Local, Loop,
                            LowFunction, Repeat, Zero, nested_blocks)
from revdiff.primitives.functions import FUNCTIONS

LANE_DTYPES = ("float32", "float64")  # batched complex or integer data runs one element at a time


class NotLaneable(Exception):
    """The program cannot run in lanes (the reason is the message)."""


def lane_name(name: str, lane: int) -> str:
    return f"{name}__l{lane}"


@dataclass(frozen=True)
class LaneCall:
    """A callee the lane program invokes: the original alias and which parameters are lanes."""

    alias: str
    lanes: tuple  # bool per parameter


def lane_alias(alias: str, lanes: tuple) -> str:
    return f"{alias}_lanes{''.join('1' if b else '0' for b in lanes)}"


class _Classes:
    """Which names hold lane data: arrays (with a lane axis) and scalars (one value per lane)."""

    def __init__(self, arrays: set, scalars: set):
        self.arrays = set(arrays)
        self.scalars = set(scalars)

    def reads_lanes(self, e) -> bool:
        if isinstance(e, Name):
            return e.id in self.scalars or e.id in self.arrays
        if isinstance(e, Shape):  # every element has the same shape
            return False
        if isinstance(e, Index) and e.base in self.arrays:
            return True
        return any(self.reads_lanes(c) for c in children(e))

    def is_lane_target(self, t) -> bool:
        return (isinstance(t, Name) and t.id in self.scalars) or (isinstance(t, Index) and t.base in self.arrays)


def _is_view(e, classes: _Classes) -> bool:
    """An expression naming an array (a whole array or a slice of one), not an element."""
    if isinstance(e, Name):
        return e.id in classes.arrays
    return isinstance(e, Index) and e.base in classes.arrays and any(isinstance(i, Slice) for i in e.indices)


def classify(fn: LowFunction, lane_params: set) -> _Classes:
    """The lane names of ``fn`` given which parameters are lanes, iterated to a fixed point: a name
    assigned lane data becomes a lane name. A callee's scalar results are lanes where its arguments
    are (a callee that writes lane data into a shared scalar is itself not laneable)."""
    arrays = {p for p in lane_params if fn.param_types[p].ndim > 0}
    classes = _Classes(arrays, set(lane_params) - arrays)
    changed = True
    while changed:
        before = (len(classes.arrays), len(classes.scalars))
        _classify_block(fn.body, classes)
        changed = before != (len(classes.arrays), len(classes.scalars))
    return classes


def _classify_block(body: list, c: _Classes) -> None:
    for s in body:
        if isinstance(s, Zero):
            if s.dtype in LANE_DTYPES or s.dtype.startswith("complex"):
                (c.arrays if s.shape is not None else c.scalars).add(s.name)
        elif isinstance(s, Local):
            if isinstance(s.expr, Index) and not _is_view(s.expr, c) and c.reads_lanes(s.expr) and \
                    any(isinstance(i, Slice) for i in s.expr.indices):
                raise NotLaneable(f"a view of a shared array at an index read from batch data ('{s.name}')")
            if _is_view(s.expr, c):
                c.arrays.add(s.name)
            elif c.reads_lanes(s.expr):
                c.scalars.add(s.name)
        elif isinstance(s, (Assign, AugAssign)):
            targets, exprs = (s.targets, s.exprs) if isinstance(s, Assign) else ((s.target,), (s.expr,))
            for t, e in zip(targets, exprs):
                if isinstance(t, Name) and c.reads_lanes(e) and t.id not in c.arrays:
                    c.scalars.add(t.id)
        elif isinstance(s, Invoke):
            for r, lane in zip(s.results, _arg_lanes(s, c)):
                if lane and isinstance(r, Name) and r.id not in c.arrays:
                    c.scalars.add(r.id)
        for block in nested_blocks(s):
            _classify_block(block, c)


def _arg_lanes(s: Invoke, c: _Classes) -> tuple:
    return tuple(_is_view(a, c) or c.reads_lanes(a) for a in s.args)


class LaneRewriter:
    """Unrolls lane statements of one function over ``width`` lanes (see the module docstring)."""

    def __init__(self, fn: LowFunction, classes: _Classes, width: int):
        self.fn = fn
        self.c = classes
        self.width = width
        self.calls: dict = {}  # lane alias -> LaneCall
        self.counter = 0

    # ---------------------------------------------------------------- expressions

    def at(self, e, lane: int):
        """Expression ``e`` as lane ``lane`` sees it."""
        c = self.c
        if isinstance(e, Name):
            if e.id in c.scalars:
                return Name(lane_name(e.id, lane))
            return e
        if isinstance(e, Index):
            indices = tuple(self.at(i, lane) for i in e.indices)
            if e.base in c.arrays:
                extra = Slice() if any(isinstance(i, Slice) for i in e.indices) else Const(lane)
                return Index(e.base, indices + (extra,))
            return Index(e.base, indices)
        if isinstance(e, Slice):
            return Slice(*(None if x is None else self.at(x, lane) for x in (e.lower, e.upper, e.step)))
        if isinstance(e, BinOp):
            return BinOp(e.op, self.at(e.left, lane), self.at(e.right, lane))
        if isinstance(e, Compare):
            return Compare(e.op, self.at(e.left, lane), self.at(e.right, lane))
        if isinstance(e, Unary):
            return Unary(e.op, self.at(e.operand, lane))
        if isinstance(e, BoolOp):
            return BoolOp(e.op, tuple(self.at(v, lane) for v in e.values))
        if isinstance(e, Call):
            return Call(e.fn, tuple(self.at(a, lane) for a in e.args))
        if isinstance(e, Select):
            return Select(self.at(e.cond, lane), self.at(e.a, lane), self.at(e.b, lane))
        return e

    def view(self, e):
        """An array argument: lane arrays keep their lane axis whole."""
        return self.at(e, 0) if _is_view(e, self.c) else e

    def uniform(self, e, what: str):
        if self.c.reads_lanes(e):
            raise NotLaneable(f"{what} in {self.fn.name} depends on batch data")
        return e

    def fresh(self) -> str:
        self.counter += 1
        return f"_lane{self.counter}"

    # ---------------------------------------------------------------- statements

    def function(self) -> LowFunction:
        params = self.expand_names(self.fn.params)
        returns = self.expand_names(self.fn.returns)
        types = {}
        for p in self.fn.params:  # a lane array gains its lane axis; a lane scalar is one per lane
            t = self.fn.param_types[p]
            if p in self.c.arrays:
                types[p] = replace(t, ndim=t.ndim + 1)
            elif p in self.c.scalars:
                types.update({lane_name(p, k): t for k in range(self.width)})
            else:
                types[p] = t
        return replace(self.fn, params=params, body=self.block(self.fn.body), returns=returns, param_types=types)

    def expand_names(self, names) -> list:
        out = []
        for p in names:
            out += [lane_name(p, k) for k in range(self.width)] if p in self.c.scalars else [p]
        return out

    def block(self, body: list) -> list:
        out: list = []
        for s in body:
            self.stmt(s, out)
        return out

    def stmt(self, s, out: list, fast_paths: bool = True) -> None:
        """Append ``s`` as the lanes run it to ``out``. ``fast_paths=False``: a statement with
        lane-dependent selects in its plain per-lane form only (what ``stmt_with_uniform_selects``
        puts in each branch)."""
        c, lanes = self.c, range(self.width)
        if fast_paths and isinstance(s, (Assign, AugAssign, Local)):
            selects = _lane_selects(s, c)
            if selects:
                self.stmt_with_uniform_selects(s, selects, out)
                return
        if isinstance(s, Comment):
            out.append(s)
        elif isinstance(s, Local):
            if s.name in c.arrays:
                out.append(Local(s.name, self.view(s.expr)))
            elif s.name in c.scalars:
                out += [Local(lane_name(s.name, k), self.at(s.expr, k)) for k in lanes]
            else:
                out.append(s)
        elif isinstance(s, AugAssign):
            if not (c.is_lane_target(s.target) or c.reads_lanes(s.expr)):
                out.append(s)
            elif not c.is_lane_target(s.target):
                raise NotLaneable(f"{self.fn.name} writes batch data into a shared variable")
            elif isinstance(s.target, Index):  # every lane's value, then the stores
                temps = [self.fresh() for _ in lanes]
                out += [Local(t, BinOp(s.op, self.at(s.target, k), self.at(s.expr, k))) for k, t in zip(lanes, temps)]
                out += [Assign((self.at(s.target, k),), (Name(t),)) for k, t in zip(lanes, temps)]
            else:
                out += [AugAssign(self.at(s.target, k), s.op, self.at(s.expr, k)) for k in lanes]
        elif isinstance(s, Assign):
            lane = [c.is_lane_target(t) or c.reads_lanes(e) for t, e in zip(s.targets, s.exprs)]
            if not any(lane):
                out.append(s)
                return
            if not all(c.is_lane_target(t) for t, is_lane in zip(s.targets, lane) if is_lane):
                raise NotLaneable(f"{self.fn.name} writes batch data into a shared variable")
            targets, exprs = [], []
            for t, e, is_lane in zip(s.targets, s.exprs, lane):
                for k in (lanes if is_lane else range(1)):
                    targets.append(self.at(t, k) if is_lane else t)
                    exprs.append(self.at(e, k) if is_lane else e)
            out.append(Assign(tuple(targets), tuple(exprs)))
        elif isinstance(s, Zero):
            if s.name in c.arrays:
                out.append(replace(s, shape=tuple(s.shape) + (Const(self.width),)))
            elif s.name in c.scalars:
                out += [Zero(lane_name(s.name, k), None, s.dtype) for k in lanes]
            else:
                out.append(s)
        elif isinstance(s, Loop):
            for bound, what in ((s.start, "a loop start"), (s.stop, "a loop bound"), (s.step, "a loop step")):
                self.uniform(bound, what)
            out.append(replace(s, body=self.block(s.body)))
        elif isinstance(s, Branch):
            selected = self.as_selects(s)
            if selected is not None:
                for u in selected:
                    self.stmt(u, out)
                return
            self.uniform(s.cond, "a branch condition")
            out.append(replace(s, then=self.block(s.then), orelse=self.block(s.orelse)))
        elif isinstance(s, Repeat):
            self.uniform(s.cond, "a while condition")
            out.append(replace(s, body=self.block(s.body)))
        elif isinstance(s, HostCall):  # host libraries know nothing of lanes: the loops
            out += self.block(s.fallback)
        elif isinstance(s, Check):
            if c.reads_lanes(s.ok) or any(c.reads_lanes(v) for v in s.values):
                out.append(self.lane_checks(s))
            else:
                out.append(s)
        elif isinstance(s, Invoke):
            self.invoke(s, out)
        else:
            raise NotLaneable(f"cannot run {type(s).__name__} in lanes")

    def lane_checks(self, s: Check) -> Branch:
        """A check of lane data as one test of every lane's condition (``&``: all evaluated, no
        branch between them, so the vectorisers compare the lanes at once), and only where one
        fails the checks lane by lane, in order, which report the first failing lane.
        Evaluating a lane's condition after an earlier lane's failed is safe: each reads only its own
        lane and the uniform values, as it would had the earlier lanes passed."""
        oks = [self.at(s.ok, k) for k in range(self.width)]
        every = oks[0]
        for ok in oks[1:]:
            every = BinOp("&", every, ok)
        checks = [Check(ok, s.fkey, s.idx, tuple(self.at(v, k) for v in s.values), lane=k) for k, ok in enumerate(oks)]
        return Branch(Unary("not", every), checks, [])

    def stmt_with_uniform_selects(self, s, selects: list, out: list) -> None:
        """A statement whose value lane-dependent selects ``a if c else b`` choose: per lane, each arm
        is evaluated only where taken, which LLVM keeps as branches per lane (an arm that divides is
        not speculated), so the lanes run one after another. Where every lane's condition of every
        such select holds (a uniform test), the statement runs with each select choosing its first
        arm by a constant (``_choosing``); where none does, its second: the same operations on every
        lane, the same bits, and vector instructions. Otherwise (lanes, or selects, differing) it runs
        per lane as before, after the two tests have evaluated its conditions once more."""
        conds = [self.at(e.cond, k) for e in selects for k in range(self.width)]
        chosen = set(selects)
        first, second, mixed = [], [], []
        self.stmt(_choosing(s, chosen, True), first, fast_paths=False)
        self.stmt(_choosing(s, chosen, False), second, fast_paths=False)
        self.stmt(s, mixed, fast_paths=False)
        out.append(Branch(BoolOp("and", tuple(conds)), first,
                          [Branch(BoolOp("and", tuple(Unary("not", x) for x in conds)), second, mixed)]))

    def as_selects(self, s: Branch):
        """A branch whose condition reads lane data but whose body only adds to lane targets (the
        adjoint's guarded cotangent updates, from ``a if c else b``), as that body under the
        condition's uniform conjuncts alone, each update ``t = t + e if lane conjuncts else t``; or
        None. The uniform conjuncts keep guarding the indices; every lane then runs the same
        statements, each with its own condition."""
        c = self.c
        if s.orelse or not s.then or not c.reads_lanes(s.cond) or not all(
                isinstance(u, AugAssign) and FUNCTIONS[u.op].accumulates and c.is_lane_target(u.target) for u in s.then):
            return None
        conjuncts = _conjuncts(s.cond)
        uniform = tuple(x for x in conjuncts if not c.reads_lanes(x))
        varying = tuple(x for x in conjuncts if c.reads_lanes(x))
        if any(isinstance(u.target, Index) and any(c.reads_lanes(i) for i in u.target.indices) for u in s.then):
            return None
        condition = varying[0] if len(varying) == 1 else BoolOp("and", varying)
        # t = t + e if condition else t: bit for bit what the branch leaves (-0.0 included)
        body = [Assign((u.target,), (Select(condition, BinOp(u.op, u.target, u.expr), u.target),)) for u in s.then]
        if not uniform:
            return body
        return [Branch(uniform[0] if len(uniform) == 1 else BoolOp("and", uniform), body, [])]

    def invoke(self, s: Invoke, out: list) -> None:
        c, lanes = self.c, range(self.width)
        arg_lanes = _arg_lanes(s, c)
        alias = lane_alias(s.fn, arg_lanes)
        self.calls[alias] = LaneCall(s.fn, arg_lanes)
        args, results = [], []
        for a, is_lane in zip(s.args, arg_lanes):
            if is_lane and not _is_view(a, c):
                args += [self.at(a, k) for k in lanes]
            else:
                args.append(self.view(a) if is_lane else a)
        for a, r, is_lane in zip(s.args, s.results, arg_lanes):
            scalar_lanes = is_lane and not _is_view(a, c)
            if r is None:  # an array, updated in place
                results.append(None)
            elif not scalar_lanes:
                results.append(r)
            elif isinstance(r, Name) and r.id.startswith("_unused"):
                results += [Name(lane_name(r.id, k)) for k in lanes]
            elif c.is_lane_target(r):
                results += [self.at(r, k) for k in lanes]
            else:
                raise NotLaneable(f"{self.fn.name} writes batch data into a shared variable")
        out.append(Invoke(alias, tuple(args), tuple(results)))


def _lane_selects(s, c: _Classes) -> list:
    """The selects in the values statement ``s`` assigns (a Local's only where it defines a lane
    scalar; targets are not searched) whose condition reads lane data and that are evaluated whenever
    the statement is (not inside another select's arm or a short-circuit operand)."""
    found: list = []

    def visit(e) -> None:
        if isinstance(e, Select):
            if c.reads_lanes(e.cond) and e not in found:
                found.append(e)
            return
        if isinstance(e, BoolOp):
            return
        for x in children(e):
            visit(x)

    if isinstance(s, Local) and s.name not in c.scalars:
        return found
    for e in (s.exprs if isinstance(s, Assign) else (s.expr,)):
        visit(e)
    return found


def _choosing(s, selects: set, first: bool):
    """Statement ``s`` with each of ``selects`` choosing its first arm (``first``) or its second: its
    condition made a constant, so that the select keeps its type (both arms' join: an int or float32
    arm still computes as the float64 the other makes it) and only the chosen arm is evaluated, with
    no branch left once LLVM folds the constant."""
    def arm(e):
        return Select(Const(first), e.a, e.b) if isinstance(e, Select) and e in selects else None

    if isinstance(s, Assign):
        return replace(s, exprs=tuple(rewrite_expr(e, arm) for e in s.exprs))
    return replace(s, expr=rewrite_expr(s.expr, arm))  # AugAssign, Local


def _conjuncts(e) -> tuple:
    """The operands of a (nested) ``and``; the expression itself otherwise."""
    if isinstance(e, BoolOp) and e.op == "and":
        return tuple(x for v in e.values for x in _conjuncts(v))
    return (e,)


def to_lanes(fn: LowFunction, lane_params: set, width: int) -> tuple:
    """(the lane version of ``fn``, its lane callees ``{lane alias: LaneCall}``). Raises NotLaneable
    when control flow depends on lane data."""
    classes = classify(fn, lane_params)
    for p in fn.params:
        if p in classes.scalars and p not in lane_params:
            raise NotLaneable(f"{fn.name} writes batch data into its shared scalar parameter '{p}'")
    rewriter = LaneRewriter(fn, classes, width)
    low = rewriter.function()
    return low, rewriter.calls
