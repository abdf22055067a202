"""Every program of a function and its parameters: how each program is made (``PLANS``), and, for
given argument types, each parameter's role, type and passing (``program_signature``). The
specialisation, every target (CPU, lanes, CUDA) and the call driver read this one table; a batched
entry's signature (``entry_signature``) is derived from it."""
from __future__ import annotations

from typing import NamedTuple

from revdiff.ir.entries import BatchParam, EntrySignature, entry_argument
from revdiff.ir.types import VarType


class Plan(NamedTuple):
    """How one program is made from the function's body (its parameters: ``program_signature``)."""
    inverted: bool  # from the inverse of the body (``passes/invert.py``)
    lowering: str  # "forward": ``Lowerer``; "adjoint": ``AdjointLowerer``; "fused": forward then adjoint
    vjp_forward: bool = False  # the forward half of a batched vjp: keeps what the adjoint half reads
    tangent_of: "str | None" = None  # "tangent": the program whose tangent this is (``passes/tangent.py``)


#: every program of a function; its position is part of each program's runtime-check codes
PROGRAMS = {
    "forward": Plan(False, "forward"),
    "inverse": Plan(True, "forward"),
    "adjoint": Plan(False, "adjoint"),
    "inverse_adjoint": Plan(True, "adjoint"),
    "vjp": Plan(False, "fused"),
    "inverse_vjp": Plan(True, "fused"),
    "vjp_forward": Plan(False, "forward", vjp_forward=True),
}
#: the tangent program of each program: forward mode, and (of the fused vjp) the Hessian-vector
#: product. They lower nothing themselves, so their checks keep the numbers of the program they
#: derive from, and they need no position in ``PROGRAMS``'s numbering.
TANGENTS = {p: {"forward": "jvp", "inverse": "inverse_jvp", "vjp": "hvp", "inverse_vjp": "inverse_hvp"}.get(p, p + "_jvp")
            for p in PROGRAMS}
PLANS = dict(PROGRAMS, **{t: Plan(PROGRAMS[p].inverted, "tangent", tangent_of=p) for p, t in TANGENTS.items()})


class Slot(NamedTuple):
    """One parameter of a program. ``role``: "value" (a parameter of the function), "gradient" (its
    cotangent, differentiable parameters only), "saved" (a modified parameter's forward result,
    copied out by a fused vjp; a scalar as a one-element array), or one of those behind "d_" (its
    tangent, in a tangent program); ``position``: the function's parameter it belongs to;
    ``by_reference``: a scalar the program writes (returned by the CPU programs, a pointer in CUDA)."""
    role: str
    position: int
    type: VarType
    by_reference: bool


class ProgramSignature(NamedTuple):
    program: str
    slots: tuple

    def indices(self, role: str) -> list:
        """The positions among the program's parameters of the slots of ``role``."""
        return [k for k, s in enumerate(self.slots) if s.role == role]

    def positions(self, role: str) -> list:
        """The function's parameters (positions) that have a slot of ``role``, in order."""
        return [s.position for s in self.slots if s.role == role]


def program_signature(program: str, types: tuple, modified) -> ProgramSignature:
    """The parameters of ``program`` for argument ``types``, the function modifying the parameters
    at positions ``modified``: the function's parameters; then (adjoint, fused vjp) a gradient per
    differentiable one; then (fused vjp) the saved results of the modified ones; a tangent program
    adds the tangent of every differentiable parameter of the program it derives from."""
    plan = PLANS[program]
    if plan.lowering == "tangent":
        base = program_signature(plan.tangent_of, types, modified).slots
        return ProgramSignature(program, base + tuple(s._replace(role="d_" + s.role) for s in base
                                                      if s.type.differentiable))
    slots = [Slot("value", k, t, k in modified) for k, t in enumerate(types)]
    if plan.lowering != "forward":
        slots += [Slot("gradient", k, t, True) for k, t in enumerate(types) if t.differentiable]
    if plan.lowering == "fused":
        slots += [Slot("saved", k, VarType(t.kind, max(t.ndim, 1), t.dtype), False)
                  for k, t in enumerate(types) if k in modified]
    return ProgramSignature(program, tuple(slots))


#: the program each batched entry runs per element, of a function run forwards (``f.programs``:
#: ``~f`` runs the inverse programs); "value": the final values from the fused vjp's forward half
#: ("vjp_forward", whose ancillas are freed where the call uncomputes them), or ``~f``'s call;
#: "value_jvp": the tangent of that
ENTRY_KINDS = ("call", "value", "vjp", "jvp", "value_jvp", "hvp")


def entry_program(f, kind: str) -> str:
    """The program the ``kind`` entry of ``f`` (a reversible function or its inverse) runs."""
    value = "vjp_forward" if f.programs[0] == "forward" else f.programs[0]
    return {"call": f.programs[0], "value": value, "vjp": f.fused_vjp, "jvp": TANGENTS[f.programs[0]],
            "value_jvp": TANGENTS[value], "hvp": TANGENTS[f.fused_vjp]}[kind]


def entry_signature(f, batched: frozenset, kind: str, types: tuple) -> EntrySignature:
    """The signature of the ``kind`` entry (``ENTRY_KINDS``) of ``f`` batched over the parameters
    in ``batched``, for element ``types``: the program signature's slots named, gradients batched
    for every parameter (a shared one's are summed after), tangents batched where their primal is."""
    sig = program_signature(entry_program(f, kind), types, f.forward_function.modified_positions())
    params: dict = {}
    for s in sig.slots:
        if s.role in ("value", "gradient", "d_value", "d_gradient"):
            p = f.params[s.position]
            batched_here = p in batched or s.role in ("gradient", "d_gradient")
            params.setdefault(s.role, []).append(BatchParam(entry_argument(s.role, p), batched_here,
                                                            types[s.position].ndim == 0, p))
    saved = tuple(f.params[k] for k in sig.positions("saved"))
    tangent_saved = tuple(f.params[k] for k in sig.positions("d_saved"))
    return EntrySignature(sig.program, params["value"], params.get("gradient", []), saved,
                          params.get("d_value", []) + params.get("d_gradient", []), tangent_saved)
