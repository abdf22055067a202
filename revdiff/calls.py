"""Calling generated programs: which variant an argument set runs (``blas_for``; ``compiled``: found
with one lookup on the kinds of the arguments), the call itself
(in a thread where while loops may need Ctrl-C), the error record it fills turned into the user's
exception, and cotangents checked against the outputs they belong to."""
from __future__ import annotations

import functools
import numbers
import threading
from typing import Any, Iterable, NamedTuple, Protocol

import numpy as np

from revdiff.ir.signature import ProgramSignature, program_signature
from revdiff.errors import ReversibilityError
from revdiff.ir import checks
from revdiff.primitives.vector import BLAS_MIN_ELEMENTS
from revdiff.runtime import loader, workers
from revdiff.targets.llvm.entry_calls import NativeProgram
from revdiff.runtime.device import may_share_memory, on_device, writeable
from revdiff.runtime.threads import batch_threads


def blas_for(args: Iterable, element_sizes: Iterable[int] = ()) -> bool:
    """Whether calls on ``args`` (or on arrays of ``element_sizes`` entries) run the programs with
    BLAS branches: only when an array has more than BLAS_MIN_ELEMENTS entries. Views of smaller
    arrays never reach BLAS's threshold, so their programs compile to loops only: a third less code
    to compile, the same results. Forward, inverse and adjoint see the same shapes, hence the same
    choice; an ancilla larger than every argument then runs loops too."""
    sizes = [a.size for a in args if isinstance(a, np.ndarray)] + list(element_sizes)
    return any(size > BLAS_MIN_ELEMENTS for size in sizes)


def run(fn, args: tuple, batch_errors: np.ndarray | None = None, partial: str = "",
        elements: int | None = None, units: int | None = None, element: int | None = None,
        typed: bool = False) -> tuple:
    """Call a generated function and turn its error record (one per batch element when
    ``batch_errors`` is given) into the user-facing exception, with ``partial`` (what the caller
    holds half-updated, if anything) added to its message. A batched entry runs as
    ``fn(lo, hi, *args, batch_errors)`` over ``units`` (elements, or a lane entry's chunks of
    groups; ``elements`` then says how many rows of ``batch_errors`` belong to elements: the chunks
    keep records of their own below) split among threads (``run_batch``). Returns the final value
    of every argument: a program returns its scalar parameters (arrays change in place), a batched
    entry all of them. ``element``: the batch element a single call runs, named by its errors.
    ``typed``: the arguments have the types ``fn`` was compiled for (found by their kinds), so a
    compiled program is called without checking them (``NativeProgram.call_typed``)."""
    try:
        if batch_errors is not None:
            with loader.deep_recursion():
                result = run_batch(fn, args, batch_errors, len(batch_errors) if units is None else units,
                                   None if units is None else elements)
            failed = np.flatnonzero(batch_errors[:elements, 0])
            if failed.size:
                raise_failure(batch_errors[failed[0]], batch_element=int(failed[0]), partial=partial,
                              failed=tuple(int(b) for b in failed))
            return result
        record = np.zeros(ERROR_RECORD)
        try:
            if isinstance(fn, NativeProgram) and not fn.revdiff_loops:  # machine code: no Python recursion
                result = fn.call_typed(*args, record) if typed else fn(*args, record)
            else:
                with loader.deep_recursion():
                    result = interruptible([lambda: fn(*args, record)], record, getattr(fn, "revdiff_loops", False))[0]
        except (MemoryError, ValueError) as exc:  # NumPy's, where the Python program allocates an ancilla
            if isinstance(fn, NativeProgram) or not _failed_allocation(record, exc):
                raise
        if record[0]:
            raise_failure(record, batch_element=element, partial=partial)
        if not result:  # no scalar parameters
            return tuple(args)
        scalars = iter(result)
        return tuple(a if isinstance(a, np.ndarray) else scalar_like(a, next(scalars)) for a in args)
    except RecursionError:
        raise ReversibilityError(f"{getattr(fn, '__name__', fn)}: reversible functions call each other too deeply "
                                 "to run as plain Python (each level of calls is a Python call, and this chain "
                                 f"passed the recursion limit of {loader.COMPILE_RECURSION_LIMIT}); flatten the "
                                 "chain of calls") from None
    except IndexError as exc:
        shapes = ", ".join(str(getattr(a, "shape", type(a).__name__)) for a in args)
        raise IndexError(f"{exc} in {getattr(fn, '__name__', fn)}: an argument is smaller than the program "
                         f"indexes (argument shapes: {shapes})") from None


