"""The public name of a program built by a factory (each factory defines its program inside, under
one local name, once per use)."""


def named(program, name: str, doc: str | None = None):
    """``program`` under ``name`` (and ``doc``, when given, as its docstring)."""
    program.__name__ = program.__qualname__ = name
    if doc is not None:
        program.__doc__ = doc
    return program
