"""What a batched entry is, for every target that generates one (CPU elements, lanes, CUDA): its
parameters with their batch axes, and the names it derives from them (tangent entries: ``d_<p>``,
``d_g_<p>``, ``dout_<p>``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class BatchParam:
    name: str
    batched: bool  # has a leading batch axis
    scalar: bool  # a scalar per element (batched: a 1-D array of them)


class EntrySignature(NamedTuple):
    program: str  # the program run per element: a call's, or the fused vjp
    params: list  # BatchParam per parameter of the function
    grads: list  # BatchParam per differentiable parameter (vjp entries; empty for calls)
    saved: tuple  # names of the parameters whose forward results a vjp entry copies out
    #: tangent programs (jvp, hvp entries): BatchParam per tangent parameter after the saved
    #: outputs, then the names of the saved outputs whose tangents come back in ``dout_<name>``
    tangents: list = []
    tangent_saved: tuple = ()


#: the names a batched entry derives from a parameter ``p``: its gradient buffer, its saved output,
#: and (CUDA) the pointer and shape record it arrives as
DERIVED = {"g_": "the gradient of", "out_": "the saved output of", "p_": "the device pointer of",
           "m_": "the shape record of", "d_": "the tangent of", "dout_": "the tangent of the saved output of"}
