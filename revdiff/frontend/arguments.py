"""Binding a call's arguments to a reversible function's parameters as Python binds them: positional
arguments first, keywords by name, then the default values of the parameters left out. Calls inside
reversible functions are bound when they are parsed, calls from Python when they are made."""
from __future__ import annotations

import numbers
from typing import Any



def bind(name: str, params: list, defaults: dict, args: tuple, kwargs: dict) -> tuple:
    """The value of every parameter, in order; TypeError worded as Python's for a call that does
    not fit the parameters."""
    if len(args) > len(params):
        raise TypeError(f"{name}() takes {len(params)} arguments ({', '.join(params)}), got {len(args)}")
    bound = dict(zip(params, args))
    for key, value in kwargs.items():
        if key not in params:
            raise TypeError(f"{name}() got an unexpected keyword argument '{key}' (parameters: {', '.join(params)})")
        if key in bound:
            raise TypeError(f"{name}() got multiple values for argument '{key}'")
        bound[key] = value
    missing = [p for p in params if p not in bound and p not in defaults]
    if missing:
        raise TypeError(f"{name}() takes {len(params)} arguments ({', '.join(params)}); missing "
                        + ", ".join(f"'{p}'" for p in missing))
    return tuple(bound[p] if p in bound else defaults[p] for p in params)


def default_value(value: Any) -> bool:
    """Whether ``value`` may be a parameter's default: a number (Python's or a NumPy scalar), compiled
    into calls as a constant. An array would be one object shared by every call (and a function may
    not modify a parameter with a default)."""
    return isinstance(value, numbers.Number)
