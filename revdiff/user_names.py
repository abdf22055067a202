"""Hygiene between the user's names and generated ones. Generated code names its own variables with
a leading underscore (``_err``, ``_t3``, ``_b``), so a local name of the user's that matches ``u*_…``
(an underscore, after none or more ``u``s) is compiled with one more ``u`` in front: ``_t`` as
``u_t``, ``u_t`` as ``uu_t``. The renaming is one-to-one and never gives a name beginning with an
underscore. Messages about a function show its renamed locals as the user wrote them."""
from __future__ import annotations

import re

_ESCAPED = re.compile(r"u*_")
_WORD = re.compile(r"(?<![\w.])u+_\w*")  # a word that may be a renamed local
#: (file, function) -> the renamed locals of the functions parsed there, as compiled
_RENAMED: dict = {}


def escaped(name: str) -> str:
    """The name a user's local ``name`` is compiled under."""
    return "u" + name if _ESCAPED.match(name) else name


def as_written(name: str) -> str:
    """The user's name for compiled name ``name`` (the inverse of ``escaped``)."""
    return name[1:] if name.startswith("u") and _ESCAPED.match(name, 1) else name


def remember(filename: str, function: str, names) -> None:
    """Record the locals of ``function`` (in ``filename``) that ``escaped`` renames."""
    renamed = {escaped(n) for n in names if escaped(n) != n}
    if renamed:
        _RENAMED[filename, function] = _RENAMED.get((filename, function), frozenset()) | renamed


def in_user_terms(text: str, loc) -> str:
    """``text``, a message about the function at ``loc`` (a SourceLocation), with that function's
    renamed locals as the user wrote them; other words (globals, callees, generated names) as they are."""
    renamed = _RENAMED.get((loc.filename, loc.function)) if loc is not None else None
    if not renamed:
        return text
    keep = set(loc.function.replace("<locals>", "").split("."))  # the function's own name, as Python has it
    return _WORD.sub(lambda m: as_written(m.group()) if m.group() in renamed and m.group() not in keep
                     else m.group(), text)
