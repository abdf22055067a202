"""The fused vjp program: forward and adjoint in one function, with the uncompute that ends the
forward and the recompute that starts the adjoint left out where they cancel.

A body ``alloc; with routine: C; U; ~routine; del`` run forward and then adjointed executes
``C, U, ~C`` and then ``adj(~C)`` (which recomputes ``C`` while pushing the cotangents of the
ancillas ``C`` wrote, zero at that point), ``adj(U)``, ``adj(C)``. When everything ``C`` writes is
an ancilla deallocated after ``~routine``, the pair ``~C, adj(~C)`` is the identity on values and
pushes only zeros, so the fused program runs ``C, U``, copies the results out, and continues with
``adj(U), adj(C)``: one uncompute and one recompute fewer, and no zero cotangents pushed through
them (which could make 0 * inf = NaN).
"""
from __future__ import annotations

from revdiff.ir.high import Alloc, Const, Dealloc, Index, Name, Shape, Uncompute
from revdiff.ir.low import Assign
from revdiff.ir.types import VarType
from revdiff.passes.analysis import restores_only_freed
from revdiff.passes.infer import alloc_type


def split_for_fused_vjp(body: list, callee_modifies) -> tuple[list, list]:
    """(prefix, kept): the statements the fused vjp runs forward and then adjoints, and the
    allocations of the ancillas that stay alive between the two. Without a final uncompute that
    may be elided, the prefix is the whole body and nothing is kept."""
    end = len(body)
    while end > 0 and isinstance(body[end - 1], Dealloc):
        end -= 1
    if end == 0 or not isinstance(body[end - 1], Uncompute):
        return body, []
    if not restores_only_freed(body, end - 1, callee_modifies):
        return body, []  # the compute block writes state that outlives it: its cotangent may be nonzero
    freed = {s.name for s in body[end:]}
    prefix = body[:end - 1]
    kept = [s for s in prefix if isinstance(s, Alloc) and s.name in freed]
    if len(kept) != len(freed):
        return body, []  # an ancilla allocated in a nested block: keep the plain composition
    return prefix, kept


def saved_name(param: str, taken: set) -> str:
    name = "saved_" + param
    while name in taken:
        name = "_" + name
    return name


def lower_fused_vjp(lowerer, body: list, modified: list) -> tuple[list, list]:
    """(statements, parameters) of the fused vjp: ``params, gradients, saved_<p>`` for each
    modified parameter ``p`` (its forward result, copied out before the adjoint restores it; a
    scalar is saved as a one-element array)."""
    prefix, kept = split_for_fused_vjp(body, lowerer.callee_modifies)
    env = lowerer.env
    lowerer.vjp_forward = True  # its freed ancillas' uncomputes are the adjoint half's to run and check
    forward = lowerer.lower_block(prefix)
    lowerer.vjp_forward = False
    gradients = lowerer.gradient_params()
    saved_out, lowerer.out = lowerer.out, []
    saved = []
    for p in modified:
        t = env[p]
        name = saved_name(p, set(env.types) | set(lowerer.params))
        env.types[name] = VarType(t.kind, max(t.ndim, 1), t.dtype)
        saved.append(name)
        _copy_into(lowerer, name, p, t.ndim)
    for alloc in kept:  # what adj(del) would have allocated: the kept ancillas' zero cotangents
        if lowerer.differentiable(alloc.name):
            t = alloc_type(alloc, env)
            env.types[lowerer.gname(alloc.name)] = t
            lowerer.emit(lowerer.zero_array(lowerer.gname(alloc.name), alloc.shape, t.dtype,
                                            f"the gradient of ancilla '{alloc.name}'"))
    copies, lowerer.out = lowerer.out, saved_out
    adjoint = lowerer.adjoint_body(prefix)
    return forward + copies + adjoint, list(lowerer.params) + gradients + saved


def _copy_into(lowerer, dst: str, src: str, ndim: int) -> None:
    if ndim == 0:
        lowerer.emit(Assign((Index(dst, (Const(0),)),), (Name(src),)))
        return

    def nest(idx: list) -> None:
        if len(idx) == ndim:
            lowerer.emit(Assign((Index(dst, tuple(idx)),), (Index(src, tuple(idx)),)))
        else:
            lowerer.loop(Const(0), Shape(src, len(idx)), lambda i: nest(idx + [i]), "i")

    nest([])
