"""The inverse of a program: a small rewrite of the high-level IR.

Statements run in reverse order, each replaced by its inverse: instructions by the inverse named in
the instruction table, ``for`` loops iterate backwards, ``if (pre, post)`` becomes ``if (post, pre)``,
``while (pre, post)`` becomes ``while (post, pre)``, allocation and deallocation trade places, and
compute / uncompute blocks trade places. Constant bindings keep their meaning and move to the top
of their block so they are defined before any use.
"""
from __future__ import annotations

from dataclasses import replace

from revdiff.ir.high import Alloc, Bind, CallFn, Compute, Dealloc, For, If, Instr, Uncompute, While
from revdiff.primitives import INSTRUCTIONS


def invert_block(body: list) -> list:
    allocs = {s.name: s for s in body if isinstance(s, Alloc)}
    bindings = [s for s in body if isinstance(s, Bind)]
    rest = [invert_stmt(s, allocs) for s in reversed(body) if not isinstance(s, Bind)]
    return bindings + rest


def invert_stmt(s, allocs: dict):
    if isinstance(s, Instr):
        return replace(s, op=INSTRUCTIONS[s.op].inverse)
    if isinstance(s, CallFn):
        return replace(s, inverse=not s.inverse)
    if isinstance(s, For):
        return replace(s, body=invert_block(s.body), reverse=not s.reverse)
    if isinstance(s, If):
        if s.post is None:
            return replace(s, then=invert_block(s.then), orelse=invert_block(s.orelse))
        return replace(s, pre=s.post, post=s.pre, then=invert_block(s.then), orelse=invert_block(s.orelse))
    if isinstance(s, While):
        return replace(s, pre=s.post, post=s.pre, body=invert_block(s.body))
    if isinstance(s, Alloc):
        return Dealloc(s.loc, s.name, s.value)
    if isinstance(s, Dealloc):
        a = allocs[s.name]
        return Alloc(s.loc, a.name, a.shape, a.dtype, a.value)
    if isinstance(s, Compute):
        return Uncompute(s.loc, s.body, s.ident)
    if isinstance(s, Uncompute):
        return Compute(s.loc, s.body, s.ident)
    raise TypeError(f"cannot invert {type(s).__name__}")
