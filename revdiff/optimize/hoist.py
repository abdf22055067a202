"""Keep ancilla arrays allocated inside loops from being allocated on every iteration.

An array ancilla allocated in a loop body is declared once at the top of the function (empty) and,
at its allocation, reused and zero-filled when it already has the requested shape, so a hot loop
does no heap allocation. Values are unchanged: the array is zero exactly as a fresh one would be.
"""
from __future__ import annotations

from dataclasses import replace

from revdiff.ir.high import Const
from revdiff.ir.low import Branch, HostCall, Loop, LowFunction, Repeat, Zero


def hoist_allocations(fn: LowFunction) -> LowFunction:
    declared: dict = {}
    body = _rewrite(fn.body, declared, in_loop=False)
    prologue = [Zero(name, (Const(0),) * len(z.shape), z.dtype) for name, z in declared.items()]
    return replace(fn, body=prologue + body)


def _rewrite(body: list, declared: dict, in_loop: bool) -> list:
    out = []
    for s in body:
        if isinstance(s, Zero) and s.shape is not None and in_loop:
            declared.setdefault(s.name, s)
            s = replace(s, reuse=True)
        elif isinstance(s, (Loop, Repeat)):
            s = replace(s, body=_rewrite(s.body, declared, True))
        elif isinstance(s, Branch):
            s = replace(s, then=_rewrite(s.then, declared, in_loop), orelse=_rewrite(s.orelse, declared, in_loop))
        elif isinstance(s, HostCall):
            s = replace(s, fallback=_rewrite(s.fallback, declared, in_loop))
        out.append(s)
    return out
