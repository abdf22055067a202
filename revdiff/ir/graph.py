"""The program graph: the name each compiled program links under, and the programs a low-level
function calls, read from its ``Invoke`` statements. The compiler names and gathers the programs of
every backend's modules with these two."""
from __future__ import annotations

from revdiff.ir.low import Invoke, LowFunction, nested_blocks


def symbol(spec, program: str) -> str:
    """The name ``program`` of specialisation ``spec`` links under in a module holding other
    functions' programs too: the function's name (ASCII: other letters as their code points), its
    specialisation key, and the program."""
    return f"{ascii_name(spec.rf.__name__)}_{spec.key}_{program}"


def ascii_name(name: str) -> str:
    """``name`` in ASCII letters, digits and underscores, as every target's symbols must be (a letter
    outside ASCII as ``_u`` and its code point: ``fü`` is ``f_u00fc``)."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"_u{ord(c):04x}" for c in name)


def invoked(low: LowFunction) -> set:
    """Names of the generated functions ``low`` calls."""
    names: set = set()

    def visit(body: list) -> None:
        for s in body:
            if isinstance(s, Invoke):
                names.add(s.fn)
            for block in nested_blocks(s):
                visit(block)

    visit(low.body)
    return names
