"""Batched entry points: one generated function that runs a program (a call, or the fused vjp
program) on every element of a leading batch axis, in parallel with Numba's prange.

The per-element programs are the ordinary generated ones; the entry only indexes the batch, so there
is no Python work per element. Scalars that are batched arrive as 1-D arrays and are written back.
Each element has its own error record (a row of ``_errors``), read by the caller after the loop.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchParam:
    name: str
    batched: bool  # has a leading batch axis
    scalar: bool  # a scalar per element (batched: a 1-D array of them)


def _element(p: BatchParam) -> str:
    return f"{p.name}[_b]" if p.batched else p.name


def _call(lines: list, fn: str, params: list, saved: tuple, indent: str) -> None:
    """``r = fn(elements..., errors[b])`` then write back the scalars the program returned; a
    scalar's saved result is the one-element slice of its ``out_`` array."""
    args = [_element(p) for p in params]
    scalars = {p.name for p in params if p.scalar}
    args += [f"out_{name}[_b:_b + 1]" if name in scalars else f"out_{name}[_b]" for name in saved]
    lines.append(f"{indent}_r = {fn}({', '.join(args + ['_errors[_b]'])})")
    for k, p in enumerate(params):
        if p.batched and p.scalar:
            lines.append(f"{indent}{p.name}[_b] = _r[{k}]")


def batch_source(entry: str, program: str, params: list, grads: list, header: str, saved: tuple = ()) -> str:
    """Source of ``entry(params..., grads..., out_<saved>...)``: run ``program`` on every batch
    element. A fused vjp program takes ``params + grads + saved`` (``saved``: the parameters whose
    forward results it copies out before its adjoint half restores them); others take ``params``."""
    batched = [p for p in params + grads if p.batched]
    if not batched:
        raise ValueError("a batched entry needs at least one batched parameter")
    outs = [f"out_{name}" for name in saved]
    names = [p.name for p in params + grads] + outs
    lines = [header, "import numpy as np", "from numba import prange", "", "",
             f"def {entry}({', '.join(names + ['_errors'])}):",
             f"    for _b in prange({batched[0].name}.shape[0]):"]
    _call(lines, program, params + grads, saved, "        ")
    lines.append(f"    return ({', '.join(names)},)")
    return "\n".join(lines) + "\n"
