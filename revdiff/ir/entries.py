"""What a batched entry is, for every target that generates one (CPU elements, lanes, CUDA): its
parameters with their batch axes, and the names it gives the arguments it derives from them
(``ENTRY_PREFIXES``: gradients, saved outputs, tangents)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class BatchParam:
    name: str
    batched: bool  # has a leading batch axis
    scalar: bool  # a scalar per element (batched: a 1-D array of them)
    of: str = ""  # the function's parameter (as compiled) it belongs to


class EntrySignature(NamedTuple):
    program: str  # the program run per element: a call's, or the fused vjp
    params: list  # BatchParam per parameter of the function
    grads: list  # BatchParam per differentiable parameter (vjp entries; empty for calls)
    saved: tuple  # names of the parameters whose forward results a vjp entry copies out
    #: tangent programs (jvp, hvp entries): BatchParam per tangent parameter after the saved
    #: outputs, then the names of the saved outputs whose tangents come back in ``dout_<name>``
    tangents: list = []
    tangent_saved: tuple = ()


class SkippedCopies(NamedTuple):
    """The entry arguments whose copies a lane entry leaves out: ``unread``, gradients the caller will
    not read (left in their lane buffers); ``zeroed``, zero arrays the caller made (the seeds of
    absent cotangents), whose buffers each group clears instead of copying the zeros in."""
    unread: frozenset = frozenset()
    zeroed: frozenset = frozenset()


#: the prefix of the name of each entry argument, by its role (``ir.signature.Slot``), before the name
#: of the parameter it belongs to (as compiled). A user's name never begins with "_" (``user_names``),
#: so no argument of an entry can take a parameter's name.
ENTRY_PREFIXES = {"value": "", "gradient": "_g_", "saved": "_out_", "d_value": "_d_", "d_gradient": "_dg_",
                  "d_saved": "_dout_"}


def entry_argument(role: str, parameter: str) -> str:
    """The name of the entry argument of ``role`` that belongs to ``parameter``."""
    return ENTRY_PREFIXES[role] + parameter
