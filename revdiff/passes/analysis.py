"""Facts about IR that several passes need: which variables a block writes, and which parameters
a function modifies (through its own instructions and its calls)."""
from __future__ import annotations

from revdiff.ir.high import (Alloc, CallFn, Compute, Dealloc, For, If, Index, Instr, Name, Slice, Stmt,
                             Uncompute, While, base_name, names_read, stmt_exprs, sub_blocks, walk_stmts)
from revdiff.primitives import INSTRUCTIONS


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


def mentioned_names(s: Stmt) -> set:
    """Base names of every variable a statement reads, writes, allocates or frees, nested blocks
    (uncomputes too) included; shapes do not count (they never change)."""
    out = {s.name} if isinstance(s, (Alloc, Dealloc)) else set()
    for e in stmt_exprs(s):
        out |= names_read(e)
    for block in sub_blocks(s) + ([s.body] if isinstance(s, Uncompute) else []):
        for t in block:
            out |= mentioned_names(t)
    return out


def first_writes_of_ancillas(body: list, wanted=lambda s: True) -> dict:
    """{id(instruction): (instruction, allocation)} for each additive instruction (of those ``wanted``
    accepts) that is the first statement to mention an ancilla allocated in ``body`` (computes, which
    run once, taken in order). An adjoint running ``body`` backwards reaches that allocation right
    after the instruction, with nothing in between that reads the ancilla: the undo is dead."""
    found: dict = {}
    untouched: dict = {}  # ancilla -> its allocation, until a statement mentions it

    def visit(block: list, top: bool) -> None:
        for s in block:
            if isinstance(s, Compute):
                visit(s.body, False)
                continue
            if top and isinstance(s, Alloc):
                untouched[s.name] = s
                continue
            if isinstance(s, Instr) and INSTRUCTIONS[s.op].additive and wanted(s):
                target = base_name(s.operands[INSTRUCTIONS[s.op].targets[0]])
                if target in untouched:
                    found[id(s)] = (s, untouched[target])
            for name in mentioned_names(s):
                untouched.pop(name, None)

    visit(body, True)
    return found


def dead_gradients(body: list) -> dict:
    """{id(instruction): instruction} for the instructions of ``body`` whose one target is an ancilla
    with a zero cotangent where an adjoint running ``body`` backwards reaches them: freed later in
    ``body``, and no statement in between (other than such instructions) mentions it, as ``d *= c;
    d += C^T v`` uncomputing d before ``del d``. A gradient is linear in the target's cotangent, so
    theirs would push only zeros (and ``0 * inf``): the adjoint emits their undo alone, and they change
    no cotangent. (The instructions come with their ids: kept alive, no other statement can reuse one.)"""
    found: dict = {}
    zero: set = set()  # ancillas whose cotangent is still zero, walking backwards
    for s in reversed(body):
        if isinstance(s, Dealloc):
            zero.add(s.name)
            continue
        if isinstance(s, Instr) and len(INSTRUCTIONS[s.op].targets) == 1 and \
                base_name(s.operands[INSTRUCTIONS[s.op].targets[0]]) in zero:
            found[id(s)] = s
            continue
        zero -= mentioned_names(s)
    return found


def distinguishable(a: Index, b: Index) -> bool:
    """Two element/view accesses of one array that may be told apart at run time: some position
    holds integer indices in both that are not written the same way."""
    pairs = [(x, y) for x, y in zip(a.indices, b.indices) if not isinstance(x, Slice) and not isinstance(y, Slice)]
    return len(a.indices) == len(b.indices) and any(x != y for x, y in pairs)


def ancilla_names(body: list) -> set:
    """Names of the ancillas a body allocates."""
    return {s.name for s in walk_stmts(body) if isinstance(s, Alloc)}
