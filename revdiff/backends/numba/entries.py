"""Batched entry points: one generated function ``entry(_lo, _hi, args..., _errors, _program_at)``
that runs a program (a call, or the fused vjp program) on elements ``_lo`` to ``_hi`` of a leading
batch axis (lane entries: chunks of lane groups). The caller splits the batch among threads
(``calls.run_batch``); the entry releases the GIL.

The per-element programs are the ordinary generated ones, called through their address
``_program_at`` (``runtime/program_calls.py``): not linked into the entry, whose compile then takes
a fraction of a second instead of as long as its program's. The entry only indexes the batch, so
there is no Python work per element. Scalars that are batched arrive as 1-D arrays and are written back.
Each element has its own error record (a row of ``_errors``), read by the caller after the loop.

The loop is a plain one, not a Numba ``prange``: a parallel loop compiles the program it calls
again, in its own library, and took more than half of a first call's compile time (49 s against
22 s for a 32x16 CGS2 projection gradient). The only exceptions generated code raises are failed
allocations, and entries let them leave their loop: an element entry marks each element's record
as it starts it, a lane entry writes the group it runs into its chunk's record, and the caller
records the exception as the failure of the element it stopped (``calls.run_batch``). A ``try``
around each call would cost more than half of an entry's compile (0.9 s against 0.3 s for an
element entry, 1.4 s against 0.7 s for a lane entry).
"""
from __future__ import annotations

from revdiff.ir.checks import GROUP, STARTED
from revdiff.ir.entries import (AS_IS, BATCH_WORKERS, CHUNK_RECORD, ELEMENT, ELEMENT_SLICE, LANE_BUFFER,
                                 SCALAR_LANE_BUFFER, BatchParam)

GROUPS, = BATCH_WORKERS  # the function beside a lane entry (loader.compiled compiles it)


def _element(p: BatchParam) -> tuple:
    return (f"{p.name}[_b]", (p.name, ELEMENT)) if p.batched else (p.name, (p.name, AS_IS))


def _call(lines: list, fn: str, params: list, saved: tuple, tangents: list = (), tangent_saved: tuple = ()) -> list:
    """``r = fn(elements..., errors[b])`` then write back the batched scalars from those the program
    returned (its scalar parameters, in order), as lines of the entry's loop over elements; a
    scalar's saved result is the one-element slice of its ``out_`` array (of its ``dout_`` array, its
    tangent's). Returns the arguments' description (``_described``)."""
    indent = "        "
    scalar_names = {p.name for p in params if p.scalar}

    def outs(prefix: str, names: tuple) -> list:
        return [(f"{prefix}{name}[_b:_b + 1]", (prefix + name, ELEMENT_SLICE)) if name in scalar_names else
                (f"{prefix}{name}[_b]", (prefix + name, ELEMENT)) for name in names]

    args = [_element(p) for p in params] + outs("out_", saved) + [_element(p) for p in tangents] + \
        outs("dout_", tangent_saved) + [("_errors[_b]", ("_errors", ELEMENT))]
    scalars = [p for p in list(params) + list(tangents) if p.scalar]
    call = f"_call_at(_program_at, {fn}, {', '.join(a for a, _ in args)})"
    lines.append(f"{indent}_r = {call}" if scalars else f"{indent}{call}")
    for k, p in enumerate(scalars):
        if p.batched:
            lines.append(f"{indent}{p.name}[_b] = _r[{k}]")
    return [d for _, d in args]


def _described(program: str, arguments: list) -> list:
    """The module lines naming the program an entry calls through ``_call_at`` and where each of its
    arguments comes from (``ir/entries.py``): ``runtime/program_calls.py`` finds its types there."""
    return [f"_PROGRAM = {program!r}  # called through its address; its arguments come from the entry's:",
            f"_PROGRAM_ARGUMENTS = {tuple(arguments)!r}"]


