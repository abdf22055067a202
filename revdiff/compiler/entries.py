"""The signature of a reversible function's batched entries (``ir/entries.py``): the program an entry
runs, which parameters carry a batch axis, the gradient buffers a vjp entry takes (one per element,
shared parameters included: they are summed after), and the outputs it saves before its adjoint
half restores the inputs."""
from __future__ import annotations

from revdiff.compiler.specialization import TANGENTS
from revdiff.ir.entries import DERIVED, BatchParam, EntrySignature
from revdiff.user_names import as_written


def check_names(f) -> None:
    """ValueError for a parameter whose name is one a batched entry derives from another's, by one
    prefix or two (``d_g_x``: the tangent of the gradient of ``x``, in an hvp entry)."""
    params = set(f.params)
    for p in f.params:
        for prefix, what in DERIVED.items():
            rest = p[len(prefix):] if p.startswith(prefix) else None
            if rest is None:
                continue
            inner = [(rest, what)] + [(rest[len(q):], f"{what} {w}") for q, w in DERIVED.items()
                                      if rest.startswith(q)]
            for base, described in inner:
                if base in params:
                    raise ValueError(f"parameter '{as_written(p)}' of {f.__qualname__} has the name batched "
                                     f"entries give {described} '{as_written(base)}'; rename it to run "
                                     f"{f.__qualname__} batched")


def entry_signature(f, batched: frozenset, kind: str, types: tuple) -> EntrySignature:
    """The signature of the ``kind`` ("call", "vjp", "jvp" or "hvp") entry of ``f`` (a reversible
    function or its inverse) batched over the parameters in ``batched``, for element ``types``.
    A tangent entry runs the tangent of the call's or the vjp's program with a tangent per float or
    complex parameter, batched where its primal is (``compiler/specialization.TANGENTS``)."""
    check_names(f)
    params = [BatchParam(p, p in batched, t.ndim == 0) for p, t in zip(f.params, types)]
    tangents = [BatchParam("d_" + p.name, p.batched, p.scalar) for p, t in zip(params, types) if t.differentiable]
    if kind == "call":
        return EntrySignature(f.programs[0], params, [], ())
    if kind == "jvp":
        return EntrySignature(TANGENTS[f.programs[0]], params, [], (), tangents)
    grads = [BatchParam("g_" + p.name, True, p.scalar) for p, t in zip(params, types) if t.differentiable]
    modified = f.forward_function.modified_positions()
    saved = tuple(p for k, p in enumerate(f.params) if k in modified)
    if kind == "vjp":
        return EntrySignature(f.fused_vjp, params, grads, saved)
    differentiable_saved = tuple(p for k, p in enumerate(f.params) if k in modified and types[k].differentiable)
    return EntrySignature(TANGENTS[f.fused_vjp], params, grads, saved,
                          tangents + [BatchParam("d_" + g.name, True, g.scalar) for g in grads], differentiable_saved)
