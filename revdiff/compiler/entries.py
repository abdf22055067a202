"""The signature of a reversible function's batched entries (``ir/entries.py``): the program an entry
runs, which parameters carry a batch axis, the gradient buffers a vjp entry takes (one per element,
shared parameters included: they are summed after), and the outputs it saves before its adjoint
half restores the inputs."""
from __future__ import annotations

from revdiff.ir.entries import DERIVED, BatchParam, EntrySignature


def check_names(f) -> None:
    """ValueError for a parameter whose name is one a batched entry derives from another's."""
    for p in f.params:
        for prefix, what in DERIVED.items():
            if p.startswith(prefix) and p[len(prefix):] in f.params:
                raise ValueError(f"parameter '{p}' of {f.__qualname__} has the name batched entries give "
                                 f"{what} '{p[len(prefix):]}'; rename it to run {f.__qualname__} batched")


def entry_signature(f, batched: frozenset, kind: str, types: tuple) -> EntrySignature:
    """The signature of the ``kind`` ("call" or "vjp") entry of ``f`` (a reversible function or its
    inverse) batched over the parameters in ``batched``, for element ``types``."""
    check_names(f)
    params = [BatchParam(p, p in batched, t.ndim == 0) for p, t in zip(f.params, types)]
    if kind == "call":
        return EntrySignature(f.programs[0], params, [], ())
    grads = [BatchParam("g_" + p.name, True, p.scalar) for p, t in zip(params, types) if t.differentiable]
    modified = f.forward_function.modified_positions()
    saved = tuple(p for k, p in enumerate(f.params) if k in modified)
    return EntrySignature(f.fused_vjp, params, grads, saved)
