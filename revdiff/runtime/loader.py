"""Write generated source to a content-addressed file in the cache directory, import it, and
compile it with Numba (whose on-disk cache then lives beside it and survives between processes).

Generated code has a real file, so tracebacks, ``inspect`` and Numba's cache all work. The module
is executed from the text revdiff generated, never from bytecode or a file it did not verify
(``runtime/cache.py``).
"""
from __future__ import annotations

import hashlib
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Iterator

from revdiff.ir.entries import BATCH_WORKERS
from revdiff.runtime.cache import cache_dir, ensure_file, verify_cache

_MODULES: dict = {}
_COMPILED: dict = {}

# Generated modules are named revdiff_generated.<file>; Numba's cache re-imports a function's module
# by name when it rebuilds its environment, so the parent package must exist.
if "revdiff_generated" not in sys.modules:
    _package = ModuleType("revdiff_generated")
    _package.__path__ = []
    sys.modules["revdiff_generated"] = _package


_FINGERPRINT: list = []
# what generated code depends on (not the programs, whose own source is in their keys, nor the tools)
_COMPILER_PARTS = {"ir", "primitives", "frontend", "passes", "optimize", "runtime", "backends", "compiler",
                   "language.py", "function.py", "calls.py", "batch.py", "device_calls.py", "errors.py"}


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


def source_file(source: str, stem: str) -> Path:
    """The cache file holding ``source``, written (atomically) when missing or not holding it."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    path = cache_dir() / f"{stem}_{digest}.py"
    ensure_file(path, source.encode())
    return path


def linked_source(source: str, dependencies: dict) -> str:
    """``source`` with a last comment naming the module of every function it links. Files are
    content-addressed, and a caller's text can stay the same while a callee's changes (a program
    deeper down edited): the comment gives such a caller a file, and a Numba cache, of its own,
    never one compiled against the old callees."""
    links = sorted(f"{name}={_origin(fn)}" for name, fn in dependencies.items())
    return source + ("\n# Links: " + ", ".join(links) + "\n" if links else "")


def _origin(fn) -> str:
    f = getattr(fn, "py_func", fn)
    return f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}"


def load(source: str, stem: str, backend: str, dependencies: dict | None = None) -> ModuleType:
    """Import generated source (with the links to ``dependencies``) as a module, one module object
    per file and backend."""
    text = linked_source(source, dependencies or {})
    path = source_file(text, stem)
    key = (str(path), backend)
    module = _MODULES.get(key)
    if module is None:
        name = f"revdiff_generated.{path.stem}_{backend}"
        module = ModuleType(name)
        module.__file__ = str(path)
        sys.modules[name] = module
        exec(compile(text, str(path), "exec"), module.__dict__)
        _MODULES[key] = module
    return module


_DEPTH_LOCK = threading.Lock()
_DEPTH: list = [0, 0]  # calls inside ``deep_recursion``, and the limit they saved
#: the recursion limit while generated code runs: Numba compiles a callee inside its caller's type
#: inference, about 30 Python frames per level of calls, so a chain of 40 reversible functions
#: already passes Python's default of 1000 (measured: 300 levels compile within this limit)
COMPILE_RECURSION_LIMIT = 20000


@contextmanager
def deep_recursion() -> Iterator[None]:
    """Run generated code (which may compile, recursively, at its first call) with the recursion
    limit raised to COMPILE_RECURSION_LIMIT; restored when the last such call in the process ends."""
    with _DEPTH_LOCK:
        if _DEPTH[0] == 0:
            _DEPTH[1] = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_DEPTH[1], COMPILE_RECURSION_LIMIT))
        _DEPTH[0] += 1
    try:
        yield
    finally:
        with _DEPTH_LOCK:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                sys.setrecursionlimit(_DEPTH[1])


def compiled(module: ModuleType, name: str, backend: str, dependencies: dict, batch_entry: bool = False):
    """The callable for ``module.name``: the plain function, or its Numba dispatcher. Numba's own
    bounds checks stay off: the generated code checks its indices itself (``Lowerer.index_checks``),
    naming the user's line, and leaves the loops of vector instructions unchecked. Its divisions are
    checked the same way, so Numba's error model is NumPy's: no exception and no second zero test
    per division. ``batch_entry``: the workers beside it (``backends/numba/entries.py``) compiled too."""
    module.__dict__.update(dependencies)
    if batch_entry:  # a batch entry's per-element (or per-chunk) workers
        for worker in (f"{name}_{suffix}" for suffix in BATCH_WORKERS):
            if hasattr(module, worker):
                module.__dict__[worker] = compiled(module, worker, backend, {})
    key = (module.__name__, name)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = getattr(module, name)
        if backend == "numba":
            import numba
            fn = numba.njit(cache=True, fastmath=False, nogil=True, boundscheck=False, error_model="numpy")(fn)
            verify_cache(fn)
        _COMPILED[key] = fn
    return fn
