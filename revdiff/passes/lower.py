"""Lower the high-level IR to the low-level IR that emitters print (forward semantics).

Instructions are lowered by their table entry's forward rule; control flow gets the runtime checks
that make it reversible (post-conditions, loop bounds, ancillas back to zero). The inverse program
is ``lower(invert(body))``; the adjoint pass (``adjoint.py``) extends this class.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager

from revdiff.ir import algebra as A
from revdiff.ir import views
from revdiff.ir.checks import CheckInfo, failure_code, register
from revdiff.ir.high import (Alloc, Bind, Call, CallFn, Compare, Compute, Const, Dealloc, For, If, Index,
                             Instr, Name, Shape, Unary, Uncompute, While, names_read, walk_expr)
from revdiff.ir.options import Options
from revdiff.ir.low import Branch, Check, Comment, HostCall, Invoke, Local, Loop, Repeat, Zero
from revdiff.ir.types import VarType
from revdiff.passes.aliasing import AliasChecks
from revdiff.passes.analysis import ancilla_names, restores_only_freed
from revdiff.passes.bounds import (arithmetic_checks, element_conditions, in_bounds, index_conditions,
                                   reported_values)
from revdiff.passes.infer import TypeEnv, alloc_type, expr_type
from revdiff.passes.invert import invert_block
from revdiff.passes.scales import ScaleTracking
from revdiff.primitives import INSTRUCTIONS
from revdiff.primitives.printer import expr_source

#: the largest finite float64, the cap of an ancilla's scale in its zero check
_LARGEST = sys.float_info.max


class Lowerer(AliasChecks, ScaleTracking):
    """Lowers statements into ``self.out``; implements the RuleContext the instruction table uses."""

    def __init__(self, env: TypeEnv, options: Options, fkey: int, callee_symbol, ancillas: set,
                 params: list, counter: list | None = None, callee_modifies=None, vjp_forward: bool = False):
        self.env = env
        self.options = options
        self.fkey = fkey
        self.callee_symbol = callee_symbol  # (CallFn, kind) -> name of the generated function
        self.ancillas = ancillas
        self.params = params
        self.counter = counter if counter is not None else [0]
        self.out: list = []
        self.loc = None
        self.proven_in_bounds = False  # set while a vector instruction emits loops over checked views
        self.scales_known: frozenset = frozenset()  # ancillas whose scales need no new measurement here
        self.product_scaled: set = set()  # (ancilla, operand arrays) this block measured (track_product_scale)
        self.callee_modifies = callee_modifies  # callee name -> positions of the parameters it modifies
        # lowering the forward half of a fused vjp: uncomputes of ancillas freed right after them are
        # left out (the adjoint half recomputes and uncomputes them, checked), and so are their checks
        self.vjp_forward = vjp_forward
        self.unverified: frozenset = frozenset()

    # ---------------------------------------------------------------- RuleContext

    def emit(self, stmt) -> None:
        if self.options.check:
            if not self.proven_in_bounds:
                self.index_checks(stmt)
            for ok, message, values, labels, error in arithmetic_checks(stmt, self.kind):
                self.require(ok, message, *values, labels=labels, error=error)
        self.out.append(stmt)

    def index_checks(self, stmt) -> None:
        """Check every integer index ``stmt`` itself reads or writes before it runs (Python's range:
        -size <= i < size). Compiled code has no bounds checks of its own: these name the
        user's line, and loops of vector instructions, whose views are checked once, run unchecked."""
        for ok, node, axis in index_conditions(stmt):
            self.check_index(node, axis, ok)

    def check_index(self, element: Index, axis: int, ok=None) -> None:
        """IndexError unless index ``axis`` of ``element`` lies in its array (``ok``: that condition,
        under the guard of a conditional read)."""
        i = element.indices[axis]
        size = Shape(element.base, axis)
        self.require(ok if ok is not None else in_bounds(i, size),
                     f"index {expr_source(i)} is out of bounds for axis {axis} of '{element.base}'",
                     i, size, labels=("index", "size"), error=IndexError)

    def kind(self, e) -> str:
        return self.env.kind(e)

    def fresh(self, hint: str) -> str:
        self.counter[0] += 1
        return f"_{hint}{self.counter[0]}"

    def temp(self, e, hint: str = "t"):
        name = self.fresh(hint)
        self.emit(Local(name, e))
        self.env.types[name] = _expr_type(self.env, e)
        return Name(name)

    def require(self, ok, message: str, *values, labels=None, error=None) -> None:
        if not self.options.check:
            return
        self.counter[0] += 1
        idx = self.counter[0]
        vals, labels = reported_values(values, labels, self.kind)
        kwargs = {"error": error} if error is not None else {}
        register(self.fkey, idx, CheckInfo(message, self.loc, labels, **kwargs))
        self.emit(Check(ok, self.fkey, idx, vals))

    def rank(self, name: str) -> int:
        return self.env[name].ndim

    def loop(self, start, stop, body, hint: str = "i", step=None) -> None:
        var = self.fresh(hint)
        self.env.types[var] = VarType("int", 0, "int64")
        with self.block() as inner:
            body(Name(var))
        self.emit(Loop(var, start, stop, step if step is not None else Const(1), inner))

    def choose(self, cond, then, orelse) -> None:
        arms = []
        for arm in (then, orelse):
            with self.block() as statements:
                arm()
            arms.append(statements)
        self.emit(Branch(cond, arms[0], arms[1]))

    def host_call(self, routine: str, args: tuple, fallback, when=None) -> None:
        if not self.options.blas:  # a specialisation whose products never reach BLAS's threshold
            fallback()
            return
        with self.block() as loops:
            fallback()
        self.emit(HostCall(routine, tuple(args), loops, when))

    def dtype(self, name: str) -> str:
        return self.env[name].dtype

    def accumulator(self, hint: str, like):
        name = self.fresh(hint)
        t = _expr_type(self.env, like).element()
        self.env.types[name] = t
        self.emit(Zero(name, None, t.dtype))
        return Name(name)

    def grad(self, lv):
        raise NotImplementedError("gradients exist only in the adjoint")

    def push(self, e, cotangent) -> None:
        raise NotImplementedError("gradients exist only in the adjoint")

    # ---------------------------------------------------------------- blocks

    @contextmanager
    def block(self, into: list | None = None):
        """Statements emitted inside go to a new list (or to ``into``), which it yields; the
        enclosing block receives statements again after it."""
        saved, self.out = self.out, [] if into is None else into
        try:
            yield self.out
        finally:
            self.out = saved

    def lower_block(self, body: list) -> list:
        left_out, freed = self.uncomputes_left_out(body)
        saved_unverified, self.unverified = self.unverified, self.unverified | freed
        saved_products, self.product_scaled = self.product_scaled, set(self.product_scaled)
        with self.block() as result:
            for pos, s in enumerate(body):
                if pos in left_out:
                    self.comment(s)
                    self.emit(Comment("left out in the vjp's forward half: the ancillas it would restore are "
                                      "freed here, and the adjoint half recomputes and uncomputes them, checked"))
                else:
                    self.statement(s)
        self.unverified = saved_unverified
        self.product_scaled = saved_products  # a loop's or a branch's marks may not have run
        return result

    def uncomputes_left_out(self, body: list) -> tuple[set, frozenset]:
        """(positions, ancillas) of the uncomputes in ``body`` that the forward half of a fused vjp
        leaves out, and of the ancillas they would restore. Such an uncompute only returns ancillas to
        zero that are freed right after it; the adjoint half runs the same compute and uncompute on the
        same values (what the compute read is restored, not changed, by then) and checks them there."""
        if not self.vjp_forward:
            return set(), frozenset()
        allocated = [s.name for s in body if isinstance(s, Alloc)]
        positions, freed = set(), set()
        for pos, s in enumerate(body):
            if not (isinstance(s, Uncompute) and restores_only_freed(body, pos, self.callee_modifies)):
                continue
            names = set()
            for t in body[pos + 1:]:
                if not isinstance(t, Dealloc):
                    break
                names.add(t.name)
            if all(allocated.count(n) == 1 for n in names):  # one lifetime each in this block
                positions.add(pos)
                freed |= names
        return positions, frozenset(freed)

    def comment(self, s) -> None:
        self.loc = s.loc
        self.emit(Comment(f"line {s.loc.lineno}: {s.loc.line.strip()}", s.loc))

    def statement(self, s) -> None:
        self.comment(s)
        method = getattr(self, "_" + type(s).__name__)
        method(s)

    # ---------------------------------------------------------------- statements

    def _Instr(self, s: Instr) -> None:
        self.alias_checks(s)
        with self.vector_loops(s):
            INSTRUCTIONS[s.op].forward(s.operands, self)
        self.track_scales(s)

    @contextmanager
    def vector_loops(self, s: Instr):
        """While a vector instruction's rule runs, element accesses need no checks of their own:
        the rule checks its views' bounds and lengths first (with ``require``, which still emits).
        The single elements among its operands (``a[k]`` in ``a[k] += np.dot(x, y)``, ``w[k]`` in
        ``y[:] += w[k] * x``) are checked here first: their indices do not depend on the loops."""
        if INSTRUCTIONS[s.op].is_vector and self.options.check:
            for ok, node, axis in element_conditions(s.operands):
                self.check_index(node, axis, ok)
        saved = self.proven_in_bounds
        self.proven_in_bounds = INSTRUCTIONS[s.op].is_vector
        try:
            yield
        finally:
            self.proven_in_bounds = saved

    def _Bind(self, s: Bind) -> None:
        self.emit(Local(s.name, s.expr))

    def _Alloc(self, s: Alloc) -> None:
        t = alloc_type(s, self.env)
        for size in s.shape or ():
            if not (isinstance(size, Const) and size.value >= 0):
                self.require(Compare(">=", size, Const(0)), f"ancilla '{s.name}' gets a negative size "
                             f"{expr_source(size)}", size, labels=("size",), error=ValueError)
        self.emit(self.zero_array(s.name, s.shape, t.dtype, f"ancilla '{s.name}'"))
        self.product_scaled = {key for key in self.product_scaled if key[0] != s.name}
        if self.options.check:
            self.emit(Local(f"_scale_{s.name}", Const(0.0)))

    def zero_array(self, name: str, shape, dtype: str, what: str) -> Zero:
        """The allocation of a zero ancilla (an array: with the code that names it if it fails)."""
        if shape is None:
            return Zero(name, None, dtype)
        self.counter[0] += 1
        register(self.fkey, self.counter[0], CheckInfo(f"allocating {what} failed: not enough memory", self.loc,
                                                       ("entries",), error=MemoryError))
        return Zero(name, shape, dtype, alloc=failure_code(self.fkey, self.counter[0]))

    def _Dealloc(self, s: Dealloc) -> None:
        if s.name not in self.unverified:
            self.check_zero(s.name, s.value)

    def check_zero(self, name: str, value=None) -> None:
        """Runtime check that an ancilla is back to zero, within atol + rtol * (largest magnitude held);
        ``value``: what a ``release(t, e)`` subtracted, named in the message."""
        if not self.options.check:
            return
        t = self.env[name]
        # the scale capped at the largest float: an ancilla left holding an infinity (a float32 store of a
        # wider value that overflowed, inf - x = inf) fails, where an infinite tolerance passed it; one
        # back to zero passes, also where an operand it summed or a scalar a call read was infinite
        scale = Call("min", (Name(f"_scale_{name}"), Const(_LARGEST)))
        tol = A.add(Const(self.options.atol), A.mul(Const(self.options.rtol_for(t.dtype)), scale))
        if t.kind in ("int", "bool"):
            tol = Const(0)
        tolerance = (f"(tolerance atol={self.options.atol:g}, rtol={self.options.rtol_for(t.dtype):g} of "
                     f"{'its largest magnitude, at most the largest float' if value is None else 'the value'})")
        what = f"ancilla '{name}'" if not t.is_array else f"ancilla array '{name}'"
        message = f"{what} is not zero at deallocation {tolerance}" if value is None else \
            f"{what} no longer equals {expr_source(value)}, the value it was allocated as a copy of {tolerance}"
        label = ("value",) if value is None else ("difference",)
        rtol = Const(self.options.rtol_for(t.dtype))
        if not t.is_array:
            if value is not None:  # relative to the value released, not to the largest the ancilla held
                tol = A.add(Const(self.options.atol), A.mul(rtol, Call("abs", (value,))))
            self.require(Compare("<=", Call("abs", (Name(name),)), tol), message, Name(name),
                         labels=label if self.kind(Name(name)) != "complex" else None)
            return
        idx = [self.fresh("i") for _ in range(t.ndim)]
        element = Index(name, tuple(Name(i) for i in idx))
        for i in idx:
            self.env.types[i] = VarType("int", 0, "int64")
        if value is not None:  # element by element, relative to the element released
            released = views.element(value, self.env[views.base(value)].ndim, tuple(Name(i) for i in idx))
            tol = A.add(Const(self.options.atol), A.mul(rtol, Call("abs", (released,))))
        with self.block() as body:
            self.require(Compare("<=", Call("abs", (element,)), tol), message, element,
                         labels=label if t.kind != "complex" else None)
        for axis in reversed(range(t.ndim)):
            body = [Loop(idx[axis], Const(0), Shape(name, axis), Const(1), body)]
        self.out.extend(body)

    def _For(self, s: For) -> None:
        self.emit_for(s, lambda: self.lower_block(s.body), s.reverse)

    def emit_for(self, s: For, lower_body, reverse: bool) -> None:
        """A counted loop over the values of range(start, stop, step), last to first if ``reverse``;
        bounds that read mutable state are checked unchanged afterwards."""
        start, stop, step = s.start, s.stop, s.step
        if not (isinstance(step, Const)):
            step = self.temp(step, "step")
            self.require(Compare("!=", step, Const(0)), "range() step is zero", step)
        watched = self.watched_bounds(s)
        saved_bounds = [self.temp(b, "bound") for b in watched]
        body = lower_body()
        if reverse:
            count = Call("trip_count", (start, stop, step))
            last = self.temp(A.add(start, A.mul(A.sub(count, Const(1)), step)), "last")
            self.emit(Loop(s.var, last, A.sub(start, step), A.neg(step), body))
        else:
            self.emit(Loop(s.var, start, stop, step, body))
        for b, saved in zip(watched, saved_bounds):
            self.loc = s.loc
            self.require(Compare("==", b, saved), f"a loop bound changed during the loop: {expr_source(b)}",
                         saved, b, labels=("before", "after"))

    def watched_bounds(self, s: For) -> list:
        """Bounds that read mutable state (anything but constants, shapes, bindings, loop variables)."""
        if not self.options.check:
            return []
        out = []
        for b in (s.start, s.stop, s.step):
            if any(isinstance(n, Index) or (isinstance(n, Name) and (n.id in self.params or n.id in self.ancillas))
                   for n in walk_expr(b)):
                out.append(b)
        return out

    def _If(self, s: If) -> None:
        self.emit_if(s, s.pre, s.post, self.lower_block(s.then), self.lower_block(s.orelse))

    def emit_if(self, s: If, pre, post, then: list, orelse: list) -> None:
        """Branch on ``pre``; with a post-condition, check it agrees with the branch taken."""
        if post is None:
            self.emit(Branch(pre, then, orelse))
            return
        self.loc = s.loc
        chosen = self.temp(pre, "branch")
        self.emit(Branch(chosen, then, orelse))
        self.loc = s.loc
        self.require(Compare("==", post, chosen),
                     f"post-condition {expr_source(post)} does not match the branch taken "
                     f"(it must be true after the then-branch and false after the else-branch)",
                     chosen, labels=("branch taken (1 = then)",))

    def _While(self, s: While) -> None:
        self.emit_while(s, s.pre, s.post, lambda: self.lower_block(s.body))

    def emit_while(self, s: While, pre, post, lower_body) -> None:
        """``while pre`` with ``post`` false on entry and true after every iteration (checked)."""
        self.loc = s.loc
        self.require(Unary("not", post), f"while post-condition {expr_source(post)} must be false on entry")
        body = lower_body()
        with self.block(into=body):
            self.loc = s.loc
            self.require(post, f"while post-condition {expr_source(post)} must be true after every iteration")
        self.emit(Repeat(pre, body))

    def _Compute(self, s: Compute) -> None:
        self.out.extend(self.lower_block(s.body))

    def _Uncompute(self, s: Uncompute) -> None:
        with self.scales_measured_by_compute(s.body):
            self.out.extend(self.lower_block(invert_block(s.body)))

    @contextmanager
    def scales_measured_by_compute(self, body: list):
        """While a compute block is undone, the ancillas that outlive it pass back through the states
        its compute gave them, whose largest magnitudes their scales already hold: no new scans. Those
        allocated inside the block restart from zero there and are measured again."""
        saved = self.scales_known
        self.scales_known = saved | (frozenset(self.ancillas) - ancilla_names(body))
        try:
            yield
        finally:
            self.scales_known = saved

    def _CallFn(self, s: CallFn) -> None:
        self.call_alias_checks(s)
        fn, modified = self.callee_symbol(s, "inverse" if s.inverse else "vjp_forward" if self.vjp_forward else "forward")
        self.emit(Invoke(fn, s.args, self.call_results(s.args, modified)))
        self.track_call_scales(s, modified)

    def call_results(self, args, modified) -> tuple:
        """Where each returned value goes: a callee returns its scalar parameters (arrays change in
        place: None); the scalars and elements it modifies are written back, the others dropped."""
        out = []
        for k, a in enumerate(args):
            t = _expr_type(self.env, a)
            if t.is_array:
                out.append(None)
            elif k in modified and isinstance(a, (Name, Index)):
                out.append(a)
            else:
                out.append(Name(self.fresh("unused")))
        return tuple(out)


def _expr_type(env: TypeEnv, e) -> VarType:
    return expr_type(e, env, None)


__all__ = ["Lowerer", "names_read"]
