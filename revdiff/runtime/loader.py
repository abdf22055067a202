"""Write generated source to a content-addressed file in the cache directory, import it, and
compile it with Numba (whose on-disk cache then lives beside it and survives between processes).

Generated code has a real file, so tracebacks, ``inspect`` and Numba's cache all work. The module
is executed from the text revdiff generated, never from bytecode or a file it did not verify
(``runtime/cache.py``).

Every global revdiff puts into a generated module (the functions it links) is recorded, so that
another process can rebuild the module from its file (``recipe``, ``rebuild``): with
``REVDIFF_COMPILE_WORKER=1`` the compile worker (``runtime/compile_worker.py``) compiles there and
this process loads the result from Numba's disk cache.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import sys
import warnings
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType

from revdiff.ir.entries import BATCH_WORKERS
from revdiff.runtime import compile_worker
from revdiff.runtime.cache import VerifiedCacheFile, cache_dir, ensure_file, read_regular, verify_cache
from revdiff.runtime.held import HeldSetting

_MODULES: dict = {}  # (file, backend) -> module
_COMPILED: dict = {}  # (module name, function name) -> callable
_FILES: dict = {}  # module name -> (file, backend)
_TEXTS: dict = {}  # file -> the text it holds
_LINKED: dict = {}  # module name -> {global name: what revdiff put there}

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


def _text_digest(text: str) -> str:
    """The digest a generated file's name ends with: of the text it holds."""
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def source_file(source: str, stem: str) -> Path:
    """The cache file holding ``source``, written (atomically) when missing or not holding it."""
    path = cache_dir() / f"{stem}_{_text_digest(source)}.py"
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
    return _module(source_file(text, stem), text, backend)


def _module(path: Path, text: str, backend: str) -> ModuleType:
    """The module of file ``path`` (holding ``text``) for ``backend``, executed once per process."""
    key = (str(path), backend)
    module = _MODULES.get(key)
    if module is None:
        name = f"revdiff_generated.{path.stem}_{backend}"
        module = ModuleType(name)
        module.__file__ = str(path)
        sys.modules[name] = module
        exec(compile(text, str(path), "exec"), module.__dict__)
        _MODULES[key] = module
        _FILES[name] = key
        _TEXTS[str(path)] = text
    return module


def link(module: ModuleType, functions: dict) -> None:
    """Make ``functions`` globals of generated ``module`` (the functions its code calls by name)."""
    module.__dict__.update(functions)
    _LINKED.setdefault(module.__name__, {}).update(functions)


#: the recursion limit while generated code runs: Numba compiles a callee inside its caller's type
#: inference, about 30 Python frames per level of calls, so a chain of 40 reversible functions
#: already passes Python's default of 1000 (measured: 300 levels compile within this limit)
COMPILE_RECURSION_LIMIT = 20000


def _raise_recursion_limit():
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(max(saved, COMPILE_RECURSION_LIMIT))
    return lambda: sys.setrecursionlimit(saved)


_DEEP_RECURSION = HeldSetting(_raise_recursion_limit)


def deep_recursion() -> AbstractContextManager:
    """Run generated code (which may compile, recursively, at its first call) with the recursion
    limit raised to COMPILE_RECURSION_LIMIT; restored when the last such call in the process ends."""
    return _DEEP_RECURSION.held()


def compiled(module: ModuleType, name: str, backend: str, dependencies: dict, batch_entry: bool = False):
    """The callable for ``module.name``: the plain function, or its Numba dispatcher. Numba's own
    bounds checks stay off: the generated code checks its indices itself (``Lowerer.index_checks``),
    naming the user's line, and leaves the loops of vector instructions unchecked. Its divisions are
    checked the same way, so Numba's error model is NumPy's: no exception and no second zero test
    per division. No C-callable wrapper (``no_cfunc_wrapper``): revdiff calls its programs through
    Numba's own calling convention (``runtime/program_calls.py``), never as C functions.
    ``batch_entry``: the workers beside it (``backends/numba/entries.py``) compiled too."""
    link(module, dependencies)
    if batch_entry:  # a batch entry's per-element (or per-chunk) workers
        link(module, {part: compiled(module, part, backend, {})
                      for part in (f"{name}_{suffix}" for suffix in BATCH_WORKERS) if hasattr(module, part)})
    key = (module.__name__, name)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = getattr(module, name)
        if backend == "numba":
            import numba
            # Numba's disk cache reads the file's stamp: the file back in place if someone cleared the cache
            ensure_file(Path(module.__file__), _TEXTS[module.__file__].encode())
            fn = numba.njit(cache=True, fastmath=False, nogil=True, boundscheck=False, error_model="numpy",
                             no_cfunc_wrapper=True)(fn)
            verify_cache(fn)
            fn.revdiff_key = key
            # Numba's dispatcher asks its cache (``load_overload(sig, target_context)``, Numba 0.6x)
            # before it compiles a signature: the one place a compile can be sent elsewhere.
            cache = fn._cache
            if isinstance(getattr(cache, "_cache_file", None), VerifiedCacheFile):  # a disk cache to meet in
                cache.load_overload = functools.partial(_load_or_compile_elsewhere, fn, cache.load_overload)
        _COMPILED[key] = fn
    return fn


