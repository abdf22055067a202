"""Write generated Python source (``backend="python"``) to a content-addressed file in the cache
directory and import it, so that tracebacks, ``inspect`` and debuggers show real lines. The module is
executed from the text revdiff generated, never from bytecode or a file it did not verify
(``runtime/cache.py``). Also the fingerprint of revdiff's own compiler, which every specialisation's
key holds.
"""
from __future__ import annotations

import hashlib
import sys
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterator

from revdiff.errors import ReversibilityError, SourceLocation
from revdiff.runtime.cache import cache_dir, ensure_file
from revdiff.runtime.held import HeldSetting

_MODULES: dict = {}  # file -> module

# Generated modules are named revdiff_generated.<file>, in a package of their own
if "revdiff_generated" not in sys.modules:
    _package = ModuleType("revdiff_generated")
    _package.__path__ = []
    sys.modules["revdiff_generated"] = _package


_FINGERPRINT: list = []
# what generated code depends on (not the programs, whose own source is in their keys, nor the tools)
_COMPILER_PARTS = {"ir", "primitives", "frontend", "passes", "optimize", "runtime", "targets", "compiler",
                   "language.py", "function.py", "calls.py", "batching.py", "errors.py", "user_names.py"}


def compiler_fingerprint() -> str:
    """A hash of revdiff's own compiler sources. Generated names include it, so that a cached
    caller compiled against an older code generator is never reused with newer callees."""
    if not _FINGERPRINT:
        root = Path(__file__).resolve().parent.parent
        digest = hashlib.sha256()
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if path.suffix in (".py", ".h") and relative.parts[0] in _COMPILER_PARTS:
                digest.update(path.read_bytes())
        _FINGERPRINT.append(digest.hexdigest()[:12])
    return _FINGERPRINT[0]


def _text_digest(text: str) -> str:
    """The digest a generated file's name ends with: of the text it holds."""
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def source_file(source: str, stem: str) -> Path:
    """The cache file holding ``source``, written (atomically) when missing or not holding it."""
    path = cache_dir() / f"{stem}_{_text_digest(source)}.py"
    ensure_file(path, source.encode())
    return path


def linked_source(source: str, dependencies: dict) -> str:
    """``source`` with a last comment naming every function it links. Files are content-addressed,
    and a caller's text can stay the same while a callee's changes (a program deeper down edited):
    the comment gives such a caller a file of its own."""
    links = sorted(f"{name}={getattr(fn, '__name__', '?')}" for name, fn in dependencies.items())
    return source + ("\n# Links: " + ", ".join(links) + "\n" if links else "")


def load(source: str, stem: str, dependencies: dict | None = None) -> ModuleType:
    """Import generated Python source (with the links to ``dependencies``) as a module, one module
    object per file."""
    text = linked_source(source, dependencies or {})
    return _module(source_file(text, stem), text)


def _module(path: Path, text: str) -> ModuleType:
    """The module of file ``path`` (holding ``text``), executed once per process."""
    module = _MODULES.get(str(path))
    if module is None:
        name = f"revdiff_generated.{path.stem}"
        module = ModuleType(name)
        module.__file__ = str(path)
        sys.modules[name] = module
        exec(compile(text, str(path), "exec"), module.__dict__)
        _MODULES[str(path)] = module
    return module


def link(module: ModuleType, functions: dict) -> None:
    """Make ``functions`` globals of generated ``module`` (the functions its code calls by name)."""
    module.__dict__.update(functions)


#: the recursion limit while programs are made and plain-Python programs run: a chain of calls is
#: lowered and compiled callee by callee, and runs as nested Python calls, a few frames per level
COMPILE_RECURSION_LIMIT = 20000


def _raise_recursion_limit():
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(max(saved, COMPILE_RECURSION_LIMIT))
    return lambda: sys.setrecursionlimit(saved)


_DEEP_RECURSION = HeldSetting(_raise_recursion_limit)


def deep_recursion() -> AbstractContextManager:
    """Make or run generated code with the recursion limit raised to COMPILE_RECURSION_LIMIT;
    restored when the last such caller in the process ends."""
    return _DEEP_RECURSION.held()


def compiled(module: ModuleType, name: str, dependencies: dict):
    """``module.name``, the generated functions it calls linked in as its globals."""
    link(module, dependencies)
    return getattr(module, name)


@contextmanager
def deeply_nested(fn: Callable) -> Iterator[None]:
    """Parse, check, lower or compile the reversible function ``fn`` with room for deeply nested
    code (a sum of hundreds of terms is an expression hundreds of levels deep, which every pass walks
    recursively); beyond that room, a ReversibilityError naming ``fn`` instead of a RecursionError."""
    with deep_recursion():
        try:
            yield
        except RecursionError:
            code = getattr(fn, "__code__", None)
            name = getattr(fn, "__qualname__", str(fn))
            loc = SourceLocation(code.co_filename, code.co_firstlineno, 0, "", name) if code else None
            raise ReversibilityError(f"{name} nests an expression or block too deeply to compile (more "
                                     f"levels than {COMPILE_RECURSION_LIMIT} frames of recursion hold); split it "
                                     "into several statements", loc) from None
