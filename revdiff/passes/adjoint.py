"""The adjoint program: run the program backwards, instruction by instruction.

Each instruction first restores its operands (the forward rule of its inverse, from the table) and
then applies its gradient rule, which maps the cotangents of the new values to those of the old
ones. Expressions are differentiated symbolically from their IR by the cotangent rules of the
function table. No tape is kept: the adjoint needs only the final state and its cotangents.

An uncompute (``~routine``) that writes only ancillas freed right after it restores values nothing
reads afterwards, so their cotangents are zero there and its adjoint pushes only zeros: it is lowered
as the recompute alone (no gradient work, and no ``0 * inf``), the same reasoning as the fused vjp's.

Dead undos: a matrix product ``S += Q^H V`` that is the first statement to touch an ancilla S of its
block needs no undo in the adjoint, which reaches S's allocation next with nothing in between that
reads S (``analysis.first_writes_of_ancillas``). Only its gradient is emitted, and S's zero check at
that allocation is dropped. Cheaper undos are kept, and with them their checks. Dead gradients: the
instructions that write an ancilla after anything else reads it, before it is freed (``d *= c;
d += C^T v`` uncomputing d), meet a zero cotangent in the adjoint (``analysis.dead_gradients``): only
their undos are emitted.

Gradient variables are named ``g_<name>``; a gradient ancilla lives exactly as long as its value
ancilla. Constant bindings get a gradient accumulator pushed to what they read at the end of
their block (which in backward time is where the binding happened).
"""
from __future__ import annotations

from revdiff.ir import algebra as A
from revdiff.ir.high import (Alloc, Bind, BoolOp, CallFn, Compute, Const, Dealloc, For, If,
                             Index, Instr, Name, Select, Shape, Unary, Uncompute, While, base_name,
                             walk_stmts)
from revdiff.ir.low import AugAssign, Branch, Invoke, Local, Zero
from revdiff.ir.types import is_real
from revdiff.passes.analysis import first_writes_of_ancillas, dead_gradients, restores_only_freed
from revdiff.passes.infer import alloc_type, expr_type
from revdiff.passes.invert import invert_block
from revdiff.passes.lower import Lowerer
from revdiff.primitives import INSTRUCTIONS, applied


