"""The table of runtime checks of generated code, and their translation into user errors."""
from __future__ import annotations

import zlib
from dataclasses import dataclass

from revdiff.errors import ReversibilityError, SourceLocation
from revdiff.user_names import in_user_terms


@dataclass(frozen=True)
class CheckInfo:
    message: str
    loc: SourceLocation
    labels: tuple = ()  # names for the reported values, e.g. ("value",)
    error: type = ReversibilityError


_CHECKS: dict = {}

# The error record of generated CPU code (float64, zero until written), field by field:
#   0 failure code (nonzero: a check failed), 1 SIMD lane of the failure, 2 and 3 the values the
#   message reports: written by a failed check; one code names the function and the check, so a
#   failure costs three stores, not five (each is code to compile, at every check);
#   4 allocation code, 5 its number of entries: written by Python code before each array
#   allocation and cleared after it, since an allocation that fails raises inside NumPy, and the
#   caller turns them into a MemoryError naming the ancilla (compiled code whose calloc fails
#   writes the allocation code into 0 and the entries into 2, as a failed check);
#   6 interrupt: set by the caller on Ctrl-C, read by every iteration of a while loop, which then
#   returns (compiled code cannot see Python's signals otherwise);
#   7 where a batch entry is, so that the caller finds the element an exception stopped: element
#   entries write 1 once they start an element (the failed one is the last its part started), lane
#   entries 1 + the first element of the group they run into the record of its chunk of groups.
RECORD_SIZE = 8
ALLOCATION = 4
INTERRUPT = 6
GROUP = STARTED = 7
_CHECK_BITS = 20  # function keys stay below 2**31, so codes below 2**51 are exact in float64


def register(fkey: int, idx: int, info: CheckInfo) -> None:
    if not 0 < idx < 1 << _CHECK_BITS:
        raise ValueError(f"{info.loc}: a generated function cannot have more than {(1 << _CHECK_BITS) - 1} "
                         "runtime checks; split the reversible function")
    _CHECKS[(fkey, idx)] = info


#: checks the tangent pass adds to a program's (``passes/tangent.py``) are numbered from here, by their
#: content, so that every variant of the program (its callees inlined or not) numbers them alike
DERIVED = 1 << (_CHECK_BITS - 1)


def register_derived(fkey: int, info: CheckInfo) -> int:
    """The number of the check ``info`` of function ``fkey`` in the range of derived checks, taken
    from a digest of its description (the next free one where two descriptions meet)."""
    idx = DERIVED + zlib.crc32(repr(info).encode()) % DERIVED
    while _CHECKS.get((fkey, idx), info) != info:
        idx = DERIVED + (idx - DERIVED + 1) % DERIVED
    _CHECKS[(fkey, idx)] = info
    return idx


#: the failure code of an exception raised inside a batch element's program other than a tracked
#: allocation (a NumPy allocation of the runtime, such as the lanes' buffers)
UNTRACKED = 1
#: the failure code of a while loop that stopped because the caller set the interrupt field
INTERRUPTED = 2


def failure_code(fkey: int, idx: int) -> int:
    """The nonzero number a failed check ``idx`` of function ``fkey`` writes into its record."""
    return fkey << _CHECK_BITS | idx


def decode(code: float) -> tuple:
    """(function key, check index) of a failure code."""
    return int(code) >> _CHECK_BITS, int(code) & ((1 << _CHECK_BITS) - 1)


def to_error(fkey: int, idx: int, a: float, b: float, batch_element: int | None = None,
             partial: str = "") -> Exception:
    """The user-facing error for failed check ``idx`` of generated function ``fkey``, which recorded
    the values ``a`` and ``b`` (in batch element ``batch_element``); ``partial``: a sentence on what
    the caller now holds half-updated."""
    info = _CHECKS.get((fkey, idx))
    tail = f". {partial}" if partial else ""
    if (fkey, idx) == (0, INTERRUPTED):
        return KeyboardInterrupt(f"revdiff: interrupted inside a while loop of generated code{tail}")
    if (fkey, idx) == (0, UNTRACKED):
        where = f" in batch element {batch_element}" if batch_element is not None else ""
        return MemoryError(f"an allocation failed{where} (not enough memory for the program's arrays){tail}")
    if info is None:
        return ReversibilityError(f"runtime check {idx} of generated function {fkey} failed "
                                  "(its description was not loaded in this process)")
    parts = []
    if "value" in info.labels:
        value = complex(a, b) if b else a
        parts.append(f"value {value!r}")
    elif "integer value" in info.labels:
        parts.append(f"value {int(a)}")
    else:
        for label, v in zip(info.labels, (a, b)):
            parts.append(f"{label} = {int(v) if float(v).is_integer() else v!r}")
    detail = f" ({', '.join(parts)})" if parts else ""
    if batch_element is not None:
        detail += f" in batch element {batch_element}"
    text = in_user_terms(info.message + detail, info.loc) + tail  # the tail names arguments as written
    if info.error is ReversibilityError:
        error = ReversibilityError(text, info.loc, written=True)
    else:
        error = info.error(f"{info.loc}: {text}")
    error.batch_element = batch_element  # read by callers that run a failed element again
    return error
