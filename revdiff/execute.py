"""The call driver: every call of a reversible function takes this one path from the API (``f(*args)``,
``revdiff.vjp``, ``jvp``, ``vjp_jvp``, ``revdiff.batched``) to a target; beside it, ``run_owned`` runs
a single-call program found here for the warm calls of ``revdiff.programs``' plans.

``execute(f, kind, args, cotangents, tangents, batch=...)`` checks the arguments, finds what runs them
and runs it: one call on the CPU runs a compiled program (found with one dictionary lookup on the kinds
of its arguments, ``calls.compiled``); one call on GPU arrays runs as a batch of one; a call, value or
vjp of a batch of one on the CPU runs the single-call program on its element (``Batching.one_element``,
one lookup too); other batches run the entry ``Batching.run`` picks (one element per iteration, SIMD
lanes, CUDA kernels). Each program's parameters are laid out by ``ir/signature.py``: results are read from
it, never counted here.
"""
from __future__ import annotations

import functools
from typing import Any, Iterable, Sequence

import numpy as np

from revdiff.batching import Batching, OneElement, is_array
from revdiff.calls import (ERROR_RECORD, Compiled, Reversible, argument_kinds, check_array_cotangent, check_count,
                           checked_tangents, compiled, copy_value, cotangent, cotangent_value, in_dtype_of, run,
                           scalar_expected, zero_like)
from revdiff.ir.entries import SkippedCopies, entry_argument
from revdiff.ir.signature import TANGENTS
from revdiff.runtime.device import any_on_device, cupy_module, on_device
from revdiff.targets.llvm.entry_calls import NativeProgram
from revdiff.user_names import as_written

#: the kinds of call: "call" runs the function, "vjp" also its adjoint (one call: returns a pullback;
#: a batch: takes the cotangents), "jvp" its tangent program, "vjp_jvp" the tangent of the fused vjp;
#: batches also take "value" (``BatchedFunction.value``: the fused vjp's forward half) and "value_jvp"
#: (its tangent)
KINDS = ("call", "vjp", "jvp", "vjp_jvp")


def execute(f: Reversible, kind: str, args: tuple, cotangents: Sequence | None = None,
            tangents: Sequence | None = None, *, batch: Batching | None = None, donate: bool = False,
            wrt: Iterable[str] | None = None):
    """Run ``f`` on ``args`` (bound to its parameters). One call (``batch`` None): "call" runs in place
    and returns every parameter's final value; "vjp" runs on copies and returns (outs, pullback);
    "jvp" (outs, out_tangents); "vjp_jvp" (outs, grads, out_tangents, grad_tangents). A batch: the
    same, "vjp" with its ``cotangents`` returning (outs, grads), those of parameters not in ``wrt``
    (when given) None; ``donate``: run on the arrays given."""
    if batch is not None:
        return _batched(batch, kind, args, cotangents, tangents, donate, wrt)
    kinds = argument_kinds(args)
    if kinds is None and any_on_device(args):
        return _on_device(f, kind, args, cotangents, tangents)
    if kind == "call":
        c = compiled(f, f.programs[0], args, kinds)
        f.validate(args)
        return run(c.program, args, partial=c.note)
    if kind == "vjp":
        return _vjp(f, args, kinds)
    if kind == "jvp":
        c = compiled(f, TANGENTS[f.programs[0]], args, kinds)
        dargs = checked_tangents(f, args, c.types, tangents, "jvp")
        f.validate(args)
        result = run(c.program, tuple(copy_value(a) for a in args) + dargs)
        return _spread(c, result, "value"), _spread(c, result, "d_value")
    if kind == "vjp_jvp":
        return _vjp_jvp(f, args, cotangents, tangents, kinds)
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


def _spread(c: Compiled, result: tuple, role: str) -> tuple:
    """Per parameter of the function, the program's final value of its ``role`` slot (None: none)."""
    values = [None] * len(c.types)
    for s, value in zip(c.signature.slots, result):
        if s.role == role:
            values[s.position] = value
    return tuple(values)


