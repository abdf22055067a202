"""Drop the runtime checks of generated code that cannot fail, and run loop-invariant ones once.

Lowering emits a check before every statement that needs one (an index in bounds, a slice inside
its array, equal shapes), so a loop body re-checks what an earlier statement of the same iteration
checked, and ``for i in range(len(v)): v[i] ...`` checks an index its loop bounds already keep in
range. This pass removes a check (or the conjuncts of one) that is implied on every path to it:

* by an earlier check whose condition still holds (nothing it reads was reassigned since; facts
  never read array elements, which change without reassignment; shapes change only when the
  array is reallocated);
* by the range of a loop variable: ``i`` of ``range(a, n)`` with a constant ``a >= 0`` satisfies
  ``-s <= i`` for any size ``s`` and ``i < n``, hence ``i < s`` where ``n <= s`` was checked; the
  reversed loops the inverse and adjoint run (``range(last, -1, -1)``, ``last = len(range(0, n, 1)) - 1``)
  likewise. Loop bounds are read once, so the range holds only while the body leaves them alone;
* a gradient parameter of an adjoint program has its primal's shape (``twins``): the vjp entry
  points check cotangent shapes and calls pass matching views, as the loops of vector
  instructions already rely on, so ``i < g_v.shape[0]`` follows from ``i < v.shape[0]``.

A check in a loop body that reads nothing the loop changes moves before the loop (guarded by the
loop running at all). Fewer checks mean less code to compile and fewer branches at run time.
Error messages are unchanged: a check that can fail is kept with its own message and reported values.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from revdiff.ir import algebra as A
from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Index, Name, Shape, Unary, rewrite_expr, walk_expr
from revdiff.ir.low import (Assign, AugAssign, Branch, Check, HostCall, Invoke, Local, Loop, LowFunction,
                            Repeat, Zero, nested_blocks)


@dataclass(frozen=True)
class _Range:
    lower: object  # inclusive bound (an expression) or None
    upper: object  # exclusive bound or None


class _Facts:
    """What holds at a point of the program: checked conditions (conjuncts), the values of the
    Locals still valid, and the ranges of the enclosing loop variables."""

    def __init__(self, twins: dict, conds=frozenset(), locals_=None, ranges=None):
        self.twins = twins
        self.conds = set(conds)
        self.locals = dict(locals_ or {})
        self.ranges = dict(ranges or {})

    def copy(self) -> "_Facts":
        return _Facts(self.twins, self.conds, self.locals, self.ranges)

    def canonical(self, e):
        """``e`` with a gradient's shapes read as its primal's."""
        if not self.twins or not any(isinstance(n, Shape) and n.base in self.twins for n in walk_expr(e)):
            return e
        return _substitute_shapes(e, self.twins)

    def forget(self, names: set) -> None:
        """Drop everything that reads a name in ``names`` (it may have been reassigned)."""
        if not names:
            return
        self.conds = {c for c in self.conds if not (_names(c) & names)}
        self.locals = {k: e for k, e in self.locals.items() if k not in names and not (_names(e) & names)}
        self.ranges = {v: r for v, r in self.ranges.items()
                       if v not in names and not any(_names(b) & names for b in (r.lower, r.upper) if b is not None)}

    # ------------------------------------------------------------------ implication

    def implies(self, c) -> bool:
        c = self.canonical(c)
        if c in self.conds:
            return True
        if not isinstance(c, Compare):
            return False
        if c.op in ("!=", ">=", "<="):  # a strict comparison implies these
            stricter = {"!=": ("<", ">"), ">=": (">",), "<=": ("<",)}[c.op]
            if any(Compare(op, c.left, c.right) in self.conds for op in stricter) or (
                    c.op == "!=" and any(Compare(op, c.right, c.left) in self.conds for op in ("<", ">"))):
                return True
        if c.op == "!=" and c.right == Const(0) and self._positive(c.left):
            return True
        if c.op == "!=" and c.right == Const(0) and isinstance(c.left, Call) and (
                c.left.fn == "sqrt" and Compare(">", c.left.args[0], Const(0)) in self.conds or  # root of a positive
                c.left.fn == "abs" and Compare("!=", c.left.args[0], Const(0)) in self.conds):  # |a| of a nonzero a
            return True
        if c.op == "<" and isinstance(c.left, Name):  # i < s
            r = self.ranges.get(c.left.id)
            return r is not None and r.upper is not None and (r.upper == c.right or
                                                              Compare("<=", r.upper, c.right) in self.conds)
        if c.op == "<=" and (c.left == Const(0) or (isinstance(c.left, Unary) and c.left.op == "-"
                                                   and isinstance(c.left.operand, Shape))):  # -s <= i, 0 <= i
            if _non_negative(c.right):  # -s <= 0, 0 <= t.shape[0]
                return True
            if not isinstance(c.right, Name):
                return False
            if Compare("<=", Const(0), c.right) in self.conds:
                return True
            r = self.ranges.get(c.right.id)
            return r is not None and _non_negative(r.lower)
        return False

    def _positive(self, e) -> bool:
        """Whether integer ``e`` is known to be at least 1: the stop of an enclosing loop that runs
        from a non-negative start (``n`` inside ``for i in range(n)``), or checked ``0 < e``."""
        if Compare("<", Const(0), e) in self.conds or Compare(">", e, Const(0)) in self.conds:
            return True
        return any(r.upper == e and r.lower is not None and _non_negative(r.lower) for r in self.ranges.values())

    def loop_range(self, s: Loop):
        """The range of ``s.var`` inside the loop, or None."""
        if not isinstance(s.step, Const) or isinstance(s.step.value, bool) or not isinstance(s.step.value, int):
            return None
        if s.step.value > 0:
            return _Range(s.start, s.stop)
        lower = Const(s.stop.value + 1) if isinstance(s.stop, Const) and isinstance(s.stop.value, int) else None
        upper = None
        if s.step.value == -1 and isinstance(s.start, Name):  # last = len(range(0, n, 1)) - 1: i < n
            last = self.locals.get(s.start.id)
            if (isinstance(last, BinOp) and last.op == "-" and last.right == Const(1)
                    and isinstance(last.left, Call) and last.left.fn == "trip_count"
                    and last.left.args[0] == Const(0) and last.left.args[2] == Const(1)):
                upper = last.left.args[1]
        return _Range(lower, upper)


def _non_negative(e) -> bool:
    return isinstance(e, Shape) or (isinstance(e, Const) and not isinstance(e.value, bool)
                                    and isinstance(e.value, int) and e.value >= 0)


def _names(e) -> set:
    """Names an expression reads, shapes' arrays included."""
    out = set()
    for node in walk_expr(e):
        if isinstance(node, Name):
            out.add(node.id)
        elif isinstance(node, (Shape, Index)):
            out.add(node.base)
    return out