ERROR_RECORD = checks.RECORD_SIZE


def _failed_allocation(record: np.ndarray, exc: Exception) -> bool:
    """Record exception ``exc`` that left a program as the failed allocation ``record`` names (a
    ValueError: "array is too big") or, for a MemoryError, as an untracked one; False: not an
    allocation's, to be raised as it is."""
    if not record[checks.ALLOCATION] and not isinstance(exc, MemoryError):
        return False
    record[0] = record[checks.ALLOCATION] or checks.failure_code(0, checks.UNTRACKED)
    record[2] = record[checks.ALLOCATION + 1]
    return True


def run_batch(entry, args: tuple, errors: np.ndarray, units: int, lane_elements: "int | None" = None,
              kernel: bool = False) -> tuple:
    """``entry(lo, hi, *args, errors, record)`` over ``[0, units)`` (elements, or a lane entry's chunks
    of groups over ``lane_elements`` elements), split into contiguous parts that ``batch_threads()``
    threads run at once (compiled code releases the GIL; plain Python runs in one part). Each
    element's failure lands in its row of ``errors``; a part's own record holds what failed outside
    every element (a lane entry's buffers that could not be allocated). Returns the arguments, which
    the entry updated in place. ``kernel``: the entry is a kernel (``programs/kernels.py``), which
    takes its bounds in one int64 array and was found by its arrays' types (called unchecked)."""
    loops = getattr(entry, "revdiff_loops", False)
    native = isinstance(entry, NativeProgram)
    parts = 1 if units <= 1 else max(1, min(units, batch_threads() if native else 1))
    call = entry
    if kernel:
        call = lambda lo, hi, *rest: entry.call_typed(np.array([lo, hi], np.int64), *rest)  # noqa: E731
    if parts == 1 and not loops:  # one part, nothing to interrupt: called here, as it is
        record = np.zeros(ERROR_RECORD)
        call(0, units, *args, errors, record)
        if record[0]:
            raise_failure(record)
        return args
    bounds = [units * k // parts for k in range(parts + 1)]
    records = [np.zeros(ERROR_RECORD) for _ in range(parts)]
    calls = [functools.partial(call, lo, hi, *args, errors, record)
             for lo, hi, record in zip(bounds, bounds[1:], records)]
    interruptible(calls, errors, loops)
    for record in records:
        if record[0]:
            raise_failure(record)
    return args


class Compiled(NamedTuple):
    """What one call of one program runs on arguments of given kinds: the compiled program, the
    argument types, its signature, the version of the function it was compiled for, what a failure
    leaves half-updated (``ReversibleFunction.partial_note``), and the specialisation it is from."""
    program: Any
    types: tuple
    signature: ProgramSignature
    version: tuple
    note: str
    spec: Any

    def sibling(self, program: str) -> "Compiled":
        """Another program of the same specialisation (a pullback's adjoint: the forward's program,
        even where a global changed in between)."""
        return self._replace(program=self.spec.callable(program), signature=program_signature(
            program, self.types, self.spec.rf.modified_positions()))


def argument_kinds(args: tuple):
    """The key of a call's arguments: per argument its dtype and rank (arrays) or Python type
    (numbers), and whether an array is large enough for BLAS (``blas_for``); None for anything else
    (GPU arrays, subclasses, 0-d arrays, non-native byte order, integers beyond int64), which takes
    the checked path."""
    key = []
    large = False
    for a in args:
        kind = type(a)
        if kind is np.ndarray:
            if not a.ndim or not a.dtype.isnative:  # compiled code reads native byte order only
                return None
            key.append((a.dtype, a.ndim))
            large = large or a.size > BLAS_MIN_ELEMENTS
        elif kind is int:
            if not -(1 << 63) <= a < (1 << 63):
                return None
            key.append(kind)
        elif kind is float or kind is complex or kind is bool or isinstance(a, np.generic):
            key.append(kind)
        else:
            return None
    return tuple(key), large


def compiled(f: Reversible, program: str, args: tuple, kinds=False) -> Compiled:
    """``program`` of ``f`` compiled for ``args`` (the program's arguments, which begin with the
    function's): one dictionary lookup when a call with arguments of the same kinds ran before and
    no global the function reads has been rebound since. ``kinds``: ``argument_kinds`` of the function's
    parameters, where the caller has them."""
    forward = f.forward_function
    values = args[:len(f.params)]  # the function's parameters: they decide the rest (gradients, saved values)
    kinds = argument_kinds(values) if kinds is False else kinds
    found = forward.compiled_calls.get((program, kinds)) if kinds is not None else None
    if found is not None and current(f, found):
        return found
    types = f.argument_types(values)
    spec = forward.specialize(types, blas_for(values))
    # labelled with the version the specialisation was made for, not the function's version now: another
    # thread may have parsed it anew meanwhile, and the next call must then not take this program
    found = Compiled(spec.callable(program), types, program_signature(program, types, forward.modified_positions()),
                     spec.version, f.partial_note(values), spec)
    if kinds is not None:
        forward.compiled_calls[(program, kinds)] = found
    return found


def current(f: "Reversible", found: Compiled) -> bool:
    """Whether ``found``, compiled for ``f`` earlier, still runs it: the function has not been parsed
    anew, and every global it reads is bound to what it was compiled with."""
    forward = f.forward_function
    return found.version is forward._version and forward.unchanged()


class Reversible(Protocol):
    """What the modules that run programs read of a reversible function (``function.ReversibleFunction``
    or its inverse), as a structural type: they sit below ``function``, which imports them."""

    __qualname__: str
    params: list
    programs: tuple
    fused_vjp: str
    compiled_calls: dict

    def unchanged(self) -> bool: ...

    def partial_note(self, args: tuple) -> str: ...

    def modified_positions(self) -> set: ...

    def specialize(self, types: tuple, blas: bool = True) -> Any: ...

    @property
    def parameter_names(self) -> tuple: ...

    @property
    def forward_function(self) -> "Reversible": ...

    def bind(self, args: tuple, kwargs: dict | None = None) -> tuple: ...

    def argument_types(self, args: tuple) -> tuple: ...

    def validate(self, args: tuple) -> None: ...


def validate(f: "Reversible", args: tuple) -> None:
    """Refuse a modified argument of ``f`` that is read-only, whose entries share memory, or that
    shares memory with another argument: a program that modifies an array must be its only way to
    those bytes, or its updates read what they wrote (and its inverse does not restore the input)."""
    modified = f.forward_function.modified_positions()
    if not modified:  # nothing is written
        return
    if _separate_host_arrays(args, modified):
        return
    names = f.parameter_names
    on_gpu = any(not isinstance(a, (np.ndarray, numbers.Number)) and on_device(a) for a in args)
    arrays = [(k, a) for k, a in enumerate(args) if isinstance(a, np.ndarray) or on_gpu and on_device(a)]
    for k, a in arrays:
        if k not in modified:
            continue
        if not (a.flags.writeable if isinstance(a, np.ndarray) else writeable(a)):
            raise ValueError(f"argument '{names[k]}' of {f.__qualname__}() is read-only, but the function modifies it")
        if isinstance(a, np.ndarray) and not a.flags.c_contiguous and overlaps_itself(a):  # contiguous: no overlap
            raise ReversibilityError(f"argument '{names[k]}' of {f.__qualname__}() has entries that share memory (a "
                                     "zero stride, or rows that overlap), but the function modifies it; pass a copy")
    for i, (k, a) in enumerate(arrays):
        for j, b in arrays[i + 1:]:
            if k not in modified and j not in modified:
                continue
            if not on_gpu and not np.may_share_memory(a, b):  # the usual pair, answered by its bounds alone
                continue
            how = sharing(a, b)
            if how is not None:
                raise ReversibilityError(f"arguments '{names[k]}' and '{names[j]}' of {f.__qualname__}() share "
                                         f"memory{how}; pass separate arrays")


def _separate_host_arrays(args: tuple, modified: set) -> bool:
    """Whether ``validate`` passes at a glance (the usual case): every argument is a NumPy array or a
    number, every modified array is writeable and C-contiguous (no entries overlap) and shares no
    bounds with another argument. False: ``validate``'s full checks decide (and name what is wrong).
    Each condition here is one that every refusal of ``validate`` breaks; a refusal added there
    needs its condition here (``tests/test_trust.py`` checks the two agree on aliased arguments)."""
    for a in args:
        if type(a) is not np.ndarray and not isinstance(a, (int, float, complex, np.generic)):
            return False
    for k in modified:
        a = args[k]
        if type(a) is not np.ndarray:
            continue
        flags = a.flags
        if not (flags.writeable and flags.c_contiguous):
            return False
        for j, b in enumerate(args):
            if j != k and type(b) is np.ndarray and np.may_share_memory(a, b):
                return False
    return True


#: candidate solutions NumPy may try before a pair of host arrays counts as sharing memory (``sharing``)
MAX_WORK = 1_000_000


def sharing(a: Any, b: Any) -> str | None:
    """How arrays ``a`` and ``b`` share memory, in words, or None where they do not."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if not np.may_share_memory(a, b):
            return None
        try:
            return "" if np.shares_memory(a, b, max_work=MAX_WORK) else None
        except np.exceptions.TooHardError:
            return " (or may: their strides are too intricate for NumPy to tell)"
    if may_share_memory(a, b):
        return " (their byte ranges on the GPU overlap)"
    return None


def overlaps_itself(a: np.ndarray) -> bool:
    """Whether two entries of host array ``a`` may be the same bytes: its axes, by stride, must each
    step past everything the smaller ones span (so a zero stride, or ``as_strided`` views whose rows
    overlap, count; every view NumPy's slicing and transposing make passes)."""
    span = a.itemsize
    for stride, n in sorted((abs(s), n) for n, s in zip(a.shape, a.strides) if n > 1):
        if stride < span:
            return a.size > 0
        span += stride * (n - 1)
    return False


def scalar_like(argument, value):
    """``value``, a program's final value of scalar ``argument``, in the argument's type: a NumPy
    scalar stays one of its dtype (``np.int32`` updated by ``+=`` is an ``np.int32``, as in NumPy 2;
    the program computed it in that dtype, ``type_of_value``)."""
    if not isinstance(argument, np.generic) or type(argument) is type(value):
        return value
    return argument.dtype.type(value)


def interruptible(calls: list, record: np.ndarray, loops: bool) -> list:
    """The results of ``calls`` (functions of no arguments), run at once. One call that cannot loop
    without end runs here; otherwise each runs in a thread, so that Ctrl-C reaches this one: it
    sets the interrupt field of ``record`` (every row), which while loops read (``loops``: the
    programs have some), waits for the calls to return, and the failure they recorded raises
    KeyboardInterrupt."""
    if len(calls) == 1 and not loops:
        return [calls[0]()]
    outcomes: list = [None] * len(calls)
    remaining = [len(calls)]
    lock = threading.Lock()
    done = threading.Event()  # not Thread.join, which an interrupt can leave returning early

    def task(k: int) -> None:
        try:
            outcomes[k] = (True, calls[k]())
        except BaseException as exc:  # re-raised in the caller's thread
            outcomes[k] = (False, exc)
        finally:
            with lock:
                remaining[0] -= 1
                if not remaining[0]:
                    done.set()

    here = [k for k in range(len(calls)) if not workers.start(functools.partial(task, k))]
    for k in here:  # no thread could be started (no memory for its stack): run here, where it fails or not
        task(k)
    try:
        while not done.wait(0.05):
            pass
    except KeyboardInterrupt:
        record[..., checks.INTERRUPT] = 1.0
        while not done.wait(0.05):  # polled, so that a second Ctrl-C surely ends the wait (leaving them running)
            pass
        if not np.any(record[..., 0]):  # they finished before reaching a loop: still interrupted
            raise
    for ok, value in outcomes:
        if not ok:
            raise value
    return [value for _, value in outcomes]


def raise_failure(record: np.ndarray, batch_element: int | None = None, partial: str = "", failed: tuple = ()) -> None:
    """The error ``record`` describes, raised; ``failed``: every batch element whose record says it
    failed (the error's ``failed_elements``, beside ``batch_element``, the one it describes)."""
    error = checks.to_error(*checks.decode(record[0]), float(record[2]), float(record[3]), batch_element, partial)
    error.failed_elements = failed or (() if batch_element is None else (batch_element,))
    raise error from None


def copy_value(value: Any) -> Any:
    """A fresh copy of an array argument (programs update arrays in place); scalars as they are."""
    return value.copy() if isinstance(value, np.ndarray) else value


def zero_like(value: Any) -> Any:
    """The zero cotangent of ``value``."""
    if isinstance(value, np.ndarray):  # calloc'd: no pass that writes zeros over a large gradient
        return np.zeros(value.shape, value.dtype)
    return type(value)(0)


def cotangent_value(name: str, ct: Any, what: str = "cotangent") -> Any:
    """TypeError naming the parameter for a cotangent that is not numeric (or is a masked array,
    which arguments cannot be either: its masked entries would be read)."""
    if ct is not None and not isinstance(ct, (numbers.Number, np.ndarray, np.generic, list, tuple)):
        raise TypeError(f"{what} for '{name}' must be a number or an array, got {type(ct).__name__}")
    if isinstance(ct, np.ma.MaskedArray):
        raise TypeError(f"{what} for '{name}' is a masked array, whose masked entries would be read; pass "
                        "np.asarray(c) or c.filled(value)")
    return ct


def check_array_cotangent(name: str, out: Any, ct: Any, what: str = "cotangent") -> None:
    """ValueError or TypeError naming the parameter for an array cotangent (or tangent) that does not
    fit the array ``out``: not numeric, another shape, or complex into real. NumPy or GPU arrays alike."""
    if ct.dtype.kind not in "biufc":  # strings, objects (an array of None would become NaN)
        raise TypeError(f"{what} for '{name}' must be a numeric array, got dtype {ct.dtype}")
    if ct.shape != out.shape:
        raise ValueError(f"{what} for '{name}' has shape {ct.shape}, expected {out.shape}")
    if ct.dtype.kind == "c" and out.dtype.kind != "c":
        raise TypeError(f"{what} for '{name}' is complex but '{name}' is real")


def in_dtype_of(xp, name: str, out: Any, ct: Any, what: str = "cotangent") -> Any:
    """A fresh copy of the array cotangent (or tangent) ``ct`` in the dtype of ``out`` (``xp``: NumPy
    or CuPy); ValueError naming the parameter where that dtype cannot hold its values (float64
    values beyond float32's range would become inf, with only NumPy's overflow warning)."""
    with np.errstate(over="ignore", invalid="ignore"):
        cast = ct.astype(out.dtype, copy=True)
    if ct.dtype != out.dtype and cast.dtype.kind in "fc" and \
            not bool(xp.array_equal(xp.isfinite(cast), xp.isfinite(ct))):
        raise ValueError(f"{what} for '{name}' has values beyond the range of {out.dtype}, the dtype of "
                         f"'{name}' (they would become inf)")
    return cast


def scalar_expected(name: str, what: str = "cotangent") -> TypeError:
    """The error for an array given as the cotangent (or tangent) of a scalar parameter."""
    return TypeError(f"{what} for the scalar '{name}' must be a scalar")


def cotangent(name: str, out: Any, ct: Any, what: str = "cotangent") -> Any:
    """Check one cotangent (or tangent: ``what``) against its value and give it the value's type (a fresh copy)."""
    if ct is None:
        return zero_like(out)
    if ct.__class__ is np.ndarray and out.__class__ is np.ndarray and ct.dtype is out.dtype and ct.shape == out.shape:
        return ct.copy()  # already the value's type and shape (the usual case)
    if cotangent_value(name, ct, what) is None:
        return zero_like(out)
    if isinstance(out, np.ndarray):
        ct = np.asarray(ct)
        check_array_cotangent(name, out, ct, what)
        return in_dtype_of(np, name, out, ct, what)
    if isinstance(ct, (np.ndarray, list, tuple)) or not isinstance(ct, numbers.Number) and on_device(ct):
        raise scalar_expected(name, what)
    if isinstance(ct, (complex, np.complexfloating)) and not isinstance(out, (complex, np.complexfloating)):
        raise TypeError(f"{what} for '{name}' is complex but '{name}' is real")
    return type(out)(ct) if not isinstance(out, np.generic) else out.dtype.type(ct)


def loss_index(f, loss: "str | int") -> int:
    """The position of the parameter ``loss`` names (or gives the position of) among ``f``'s."""
    if isinstance(loss, bool) or not isinstance(loss, (str, int)):
        raise TypeError(f"loss must name a parameter of {f.__qualname__} or give its position, got {loss!r}")
    if isinstance(loss, str):
        if loss not in f.parameter_names:
            raise ValueError(f"loss '{loss}' is not a parameter of {f.__qualname__} ({', '.join(f.parameter_names)})")
        return f.parameter_names.index(loss)
    if not -len(f.params) <= loss < len(f.params):
        raise IndexError(f"loss index {loss} out of range for {len(f.params)} parameters")
    return loss % len(f.params)


def check_count(f, what: str, values, role: str = "cotangents") -> None:
    """TypeError unless ``values`` (the ``role`` of a call ``what``) is a tuple or list of one entry per
    parameter of ``f``: one wording wherever cotangents or tangents are passed."""
    n = len(f.params)
    if not isinstance(values, (tuple, list)) or len(values) != n:
        got = f"{len(values)}" if isinstance(values, (tuple, list)) else f"a {type(values).__name__}"
        raise TypeError(f"{what} of {f.__qualname__} takes {n} {role}, one entry per argument "
                        f"({', '.join(f.parameter_names)}; None for zero), got {got}")


def checked_tangents(f, args: tuple, types: tuple, tangents, what: str, convert=cotangent) -> tuple:
    """One checked tangent per float or complex parameter of ``f`` (None: zero), a fresh copy in
    its argument's type (``convert``: ``cotangent``, or its GPU version); TypeError for a tangent
    of an integer parameter or a wrong count."""
    check_count(f, what, tangents, "tangents")
    out = []
    for name, a, t, d in zip(f.parameter_names, args, types, tangents):
        if not t.differentiable:
            if d is not None:
                raise TypeError(f"{what}: '{name}' is {t.describe()}, which has no tangent; pass None for it")
            continue
        out.append(convert(name, a, d, "tangent"))
    return tuple(out)