def _vjp(f: Reversible, args: tuple, kinds) -> tuple:
    """One call's (outs, pullback): the forward program on copies of ``args``; the pullback runs the
    adjoint program of the same specialisation from the final values, which it does not keep otherwise."""
    c = compiled(f, f.programs[0], args, kinds)
    f.validate(args)
    outs = run(c.program, tuple(copy_value(a) for a in args))
    names = f.parameter_names

    def pullback(*cotangents: Any) -> tuple:
        check_count(f, "pullback", cotangents)
        adjoint = compiled(f, f.programs[1], outs, kinds)
        if adjoint.spec is not c.spec:  # a global changed since the forward ran: its own adjoint, not cached
            adjoint = c.sibling(f.programs[1])
        seeds = tuple(cotangent(names[s.position], outs[s.position], cotangents[s.position])
                      for s in adjoint.signature.slots if s.role == "gradient")
        result = run(adjoint.program, tuple(copy_value(o) for o in outs) + seeds)
        return _spread(adjoint, result, "gradient")

    return tuple(outs), pullback


def _vjp_jvp(f: Reversible, args: tuple, cotangents: Sequence, tangents: Sequence, kinds) -> tuple:
    """One call of the tangent of the fused vjp: its saved outputs are the final values (the adjoint
    half restores the inputs, copies of the caller's), and their tangents the final values' tangents."""
    c = compiled(f, TANGENTS[f.fused_vjp], args, kinds)
    dargs = checked_tangents(f, args, c.types, tangents, "vjp_jvp")
    f.validate(args)
    names = f.parameter_names
    slots = c.signature.slots
    call = []
    dargs_left = iter(dargs)
    for s in slots:
        a = args[s.position]
        if s.role == "value":
            call.append(copy_value(a))
        elif s.role == "gradient":
            call.append(cotangent(names[s.position], a, cotangents[s.position]))
        elif s.role in ("saved", "d_saved"):
            call.append(np.zeros(np.shape(a) or (1,), c.types[s.position].dtype))
        elif s.role == "d_value":
            call.append(next(dargs_left))
        else:  # d_gradient
            call.append(zero_like(a))
    result = run(c.program, tuple(call))
    outs, out_tangents = list(_spread(c, tuple(call), "value")), list(_spread(c, tuple(call), "d_value"))
    for s, value in zip(slots, call):  # what is not modified ends as it began
        if s.role == "saved":
            outs[s.position] = _from_one_element(value, args[s.position])
        elif s.role == "d_saved":
            out_tangents[s.position] = _from_one_element(value, args[s.position])
    return tuple(outs), _spread(c, result, "gradient"), tuple(out_tangents), _spread(c, result, "d_gradient")


def _from_one_element(value, like):
    """A program's output of parameter ``like``: an array as it is, a scalar from its one-element array."""
    if np.ndim(like):
        return value
    return value[0] if isinstance(like, np.generic) else value[0].item()


# ---------------------------------------------------------------- one call on GPU arrays: a batch of one

#: (function, batched parameters) -> its Batching, so that repeated calls (and a Hessian's columns)
#: reuse one compiled kernel module: the modules are cached per Batching
_BATCHES: dict = {}


def _on_device(f: Reversible, kind: str, args: tuple, cotangents, tangents):
    """One call where some arguments are GPU arrays, run as a batch of one by the batched CUDA
    entries: arrays gain a leading axis of length 1, and so do the scalars ``f`` modifies."""
    f.argument_types(args)  # what the CPU refuses (0-d arrays, unsupported dtypes), refused alike
    cp = cupy_module()
    modified = f.forward_function.modified_positions()
    names, wrapped = [], []
    for k, (p, a) in enumerate(zip(f.params, args)):
        if is_array(a):
            names.append(p)
            wrapped.append(cp.asarray(a)[None])
        elif k in modified:
            names.append(p)
            wrapped.append(cp.asarray([a]))
        else:
            wrapped.append(a)
    key = (f, tuple(names))
    if key not in _BATCHES:
        _BATCHES[key] = Batching(f, [f.parameter_names[f.params.index(p)] for p in names])
    bf, wrapped = _BATCHES[key], tuple(wrapped)

    def first(values: tuple) -> tuple:  # element 0: an array for an array argument, else a Python number
        return tuple(v if not is_array(v) else v[0] if is_array(a) else v[0].item() for v, a in zip(values, args))

    if kind == "call":
        return first(_batched(bf, "call", wrapped, None, None, False))
    if kind == "vjp":  # the pullback reruns the fused vjp from the inputs as they were: copies of them
        kept = _copies(wrapped, False)
        outs = first(_batched(bf, "call", wrapped, None, None, False))
        return outs, lambda *cts: first(_batched(bf, "vjp", kept, _one(bf, args, cts, "cotangent"), None, True)[1])
    if kind == "jvp":
        return tuple(first(v) for v in _batched(bf, "jvp", wrapped, None, _one(bf, args, tangents, "tangent"), False))
    return tuple(first(v) for v in _batched(bf, "vjp_jvp", wrapped, _one(bf, args, cotangents, "cotangent"),
                                            _one(bf, args, tangents, "tangent"), False))


