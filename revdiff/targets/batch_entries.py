"""Batched entries as low IR, printed by every CPU target like a program: ``entry(_lo, _hi, args...,
_errors)`` runs a program (a call's, or the fused vjp) on elements ``_lo`` to ``_hi`` of a leading batch
axis, or, in SIMD lanes, on chunks ``_lo`` to ``_hi`` of groups of elements copied side by side.

The caller splits the batch among threads (``calls.run_batch``). Every element has its own error
record (row ``_b`` of ``_errors``): a failed check ends that element's program and the loop goes on.
A batched scalar is one entry of a 1-D array, read before its element's program and written back
after it, in the array's dtype; a saved scalar output is a one-element slice.

Lane entries (``targets/lanes/rewrite.py`` makes the lane programs): each chunk of LANE_CHUNK
groups shares one record, the lane buffers (element axes, then lanes) are allocated once per call,
each group's elements are copied in (the buffers of arrays the caller made zero, the seeds of absent
cotangents, are cleared instead), the lane program runs once, and the arrays it writes are copied
back; the last group repeats its last element to fill its lanes. A failure in a group is copied to
the record of the element its lane names.
"""
from __future__ import annotations

from revdiff.ir.checks import INTERRUPT, RECORD_SIZE
from revdiff.ir.entries import BatchParam, EntrySignature, entry_argument
from revdiff.ir.high import BinOp, Call, Compare, Const, Index, Name, Shape, Slice
from revdiff.ir.low import Assign, Branch, Comment, HostCall, Invoke, Local, Loop, LowFunction, Zero
from revdiff.ir.types import VarType

LANE_CHUNK = 64  # groups per chunk: lane buffers are allocated once per call, records per chunk
INT = VarType("int", 0, "int64")
RECORDS = VarType("float", 2, "float64")


def entry_names(sig: EntrySignature) -> list:
    """The arguments of the program a batched entry runs, in order: parameters, gradients, the saved
    outputs, then (tangent programs) the tangents and the saved outputs' tangents (``ENTRY_PREFIXES``)."""
    return ([p.name for p in sig.params + sig.grads] + [entry_argument("saved", name) for name in sig.saved] +
            [p.name for p in sig.tangents] + [entry_argument("d_saved", name) for name in sig.tangent_saved])


def _batched(sig: EntrySignature) -> dict:
    """name -> whether the entry argument carries a batch axis (saved outputs always do)."""
    out = {p.name: p.batched for p in sig.params + sig.grads + list(sig.tangents)}
    out.update({entry_argument("saved", n): True for n in sig.saved})
    out.update({entry_argument("d_saved", n): True for n in sig.tangent_saved})
    return out


def lane_records(n: int, width: int) -> int:
    """Rows of the error table of a lane entry over n elements: one per element, then one per chunk
    (the record its groups share, where the caller can also set the interrupt field)."""
    groups = (n + width - 1) // width
    return n + (groups + LANE_CHUNK - 1) // LANE_CHUNK


def _plus(a, b):
    return BinOp("+", a, b)


def element_entry(name: str, program: str, sig: EntrySignature, program_types: tuple, entry_types: dict) -> LowFunction:
    """The entry running ``program`` (parameter types ``program_types``) once per batch element.
    ``entry_types``: the VarType of every argument of the entry as given (batched ones with their
    batch axis)."""
    names = entry_names(sig)
    batched = _batched(sig)
    b = Name("_b")
    args, results = [], []
    for n, t in zip(names, program_types):
        given = entry_types[n]
        if not batched[n]:
            args.append(Name(n))
        elif t.ndim == given.ndim:  # a saved scalar output: the element's one-element slice
            args.append(Index(n, (Slice(b, _plus(b, Const(1))),)))
        else:
            args.append(Index(n, (b,)))
        results.append(None if t.ndim else args[-1])
    call = Invoke(program, tuple(args), tuple(results), record=Index("_errors", (b,)))
    body = [Comment(f"{program} on each element of [_lo, _hi), each with its own error record"),
            Loop("_b", Name("_lo"), Name("_hi"), Const(1), [call])]
    return _entry_function(name, names, entry_types, body)


def _entry_function(name: str, names: list, entry_types: dict, body: list) -> LowFunction:
    params = ["_lo", "_hi"] + names + ["_errors"]
    types = {"_lo": INT, "_hi": INT, "_errors": RECORDS, **{n: entry_types[n] for n in names}}
    scalars = [p for p in params if not types[p].ndim]
    return LowFunction(name, params, body, scalars, types)


