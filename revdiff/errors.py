"""Exceptions users see, each carrying the location in the user's own source file."""
from __future__ import annotations

from dataclasses import dataclass

from revdiff.user_names import in_user_terms


@dataclass(frozen=True)
class SourceLocation:
    """A place in the user's file: real file name, 1-based line, 0-based column, and the line text."""

    filename: str
    lineno: int
    col: int
    line: str
    function: str = "?"

    def __str__(self) -> str:
        return f'File "{self.filename}", line {self.lineno}, column {self.col}, in {self.function}'


class ReversibilityError(Exception):
    """A reversibility rule is broken, found statically (at decoration) or at run time."""

    #: where a batch failed at run time: the element the message names, and (on the CPU) every
    #: element whose check failed (``calls.raise_failure``; ``programs/ranked.py`` reruns them)
    batch_element: "int | None" = None
    failed_elements: tuple = ()
    #: a matrix Householder's programs refused in every row order (``programs/ranked.py``; "auto"
    #: then runs cgs2)
    refused_in_every_order: bool = False

    def __init__(self, message: str, loc: SourceLocation | None = None, written: bool = False):
        """``written``: ``message`` names everything as the user wrote it already (else the names of
        compiled code are turned back, ``user_names.in_user_terms``)."""
        self.message = message if written else in_user_terms(message, loc)
        self.loc = loc
        self.filename = loc.filename if loc else None
        self.lineno = loc.lineno if loc else None
        self.col = loc.col if loc else None
        super().__init__(self._format())

    def _format(self) -> str:
        if self.loc is None:
            return self.message
        return f"{self.loc}: {self.message}\n    {self.loc.line.strip()}"


class RankDeficientError(ValueError):
    """A matrix column became (numerically) linearly dependent on the previous ones."""


class ResultOverflowError(OverflowError):
    """A result is not finite although the inputs were: its exact value, or an intermediate one,
    overflows the dtype. Raised instead of returning it."""


class CacheDirectoryError(OSError):
    """The cache directory cannot be created or written (the message names the setting to change)."""