def _one(bf: Batching, args: tuple, values, what: str):
    """Per-parameter cotangents or tangents (``what``) of one call as its batch of one reads them: those
    of batched parameters gain the leading axis of length one (None stays None). A sequence of the
    wrong length is passed on as it is, for the batch to refuse by name."""
    if not isinstance(values, (tuple, list)) or len(values) != len(args):
        return values
    out = []
    for p, shown, a, v in zip(bf.f.params, bf.f.parameter_names, args, values):
        if v is not None and p in bf.batched:
            if is_array(a):  # checked against the element, so that errors name its shape
                v = v if is_array(v) else np.asarray(cotangent_value(shown, v, what))
                check_array_cotangent(shown, a, v, what)
                v = v[None]
            elif is_array(v) or isinstance(v, (list, tuple)):
                raise scalar_expected(p, what)
            else:
                v = np.asarray(cotangent_value(p, v, what)).reshape(1)
        out.append(v)
    return tuple(out)


# ---------------------------------------------------------------- batches

#: the kind of a batched call -> the kind of the entry it runs
_ENTRY_KINDS = {"call": "call", "value": "value", "vjp": "vjp", "jvp": "jvp", "value_jvp": "value_jvp",
                "vjp_jvp": "hvp"}


def _batched(bf: Batching, kind: str, args: tuple, cotangents, tangents, donate: bool, wrt=None):
    """A batched call: the entry's arguments laid out slot by slot from its program signature, run by
    ``Batching.run``, and the per-parameter results read back by role (a shared parameter's
    gradients summed over the batch; a vjp's, of the parameters ``wrt`` names, when given)."""
    wanted = _wanted(bf.f, wrt)
    xp, args = _array_module(args)
    if xp is np and kind in ("call", "value", "vjp"):
        one = bf.one_element(kind, args)
        if one is not None:
            result = _one_element(bf, one, kind, args, cotangents, donate)
            return result if kind != "vjp" else (result[0], _only(result[1], wanted))
    types = bf._element_types(args)
    f = bf.f
    if kind in ("call", "value"):
        return bf.run(kind, types, _copies(args, donate), xp)
    if kind in ("vjp", "vjp_jvp"):
        check_count(f, kind, cotangents)
    copies = _copies(args, donate and kind == "vjp")
    differentiable = [k for k, t in enumerate(types) if t.differentiable]
    tangents_only = kind in ("jvp", "value_jvp")
    seeds = _seeds(bf, xp, copies, cotangents, types) if not tangents_only else {}
    dargs = dict(zip(differentiable, _tangents(f, xp, args, types, tangents, "jvp" if tangents_only else kind))) \
        if kind != "vjp" else {}
    entry = _ENTRY_KINDS[kind]
    signature = bf.program_signature(entry, types)
    arguments = []
    for s in signature.slots:
        k = s.position
        arguments.append(copies[k] if s.role == "value" else seeds[k] if s.role == "gradient" else
                         dargs[k] if s.role == "d_value" else xp.empty_like(copies[k]) if s.role == "saved" else
                         xp.zeros_like(seeds[k]) if s.role == "d_gradient" else xp.zeros_like(copies[k]))
    skipped = SkippedCopies()
    if kind == "vjp":  # the seeds of absent cotangents of batched parameters are the zeros ``_seeds`` made
        skipped = SkippedCopies(
            frozenset(entry_argument("gradient", p) for k, p in enumerate(f.params) if k not in wanted),
            frozenset(entry_argument("gradient", p) for k, p in enumerate(f.params)
                      if k in seeds and p in bf.batched and cotangents[k] is None))
    result = bf.run(entry, types, tuple(arguments), xp, skipped)
    final = {(s.role, s.position): value for s, value in zip(signature.slots, result)}
    # a shared parameter is never modified: it ends as it began (a jvp: in the type it came in)
    outs = tuple(final.get(("saved", k), final[("value", k)] if not tangents_only or p in bf.batched else args[k])
                 for k, p in enumerate(f.params))
    out_tangents = tuple(final.get(("d_saved", k), final.get(("d_value", k))) for k in range(len(args)))
    if tangents_only:
        return outs, out_tangents
    grads = tuple(_gradient(bf, p, copies[k], final[("gradient", k)]) if k in seeds else None
                  for k, p in enumerate(f.params))
    if kind == "vjp":
        return outs, _only(grads, wanted)
    grad_tangents = tuple(_gradient(bf, p, copies[k], final[("d_gradient", k)]) if k in seeds else None
                          for k, p in enumerate(f.params))
    return outs, grads, out_tangents, grad_tangents


