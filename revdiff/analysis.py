"""Facts about IR that several passes need: which variables a block writes, and which parameters
a function modifies (through its own instructions and its calls)."""
from __future__ import annotations

from .ir import (Alloc, CallFn, Compute, Dealloc, Expr, For, If, Index, Instr, Name, Uncompute, While,
                 base_name, names_read)
from .primitives import INSTRUCTIONS


def written_lvalues(s, callee_modifies) -> list:
    """The lvalues one statement writes (not recursing into blocks). ``callee_modifies(name)``
    gives the set of parameter positions a callee modifies."""
    if isinstance(s, Instr):
        entry = INSTRUCTIONS[s.op]
        return [s.operands[i] for i in entry.targets]
    if isinstance(s, CallFn):
        positions = callee_modifies(s.callee)
        return [a for k, a in enumerate(s.args) if k in positions and isinstance(a, (Name, Index))]
    if isinstance(s, (Alloc, Dealloc)):
        return [Name(s.name)]
    return []


def modified_names(body: list, callee_modifies) -> set:
    """Base names of every variable a block writes, recursing into nested blocks."""
    out: set = set()
    for s in body:
        out.update(base_name(lv) for lv in written_lvalues(s, callee_modifies))
        if isinstance(s, For) or isinstance(s, While) or isinstance(s, Compute) or isinstance(s, Uncompute):
            out |= modified_names(s.body, callee_modifies)
        elif isinstance(s, If):
            out |= modified_names(s.then, callee_modifies) | modified_names(s.orelse, callee_modifies)
    return out


def restores_only_freed(body: list, pos: int, callee_modifies) -> bool:
    """Whether the uncompute ``body[pos]`` writes nothing but ancillas that the deallocations right
    after it free. Nothing reads what it restores, so in the adjoint those ancillas carry zero
    cotangents there: the adjoint of the uncompute pushes only zeros and is the recompute alone."""
    freed = set()
    for s in body[pos + 1:]:
        if not isinstance(s, Dealloc):
            break
        freed.add(s.name)
    return modified_names(body[pos].body, callee_modifies) <= freed


def reads_any(e: Expr, names: set) -> set:
    return names_read(e) & names
