"""The high-level IR: what the front end builds and the passes read, down to lowering.

Expressions are small frozen trees (hashable, so identical reads are recognised); statements of
the high-level IR carry the user's source location. Instructions are ``Instr(op, ...)`` nodes whose
meaning lives in the instruction table (``revdiff.primitives``), never in the passes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Callable, Iterator, Union

from revdiff.errors import SourceLocation

# ----------------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Const:
    value: Union[int, float, complex, bool]


@dataclass(frozen=True)
class Name:
    id: str


@dataclass(frozen=True)
class Slice:
    lower: "Expr | None" = None
    upper: "Expr | None" = None
    step: "Expr | None" = None


@dataclass(frozen=True)
class Index:
    """``base[i, j]``; an index is an expression or (only in call arguments) a Slice."""

    base: str
    indices: tuple

    @property
    def is_element(self) -> bool:
        return not any(isinstance(i, Slice) for i in self.indices)


@dataclass(frozen=True)
class Shape:
    """``a.shape[k]`` (and ``len(a)`` as ``Shape(a, 0)``)."""

    base: str
    axis: int


@dataclass(frozen=True)
class BinOp:
    op: str  # + - * / ** // % & | ^
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class Unary:
    op: str  # - + not
    operand: "Expr"


@dataclass(frozen=True)
class Compare:
    op: str  # < <= > >= == !=
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class BoolOp:
    op: str  # and or
    values: tuple


@dataclass(frozen=True)
class Select:
    """``a if cond else b`` (used by derivative rules; users write it too)."""

    cond: "Expr"
    a: "Expr"
    b: "Expr"


@dataclass(frozen=True)
class Call:
    """A pure function of the function table (``revdiff.primitives.functions``)."""

    fn: str
    args: tuple


Expr = Union[Const, Name, Index, Shape, BinOp, Unary, Compare, BoolOp, Select, Call, Slice]
LValue = Union[Name, Index]


def children(e: Expr) -> tuple:
    if isinstance(e, Index):
        return tuple(i for i in e.indices)
    if isinstance(e, Slice):
        return tuple(x for x in (e.lower, e.upper, e.step) if x is not None)
    if isinstance(e, BinOp) or isinstance(e, Compare):
        return (e.left, e.right)
    if isinstance(e, Unary):
        return (e.operand,)
    if isinstance(e, BoolOp):
        return e.values
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    return ()


def walk_expr(e: Expr) -> Iterator[Expr]:
    yield e
    for c in children(e):
        yield from walk_expr(c)


def rewrite_expr(e, leaf: Callable):
    """``e`` with every node for which ``leaf`` returns an expression replaced by that expression
    (its children are not visited then); the passes' one expression rewriter."""
    new = leaf(e)
    if new is not None:
        return new
    if not is_dataclass(e) or isinstance(e, (Const, Name)):
        return e
    changes = {}
    for f in fields(e):
        v = getattr(e, f.name)
        if isinstance(v, tuple):
            changes[f.name] = tuple(rewrite_expr(x, leaf) for x in v)
        elif is_dataclass(v):
            changes[f.name] = rewrite_expr(v, leaf)
    return replace(e, **changes)


def names_read(e: Expr) -> set[str]:
    """Every variable an expression reads (array names included, shapes excluded)."""
    out: set[str] = set()
    for node in walk_expr(e):
        if isinstance(node, Name):
            out.add(node.id)
        elif isinstance(node, Index):
            out.add(node.base)
    return out


def base_name(lv: LValue) -> str:
    return lv.id if isinstance(lv, Name) else lv.base


# ----------------------------------------------------------------------------------- statements


@dataclass
class Stmt:
    loc: SourceLocation


@dataclass
class Instr(Stmt):
    """An instruction of the table: ``op`` names the entry, ``operands`` follow its roles."""

    op: str
    operands: tuple


@dataclass
class CallFn(Stmt):
    """``g(args)`` or ``~g(args)``: a call of another reversible function or its inverse."""

    callee: str
    args: tuple
    inverse: bool


@dataclass
class For(Stmt):
    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: list
    reverse: bool = False  # iterate the same values last to first (set by the inverter)


@dataclass
class If(Stmt):
    """``if (pre, post)``; a plain ``if c`` has ``post is None`` (c itself is checked static)."""

    pre: Expr
    post: "Expr | None"
    then: list
    orelse: list


@dataclass
class While(Stmt):
    pre: Expr
    post: Expr
    body: list


@dataclass
class Bind(Stmt):
    """A constant binding ``name = expr`` of values the function never modifies."""

    name: str
    expr: Expr


@dataclass(frozen=True)
class DType:
    """An ancilla's element type: a kind (float, complex, int, bool) or the dtype of an array."""

    kind: str | None = None  # "float", "complex", "int", "bool"
    np_name: str | None = None  # e.g. "float32" when spelled np.float32
    like: str | None = None  # array name for ``A.dtype``
    real: bool = False  # ``A.real.dtype``: the real type of A's precision (float32 for complex64)


@dataclass
class Alloc(Stmt):
    name: str
    shape: "tuple | None"  # None: a scalar ancilla
    dtype: DType
    value: "Expr | None" = None  # ``t = ancilla(e)``: the number or array view it starts as a copy of


@dataclass
class Dealloc(Stmt):
    name: str
    value: "Expr | None" = None  # ``release(t, e)``: what it was a copy of (its check's message)


@dataclass
class Compute(Stmt):
    """``with routine:`` body, run forward."""

    body: list
    ident: int = 0


@dataclass
class Uncompute(Stmt):
    """``~routine``: the inverse of the matching compute block."""

    body: list
    ident: int = 0


@dataclass
class Function:
    """A parsed reversible function."""

    name: str
    params: list
    body: list
    loc: SourceLocation
    globals_names: dict = field(default_factory=dict)  # name used in calls -> resolved object
    constants: dict = field(default_factory=dict)  # global or closure name -> the number compiled in
    defaults: dict = field(default_factory=dict)  # parameter -> its default value (a number)
    resolved: dict = field(default_factory=dict)  # global name -> the module or math function it was read as


def stmt_exprs(s: Stmt) -> Iterator[Expr]:
    """The expressions one statement reads or writes (not those of nested blocks)."""
    if isinstance(s, Instr):
        yield from s.operands
    elif isinstance(s, CallFn):
        yield from s.args
    elif isinstance(s, For):
        yield from (s.start, s.stop, s.step)
    elif isinstance(s, If):
        yield s.pre
        if s.post is not None:
            yield s.post
    elif isinstance(s, While):
        yield from (s.pre, s.post)
    elif isinstance(s, Bind):
        yield s.expr
    elif isinstance(s, Alloc) and s.shape is not None:
        yield from s.shape


def walk_stmts(body: list) -> Iterator[Stmt]:
    """Every statement, depth first (compute blocks once, uncompute blocks not re-entered)."""
    for s in body:
        yield s
        for sub in sub_blocks(s):
            yield from walk_stmts(sub)


def sub_blocks(s: Stmt) -> list:
    if isinstance(s, For) or isinstance(s, While) or isinstance(s, Compute):
        return [s.body]
    if isinstance(s, If):
        return [s.then, s.orelse]
    return []