def _wanted(f, wrt) -> frozenset:
    """The positions of the parameters ``wrt`` names (all when it is None); an unknown name raises."""
    if wrt is None:
        return frozenset(range(len(f.params)))
    if isinstance(wrt, str):
        raise TypeError(f"wrt must be a sequence of parameter names, got the string {wrt!r}")
    wrt = tuple(wrt)  # read twice below: an iterator once
    names = tuple(as_written(p) for p in f.params)
    unknown = [w for w in wrt if w not in names]
    if unknown:
        raise ValueError(f"wrt names {', '.join(map(repr, unknown))}, not parameters of {f.__qualname__} "
                         f"({', '.join(names)})")
    return frozenset(names.index(w) for w in wrt)


def _only(grads: tuple, wanted: frozenset) -> tuple:
    return tuple(g if k in wanted else None for k, g in enumerate(grads))


def _one_element(bf: Batching, one: OneElement, kind: str, args: tuple, cotangents, donate: bool) -> tuple:
    """A batch of one on the CPU ("call", "value" or "vjp"): the single-call program (the call, the
    fused vjp's forward half, or the fused vjp: ``Batching.one_element``) on element 0 of the batched
    arrays, slot by slot as its signature lays them out, with no batched entry to compile; the results
    are the batch-shaped arrays whose element-0 views it updated (scalars travel by value and are
    written back)."""
    f = bf.f
    if kind == "vjp":
        check_count(f, kind, cotangents)
    copies = _copies(args, donate)
    if donate:  # donated arrays are the caller's and may overlap; fresh copies cannot
        f.validate(copies)
    bf.last_paths[kind] = "one element"
    buffers = list(copies)  # per slot, the batch-shaped array (or shared value) it is element 0 of
    arguments = [a[0] if b else a for a, b in zip(copies, one.batched)]
    seeds = _seeds(bf, np, copies, cotangents, one.program.types) if kind == "vjp" else {}
    for role, k, scalar in one.extra_slots:  # the fused vjp's gradients and saved results
        buffer = seeds[k] if role == "gradient" else np.empty_like(copies[k])  # saved: of batched parameters
        buffers.append(buffer)
        arguments.append(buffer[0:1] if scalar and role == "saved" else buffer[0].item() if scalar else buffer[0])
    # a failure names no half-updated argument: copies are ours, and donated arrays hold scratch values
    # after a failure (``BatchedFunction.__call__``)
    result = run(one.program.program, tuple(arguments), element=0, typed=one.typed)
    for i in one.written_back:  # scalars come back by value: final values, gradients, restored inputs
        buffers[i][0] = result[i]
    if kind != "vjp":
        return tuple(buffers)
    return _by_role(one, buffers, lambda k, g: _gradient(bf, f.params[k], copies[k], g))


def _by_role(one: OneElement, buffers: list, gradient) -> tuple:
    """(outs, grads) of a fused vjp's single-call run from its slots' ``buffers``: the parameters'
    own, then a saved final value or a gradient (``gradient(k, buffer)``) per extra slot."""
    n = len(buffers) - len(one.extra_slots)
    outs, grads = list(buffers[:n]), [None] * n
    for (role, k, _), buffer in zip(one.extra_slots, buffers[n:]):
        if role == "saved":
            outs[k] = buffer
        else:
            grads[k] = gradient(k, buffer)
    return tuple(outs), tuple(grads)


def runs_owned(one: OneElement) -> bool:
    """Whether ``run_owned`` can run ``one``: compiled machine code found by its arguments' kinds,
    with arrays for every parameter and slot and no while loop (which runs where Ctrl-C can stop it)."""
    program = one.program.program
    return (one.typed and isinstance(program, NativeProgram) and not program.revdiff_loops
            and all(t.ndim for t in one.program.types))  # an extra slot is a parameter's: arrays too


