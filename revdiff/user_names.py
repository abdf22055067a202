"""Hygiene between the user's names and generated ones: every name revdiff generates begins with an
underscore (``_err``, ``_t3``, ``_b``), so a local name of the user's that begins with one (or with
``u``s then one) is compiled with one more ``u`` in front (``_t`` as ``u_t``, ``u_t`` as ``uu_t``), and
messages show it as written. The renaming is one-to-one and never gives a name beginning with ``_``."""
from __future__ import annotations

import re

_ESCAPED = re.compile(r"u*_")
# an escaped name in a message: a word beginning with one or more u's and then an underscore
_IN_TEXT = re.compile(r"(?<![\w.])u(u*_\w*)")


def escaped(name: str) -> str:
    """The name a user's local ``name`` is compiled under."""
    return "u" + name if _ESCAPED.match(name) else name


def as_written(name: str) -> str:
    """The user's name for compiled name ``name`` (the inverse of ``escaped``)."""
    return name[1:] if name.startswith("u") and _ESCAPED.match(name, 1) else name


def in_user_terms(text: str) -> str:
    """``text`` (a message about compiled code) with every escaped name as the user wrote it."""
    return _IN_TEXT.sub(r"\1", text)