def _unpack(names: list) -> str:
    """The line that takes a worker's arguments out of the tuple its entry passed on."""
    return f"    {', '.join(names)}{',' if len(names) == 1 else ''} = _args"


def _entry_names(params: list, grads: list, saved: tuple, tangents: list, tangent_saved: tuple) -> list:
    """The arguments of a program run by a batched entry, in order: parameters, gradients, the saved
    outputs ``out_<p>``, then (tangent programs) the tangents and the saved outputs' ``dout_<p>``."""
    return ([p.name for p in params + grads] + [f"out_{name}" for name in saved] + [p.name for p in tangents] +
            [f"dout_{name}" for name in tangent_saved])


def _arguments(names: list) -> str:
    return f"({', '.join(names)}{',' if len(names) == 1 else ''})"


def batch_source(entry: str, program: str, params: list, grads: list, header: str, saved: tuple = (),
                 tangents: list = (), tangent_saved: tuple = ()) -> str:
    """Source of ``entry(_lo, _hi, params..., grads..., out_<saved>...)``: run ``program`` on batch
    elements ``_lo`` to ``_hi``, each marked in its record as started (field STARTED, read when an
    exception leaves the loop). A fused vjp program takes ``params + grads + saved`` (``saved``: the
    parameters whose forward results it copies out before its adjoint half restores them); others
    take ``params``. A tangent program takes those, then ``tangents`` and ``dout_<tangent_saved>``:
    the tangent of each of its parameters, in order."""
    batched = [p for p in params + grads + list(tangents) if p.batched]
    if not batched:
        raise ValueError("a batched entry needs at least one batched parameter")
    names = _entry_names(params, grads, saved, list(tangents), tangent_saved)
    body: list = []
    arguments = _call(body, program, params + grads, saved, list(tangents), tangent_saved)
    lines = [header, "import numpy as np", ""] + _described(program, arguments) + [""]
    lines += ["", f"def {entry}(_lo, _hi, {', '.join(names + ['_errors'])}, _program_at):"]
    lines.append("    for _b in range(_lo, _hi):")
    lines.append(f"        _errors[_b, {STARTED}] = 1.0")
    lines += body
    lines += [f"    return ({', '.join(names)},)"]
    return "\n".join(lines) + "\n"


LANE_CHUNK = 64  # groups per chunk: lane buffers are allocated once per chunk


def lane_records(n: int, width: int) -> int:
    """Rows of the error table of a lane entry over n elements: one per element, then one per chunk
    (the record its groups share, where the caller can also set the interrupt field)."""
    groups = (n + width - 1) // width
    return n + (groups + LANE_CHUNK - 1) // LANE_CHUNK