def _reads_elements(e) -> bool:
    return any(isinstance(node, Index) for node in walk_expr(e))


def _conjuncts(e) -> list:
    if isinstance(e, BoolOp) and e.op == "and":
        return [c for v in e.values for c in _conjuncts(v)]
    return [e]


def _unproven(cond, facts: _Facts):
    """What of check condition ``cond`` the facts do not imply (None: all of it holds). A guarded
    condition ``not g or c`` (a check under a branch, or hoisted before a loop that may not run)
    is proven when ``c`` follows from the facts together with ``g``: the index check of
    ``v[i] / n if abs(v[i]) > 1 else ...`` inside ``for i in range(len(v))``, or ``t != 0`` under
    ``t > 0``. Kept conjuncts keep their order, so the error a failing check reports is unchanged."""
    if _guarded(cond):
        guarded = facts.copy()
        guarded.conds |= {guarded.canonical(c) for c in _conjuncts(cond.values[0].operand)}
        rest = _unproven(cond.values[1], guarded)
        return None if rest is None else replace(cond, values=(cond.values[0], rest))
    conds = _conjuncts(cond)
    kept = [c for c in conds if not facts.implies(c)]
    if not kept:
        return None
    if len(kept) == len(conds):
        return cond
    return kept[0] if len(kept) == 1 else BoolOp("and", tuple(kept))


def _guarded(cond) -> bool:
    """Whether a check's condition is ``not g or c``: c, checked only where g holds."""
    return (isinstance(cond, BoolOp) and cond.op == "or" and len(cond.values) == 2
            and isinstance(cond.values[0], Unary) and cond.values[0].op == "not")


