"""Runtime checks that two operands of one update are different memory: an instruction whose target
is also read (or written) through another index, and a call passing one array twice to a callee
that modifies it. Where the indices are not the same expression, the lowered code checks them."""
from __future__ import annotations

from revdiff.ir.high import BoolOp, CallFn, Compare, Index, Instr, Slice, walk_expr
from revdiff.passes.analysis import distinguishable
from revdiff.primitives import INSTRUCTIONS
from revdiff.primitives.printer import expr_source


class AliasChecks:
    """The alias checks of the lowerer (``Lowerer`` supplies ``require`` and ``callee_symbol``)."""

    def alias_checks(self, s: Instr) -> None:
        entry = INSTRUCTIONS[s.op]
        targets = [s.operands[i] for i in entry.targets]
        reads = [s.operands[i] for i in entry.reads]
        seen = set()
        for t in targets:
            if not isinstance(t, Index):
                continue
            others = [n for e in reads for n in walk_expr(e) if isinstance(n, Index) and n.base == t.base]
            if entry.distinct_targets:
                others += [u for u in targets if u is not t and isinstance(u, Index) and u.base == t.base]
            for o in others:
                key = frozenset((t, o))
                if o == t or key in seen:
                    continue
                seen.add(key)
                differ = [Compare("!=", x, y) for x, y in zip(t.indices, o.indices) if x != y]
                ok = differ[0] if len(differ) == 1 else BoolOp("or", tuple(differ))
                self.require(ok, f"'{expr_source(o)}' is the same element as the target '{expr_source(t)}' "
                                 "here, so the update cannot be undone")

    def call_alias_checks(self, s: CallFn) -> None:
        _, modified = self.callee_symbol(s, "forward")
        for k, a in enumerate(s.args):
            for j in range(k + 1, len(s.args)):
                b = s.args[j]
                if isinstance(a, Index) and isinstance(b, Index) and a.base == b.base and \
                        (k in modified or j in modified) and distinguishable(a, b):
                    differ = [Compare("!=", x, y) for x, y in zip(a.indices, b.indices)
                              if x != y and _is_int_index(x) and _is_int_index(y)]
                    ok = differ[0] if len(differ) == 1 else BoolOp("or", tuple(differ))
                    self.require(ok, f"arguments '{expr_source(a)}' and '{expr_source(b)}' of '{s.callee}' are "
                                     "the same memory here, and the callee modifies one of them")


def _is_int_index(x) -> bool:
    return not isinstance(x, Slice)
