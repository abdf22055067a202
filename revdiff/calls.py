"""Calling generated programs: which variant an argument set runs (``blas_for``), the call itself
(in a thread where while loops may need Ctrl-C), the error record it fills turned into the user's
exception, and cotangents checked against the outputs they belong to."""
from __future__ import annotations

import numbers
import threading
from typing import Any, Iterable

import numpy as np

from revdiff.errors import ReversibilityError
from revdiff.ir import checks
from revdiff.primitives.vector import BLAS_MIN_ELEMENTS
from revdiff.runtime import loader


def blas_for(args: Iterable, element_sizes: Iterable[int] = ()) -> bool:
    """Whether calls on ``args`` (or on arrays of ``element_sizes`` entries) run the programs with
    BLAS branches: only when an array has more than BLAS_MIN_ELEMENTS entries. Views of smaller
    arrays never reach BLAS's threshold, so their programs compile to loops only: a third less code
    to compile, the same results. Forward, inverse and adjoint see the same shapes, hence the same
    choice; an ancilla larger than every argument then runs loops too."""
    sizes = [a.size for a in args if isinstance(a, np.ndarray)] + list(element_sizes)
    return any(size > BLAS_MIN_ELEMENTS for size in sizes)


def run(fn, args: tuple, batch_errors: np.ndarray | None = None, partial: str = "",
        elements: int | None = None) -> tuple:
    """Call a generated function and turn its error record (one per batch element when
    ``batch_errors`` is given) into the user-facing exception, with ``partial`` (what the caller
    holds half-updated, if anything) added to its message; ``elements``: the rows of ``batch_errors``
    that belong to batch elements (a lane entry keeps records of its own below). Returns the final value of every
    argument: a program returns its scalar parameters (arrays change in place), a batched entry
    all of them."""
    try:
        if batch_errors is not None:
            with loader.deep_recursion():
                result = interruptible(fn, args, batch_errors)
            failed = np.flatnonzero(batch_errors[:elements, 0])
            if failed.size:
                raise_failure(batch_errors[failed[0]], batch_element=int(failed[0]), partial=partial)
            return result
        record = np.zeros(ERROR_RECORD)
        try:
            with loader.deep_recursion():
                result = interruptible(fn, args, record)
        except (MemoryError, ValueError) as exc:  # an allocation that failed ("array is too big": a
            if not record[checks.ALLOCATION] and not isinstance(exc, MemoryError):  # ValueError too)
                raise
            record[0] = record[checks.ALLOCATION] or checks.failure_code(0, checks.UNTRACKED)
            record[2] = record[checks.ALLOCATION + 1]
        if record[0]:
            raise_failure(record, partial=partial)
        scalars = iter(result or ())
        return tuple(a if isinstance(a, np.ndarray) else next(scalars) for a in args)
    except RecursionError:
        raise ReversibilityError(f"{getattr(fn, '__name__', fn)}: reversible functions call each other too deeply "
                                 "for Numba to compile (it recurses once per level of calls, and this chain passed "
                                 f"Python's recursion limit of {loader.COMPILE_RECURSION_LIMIT}); flatten the "
                                 "chain of calls") from None
    except IndexError as exc:
        shapes = ", ".join(str(getattr(a, "shape", type(a).__name__)) for a in args)
        raise IndexError(f"{exc} in {getattr(fn, '__name__', fn)}: an argument is smaller than the program "
                         f"indexes (argument shapes: {shapes})") from None


ERROR_RECORD = checks.RECORD_SIZE
#: the stack of the thread a call with while loops runs in: room for Numba's recursive compilation
WORKER_STACK = 256 << 20
_STACK_LOCK = threading.Lock()


def interruptible(fn, args: tuple, record: np.ndarray):
    """``fn(*args, record)``; one whose while loops may run without end (``revdiff_loops``) runs in
    a thread, so that Ctrl-C reaches this one: it sets the record's interrupt field, which the loops
    read, waits for the call to return, and the failure it recorded raises KeyboardInterrupt. A
    first call, which compiles, runs in such a thread too: Numba's compiler recurses through a
    large program (a batch of block-CGS2 gradients in SIMD lanes) deeper than the main thread's
    stack holds, and a C stack that overflows is a segfault, not an error."""
    compiled = getattr(fn, "signatures", True)  # a Numba dispatcher lists what it compiled
    if compiled and not getattr(fn, "revdiff_loops", False):
        return fn(*args, record)
    outcome: list = []
    done = threading.Event()  # not Thread.join, which an interrupt can leave returning early

    def call() -> None:
        try:
            outcome.append((True, fn(*args, record)))
        except BaseException as exc:  # re-raised in the caller's thread
            outcome.append((False, exc))
        finally:
            done.set()

    with _STACK_LOCK:  # the call may compile, recursively: a thread's default stack can be small
        previous = threading.stack_size(WORKER_STACK)
        try:
            threading.Thread(target=call, name="revdiff-call", daemon=True).start()
            started = True
        except RuntimeError:  # no memory left for the thread's stack
            started = False
        finally:
            threading.stack_size(previous)
    if not started:  # run here (outside the lock), where it fails or not
        return fn(*args, record)
    try:
        while not done.wait(0.05):
            pass
    except KeyboardInterrupt:
        record[..., checks.INTERRUPT] = 1.0
        while not done.wait(0.05):  # polled, so that a second Ctrl-C surely ends the wait (leaving it running)
            pass
        if not np.any(record[..., 0]):  # it finished before reaching a loop: still interrupted
            raise
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def raise_failure(record: np.ndarray, batch_element: int | None = None, partial: str = "") -> None:
    raise checks.to_error(*checks.decode(record[0]), float(record[2]), float(record[3]),
                          batch_element, partial) from None


def copy_value(value: Any) -> Any:
    """A fresh copy of an array argument (programs update arrays in place); scalars as they are."""
    return value.copy() if isinstance(value, np.ndarray) else value


def zero_like(value: Any) -> Any:
    """The zero cotangent of ``value``."""
    if isinstance(value, np.ndarray):  # calloc'd: no pass that writes zeros over a large gradient
        return np.zeros(value.shape, value.dtype)
    return type(value)(0)


def cotangent_value(name: str, ct: Any) -> Any:
    """TypeError naming the parameter for a cotangent that is not numeric."""
    if ct is not None and not isinstance(ct, (numbers.Number, np.ndarray, np.generic, list, tuple)):
        raise TypeError(f"cotangent for '{name}' must be a number or an array, got {type(ct).__name__}")
    return ct


def cotangent(name: str, out: Any, ct: Any) -> Any:
    """Check one cotangent against its output and give it the output's type (a fresh copy)."""
    if cotangent_value(name, ct) is None:
        return zero_like(out)
    if isinstance(out, np.ndarray):
        ct = np.asarray(ct)
        if ct.shape != out.shape:
            raise ValueError(f"cotangent for '{name}' has shape {ct.shape}, expected {out.shape}")
        if np.iscomplexobj(ct) and not np.iscomplexobj(out):
            raise TypeError(f"cotangent for '{name}' is complex but '{name}' is real")
        return np.array(ct, dtype=out.dtype, copy=True)
    if isinstance(ct, np.ndarray):
        raise TypeError(f"cotangent for the scalar '{name}' must be a scalar")
    if isinstance(ct, complex) and not isinstance(out, complex):
        raise TypeError(f"cotangent for '{name}' is complex but '{name}' is real")
    return type(out)(ct) if not isinstance(out, np.generic) else out.dtype.type(ct)