def implied(cond, known: set) -> bool:
    """Whether check condition ``cond`` holds wherever the conditions ``known`` do (a known
    ``not g or c`` gives c where the others give g)."""
    facts = {c for k in known for c in _conjuncts(k)}
    facts |= {c for k in known if _guarded(k) and set(_conjuncts(k.values[0].operand)) <= facts
              for c in _conjuncts(k.values[1])}
    return _unproven(cond, _Facts({}, facts)) is None


def written_names(s) -> set:
    """Names statement ``s`` (with its nested blocks) may reassign: scalars, loop variables,
    reallocated arrays. Element writes do not count (facts never read elements)."""
    out = set()
    if isinstance(s, (Assign,)):
        out |= {t.id for t in s.targets if isinstance(t, Name)}
    elif isinstance(s, AugAssign) and isinstance(s.target, Name):
        out.add(s.target.id)
    elif isinstance(s, Local):
        out.add(s.name)
    elif isinstance(s, Zero):
        out.add(s.name)
    elif isinstance(s, Loop):
        out.add(s.var)
    elif isinstance(s, Invoke):
        out |= {r.id for r in s.results if isinstance(r, Name)}
    elif isinstance(s, HostCall) and s.result is not None:
        out.add(s.result)
    for block in nested_blocks(s):
        for t in block:
            out |= written_names(t)
    return out


def _block(body: list, facts: _Facts) -> list:
    out = []
    for s in body:
        if isinstance(s, Check):
            kept = _unproven(s.ok, facts)
            facts.conds |= {facts.canonical(c) for c in _conjuncts(s.ok) if not _reads_elements(c)}
            if kept is None:
                continue
            out.append(replace(s, ok=kept))
            continue
        if isinstance(s, Loop):
            inner = facts.copy()
            inner.forget(written_names(s))
            rng = inner.loop_range(s)
            if rng is not None and not any(_names(b) & written_names(s)
                                           for b in (s.start, s.stop) if b is not None):
                inner.ranges[s.var] = rng
            s = replace(s, body=_block(s.body, inner))
            hoisted, s = hoist_invariant_checks(s)
            out.extend(hoisted)
        elif isinstance(s, Repeat):
            inner = facts.copy()
            inner.forget(written_names(s))
            s = replace(s, body=_block(s.body, inner))
        elif isinstance(s, Branch):
            s = replace(s, then=_block(s.then, facts.copy()), orelse=_block(s.orelse, facts.copy()))
        elif isinstance(s, HostCall):
            s = replace(s, fallback=_block(s.fallback, facts.copy()))
        facts.forget(written_names(s))
        if isinstance(s, Local) and not _reads_elements(s.expr):
            facts.locals[s.name] = s.expr
        out.append(s)
    return out


def hoist_invariant_checks(loop: Loop) -> tuple[list, Loop]:
    """(checks to run before ``loop``, the loop without them). A check of the body (not under a
    branch) that reads no array element and nothing the loop writes, its variable included, has
    the same outcome in every iteration: it runs once, before the loop, when the loop runs at all
    (``d != 0`` of ``x[i] / d``, once instead of per element and per SIMD lane). So does a bound
    check whose sides move monotonically with the loop variable (``k + j < A.shape[1]`` in
    ``for j in range(w)``): it holds in every iteration exactly when it holds in the one extreme
    iteration that could fail it, so that iteration's check runs before the loop. Only which error
    comes first (and which out-of-range index it reports) can differ, where several iterations
    would have failed."""
    extremes = _extreme_values(loop)
    if extremes is None:
        return [], loop
    written = written_names(loop) - {loop.var}
    runs = Compare("<" if loop.step.value > 0 else ">", loop.start, loop.stop)
    hoisted, kept = [], []
    for s in loop.body:
        moved = _hoisted(s, loop.var, written, extremes) if isinstance(s, Check) else None
        if moved is None:
            kept.append(s)
        else:
            hoisted += [replace(c, ok=BoolOp("or", (Unary("not", runs), c.ok))) for c in moved]
    if not hoisted:
        return [], loop
    return hoisted, replace(loop, body=kept)


def _extreme_values(loop: Loop):
    """(smallest, largest) value of the variable of a loop of step 1 or -1 while it runs; None for
    other steps."""
    step = loop.step.value if isinstance(loop.step, Const) else 0
    if isinstance(step, bool) or step not in (1, -1):
        return None
    if step == 1:
        return loop.start, _plus(loop.stop, -1)
    return _plus(loop.stop, 1), loop.start


