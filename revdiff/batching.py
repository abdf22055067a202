"""How a batch runs: a reversible function mapped over the leading axis of some of its parameters
(``revdiff.batched``), each kind of call ("call", "value", "vjp", "jvp", "hvp") as one generated
entry that loops over a range of the batch, split among threads: no Python work per element. Small
real elements run in SIMD lanes (``revdiff/targets/lanes/rewrite.py``: groups of 8 float64 or float32
elements side by side, bit-identical to one element at a time); a call, value or vjp of a batch of
one on the CPU runs the ordinary single-call program (``one_element``); GPU arrays run as CUDA kernels
(``targets/cuda/programs.py``). The call driver (``execute.py``) checks the arguments and builds the
entry's argument list; ``Batching.run`` picks the target and runs it.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from revdiff.targets.python.emit import emit_module
from revdiff.calls import ERROR_RECORD, Compiled, Reversible, argument_kinds, blas_for, compiled, current, run
from revdiff.targets.cuda.programs import run_on_device
from revdiff.ir.entries import EntrySignature, SkippedCopies, entry_argument
from revdiff.ir.signature import ProgramSignature, entry_program, entry_signature, program_signature
from revdiff.targets.batch_entries import element_entry, entry_names, lane_records
from revdiff.ir.graph import ascii_name, symbol
from revdiff.targets.lanes.modules import LANE_MIN_BATCH, NotLaneable, compile_lanes, lane_module_source, lane_width
from revdiff.ir.types import VarType, array_type, type_of_value
from revdiff.runtime.device import on_device
from revdiff.runtime.threads import blas_single_threaded
from revdiff.user_names import as_written, escaped



LAYOUTS = ("auto", "lanes", "elements")


class Batching:
    """``f`` mapped over the leading axis of the parameters named in ``batched``. ``layout``: "lanes"
    runs groups of elements in SIMD lanes, "elements" one element per iteration, "auto" lanes
    where they apply and pay (real data, arrays of at most LANE_MAX_ELEMENTS entries per element,
    batches of at least LANE_MIN_BATCH, control flow that does not depend on the data), else elements."""

    def __init__(self, f: Reversible, batched: Sequence[str], layout: str = "auto"):
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        self.layout = layout
        batched = (batched,) if isinstance(batched, str) else tuple(batched)
        unknown = [b for b in batched if b not in f.parameter_names]
        if unknown:
            raise ValueError(f"{', '.join(map(repr, unknown))} is not a parameter of {f.__qualname__} "
                             f"({', '.join(f.parameter_names)})")
        if not batched:
            raise ValueError("name at least one batched parameter")
        self.f = f
        self.batched = frozenset(escaped(b) for b in batched)  # as compiled, as ``f.params``
        self._entries: dict = {}
        self._signatures: dict = {}
        self._types: dict = {}  # argument kinds -> (function version, batched positions, element types)
        self._program_signatures: dict = {}
        self._one_element: dict = {}  # (kind, argument kinds) -> OneElement
        #: how the last run of each entry kind ran: "one element", "SIMD lanes of 8", "elements on
        #: threads, BLAS", ... (a report, ``programs.api.last_run``)
        self.last_paths: dict = {}

    def __repr__(self) -> str:
        return f"<batched {self.f!r} over {', '.join(sorted(map(as_written, self.batched)))}>"

    # ---------------------------------------------------------------- checking arguments

    def _element_types(self, args: tuple) -> tuple:
        """The type of each parameter within one element; TypeError or ValueError for arguments a
        batch cannot take. Arguments of kinds seen before (``calls.argument_kinds``) whose batch
        sizes agree are typed with one lookup."""
        f = self.f
        kinds = argument_kinds(args) if len(args) == len(f.params) else None
        known = self._types.get(kinds) if kinds is not None else None
        if known is not None and known[0] is f.forward_function._version and f.forward_function.unchanged() \
                and len({args[k].shape[0] for k in known[1]}) == 1:
            return known[2]
        version = f.forward_function._version  # before typing: a version changed meanwhile types again
        types = self._checked_element_types(args)
        if kinds is not None:
            self._types[kinds] = (version, [k for k, p in enumerate(f.params) if p in self.batched], types)
        return types

    def _checked_element_types(self, args: tuple) -> tuple:
        f = self.f
        if len(args) != len(f.params):
            raise TypeError(f"{f.__qualname__}() takes {len(f.params)} arguments ({', '.join(f.parameter_names)}), "
                            f"got {len(args)}")
        size = None
        types = []
        for name, shown, a in zip(f.params, f.parameter_names, args):
            if name in self.batched:
                if not is_array(a) or a.ndim < 1:
                    raise TypeError(f"batched argument '{shown}' must be an array with a leading batch axis")
                if size is not None and a.shape[0] != size[1]:
                    raise ValueError(f"batched arguments '{size[0]}' and '{shown}' have batch sizes {size[1]} "
                                     f"and {a.shape[0]}")
                size = size or (shown, a.shape[0])
                dtype = np.dtype(a.dtype)
                types.append(array_type(dtype, a.ndim - 1) if a.ndim > 1 else type_of_value(dtype.type(0)))
            elif is_array(a):
                if a.ndim == 0:  # as a single call refuses it (``type_of_value``): a kernel takes a scalar by value
                    raise TypeError(f"argument '{shown}' of {f.__qualname__}(): 0-d arrays are not supported; "
                                    "pass a Python or NumPy scalar")
                types.append(array_type(np.dtype(a.dtype), a.ndim))
            else:
                try:
                    types.append(type_of_value(a))
                except TypeError as exc:
                    raise TypeError(f"argument '{shown}' of {f.__qualname__}(): {exc}") from None
        modified = f.forward_function.modified_positions()
        for k, (name, shown) in enumerate(zip(f.params, f.parameter_names)):
            if k in modified and name not in self.batched:
                raise ValueError(f"'{shown}' is modified by {f.__qualname__}, so every element needs its own: "
                                 "name it among the batched parameters")
        return tuple(types)

    def one_element(self, kind: str, args: tuple) -> "OneElement | None":
        """How a ``kind`` ("call", "value" or "vjp") of a batch of one runs on element 0 of the batched
        arrays: the single-call program (the call, the fused vjp's forward half, or the fused vjp) and
        its slots (``OneElement``); None for
        a batch of another size. TypeError or ValueError, as the batch's checks raise them, for
        arguments a batch cannot take. A batch of one whose arguments have the kinds of an earlier
        one's is answered with one lookup; other sizes are checked anew on every call."""
        kinds = argument_kinds(args) if len(args) == len(self.f.params) else None
        found = self._one_element.get((kind, kinds)) if kinds is not None else None
        if found is not None and current(self.f, found.program):
            return found if all(args[k].shape[0] == 1 for k in found.positions) else None
        self._element_types(args)  # the batch's checks, which name what is wrong
        if self._size(args) != 1:
            return None
        batched = tuple(p in self.batched for p in self.f.params)
        element = tuple(a[0] if b else a for a, b in zip(args, batched))
        c = compiled(self.f, entry_program(self.f, kind), element)
        slots = c.signature.slots
        found = OneElement(c, batched, tuple(k for k, b in enumerate(batched) if b),
                           tuple((s.role, s.position, c.types[s.position].ndim == 0) for s in slots[len(element):]),
                           tuple(i for i, s in enumerate(slots) if s.role != "saved" and c.types[s.position].ndim == 0
                                 and (s.role != "value" or batched[s.position])), kinds is not None)
        if kinds is not None:
            self._one_element[(kind, kinds)] = found
        return found

    def program_signature(self, kind: str, types: tuple) -> ProgramSignature:
        """The signature of the program the ``kind`` entry runs on elements of ``types`` (the last one
        asked for each kind kept, for the warm calls that ask again)."""
        forward = self.f.forward_function
        kept = self._program_signatures.get(kind)
        if kept is not None and kept[0] is types and kept[1] is forward._version and forward.unchanged():
            return kept[2]
        version = forward._version  # before reading what the function modifies, as ``_element_types``
        signature = program_signature(entry_program(self.f, kind), types, forward.modified_positions())
        self._program_signatures[kind] = (types, version, signature)
        return signature

    def signature(self, kind: str, types: tuple) -> EntrySignature:
        """The program, parameters, gradient buffers and saved outputs of the ``kind`` entry."""
        key = (kind, types, frozenset(self.f.forward_function.modified_positions()))
        found = self._signatures.get(key)
        if found is None:
            found = self._signatures[key] = entry_signature(self.f, self.batched, kind, types)
        return found

    # ---------------------------------------------------------------- generated entries

    def lanes(self, kind: str, types: tuple, arrays: tuple) -> int | None:
        """The lane width the entry ``kind`` runs these arguments with, or None (one element per
        iteration). With layout "lanes", a program that cannot run in lanes raises ValueError."""
        return self._lane_entry(kind, types, arrays)[1]

    def _lane_entry(self, kind: str, types: tuple, arrays: tuple, skipped: SkippedCopies = SkippedCopies()) -> tuple:
        """(compiled lane entry, lane width) for these entry arguments (C-ordered), or (None, None),
        leaving out the copies ``skipped`` names."""
        if self.layout == "elements":
            return None, None
        width = self._lane_width(types, required=self.layout == "lanes")
        if self.layout == "auto" and (width is None or self._blas(arrays)  # lanes never call BLAS
                                      or self._size(arrays) < LANE_MIN_BATCH):
            return None, None
        entry_types = _entry_types(self.signature(kind, types), arrays, types)
        key = ("lanes", kind, types, tuple(entry_types.items()), self.f.forward_function.version(), skipped)
        if key not in self._entries:
            try:
                self._entries[key] = (compile_lanes(self, kind, types, width, entry_types, skipped), width)
            except NotLaneable as exc:
                if self.layout == "lanes":
                    raise self._refusal(exc) from None
                self._entries[key] = (None, None)
        return self._entries[key]

    def _lane_width(self, types: tuple, required: bool) -> int | None:
        width = lane_width(types, tuple(p in self.batched for p in self.f.params))
        if width is None and required:
            raise ValueError(f"SIMD lanes need real float32 or float64 batched arguments "
                             f"({', '.join(t.describe() for t in types)})")
        return width

    def _refusal(self, exc: NotLaneable) -> ValueError:
        return ValueError(f"{self.f.__qualname__} cannot run in SIMD lanes: {exc}")

    def entry(self, kind: str, types: tuple, arrays: tuple, blas: bool = True):
        """The compiled batched entry ``kind`` ("call", "vjp", "jvp" or "hvp": the tangent of the
        fused vjp) for element types ``types`` and the entry arguments ``arrays``, one element per
        iteration; ``blas``: programs with BLAS branches (``calls.blas_for``)."""
        sig = self.signature(kind, types)
        entry_types = _entry_types(sig, arrays, types)
        version = self.f.forward_function.version()  # a changed global compiles anew
        key = (kind, types, tuple(entry_types.items()), blas, version)
        fn = self._entries.get(key)
        if fn is None:
            low, header = self._element_entry(kind, types, entry_types, blas)
            fn = self._entries[key] = self.f.forward_function.specialize(types, blas).native.batch_entry(
                sig.program, low, header)
        return fn

    def _element_entry(self, kind: str, types: tuple, entry_types: dict, blas: bool) -> tuple:
        spec = self.f.forward_function.specialize(types, blas)
        sig = self.signature(kind, types)
        low = spec.native.low(sig.program)
        name = f"{ascii_name(self.f.__name__)}_batch_{kind}"
        header = (f"Generated by revdiff: {kind} of {self.f.__qualname__} over a batch of "
                  f"{', '.join(sorted(self.batched))} (leading axis), in parallel; element types "
                  f"({', '.join(f'{p}: {t.describe()}' for p, t in zip(self.f.params, types))}).")
        entry = element_entry(name, symbol(spec, sig.program), sig, tuple(low.param_types[p] for p in low.params),
                              entry_types)
        return entry, header

    def lane_source(self, kind: str, types: tuple, arrays: tuple | None = None) -> str:
        """Generated source of the entry ``kind`` in SIMD lanes (the Python rendering): the lane
        versions of the programs and the entry that copies each group of elements into lane buffers.
        ``arrays``: example entry arguments (default: C-ordered arrays of the element types). Raises
        ValueError when the program cannot run in lanes."""
        sig = self.signature(kind, types)
        entry_types = _entry_types(sig, arrays or (), types)
        try:
            return lane_module_source(self, kind, types, self._lane_width(types, required=True), entry_types)
        except NotLaneable as exc:
            raise self._refusal(exc) from None

    def source(self, kind: str, types: tuple, blas: bool = True, arrays: tuple | None = None,
               backend: str = "python") -> str:
        """Generated source of the batched entry (one element per iteration): "call" runs the
        function, "vjp" runs it and its adjoint, "jvp" its tangent program and "hvp" the tangent of
        the fused vjp; as Python (the low IR printed), or ``backend="llvm"`` the LLVM module compiled."""
        sig = self.signature(kind, types)
        entry_types = _entry_types(sig, arrays or (), types)
        low, header = self._element_entry(kind, types, entry_types, blas)
        if backend == "llvm":
            return self.f.forward_function.specialize(types, blas).native.batch_entry_module(sig.program, low, header)
        return emit_module([low], "\n".join("# " + line for line in header.splitlines()))

    def run(self, kind: str, types: tuple, arrays: tuple, xp, skipped: SkippedCopies = SkippedCopies()) -> tuple:
        """Run an entry in place on ``arrays`` (CPU: parts of the batch on threads; GPU: one thread per element). An
        empty batch has nothing to run: its final values are its initial ones, its gradients zero.
        ``skipped``: entry arguments the caller will not read, or made zero, which SIMD lanes do not copy
        out, or in."""
        size = self._size(arrays)
        if size == 0:
            return arrays
        self.f.validate(arrays[:len(self.f.params)])  # and so their elements, which the programs run on
        if xp is not np:
            self.last_paths[kind] = "GPU, one thread per element"
            run_on_device(self, kind, list(arrays), types)
            return arrays
        contiguous = tuple(np.ascontiguousarray(a) if isinstance(a, np.ndarray) else a for a in arrays)
        entry, width = self._lane_entry(kind, types, contiguous, skipped)
        if entry is not None:  # index checks run uniformly for every lane group
            self.last_paths[kind] = f"SIMD lanes of {width}"
            records = lane_records(size, width)  # then one per chunk of groups
            result = run(entry, contiguous, np.zeros((records, ERROR_RECORD)), elements=size, units=records - size)
            # the lanes ran on C-ordered copies of the others (Fortran-ordered, strided): their final values
            # go back into the arrays given, which the caller returns (and donated arrays must hold)
            return tuple(_copied_back(a, final) for a, final in zip(arrays, result))
        blas = self._blas(arrays)
        self.last_paths[kind] = "elements on threads" + (", BLAS" if blas else "")
        entry = self.entry(kind, types, arrays, blas)
        # the batch's threads share the cores, so BLAS calls must not add theirs (threads BLAS woke
        # earlier would spin beside the batch's workers). A failed check, a division by zero and a negative
        # ancilla size included, lands in the element's error record: nothing raises inside the loop.
        with blas_single_threaded():
            return run(entry, arrays, np.zeros((size, ERROR_RECORD)))

    def _blas(self, arrays: tuple) -> bool:
        """``blas_for`` one element: the batched arrays without their batch axis, the shared ones whole."""
        return blas_for((), (math.prod(a.shape[1:]) if p in self.batched else np.size(a)
                             for p, a in zip(self.f.params, arrays) if is_array(a)))

    def _size(self, args: tuple) -> int:
        return next(a.shape[0] for p, a in zip(self.f.params, args) if p in self.batched)


class OneElement(NamedTuple):
    """A batch of one as the single-call program ``program`` runs it. ``batched``: per parameter,
    whether it has the batch axis; ``positions``: the indices of those that do; ``extra_slots``:
    the program's slots after the function's parameters (a fused vjp's gradients and saved
    results) as (role, parameter position, whether a scalar); ``written_back``: the indices of the
    slots whose scalar final values go back into their batch arrays. ``typed``: found by the
    arguments' kinds (``calls.argument_kinds``), so the program runs without checking their types."""
    program: Compiled
    batched: tuple
    positions: tuple
    extra_slots: tuple
    written_back: tuple
    typed: bool


def _entry_types(sig: EntrySignature, arrays: tuple, types: tuple) -> dict:
    """The VarType of every argument of a batched entry: of ``arrays`` as given (batched ones with
    their batch axis, in their own dtype), and for those not given, C-ordered arrays of the element
    ``types`` (to read an entry's source without arguments)."""
    elements = dict(zip([p.name for p in sig.params], types))
    argument_of = {a.name: (a.of, a.batched) for a in sig.params + sig.grads + list(sig.tangents)}
    argument_of.update({entry_argument(role, p): (p, True) for role, names in (("saved", sig.saved),
                                                                             ("d_saved", sig.tangent_saved))
                        for p in names})
    out = {}
    for k, name in enumerate(entry_names(sig)):
        if k < len(arrays):
            a = arrays[k]
            out[name] = array_type(np.dtype(a.dtype), a.ndim) if isinstance(a, np.ndarray) else type_of_value(a)
            continue
        of, batched = argument_of[name]
        t = elements[of]
        out[name] = VarType(t.kind, t.ndim + 1, t.dtype) if batched else t
    return out


def is_array(a: Any) -> bool:
    return isinstance(a, np.ndarray) or on_device(a)


def _copied_back(given, final):
    """``given`` holding ``final``, its value after a lane entry ran on a C-ordered copy of it (a read-only
    one is an input the program does not modify: the driver copies the others)."""
    if isinstance(given, np.ndarray) and final is not given and given.flags.writeable:
        given[...] = final
        return given
    return final


