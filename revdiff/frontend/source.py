"""Read a function's source and map AST positions back to the user's real file and line."""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from revdiff.errors import ReversibilityError, SourceLocation


@dataclass
class SourceMap:
    filename: str
    first_line: int  # line number of the source's first line in the file
    indent: int  # columns removed by dedenting
    lines: list
    function: str

    def loc(self, node: ast.AST) -> SourceLocation:
        lineno = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        text = self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""
        return SourceLocation(self.filename, self.first_line + lineno - 1, col + self.indent,
                              text, self.function)

    def error(self, node: ast.AST, message: str, written: bool = False) -> ReversibilityError:
        return ReversibilityError(message, self.loc(node), written)


def function_ast(fn) -> tuple[ast.FunctionDef, SourceMap]:
    """The FunctionDef node of ``fn`` and the map from its positions to the real file."""
    try:
        lines, first_line = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError) as exc:
        raise ReversibilityError(
            f"cannot read the source of {getattr(fn, '__qualname__', fn)!r} ({exc}); reversible "
            "functions must be defined in a file (not typed at an interactive prompt)") from None
    raw = "".join(lines)
    dedented = textwrap.dedent(raw)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    tree = ast.parse(dedented)
    node = tree.body[0]
    if not isinstance(node, ast.FunctionDef):
        raise ReversibilityError(f"@reversible applies to a plain 'def' function, not {type(node).__name__}")
    smap = SourceMap(filename, first_line, indent, dedented.splitlines(), fn.__qualname__)
    return node, smap