def _load_or_compile_elsewhere(fn, numba_load, sig, target_context):
    """Numba's cache lookup for ``fn``; on a miss with the compile worker on, the worker compiles
    ``fn`` for ``sig`` into the disk cache and the lookup runs again. None (Numba compiles here)
    when the worker is off or failed, or its result is not in the cache: then this process
    compiles, and reports whatever error or warning the compile raises, once."""
    result = numba_load(sig, target_context)
    if result is None and compile_worker.enabled():
        how = recipe(fn)
        caught = compile_worker.compile_elsewhere(how, sig) if how is not None else None
        if caught is not None:
            result = numba_load(sig, target_context)
            if result is not None:  # compiled there: its warnings are this compile's
                for message, category, filename, lineno in caught:
                    warnings.warn_explicit(message, category, filename, lineno)
    return result


def recipe(fn) -> dict | None:
    """What rebuilds generated function ``fn`` in another process: each generated module it reaches
    through its globals (file, backend and the globals revdiff linked in, by reference), and its own
    (module, name). None when a linked global is neither generated nor importable by name."""
    modules: dict = {}
    todo = [fn.revdiff_key[0]]
    while todo:
        name = todo.pop()
        if name in modules:
            continue
        references = {}
        for global_name, value in _LINKED.get(name, {}).items():
            reference = _reference(value)
            if reference is None:
                return None
            if reference[0] == "generated":
                todo.append(reference[1])
            references[global_name] = reference
        modules[name] = (*_FILES[name], references)
    return {"modules": modules, "target": fn.revdiff_key}


def _reference(value) -> tuple | None:
    """("generated", module, name) for a generated function, ("import", module, name) for one
    importable by name, else None."""
    key = getattr(value, "revdiff_key", None)
    if key is not None:
        return ("generated", *key)
    # a Numba dispatcher (py_func), a Numba intrinsic (_defn, its Python definition) or a function
    inner = getattr(value, "py_func", None) or getattr(value, "_defn", None) or value
    module, name = getattr(inner, "__module__", None), getattr(inner, "__name__", None)
    if module and name and getattr(sys.modules.get(module), name, None) is value:
        return ("import", module, name)
    return None


def rebuild(how: dict):
    """The function a ``recipe`` describes, rebuilt in this process from the generated files (each
    checked against the digest its name holds) and the globals' references."""
    for path, backend, _ in how["modules"].values():
        path = Path(path)
        data = read_regular(path)
        text = data.decode(errors="replace") if data is not None else ""
        if data is None or _text_digest(text) != path.stem.rpartition("_")[2]:
            raise RuntimeError(f"generated file {path} does not hold the text its name promises")
        _module(path, text, backend)
    for path, backend, references in how["modules"].values():
        link(_MODULES[(path, backend)], {g: _resolve(r, how) for g, r in references.items()})
    return _rebuilt(how, *how["target"])


def _resolve(reference: tuple, how: dict):
    kind, module_name, name = reference
    if kind == "import":
        return getattr(importlib.import_module(module_name), name)
    return _rebuilt(how, module_name, name)


def _rebuilt(how: dict, module_name: str, name: str):
    """Generated function ``name`` of the module ``how`` lists as ``module_name``, compiled here."""
    path, backend, _ = how["modules"][module_name]
    return compiled(_MODULES[(path, backend)], name, backend, {})
