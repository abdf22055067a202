"""The low-level IR that emitters print: plain assignments, loops, branches and checks.

Passes lower the high-level IR (``revdiff.ir.high``) into these few statements by reading the
instruction table; the LLVM, Python and CUDA C emitters only print them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, Callable, Iterator, Union

from revdiff.ir.high import Expr, Index, LValue, Name, Shape, rewrite_expr


@dataclass
class Assign:
    """``target = expr``; with tuples, a parallel assignment (``a, b = b, a``)."""

    targets: tuple
    exprs: tuple


@dataclass
class AugAssign:
    target: LValue
    op: str  # + - * / // ^
    expr: Expr


@dataclass
class Local:
    """A temporary of the generated code, defined once per execution of its block."""

    name: str
    expr: Expr


@dataclass
class Loop:
    var: str
    start: Expr
    stop: Expr
    step: Expr
    body: list


@dataclass
class Branch:
    cond: Expr
    then: list
    orelse: list


@dataclass
class Repeat:
    """``while cond: body``."""

    cond: Expr
    body: list


@dataclass
class Check:
    """Raise the runtime error numbered ``idx`` of function ``fkey`` unless ``ok`` holds; ``lane``: the
    batch lane whose data failed it (programs run in SIMD lanes, ``targets/lanes/rewrite.py``)."""

    ok: Expr
    fkey: int
    idx: int
    values: tuple  # up to two real expressions reported with the error
    lane: "int | None" = None


@dataclass
class Invoke:
    """Call a generated function. It returns its scalar parameters, in order; ``results`` holds, per
    argument, where the returned value goes (None for an array argument, updated in place).
    ``record``: the error record the callee fills (None: the caller's own, and a failure there ends
    the caller too); a batched entry gives each element a record of its own and goes on."""

    fn: str
    args: tuple
    results: tuple
    record: "Expr | None" = None


@dataclass
class Zero:
    """Allocate a zero-initialised ancilla: a scalar (shape None) or an array. ``reuse``: the name
    already holds an array (declared at the top of the function); zero-fill it when the shape matches.
    ``alloc``: the failure code the CPU code records for the array's allocation (compiled code when
    calloc fails, Python code before allocating, since NumPy raises), so that a failed allocation
    is reported with the ancilla's name and line."""

    name: str
    shape: "tuple | None"
    dtype: str
    reuse: bool = False
    alloc: "int | None" = None


@dataclass
class HostCall:
    """Run host library routine ``routine`` (``revdiff.runtime.host``: BLAS) on ``args`` when
    ``when`` holds (None: always) and the routine accepts the operands; otherwise run ``fallback``,
    loops computing the same thing. With ``result``, the routine never declines and its value is
    assigned to that variable, as the fallback assigns it. The CUDA emitter and SIMD lanes use only
    the fallback."""

    routine: str
    args: tuple
    fallback: list
    when: "Expr | None" = None
    result: "str | None" = None


@dataclass
class Comment:
    text: str
    loc: Any = None  # the user's source line the statements after it come from (CUDA ``#line``)


LowStmt = Union[Assign, AugAssign, Local, Loop, Branch, Repeat, Check, Invoke, Zero, HostCall, Comment]


def nested_blocks(s) -> list:
    """The statement lists nested inside statement ``s`` (loop bodies, branch arms, fallbacks)."""
    if isinstance(s, (Loop, Repeat)):
        return [s.body]
    if isinstance(s, Branch):
        return [s.then, s.orelse]
    if isinstance(s, HostCall):
        return [s.fallback]
    return []


def walk_statements(body: list) -> "Iterator[LowStmt]":
    """Every statement of ``body``, nested ones included, outer before inner."""
    for s in body:
        yield s
        for block in nested_blocks(s):
            yield from walk_statements(block)


def with_blocks(s: "LowStmt", transform: Callable[[list], list]) -> "LowStmt":
    """``s`` with each nested statement list passed through ``transform``."""
    if not nested_blocks(s):
        return s
    return replace(s, **{f.name: transform(getattr(s, f.name)) for f in fields(s)
                         if isinstance(getattr(s, f.name), list)})


# the string fields of statements that name a variable (others name functions, routines, dtypes)
_NAME_FIELDS = ("name", "var", "result")


def rename_expression(e: Expr, rename: Callable[[str], str]) -> Expr:
    """``e`` with every variable (scalars, arrays, shapes' arrays) renamed by ``rename``."""
    def leaf(n):
        if isinstance(n, Name):
            return Name(rename(n.id))
        if isinstance(n, Shape):
            return Shape(rename(n.base), n.axis)
        if isinstance(n, Index):
            return Index(rename(n.base), tuple(rename_expression(i, rename) for i in n.indices))
        return None
    return rewrite_expr(e, leaf)


def rename_statement(s: "LowStmt", rename: Callable[[str], str]) -> "LowStmt":
    """Statement ``s``, nested blocks included, with every variable it names renamed by ``rename``."""
    changes = {}
    for f in fields(s):
        v = getattr(s, f.name)
        if f.name in _NAME_FIELDS and isinstance(v, str):
            changes[f.name] = rename(v)
        elif isinstance(v, list):
            changes[f.name] = [rename_statement(t, rename) for t in v]
        elif isinstance(v, tuple):
            changes[f.name] = tuple(rename_expression(x, rename) for x in v)
        elif is_dataclass(v):
            changes[f.name] = rename_expression(v, rename)
    return replace(s, **changes)


def host_symbol(routine: str) -> str:
    """The name generated CPU code calls host routine ``routine`` by."""
    return f"_host_{routine}"


@dataclass
class LowFunction:
    name: str
    params: list
    body: list
    returns: list  # names returned, in order: the scalar parameters (arrays change in place)
    param_types: dict = field(default_factory=dict)  # name -> VarType of every parameter
