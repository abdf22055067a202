"""Inline the generated functions a program calls once: the callee's low IR replaces the call.

Each generated function is compiled as an LLVM module of its own, which its callers call by
symbol (``targets/llvm/programs.py``). A fused vjp calls its callees' forward and adjoint programs once
each, and those are the largest functions of a gradient (the whole QR of a projection). Inlined,
each is compiled inside the vjp, where LLVM optimises it with its caller.

A call is inlined when every array argument is a whole array (a view would need a variable of its
own). The callee's names get a prefix; a scalar parameter becomes a variable of the caller, and the
scalars the callee modifies are assigned back, as the call returned them. A failed check inside the
inlined body returns from the caller, as the caller did right after a failed call.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Callable

from revdiff.ir.high import Name
from revdiff.ir.low import Assign, Comment, Invoke, LowFunction, rename_statement, walk_statements, with_blocks
from revdiff.optimize.prune import written_names
from revdiff.primitives.printer import expr_source

def inline_single_calls(fn: LowFunction, callee: Callable[[str], "LowFunction | None"]) -> LowFunction:
    """``fn`` with every call of a function it calls only once replaced by the body of
    ``callee(name)`` (its low function before allocation hoisting; None: keep the call). One level:
    the calls the inlined bodies make stay calls (inlining those too measured no faster)."""
    counts = Counter(s.fn for s in walk_statements(fn.body) if isinstance(s, Invoke))
    taken = _all_names(fn.body) | set(fn.params)
    return replace(fn, body=_inline_block(fn.body, counts, callee, taken))


def _inline_block(body: list, counts: Counter, callee, taken: set) -> list:
    out = []
    for s in body:
        if isinstance(s, Invoke) and counts[s.fn] == 1:
            low = callee(s.fn)
            if low is not None and _whole_arrays(s, low):
                out += _inlined(s, low, taken)
                continue
        out.append(with_blocks(s, lambda b: _inline_block(b, counts, callee, taken)))
    return out


def _whole_arrays(call: Invoke, low: LowFunction) -> bool:
    return all(isinstance(a, Name) for a, p in zip(call.args, low.params) if low.param_types[p].is_array)


def _inlined(call: Invoke, low: LowFunction, taken: set) -> list:
    """The callee's body for this call: arrays renamed to the arguments, everything else prefixed."""
    prefix = _prefix(low.name, _all_names(low.body) | set(low.params), taken)
    written = _assigned(low.body)
    names: dict = {}
    entry, exit_ = [], []
    for param, arg, result in zip(low.params, call.args, call.results):
        if low.param_types[param].is_array:
            names[param] = arg.id
        elif param not in written and isinstance(arg, Name):
            names[param] = arg.id
        else:
            names[param] = prefix + param
            entry.append(Assign((Name(names[param]),), (arg,)))
            if param in written and result is not None:
                exit_.append(Assign((result,), (Name(names[param]),)))
    rename = lambda n: names.get(n) or prefix + n  # noqa: E731
    taken |= {rename(n) for n in _all_names(low.body)}
    args = ", ".join(expr_source(a) for a in call.args)
    return ([Comment(f"{call.fn} inlined, on ({args}); its names prefixed {prefix}")] + entry
            + [rename_statement(s, rename) for s in low.body] + exit_ + [Comment(f"end of {call.fn}")])


def _prefix(callee: str, names: set, taken: set) -> str:
    """``<callee>_`` (e.g. ``cgs2_forward_``), numbered when a prefixed name would clash with one
    the caller already has."""
    prefix, k = callee + "_", 1
    while any(prefix + n in taken for n in names):
        k += 1
        prefix = f"{callee}{k}_"
    return prefix


def _all_names(body: list) -> set:
    """Every variable a statement list defines or reads."""
    out = set()
    collect = lambda n: out.add(n) or n  # noqa: E731
    for s in body:
        rename_statement(s, collect)
    return out


def _assigned(body: list) -> set:
    """Variables a statement list assigns (scalars, loop variables, allocations, call results)."""
    out = set()
    for s in body:
        out |= written_names(s)
    return out


__all__ = ["inline_single_calls"]
