"""The table of runtime checks of generated code, and their translation into user errors."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import ReversibilityError, SourceLocation


@dataclass(frozen=True)
class CheckInfo:
    message: str
    loc: SourceLocation
    labels: tuple = ()  # names for the reported values, e.g. ("value",)
    error: type = ReversibilityError


_CHECKS: dict = {}


def register(fkey: int, idx: int, info: CheckInfo) -> None:
    _CHECKS[(fkey, idx)] = info


def to_error(exc: BaseException, batch_element: int | None = None) -> Exception:
    """The user-facing error for a failed check of generated code (in batch element ``batch_element``)."""
    fkey, idx, a, b = exc.args
    info = _CHECKS.get((fkey, idx))
    if info is None:
        return ReversibilityError(f"runtime check {idx} of generated function {fkey} failed "
                                  "(its description was not loaded in this process)")
    parts = []
    if "value" in info.labels:
        value = complex(a, b) if b else a
        parts.append(f"value {value!r}")
    else:
        for label, v in zip(info.labels, (a, b)):
            parts.append(f"{label} = {int(v) if float(v).is_integer() else v!r}")
    detail = f" ({', '.join(parts)})" if parts else ""
    if batch_element is not None:
        detail += f" in batch element {batch_element}"
    if info.error is ReversibilityError:
        return ReversibilityError(info.message + detail, info.loc)
    return info.error(f"{info.loc}: {info.message}{detail}")