class AdjointLowerer(Lowerer):
    def __init__(self, *args, callee_modifies, **kwargs):
        super().__init__(*args, callee_modifies=callee_modifies, **kwargs)
        taken = set(self.env.types) | set(self.params)
        self.prefix = "g_"
        while any(n.startswith(self.prefix) for n in taken):
            self.prefix = "g" + self.prefix
        self._dead_undos: dict = {}  # id(instruction) -> (it, allocation of the ancilla it first writes)
        self._dead_gradients: dict = {}  # id(instruction) -> it, for those whose target's cotangent is zero
        self._unchecked: set = set()  # ids of allocations whose ancilla an adjoint left un-restored

    # ---------------------------------------------------------------- gradient storage

    def gname(self, name: str) -> str:
        return self.prefix + name

    def differentiable(self, name: str) -> bool:
        return self.env.differentiable(name)

    def gradient_params(self) -> list:
        for p in self.params:
            if self.differentiable(p):
                self.env.types[self.gname(p)] = self.env[p]
        return [self.gname(p) for p in self.params if self.differentiable(p)]

    def grad(self, lv):
        name = base_name(lv)
        if not self.differentiable(name):
            return None
        g = self.gname(name)
        self.env.types.setdefault(g, self.env[name])
        return Name(g) if isinstance(lv, Name) else Index(g, lv.indices)

    def push(self, e, cotangent) -> None:
        """Accumulate the cotangent of expression ``e`` into every differentiable variable it reads.

        A read inside a branch of ``a if c else b`` receives its cotangent only under the same
        condition: ``x[i + 1] if i < n - 1 else 0.0`` must not touch ``g_x[n]``."""
        acc: dict = {}
        self._contributions(e, cotangent, acc, memo={})
        for (leaf, guard), cot in acc.items():
            update = AugAssign(self.grad(leaf), "+", cot)
            self.emit(update if guard is None else Branch(guard, [update], []))

    def _contributions(self, e, c, acc: dict, guard=None, memo: dict | None = None) -> None:
        """Add to ``acc[leaf, guard]`` the share of cotangent ``c`` of expression ``e`` that reaches each
        differentiable leaf it reads (``guard``: the condition of the ``Select`` arms above it). ``memo``:
        the types of the expressions the walk meets (``e``'s parts and the cotangents it builds), shared
        by the whole walk so that each is typed once (``expr_type``)."""
        def kind(x) -> str:
            return self.env.kind(x, memo)

        kind_e = kind(e)
        if kind_e not in ("float", "complex"):
            return
        if is_real(kind_e) and kind(c) == "complex":
            c = A.real_part(c)
        if isinstance(e, (Name, Index)):
            if self.differentiable(base_name(e)):
                acc[e, guard] = A.add(acc.get((e, guard)), c)
            return
        if isinstance(e, (Const, Shape)):
            return
        if isinstance(e, Select):
            if guard is None and not isinstance(c, (Name, Const)):
                c = self.temp(c, "cot")  # computed once, outside the guarded updates
            self._contributions(e.a, c, acc, _both(guard, e.cond), memo)
            self._contributions(e.b, c, acc, _both(guard, Unary("not", e.cond)), memo)
            return
        application = applied(e)
        if application is None:
            return
        fn, args = application
        if fn.cotangents is None:
            return
        live = [a for a in args if kind(a) in ("float", "complex")]
        if len(live) > 1 and guard is None and not isinstance(c, (Name, Const)):
            # shared by several arguments: computed once (a temporary under a guard would be
            # evaluated, and its divisions checked, where the guarded arm is not taken)
            c = self.temp(c, "cot")
        for arg, cot in zip(args, fn.cotangents(c, args, kind)):
            if cot is not None:
                self._contributions(arg, cot, acc, guard, memo)

    # ---------------------------------------------------------------- blocks

    def adjoint_body(self, body: list) -> list:
        """The adjoint of a whole function body."""
        self._allocs = {a.name: a for a in walk_stmts(body) if isinstance(a, Alloc)}
        for a in walk_stmts(invert_block(body)):
            if isinstance(a, Alloc):
                self._allocs.setdefault(a.name, a)
        return self.adjoint_block(body)

    def adjoint_block(self, body: list) -> list:
        with self.block() as result:
            self._dead_undos.update(first_writes_of_ancillas(body, undo_is_a_matrix_product))
            self._dead_gradients.update(dead_gradients(body))
            bindings = [s for s in body if isinstance(s, Bind)]
            for b in bindings:
                self.comment(b)
                self.emit(Local(b.name, b.expr))
                if self.differentiable(b.name):
                    self.emit(Zero(self.gname(b.name), None, self.env[b.name].dtype))
            for pos in reversed(range(len(body))):
                s = body[pos]
                if isinstance(s, Bind):
                    continue
                self.comment(s)
                if isinstance(s, Uncompute) and restores_only_freed(body, pos, self.callee_modifies):
                    self.out.extend(self.lower_block(s.body))  # the recompute alone: its cotangents are zero
                else:
                    getattr(self, "_adjoint_" + type(s).__name__)(s)
            for b in reversed(bindings):
                if self.differentiable(b.name):
                    self.push(b.expr, Name(self.gname(b.name)))
        return result

    # ---------------------------------------------------------------- statements

    def _adjoint_Instr(self, s: Instr) -> None:
        entry = INSTRUCTIONS[s.op]
        self.alias_checks(s)
        if id(s) in self._dead_undos:
            self._unchecked.add(id(self._dead_undos[id(s)][1]))
        else:
            with self.vector_loops(s):
                INSTRUCTIONS[entry.inverse].forward(s.operands, self)
            self.track_scales(s)
        if self._dead_gradients.get(id(s)) is s:
            return
        with self.vector_loops(s):
            entry.gradient(s.operands, self)

    def _adjoint_Alloc(self, s: Alloc) -> None:
        if id(s) not in self._unchecked:
            self.check_zero(s.name, s.value)  # the value ancilla is back to zero; its gradient is dropped

    def _adjoint_Dealloc(self, s: Dealloc) -> None:
        alloc = self._allocs[s.name]
        self._Alloc(alloc)
        if self.differentiable(s.name):
            t = alloc_type(alloc, self.env)
            self.env.types[self.gname(s.name)] = t
            self.emit(self.zero_array(self.gname(s.name), alloc.shape, t.dtype,
                                      f"the gradient of ancilla '{s.name}'"))

    def _adjoint_For(self, s: For) -> None:
        self.emit_for(s, lambda: self.adjoint_block(s.body), not s.reverse)

    def _adjoint_If(self, s: If) -> None:
        then, orelse = self.adjoint_block(s.then), self.adjoint_block(s.orelse)
        if s.post is None:
            self.emit_if(s, s.pre, None, then, orelse)
        else:
            self.emit_if(s, s.post, s.pre, then, orelse)

    def _adjoint_While(self, s: While) -> None:
        self.emit_while(s, s.post, s.pre, lambda: self.adjoint_block(s.body))

    def _adjoint_Compute(self, s: Compute) -> None:
        with self.scales_measured_by_compute(s.body):  # measured by the (re)compute before it
            self.out.extend(self.adjoint_block(s.body))

    def _adjoint_Uncompute(self, s: Uncompute) -> None:
        self.out.extend(self.adjoint_block(invert_block(s.body)))

    def _adjoint_CallFn(self, s: CallFn) -> None:
        self.call_alias_checks(s)
        program = "inverse_adjoint" if s.inverse else "adjoint"
        fn, modified = self.callee_symbol(s, program)
        values = self.call_results(s.args, modified)
        grads, results, pushes = [], [], []
        for a in s.args:
            t = expr_type(a, self.env, s.loc)
            if not t.differentiable:
                continue
            g = self.grad(a) if isinstance(a, (Name, Index)) else None
            if g is None:  # an expression argument: collect its cotangent in a temporary
                g = Name(self.fresh("garg"))
                self.env.types[g.id] = t
                self.emit(Zero(g.id, None, t.dtype))
                pushes.append((a, g))
            grads.append(g)
            results.append(None if t.is_array else g)
        self.emit(Invoke(fn, tuple(s.args) + tuple(grads), values + tuple(results)))
        self.track_call_scales(s, modified)
        for a, g in pushes:
            self.push(a, g)



def undo_is_a_matrix_product(s: Instr) -> bool:
    """Matrix-vector and matrix-matrix products: the undos worth leaving out."""
    entry = INSTRUCTIONS[s.op]
    return entry.operand_ranks is not None and 2 in entry.operand_ranks


def _both(guard, cond):
    return cond if guard is None else BoolOp("and", (guard, cond))