def lane_entry(name: str, program: str, sig: EntrySignature, lane_types: tuple, entry_types: dict,
               width: int, written: set, zeroed: frozenset = frozenset()) -> LowFunction:
    """The entry running the lane program ``program`` (its parameters' types ``lane_types``: lane
    arrays with their lane axis last, a batched scalar as ``width`` scalars) on groups of ``width``
    elements, over chunks ``_lo`` to ``_hi`` of LANE_CHUNK groups. ``written``: the entry arguments
    whose arrays the program writes (copied back); ``zeroed``: those the caller made zero, whose
    buffers each group clears instead of copying the zeros in (an unread one is never touched)."""
    names = entry_names(sig)
    batched = _batched(sig)
    saved = {entry_argument("saved", n) for n in sig.saved} | {entry_argument("d_saved", n) for n in sig.tangent_saved}
    first = next(n for n in names if batched[n])
    n_, b = Name("_n"), Name("_b")
    last = BinOp("-", n_, Const(1))
    body: list = [Local("_n", Shape(first, 0)),
                  Local("_groups", BinOp("//", _plus(n_, Const(width - 1)), Const(width))),
                  Local("_chunks", BinOp("//", _plus(Name("_groups"), Const(LANE_CHUNK - 1)), Const(LANE_CHUNK)))]
    buffers, shapes = {}, {}
    for n in names:
        t = entry_types[n]
        if batched[n] and t.ndim > 1:
            shapes[n] = tuple(Shape(n, axis) for axis in range(1, t.ndim)) + (Const(width),)
        elif batched[n] and n in saved:  # a saved scalar output: one row of lanes
            shapes[n] = (Const(1), Const(width))
        else:
            continue
        buffers[n] = f"_lane_{n}"
        body.append(Zero(buffers[n], shapes[n], t.dtype))
    group: list = [Local("_b", BinOp("*", Name("_g"), Const(width))),
                   Assign((Index("_e", (Const(RECORD_SIZE - 1),)),), (BinOp("+", BinOp("*", Const(1.0), b), Const(1.0)),))]
    for n, buffer in buffers.items():
        if n in zeroed:
            group.append(Zero(buffer, shapes[n], entry_types[n].dtype, reuse=True))
        elif n not in saved:
            group.append(_copy_lanes(n, buffer, entry_types[n].ndim - 1, width, gather=True))
    args, results = [], []
    lanes = iter(lane_types)
    for n in names:
        if batched[n] and n in buffers:
            args.append(Name(buffers[n]))
            results.append(None)
            next(lanes)
        elif batched[n]:  # a batched scalar: one argument per lane
            for lane in range(width):
                element = Index(n, (Call("min", (_plus(b, Const(lane)), last)),))
                args.append(element)
                results.append(element)
                next(lanes)
        else:
            args.append(Name(n))
            results.append(None if next(lanes).ndim else Name(n))
    group.append(Invoke(program, tuple(args), tuple(results), record=Name("_e")))
    for n, buffer in buffers.items():
        if n in written or n in saved:
            group.append(_copy_lanes(n, buffer, entry_types[n].ndim - 1 if entry_types[n].ndim > 1 else 0,
                                     width, gather=False, scalar_out=entry_types[n].ndim == 1))
    failed = Index("_errors", (Call("min", (_plus(b, Call("round", (Index("_e", (Const(1),)),))), last)),))
    copy = Loop("_i", Const(0), Const(RECORD_SIZE), Const(1),
                [Assign((Index(failed.base, failed.indices + (Name("_i"),)),), (Index("_e", (Name("_i"),)),))])
    clear = [Assign((Index("_e", (Const(i),)),), (Const(0.0),)) for i in range(RECORD_SIZE) if i != INTERRUPT]
    group.append(Comment("a failed check: the lane it names gives the element"))
    group.append(Branch(Compare("!=", Index("_e", (Const(0),)), Const(0.0)), [copy] + clear, []))
    chunk = [Local("_e", Index("_errors", (_plus(n_, Name("_c")),))),
             Loop("_g", BinOp("//", BinOp("*", Name("_c"), Name("_groups")), Name("_chunks")),
                  BinOp("//", BinOp("*", _plus(Name("_c"), Const(1)), Name("_groups")), Name("_chunks")),
                  Const(1), group)]
    body.append(Comment(f"{program} on groups of {width} elements, chunks [_lo, _hi) of {LANE_CHUNK} groups"))
    body.append(Loop("_c", Name("_lo"), Name("_hi"), Const(1), chunk))
    return _entry_function(name, names, entry_types, body)


def _copy_lanes(name: str, buffer: str, rank: int, width: int, gather: bool, scalar_out: bool = False):
    """Loops copying each lane's element of batch array ``name`` into lane buffer ``buffer`` (``gather``)
    or back; lanes outermost. Back: only lanes holding an element (the last group's spare lanes
    repeat its last element)."""
    k, b, n_ = Name("_k"), Name("_b"), Name("_n")
    idx = [Name(f"_i{axis}") for axis in range(rank)]
    element = Call("min", (BinOp("+", b, k), BinOp("-", n_, Const(1))))
    if scalar_out:
        src, lane = Index(name, (element,)), Index(buffer, (Const(0), k))
    else:
        src, lane = Index(name, (element,) + tuple(idx)), Index(buffer, tuple(idx) + (k,))
    stmt = Assign((lane,), (src,)) if gather else Assign((src,), (lane,))
    body = [stmt]
    for axis in reversed(range(rank)):
        body = [Loop(f"_i{axis}", Const(0), Shape(name, axis + 1), Const(1), body)]
    if not gather:
        body = [Branch(Compare("<", BinOp("+", b, k), n_), body, [])]
    loops = Loop("_k", Const(0), Const(width), Const(1), body)
    if scalar_out or not rank:
        return loops
    # the CPU targets copy contiguous elements by 8 x 8 transposes (``targets/llvm/lane_copy.py``)
    return HostCall("lane_copy", (Name(buffer), Name(name), b, n_, Const(1 if gather else 0)), [loops])


__all__ = ["BatchParam", "LANE_CHUNK", "element_entry", "entry_names", "lane_entry", "lane_records"]
