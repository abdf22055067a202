"""Names of the reversible language, importable so that linters and editors accept user source.

They only have a meaning inside a ``@reversible`` function, where the compiler replaces them;
calling one from ordinary Python is a mistake and says so.
"""
from __future__ import annotations

from typing import Any, NoReturn

#: the words of the language; the parser also reads them written through the module (``revdiff.zero()``)
__all__ = ["rot", "irot", "zero", "zeros", "ancilla", "release", "routine"]


def _outside(name: str) -> NoReturn:
    raise RuntimeError(f"revdiff.{name} is a statement of the reversible language; "
                       f"use it only inside a function decorated with @revdiff.reversible")


def rot(a: Any, b: Any, theta: Any) -> NoReturn:
    """Rotate the pair (a, b) by theta: a, b = cos*a - sin*b, sin*a + cos*b."""
    _outside("rot")


def irot(a: Any, b: Any, theta: Any) -> NoReturn:
    """Rotate the pair (a, b) by -theta (the inverse of rot)."""
    _outside("irot")


def zero(dtype: Any = float) -> NoReturn:
    """Allocate a zero scalar ancilla: ``x = zero()`` or ``x = zero(A.dtype)``."""
    _outside("zero")


def zeros(shape: Any, dtype: Any = float) -> NoReturn:
    """Allocate a zero array ancilla: ``v = zeros(n, A.dtype)``."""
    _outside("zeros")


def ancilla(value: Any) -> NoReturn:
    """Allocate an ancilla holding a copy of ``value``: ``t = ancilla(x * 2.0)``, ``v = ancilla(x[:])``
    (an array, as a view); ``release(t, x * 2.0)`` deallocates it."""
    _outside("ancilla")


def release(name: Any, value: Any) -> NoReturn:
    """Deallocate an ancilla made by ``ancilla(value)``, checking that it still equals ``value``."""
    _outside("release")


class _Routine:
    """``with routine:`` opens a compute block; a later ``~routine`` runs its inverse."""

    def __enter__(self) -> NoReturn:
        _outside("routine")

    def __exit__(self, *exc: Any) -> None:
        return None

    def __invert__(self) -> NoReturn:
        _outside("routine")


routine = _Routine()
