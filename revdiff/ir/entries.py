"""What a batched entry is, for every backend that generates one (Numba, lanes, CUDA): its parameters
with their batch axes, the names it derives from them (tangent entries: ``d_<p>``, ``d_g_<p>``, ``dout_<p>``), and the worker functions beside it."""
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


#: the functions beside a batched entry, compiled before it: ``entry_groups``, which a lane entry
#: runs for each chunk of lane groups
BATCH_WORKERS = ("groups",)

#: how each argument of the program a Numba entry calls comes from the entry's own arguments: as it is,
#: one batch element (``a[_b]``), a one-element slice (``a[_b:_b + 1]``), a lane buffer of the
#: element's axes then lanes (a scalar's: one row of lanes), or a chunk's error record. The entry's
#: module lists them (``_PROGRAM_ARGUMENTS``); ``runtime/program_calls.py`` types them as Numba does.
AS_IS, ELEMENT, ELEMENT_SLICE, LANE_BUFFER, SCALAR_LANE_BUFFER, CHUNK_RECORD = (
    "as is", "element", "element slice", "lane buffer", "scalar lane buffer", "chunk record")
