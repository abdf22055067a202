"""The static reversibility rules, checked once per function on its IR.

Each rule raises ``ReversibilityError`` at the offending statement with a message that says what to
write instead. Rules that depend on values (aliasing of indices, zero divisors) are runtime checks
emitted by the lowering passes.
"""
from __future__ import annotations

from revdiff.errors import ReversibilityError
from revdiff.ir.high import (Alloc, Bind, CallFn, Compute, Dealloc, For, Function, If, Index, Instr, Name,
                             Uncompute, While, base_name, names_read, walk_expr)
from revdiff.passes.analysis import distinguishable, modified_names, written_lvalues
from revdiff.primitives import INSTRUCTIONS
from revdiff.primitives.printer import expr_source


class Checker:
    def __init__(self, func: Function, callee_modifies, callee_arity):
        self.func = func
        self.callee_modifies = callee_modifies
        self.callee_arity = callee_arity
        self.modified = modified_names(func.body, callee_modifies)

    def run(self) -> None:
        scope = {p: "parameter" for p in self.func.params}
        self.block(self.func.body, scope, loop_vars=set())

    # ---------------------------------------------------------------- scoping

    def block(self, body: list, scope: dict, loop_vars: set) -> None:
        scope = dict(scope)
        allocated_here: dict = {}
        for s in body:
            self.statement(s, scope, loop_vars)
            if isinstance(s, Alloc):
                if s.name in scope:
                    what = scope[s.name]
                    raise ReversibilityError(f"'{s.name}' is already a live {what}: an ancilla is allocated "
                                             "once and deallocated (del) before it is allocated again", s.loc)
                scope[s.name] = "ancilla"
                allocated_here[s.name] = s
            elif isinstance(s, Dealloc):
                what = scope.get(s.name)
                if what == "parameter":
                    raise ReversibilityError(f"'{s.name}' is a parameter: only ancillas allocated in the "
                                             "function can be deallocated", s.loc)
                if what != "ancilla":
                    raise ReversibilityError(f"'{s.name}' is not a live ancilla here (never allocated, already "
                                             "deallocated, or allocated in another block)", s.loc)
                if s.name not in allocated_here:
                    raise ReversibilityError(f"ancilla '{s.name}' must be deallocated in the block that "
                                             "allocated it", s.loc)
                del scope[s.name]
                del allocated_here[s.name]
            elif isinstance(s, Bind):
                if s.name in scope:
                    raise ReversibilityError(f"'{s.name}' is already defined (as a {scope[s.name]}); a constant "
                                             "binding introduces a new name once", s.loc)
                scope[s.name] = "constant"
        if allocated_here:
            name, s = next(iter(allocated_here.items()))
            raise ReversibilityError(f"ancilla '{name}' is never deallocated: add 'del {name}' (after "
                                     f"restoring it to zero) later in the same block", s.loc)

    def use(self, names: set, scope: dict, loc) -> None:
        for n in sorted(names):
            if n not in scope:
                raise ReversibilityError(f"'{n}' is used before it is allocated or bound (or after 'del {n}')",
                                         loc)

    # ---------------------------------------------------------------- statements

    def statement(self, s, scope: dict, loop_vars: set) -> None:
        if isinstance(s, Instr):
            self.instr(s, scope, loop_vars)
        elif isinstance(s, CallFn):
            self.call(s, scope, loop_vars)
        elif isinstance(s, Bind):
            self.use(names_read(s.expr), scope, s.loc)
            changed = names_read(s.expr) & self.modified
            if changed:
                raise ReversibilityError(
                    f"the constant binding '{s.name} = ...' reads '{sorted(changed)[0]}', which the function "
                    "modifies; a binding may read only values that never change (shapes, lengths, "
                    f"unmodified parameters). Use an ancilla: '{s.name} = zero()' then '{s.name} += ...'",
                    s.loc)
        elif isinstance(s, Alloc):
            if s.shape is not None:
                for d in s.shape:
                    self.use(names_read(d), scope, s.loc)
                    if names_read(d) & self.modified:
                        raise ReversibilityError("an ancilla's shape must not depend on modified values", s.loc)
            if s.dtype.like is not None:
                self.use({s.dtype.like}, scope, s.loc)
            if s.value is not None:
                self.use(names_read(s.value), scope, s.loc)
        elif isinstance(s, For):
            bounds = set().union(*(names_read(e) for e in (s.start, s.stop, s.step)))
            self.use(bounds, scope, s.loc)
            if s.var in scope:
                raise ReversibilityError(f"the loop variable '{s.var}' already names a {scope[s.var]}", s.loc)
            inner = modified_names(s.body, self.callee_modifies)
            changed = bounds & inner
            if changed:
                raise ReversibilityError(f"the loop bounds read '{sorted(changed)[0]}', which the loop body "
                                         "modifies; bounds must stay unchanged", s.loc)
            self.block(s.body, {**scope, s.var: "loop variable"}, loop_vars | {s.var})
        elif isinstance(s, If):
            self.use(names_read(s.pre), scope, s.loc)
            if s.post is None:
                inner = modified_names(s.then, self.callee_modifies) | modified_names(s.orelse, self.callee_modifies)
                changed = names_read(s.pre) & inner
                if changed:
                    raise ReversibilityError(
                        f"the condition reads '{sorted(changed)[0]}', which a branch modifies, so the inverse "
                        "cannot tell which branch ran; write 'if (pre, post):' with a post-condition that "
                        "is true after the then-branch and false after the else-branch", s.loc)
            else:
                self.use(names_read(s.post), scope, s.loc)
            self.block(s.then, scope, loop_vars)
            self.block(s.orelse, scope, loop_vars)
        elif isinstance(s, While):
            self.use(names_read(s.pre) | names_read(s.post), scope, s.loc)
            self.block(s.body, scope, loop_vars)
        elif isinstance(s, Compute):
            self.block(s.body, scope, loop_vars)
        elif isinstance(s, Uncompute):
            pass  # the same statements as its compute block, already checked
        elif isinstance(s, Dealloc):
            pass

    def instr(self, s: Instr, scope: dict, loop_vars: set) -> None:
        entry = INSTRUCTIONS[s.op]
        targets = [s.operands[i] for i in entry.targets]
        reads = [s.operands[i] for i in entry.reads]
        for t in targets:
            self.use(names_read(t), scope, s.loc)
        for e in reads:
            self.use(names_read(e), scope, s.loc)
        for t in targets:
            name = base_name(t)
            what = scope.get(name)
            if name in loop_vars:
                raise ReversibilityError(f"the loop variable '{name}' is modified in the loop body", s.loc)
            if what == "constant":
                raise ReversibilityError(f"'{name}' is a constant binding and cannot be modified; allocate an "
                                         f"ancilla instead: '{name} = zero()'", s.loc)
            if isinstance(t, Index):
                for i in t.indices:
                    if base_name(t) in names_read(i):
                        raise ReversibilityError(f"the index of '{name}' reads '{name}' itself", s.loc)
            for e in reads:
                for node in walk_expr(e):
                    if node == t or (isinstance(t, Name) and isinstance(node, Name) and node.id == t.id) or \
                            (isinstance(t, Name) and isinstance(node, Index) and node.base == t.id):
                        raise ReversibilityError(
                            f"the target '{_show(t)}' is read by its own right-hand side, so '{entry.syntax}' "
                            "cannot be undone; compute the value into an ancilla first", s.loc)
        if entry.is_vector:
            name = base_name(targets[0])
            for e in reads:
                if name in names_read(e):
                    raise ReversibilityError(
                        f"'{name}' is both updated and read by '{entry.syntax}'; views of one array may "
                        "overlap, so the update could not be undone. Copy the operand into an ancilla first",
                        s.loc)
        if len(set(targets)) < len(targets) and INSTRUCTIONS[s.op].distinct_targets:
            raise ReversibilityError(f"{entry.syntax} needs {len(targets)} different variables" if len(targets) > 2
                                     else f"{entry.syntax} needs two different variables", s.loc)

    def call(self, s: CallFn, scope: dict, loop_vars: set) -> None:
        arity = self.callee_arity(s.callee)
        if arity != len(s.args):
            hint = (f"; default values and keywords are bound where '{s.callee}' is defined before its caller"
                    if len(s.args) < arity else "")
            raise ReversibilityError(f"'{s.callee}' takes {arity} argument(s), got {len(s.args)}{hint}", s.loc)
        positions = self.callee_modifies(s.callee)
        for k, a in enumerate(s.args):
            self.use(names_read(a), scope, s.loc)
            if k not in positions:
                continue
            if not isinstance(a, (Name, Index)):
                raise ReversibilityError(f"argument {k + 1} of '{s.callee}' is modified by it, so it must be a "
                                         "variable, an array element or an array view, not an expression", s.loc)
            name = base_name(a)
            if name in loop_vars or scope.get(name) == "constant":
                raise ReversibilityError(f"'{name}' is passed to '{s.callee}', which modifies it, but it is a "
                                         f"{scope.get(name, 'loop variable')}", s.loc)
        for k, a in enumerate(s.args):
            for j in range(k + 1, len(s.args)):
                b = s.args[j]
                if not (isinstance(a, (Name, Index)) and isinstance(b, (Name, Index))):
                    continue
                if base_name(a) != base_name(b) or (k not in positions and j not in positions):
                    continue
                if not (isinstance(a, Index) and isinstance(b, Index) and distinguishable(a, b)):
                    raise ReversibilityError(
                        f"'{base_name(a)}' is passed twice to '{s.callee}', which modifies one of them; "
                        "pass distinct variables (views of one array must differ in an integer index, "
                        "e.g. Q[:, j] and Q[:, k])", s.loc)


def _show(lv) -> str:
    return expr_source(lv)


def check_function(func: Function, callee_modifies, callee_arity) -> None:
    Checker(func, callee_modifies, callee_arity).run()


__all__ = ["check_function", "written_lvalues"]