def run_owned(bf: Batching, one: OneElement, kind: str, args: tuple, cotangents: tuple) -> "tuple | None":
    """``_one_element`` for a caller that owns every array the program writes (fresh outputs; inputs
    it does not write), without their batch axis, for a ``one`` that ``runs_owned`` (the plans of
    ``revdiff.programs``): no copies, aliasing checks or batch axes around the program. Returns the
    final arguments ("call", "value") or (outs, grads) ("vjp": ``cotangents``, one per parameter,
    None for zero, copied as its seeds), or None where the program's checks failed: the caller's
    checked path then raises the error."""
    bf.last_paths[kind] = "one element"
    arguments = list(args)
    for role, k, _ in one.extra_slots:
        c = cotangents[k] if role == "gradient" else None
        arguments.append(c.copy() if c is not None else
                         np.zeros(args[k].shape, args[k].dtype) if role == "gradient" else np.empty_like(args[k]))
    record = np.zeros(ERROR_RECORD)
    one.program.program.call_typed(*arguments, record)
    if record[0]:
        return None
    return tuple(arguments) if kind != "vjp" else _by_role(one, arguments, lambda k, g: g)


def _gradient(bf: Batching, p: str, a, g):
    """A parameter's gradient from the entry's per-element gradients: a shared one's summed."""
    return g if p in bf.batched else _shared_sum(g, a)


def _seeds(bf: Batching, xp, copies: tuple, cotangents: Sequence, types: tuple) -> dict:
    """Position -> the checked cotangent of that float parameter's final value, per element: a
    shared parameter's on element 0, zeros on the others (its gradient is the sum over the batch;
    for an empty batch, which runs nothing, its one row holds that gradient: the cotangent itself)."""
    names = bf.f.parameter_names
    seeds = {}
    for k, t in enumerate(types):
        if t.differentiable:
            a, c = copies[k], cotangents[k]
            g = cotangent(names[k], a, c) if xp is np else _device_cotangent(xp, names[k], a, c)
            if bf.f.params[k] not in bf.batched:  # element 0 carries the cotangent of the unchanged final value
                per_element = xp.zeros((max(bf._size(copies), 1),) + tuple(np.shape(g)), t.dtype)
                per_element[0] = g
                g = per_element
            seeds[k] = g
    return seeds


def _tangents(f: Reversible, xp, args: tuple, types: tuple, tangents: Sequence, what: str) -> tuple:
    """``checked_tangents``, on the GPU for GPU arguments."""
    convert = cotangent if xp is np else functools.partial(_device_cotangent, xp)
    return checked_tangents(f, args, types, tangents, what, convert)


def _array_module(args: tuple) -> tuple:
    """NumPy, or CuPy when any argument lives on a GPU (then host arrays are moved there too)."""
    if not any_on_device(args):
        return np, args
    cp = cupy_module()
    return cp, tuple(cp.asarray(a) if is_array(a) else a for a in args)


def _device_cotangent(xp, name: str, out: Any, ct: Any, what: str = "cotangent") -> Any:
    """``cotangent`` where the arguments live on the GPU: ``ct`` checked against the value ``out``
    (shape; complex into real refused) and given its type, a fresh copy (on the GPU for an array)."""
    if ct is None:
        return xp.zeros(out.shape, out.dtype) if is_array(out) else zero_like(out)
    if not is_array(out):  # a scalar: the host's rules
        return cotangent(name, out, xp.asnumpy(ct) if on_device(ct) else ct, what)
    if not is_array(ct):
        cotangent_value(name, ct, what)
    ct = xp.asarray(ct)
    check_array_cotangent(name, out, ct, what)
    return in_dtype_of(xp, name, out, ct, what)


def _shared_sum(per_element, like: Any) -> Any:
    """A shared parameter's gradient: the per-element gradients summed, in the type of its value ``like``."""
    total = per_element.sum(axis=0)
    if is_array(like):
        return total
    value = total.item()
    return type(like)(value) if isinstance(like, (float, complex)) else np.asarray(like).dtype.type(value)


def _copies(args: tuple, donate: bool) -> tuple:
    """The arrays the programs run on in place: ``args`` themselves when donated (read-only NumPy
    arrays, such as JAX hands its callbacks, are still copied: the entries write back), else copies."""
    def read_only(a: Any) -> bool:
        return isinstance(a, np.ndarray) and not a.flags.writeable
    return tuple(a.copy() if is_array(a) and (not donate or read_only(a)) else a for a in args)
