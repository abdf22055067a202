"""The instruction table: one entry per instruction, holding its forward rule, the name of its
inverse instruction, and its gradient rule. Every pass and emitter reads instructions from here.

Rules are written against a small context (``RuleContext``) that the passes provide:
  * ``ctx.emit(stmt)`` appends a low-level statement (``revdiff.ir.low``);
  * ``ctx.kind(expr)`` gives the value kind ("int", "float", "complex", ...);
  * ``ctx.temp(expr, hint)`` binds a temporary and returns its Name;
  * ``ctx.require(ok, message, *values, labels=None, error=None)`` emits a runtime check at the
    instruction's source line (``labels``: names of the reported values; ``error``: the exception
    class, ReversibilityError by default);
  * ``ctx.loc`` is that source line (a SourceLocation);
  * ``ctx.check_index(element, axis)`` checks that index ``axis`` of ``element`` (an Index) lies in
    its array (IndexError naming the line and the index);
  * ``ctx.grad(lvalue)`` gives the gradient storage of a target (None when it carries none);
  * ``ctx.push(expr, cotangent)`` accumulates a cotangent into every variable ``expr`` reads;
  * ``ctx.rank(name)`` gives an array's number of dimensions;
  * ``ctx.loop(start, stop, body, hint, step)`` emits a counted loop whose body ``body(i)`` emits;
  * ``ctx.accumulator(hint, like)`` binds a zero scalar of the element type of ``like``;
  * ``ctx.choose(cond, then, orelse)`` emits a branch whose arms ``then()`` and ``orelse()`` emit;
  * ``ctx.host_call(routine, args, fallback, when)`` calls a host BLAS routine (CPU only) when
    ``when`` holds and the routine accepts its operands, else runs the loops ``fallback()`` emits;
  * ``ctx.dtype(name)`` gives an array's element dtype ("float64", ...);
  * ``ctx.options`` are the specialisation's options (``ir/options.py``; ``lanes``: lowered for SIMD
    lanes, where walks over small matrices take blocks of columns or rows, ``loops.index_blocks``).

The adjoint of an instruction is generic: run the *forward* rule of its inverse (restoring the
operands' old values), then its *gradient* rule, which sees the old values and maps the cotangents
of the new values to those of the old ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from revdiff.ir.high import Expr, LValue


class RuleContext(Protocol):  # pragma: no cover - a typing aid
    def emit(self, stmt: Any) -> None: ...
    def kind(self, e: Expr) -> str: ...
    def temp(self, e: Expr, hint: str = "t") -> Expr: ...
    loc: Any

    def require(self, ok: Expr, message: str, *values: Expr, labels: tuple | None = None,
                error: type | None = None) -> None: ...
    def check_index(self, element: Expr, axis: int, ok: Expr | None = None) -> None: ...
    def grad(self, lv: LValue) -> LValue | None: ...
    def push(self, e: Expr, cotangent: Expr) -> None: ...
    def rank(self, name: str) -> int: ...
    def loop(self, start: Expr, stop: Expr, body: Callable, hint: str = "i", step: Expr | None = None) -> None: ...
    def accumulator(self, hint: str, like: Expr) -> Expr: ...
    def choose(self, cond: Expr, then: Callable, orelse: Callable) -> None: ...
    def host_call(self, routine: str, args: tuple, fallback: Callable, when: Expr | None = None) -> None: ...
    def dtype(self, name: str) -> str: ...
    options: Any


Rule = Callable[[tuple, RuleContext], None]


@dataclass(frozen=True)
class Instruction:
    """One instruction. ``roles`` names each operand: "target" (written) or "expr" (read only).
    ``operand_ranks`` (vector instructions only): the rank each operand must have (0: a number,
    1: a vector view, 2: a matrix view). ``additive``: the instruction is ``target += f(reads)`` and
    its gradient reads the target's cotangent, never its value, so an adjoint need not restore a
    target that nothing reads afterwards. ``distinct_targets``: two targets naming the same element
    make the instruction irreversible (a swap of an element with itself is not). ``real_operands``:
    (position, what it is) of read operands that must be real. ``rank_hints``: {(operand position,
    rank given): advice} for a vector operand of the wrong rank. ``call_name``: the name users call
    the instruction by, ``rot(a, b, theta)``, its operands in the order of ``roles``. ``elementwise``:
    the scalar instruction a whole-array statement applies to every element (``elementwise.py``).
    ``real_result``: what it adds is a real number whatever its operands' kind (a norm), so complex
    operands of a real target are not a silent conversion."""

    name: str
    syntax: str  # how users write it, for messages: "t += e"
    roles: tuple
    inverse: str
    forward: Rule
    gradient: Rule
    target_kinds: tuple = ("bool", "int", "float", "complex")
    operand_ranks: tuple | None = None
    additive: bool = False
    distinct_targets: bool = True
    real_operands: tuple = ()
    rank_hints: dict = field(default_factory=dict, hash=False, compare=False)
    call_name: str | None = None
    elementwise: str | None = None
    real_result: bool = False

    @property
    def is_vector(self) -> bool:
        """Operates on array views (its rules check them and loop over their elements)."""
        return self.operand_ranks is not None or self.elementwise is not None

    @property
    def targets(self) -> tuple:
        return tuple(i for i, r in enumerate(self.roles) if r == "target")

    @property
    def reads(self) -> tuple:
        return tuple(i for i, r in enumerate(self.roles) if r == "expr")


INSTRUCTIONS: dict[str, Instruction] = {}


def instruction(entry: Instruction) -> Instruction:
    """Register an entry; the table is the only place instructions are defined."""
    if entry.name in INSTRUCTIONS:
        raise ValueError(f"instruction {entry.name} defined twice")
    INSTRUCTIONS[entry.name] = entry
    return entry


def inverse_of(name: str) -> Instruction:
    return INSTRUCTIONS[INSTRUCTIONS[name].inverse]


def called(name: str) -> Instruction | None:
    """The instruction users write as a call of ``name`` (``rot(a, b, theta)``), if any."""
    return next((e for e in INSTRUCTIONS.values() if e.call_name == name), None)
