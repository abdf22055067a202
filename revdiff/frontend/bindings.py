"""The global and closure variables a reversible function reads, as Python binds them: what a name
is bound to now (``lookup``), and whether names still hold the objects they held (``still_bound``),
which lets a warm call skip recomputing the function's version."""
from __future__ import annotations

import builtins
from typing import Any, Callable

#: what ``lookup`` returns for a name bound to nothing
MISSING = object()


def scope_of(fn: Callable, name: str):
    """Where the body of ``fn`` reads global ``name`` (as written): its closure cell, or its module's
    globals (then builtins)."""
    code = fn.__code__
    if name in code.co_freevars and fn.__closure__:
        return fn.__closure__[code.co_freevars.index(name)]
    return fn.__globals__


def read(scope, name: str) -> Any:
    """The object ``name`` is bound to in ``scope`` (``scope_of``), or MISSING."""
    if type(scope) is dict:
        now = scope.get(name, MISSING)
        return getattr(builtins, name, MISSING) if now is MISSING else now
    try:
        return scope.cell_contents
    except ValueError:  # an empty cell
        return MISSING


def lookup(fn: Callable, name: str) -> Any:
    """The current value of global (or closure) ``name`` (as written) as the body of ``fn`` reads it."""
    return read(scope_of(fn, name), name)


def still_bound(watch: list) -> bool:
    """Whether every (scope, name, object) of ``watch`` still has ``name`` bound to that object."""
    for scope, name, expected in watch:
        if read(scope, name) is not expected:
            return False
    return True
