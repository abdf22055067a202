"""Signatures of batched entries, one definition for the Numba, lane and CUDA entries: the program
an entry runs, which parameters carry a batch axis, the gradient buffers a vjp entry takes (one per
element, shared parameters included: they are summed after), and the outputs it saves before its
adjoint half restores the inputs."""
from __future__ import annotations

from typing import NamedTuple

from revdiff.backends.numba.entries import BatchParam


class EntrySignature(NamedTuple):
    program: str  # the program run per element: a call's, or the fused vjp
    params: list  # BatchParam per parameter of the function
    grads: list  # BatchParam per differentiable parameter (vjp entries; empty for calls)
    saved: tuple  # names of the parameters whose forward results a vjp entry copies out


#: the names a batched entry derives from a parameter ``p``: its gradient buffer, its saved output,
#: and (CUDA) the pointer and shape record it arrives as
DERIVED = {"g_": "the gradient of", "out_": "the saved output of", "p_": "the device pointer of",
           "m_": "the shape record of"}


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