def _plus(e, c: int):
    """``e + c`` for an integer constant c, folded when e is a constant."""
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return Const(e.value + c)
    return A.add(e, Const(c)) if c > 0 else A.sub(e, Const(-c))


def _hoisted(check: Check, var: str, written: set, extremes: tuple) -> list | None:
    """Checks that hold before the loop over ``var`` (whose body writes ``written``) exactly when
    ``check`` would hold in every iteration, or None when it must stay in the loop."""
    exprs = (check.ok,) + tuple(check.values)
    if check.lane is not None or any(_reads_elements(e) or _names(e) & written for e in exprs):
        return None
    if not any(var in _names(e) for e in exprs):
        return [check]
    guard, cond = None, check.ok
    if _guarded(cond) and var not in _names(cond.values[0]):  # hoisted from an inner loop: "not runs or c"
        guard, cond = cond.values
    by_extreme: dict = {}  # 0 (smallest value) or 1 (largest) -> the conjuncts that fail first there
    for c in _conjuncts(cond):
        which = _failing_extreme(c, var)
        if which is None:
            return None
        by_extreme.setdefault(which, []).append(c)
    if set(by_extreme) == {"invariant"}:  # only the reported values read the variable
        by_extreme = {1: by_extreme["invariant"]}
    invariant = by_extreme.pop("invariant", [])
    out = []
    for which, conds in sorted(by_extreme.items()):
        conds = conds + invariant
        invariant = []

        def at(e, value=extremes[which]):
            return _substitute_name(e, var, value)
        ok = at(conds[0] if len(conds) == 1 else BoolOp("and", tuple(conds)))
        out.append(replace(check, ok=ok if guard is None else BoolOp("or", (guard, ok)),
                           values=tuple(at(v) for v in check.values)))
    return out


def _failing_extreme(c, var: str):
    """How conjunct ``c`` of a check depends on loop variable ``var``: "invariant" when it does not
    read it; 0 or 1 when it holds for every value of a range exactly when it holds for the smallest
    (0) or the largest (1); None otherwise (not a comparison of sums and differences of ``var``)."""
    if var not in _names(c):
        return "invariant"
    if not isinstance(c, Compare) or c.op not in ("<", "<=", ">", ">="):
        return None
    low, high = (c.left, c.right) if c.op in ("<", "<=") else (c.right, c.left)  # holds: low < high
    s_low, s_high = _slope(low, var), _slope(high, var)
    if s_low is None or s_high is None:
        return None
    wanted = ({1 if s_low > 0 else 0} if s_low else set()) | ({0 if s_high > 0 else 1} if s_high else set())
    return wanted.pop() if len(wanted) == 1 else None


def _slope(e, var: str):
    """+1 or -1 when integer expression ``e`` grows or shrinks with ``var`` (a sum or difference
    of it and other terms), 0 when it does not read it, None otherwise."""
    if var not in _names(e):
        return 0
    if e == Name(var):
        return 1
    if isinstance(e, Unary) and e.op == "-":
        inner = _slope(e.operand, var)
        return None if inner is None else -inner
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        left, right = _slope(e.left, var), _slope(e.right, var)
        if left is None or right is None:
            return None
        signs = {x for x in (left, right if e.op == "+" else -right) if x}
        return signs.pop() if len(signs) == 1 else None
    return None


def _substitute_shapes(e, twins: dict):
    return rewrite_expr(e, lambda n: Shape(twins.get(n.base, n.base), n.axis) if isinstance(n, Shape) else None)


def _substitute_name(e, var: str, value):
    """``e`` with ``value`` for ``var``, sums and differences refolded (``k + 0`` reads ``k``)."""
    def leaf(n):
        if n == Name(var):
            return value
        if isinstance(n, BinOp) and n.op in ("+", "-"):
            left, right = _substitute_name(n.left, var, value), _substitute_name(n.right, var, value)
            return A.add(left, right) if n.op == "+" else A.sub(left, right)
        return None
    return rewrite_expr(e, leaf)


def prune_checks(fn: LowFunction, twins: dict | None = None) -> LowFunction:
    """``fn`` without the checks its earlier checks, loop ranges and ``twins`` (gradient parameter
    name -> primal parameter name: same shape) imply."""
    return replace(fn, body=_block(fn.body, _Facts(dict(twins or {}))))
