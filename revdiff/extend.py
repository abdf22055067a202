"""Writing new instructions: the table entry, the context its rules are written against, and
registration. An instruction is a pair of entries, each naming the other as its inverse; users call
one by its ``call_name`` inside ``@reversible`` functions, and ``~name(...)`` runs the other.

A rule is ``rule(operands, ctx)``: ``operands`` are IR expressions in the order of ``roles``, and
``ctx`` (a ``RuleContext``) emits low-level statements. The *forward* rule updates the targets; the
*gradient* rule, run after the inverse's forward rule has restored the old values, maps the
cotangents of the new values (``ctx.grad(target)``) to those of the old ones (``ctx.push``). Every
backend prints what the rules emit, so a new entry runs compiled (LLVM), in SIMD lanes and as CUDA.

    from revdiff import extend
    from revdiff.ir.low import Assign

    def rotate_left(ops, ctx):      # (a, b, c) <- (b, c, a)
        a, b, c = ops
        ctx.emit(Assign((a, b, c), (b, c, a)))

    def rotate_right(ops, ctx):     # (a, b, c) <- (c, a, b)
        a, b, c = ops
        ctx.emit(Assign((a, b, c), (c, a, b)))

    def cotangents_of(permute):     # the cotangents move as the inverse moves the values
        def rule(ops, ctx):
            grads = tuple(ctx.grad(o) for o in ops)
            if all(g is not None for g in grads):
                permute(grads, ctx)
        return rule

    cycle, uncycle = extend.register(
        extend.Instruction("cycle", "cycle(a, b, c)", ("target",) * 3, "uncycle", rotate_right,
                           cotangents_of(rotate_left), call_name="cycle"),
        extend.Instruction("uncycle", "uncycle(a, b, c)", ("target",) * 3, "cycle", rotate_left,
                           cotangents_of(rotate_right), call_name="uncycle"))
"""
from __future__ import annotations

from typing import Any, Callable, NoReturn

from revdiff.primitives.functions import USER_FUNCTIONS
from revdiff.primitives.table import INSTRUCTIONS, Instruction, Rule, RuleContext, instruction

__all__ = ["Instruction", "RuleContext", "Rule", "register"]

#: names reversible functions use for something else: builtins, allocation, routines, rotations
RESERVED = {"range", "len", "zero", "zeros", "ancilla", "release", "routine", "rot", "irot", "np", "math", "abs", "min", "max", "round"}


def register(entry: Instruction, inverse: Instruction) -> tuple[Callable[..., NoReturn], Callable[..., NoReturn]]:
    """Add an instruction and its inverse to the table; returns a stand-in for each ``call_name``
    (import them where the reversible functions are written, so that linters see the names). A call
    of a reversible function named like an instruction is refused. TypeError for what is not an
    entry, ValueError for an entry the table cannot take."""
    for e, other in ((entry, inverse), (inverse, entry)):
        if not isinstance(e, Instruction):
            raise TypeError(f"register takes Instruction entries, got {type(e).__name__}")
        if e.inverse != other.name:
            raise ValueError(f"instruction '{e.name}' names '{e.inverse}' as its inverse, not '{other.name}'")
        if e.call_name is None or not e.call_name.isidentifier():
            raise ValueError(f"instruction '{e.name}' needs a call_name users write it by, got {e.call_name!r}")
        if e.name in INSTRUCTIONS or any(x.call_name == e.call_name for x in INSTRUCTIONS.values()):
            raise ValueError(f"an instruction named '{e.name}' or called '{e.call_name}' is already in the table")
        if e.call_name in RESERVED or e.call_name in USER_FUNCTIONS:
            raise ValueError(f"'{e.call_name}' is a name of the language; call instruction '{e.name}' otherwise")
        if e.is_vector:
            raise ValueError(f"instruction '{e.name}': vector instructions and whole-array statements "
                             "(operand_ranks, elementwise) have a syntax of their own and cannot be registered as calls")
        if not e.targets or set(e.roles) - {"target", "expr"}:
            raise ValueError(f"instruction '{e.name}': roles are 'target' or 'expr', with at least one target")
    if entry is not inverse and entry.call_name == inverse.call_name:
        raise ValueError(f"'{entry.name}' and '{inverse.name}' need call names of their own")
    if entry.roles != inverse.roles:
        raise ValueError(f"'{entry.name}' and its inverse '{inverse.name}' must take the same operands")
    instruction(entry)
    if inverse is not entry:
        instruction(inverse)
    return _stand_in(entry), _stand_in(inverse)


def _stand_in(entry: Instruction) -> Callable[..., NoReturn]:
    def outside(*args: Any) -> NoReturn:
        raise RuntimeError(f"{entry.call_name} is an instruction of the reversible language; use it only "
                           "inside a function decorated with @revdiff.reversible")

    outside.__name__ = outside.__qualname__ = entry.call_name
    outside.__doc__ = f"The instruction {entry.syntax} (inside @reversible functions only)."
    return outside