def lane_batch_source(entry: str, program: str, params: list, grads: list, header: str, saved: tuple,
                      width: int, written: set, tangents: list = (), tangent_saved: tuple = ()) -> str:
    """Source of ``entry(_lo, _hi, ...)`` running ``program``, the lane version of a program
    (``backends/lanes/rewrite.py``), on groups of ``width`` batch elements: chunks ``_lo`` to ``_hi``
    of LANE_CHUNK groups. Each chunk allocates its lane buffers once (element axes, then lanes),
    copies each group's elements in, runs the program once per group and copies back the arrays in
    ``written``; the last group repeats its last element to fill its lanes. Each chunk runs in
    ``entry_groups``; 1 + the first element of the chunk, then of each group it runs, is in the chunk's
    record (field GROUP), where the caller finds the element a failed allocation stopped. The lane buffer of array ``a``
    is ``_lane_a``: no parameter begins with an underscore (``frontend/check.reserved``), so it meets
    neither a parameter nor the entry's own names (``_b``, ``_e``, ``_n``). The arguments are those of
    ``batch_source``: a tangent program's ``tangents`` and ``dout_<tangent_saved>`` follow the saved
    outputs, which (like those) the program writes whole before it reads them."""
    tangents = list(tangents)
    saved_outs, tangent_outs = [f"out_{name}" for name in saved], [f"dout_{name}" for name in tangent_saved]
    saved_names = set(saved_outs + tangent_outs)
    scalars = {p.name for p in params if p.scalar}
    scalar_outs = {o for o in saved_names if o.split("_", 1)[1] in scalars}  # a one-element array per element
    arrays = [p.name for p in params + grads + tangents if p.batched and not p.scalar] + saved_outs + tangent_outs
    first = next(p.name for p in params + grads if p.batched)
    names = _entry_names(params, grads, saved, tangents, tangent_saved)
    signature = ", ".join(names + ["_errors"])
    head = ["_c", "_n", "_groups", "_chunks", "_e"]
    lines = ["", "",
             f"def {entry}_{GROUPS}({', '.join(head)}, _args, _errors, _program_at):", _unpack(names)]
    for a in arrays:
        shape = f"(1, {width})" if a in scalar_outs else f"{a}.shape[1:] + ({width},)"
        lines.append(f"    _lane_{a} = np.empty({shape}, {a}.dtype)")
    lines += ["    for _g in range(_c * _groups // _chunks, (_c + 1) * _groups // _chunks):",
              f"        _b = _g * {width}",
              f"        _e[{GROUP}] = _b + 1"]
    for a in arrays:
        if a not in saved_names:
            lines.append(f"        _lanes_gather(_lane_{a}, {a}, _b)")
    args, described, position, results = [], [], 0, []  # position: among the returned scalars (one per lane)
    for group, group_outs in ((params + grads, saved_outs), (tangents, tangent_outs)):
        for p in group:
            if p.batched and p.scalar:
                args += [f"{p.name}[min(_b + {k}, _n - 1)]" for k in range(width)]
                described += [(p.name, ELEMENT)] * width
                results.append((p.name, position))
                position += width
            else:
                args.append(f"_lane_{p.name}" if p.batched else p.name)
                described.append((p.name, LANE_BUFFER if p.batched else AS_IS))
                position += p.scalar
        args += [f"_lane_{o}" for o in group_outs]
        described += [(o, SCALAR_LANE_BUFFER if o in scalar_outs else LANE_BUFFER) for o in group_outs]
    call = f"_call_at(_program_at, {program}, {', '.join(args + ['_e'])})"
    described.append(("_errors", CHUNK_RECORD))
    lines.append(f"        _r = {call}" if position else f"        {call}")
    for a in arrays:
        if a in written or a in saved_names:
            lines.append(f"        _lanes_scatter(_lane_{a}, {a}, _b)")
    for name, at in results:
        for k in range(width):
            lines.append(f"        if _b + {k} < _n:")
            lines.append(f"            {name}[_b + {k}] = _r[{at + k}]")
    lines += ["        if _e[0] != 0.0:  # a failed check: its lane names the element",
              "            _errors[min(_b + int(_e[1]), _n - 1), :] = _e",
              "            _e[:] = 0.0"]
    lines += ["", "",
              f"def {entry}(_lo, _hi, {signature}, _program_at):",
              f"    _n = {first}.shape[0]",
              f"    _groups = (_n + {width - 1}) // {width}",
              f"    _chunks = (_groups + {LANE_CHUNK - 1}) // {LANE_CHUNK}",
              "    _records = _errors[_n:]  # the chunks' own records: rows the caller added (lane_records)",
              f"    _args = {_arguments(names)}",
              "    for _c in range(_lo, _hi):",
              "        _e = _records[_c]"]
    lines.append(f"        _e[{GROUP}] = (_c * _groups // _chunks) * {width} + 1  # its lane buffers' allocation")
    lines.append(f"        {entry}_{GROUPS}({', '.join(head)}, _args, _errors, _program_at)")
    lines += [f"    return ({', '.join(names)},)"]
    return "\n".join([header, "import numpy as np", ""] + _described(program, described) + lines) + "\n"
