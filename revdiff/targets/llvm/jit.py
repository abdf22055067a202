"""Machine code of generated LLVM modules: optimised and compiled by LLVM in this process (llvmlite,
the LLVM binding Numba is built on), loaded into one JIT shared by every module, and cached on disk.

A module's object code is stored in the cache directory under a digest of everything it depends
on: the module's text, the optimisation pipeline, LLVM's version, and this machine's CPU and
features. The file holds a digest of its bytes too, checked before the code is loaded: a damaged or
foreign file is compiled again and rewritten, never run. Modules reach each other's programs by
symbol (a caller is compiled after its callees); a module whose symbols are all loaded in this
process already is not loaded again, and one symbol generated from two different texts raises.

Compiling takes a fraction of a second per program; one that takes longer than
``NOTICE_SECONDS`` tells the user once per process, on standard error, what it compiles
(``REVDIFF_COMPILE_NOTICE=0`` silences it).
"""
from __future__ import annotations

import ctypes
import hashlib
import re
import sys
import threading
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from revdiff.runtime.cache import cache_dir, read_regular, unwritable, write_atomically
from revdiff.runtime.heap import raise_malloc_thresholds
from revdiff.runtime.switches import switched_off

#: the optimisation level of generated programs (LLVM's -O2: loop and SLP vectorisers on)
OPT_LEVEL = 2
#: the code generator's level (instruction selection, scheduling, register allocation): at 1 it
#: compiles block CGS2's gradient modules a quarter faster than at 2, and the programs ran as fast
#: (alternating runs, ``benchmarks/RESULTS.md``); the arithmetic is the same either way
CODEGEN_LEVEL = 1
#: a compile running longer than this tells the user, once per process
NOTICE_SECONDS = 2.0
_FORMAT = b"revdiff-native-1\n"  # the header of a cached object file, before its digest

_LOCK = threading.RLock()
_STATE: dict = {}
_LOADED: dict = {}  # symbol -> (module digest, address)
_NOTICE: list = []


def _initialize() -> dict:
    """The target machine and the JIT engine of this process, made on first use (by one thread: two
    threads making them at once crashed LLVM)."""
    if _STATE:
        return _STATE
    with _LOCK:
        return _initialized()


def _initialized() -> dict:
    if not _STATE:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_triple(llvm.get_process_triple())
        cpu, features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        # static relocations and the JIT's code model for MCJIT (the settings Numba's JIT uses on x86)
        tm = target.create_target_machine(cpu=cpu, features=features, opt=CODEGEN_LEVEL, reloc="static",
                                          codemodel="jitdefault", jit=True)
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        host = f"{llvm.get_process_triple()} {cpu} {features} llvm {llvm.llvm_version_info} llvmlite {llvmlite.__version__}"
        _STATE.update(tm=tm, engine=engine, host=host, layout=str(tm.target_data), triple=tm.triple)
        raise_malloc_thresholds()  # before the compiled programs allocate their ancillas
    return _STATE


#: the BLAS functions generated code calls (``targets/llvm/host.py``), by the symbol it calls them
#: under: SciPy's (``scipy.linalg.cython_blas``), made known to the JIT when a module first needs them
BLAS_SYMBOLS = {"revdiff_dgemv": "dgemv", "revdiff_sgemv": "sgemv", "revdiff_dgemm": "dgemm",
                "revdiff_sgemm": "sgemm"}


def _register_blas() -> None:
    if _STATE.get("blas"):
        return
    from scipy.linalg import cython_blas  # noqa: PLC0415 - SciPy's BLAS is loaded only where a program uses it

    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype, api.PyCapsule_GetName.argtypes = ctypes.c_char_p, [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    for symbol, name in BLAS_SYMBOLS.items():
        capsule = cython_blas.__pyx_capi__[name]
        llvm.add_symbol(symbol, api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule)))
    _STATE["blas"] = True


def target_triple() -> str:
    return _initialize()["triple"]


def data_layout() -> str:
    return _initialize()["layout"]


def _pipeline() -> str:
    """The optimisation pipeline, as part of a module's cache key."""
    return f"O{OPT_LEVEL} codegen O{CODEGEN_LEVEL} vectorize=True"


def _stem(name: str) -> str:
    """A file name stem from a module's name: ASCII letters, digits and underscores, at most 80."""
    return (re.sub(r"[^A-Za-z0-9_]", "_", name) or "module")[:80]


def load(text: str, name: str, symbols: list) -> dict:
    """The addresses of ``symbols``, defined by the LLVM module ``text`` (named ``name`` in the
    cache): loaded from the cache, or compiled and cached. Every symbol it declares without defining
    must be loaded already. Thread-safe."""
    state = _initialize()
    if "@revdiff_" in text:
        _register_blas()
    key = hashlib.sha256("\0".join((text, _pipeline(), state["host"])).encode()).hexdigest()
    with _LOCK:
        if symbols and all(s in _LOADED for s in symbols):
            for s in symbols:
                if _LOADED[s][0] != key:
                    raise RuntimeError(f"revdiff: two different programs were generated under the symbol {s}")
            return {s: _LOADED[s][1] for s in symbols}
        path = cache_dir() / "native" / f"{_stem(name)}_{key[:24]}.o"
        code = _read_object(path, key)
        if code is None:
            code = _compile(text, name, state)
            try:
                write_atomically(path, _FORMAT + _digest(key, code) + code)
            except OSError as exc:  # a full disk, a quota, a directory made read-only meanwhile
                unwritable(path.parent, exc)
        engine = state["engine"]
        engine.add_object_file(llvm.ObjectFileRef.from_data(code))
        engine.finalize_object()
        addresses = {}
        for s in symbols:
            address = engine.get_function_address(s)
            if not address:
                raise RuntimeError(f"revdiff: the compiled module {name} defines no {s}")
            _LOADED[s] = (key, address)
            addresses[s] = address
        return addresses


def _digest(key: str, code: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\0" + code).digest()


def _read_object(path: Path, key: str) -> bytes | None:
    """The object code cached at ``path``, or None where there is none or it does not hold what its
    digest says (it is then compiled again and rewritten)."""
    data = read_regular(path)
    if data is None:
        return None
    head, stored, code = data[:len(_FORMAT)], data[len(_FORMAT):len(_FORMAT) + 32], data[len(_FORMAT) + 32:]
    if head != _FORMAT or _digest(key, code) != stored:
        return None
    return code


def _compile(text: str, name: str, state: dict) -> bytes:
    """Object code of module ``text``: parsed, optimised and compiled for this machine."""
    timer = threading.Timer(NOTICE_SECONDS, _notice, (name,))
    timer.daemon = True
    timer.start()
    try:
        module = llvm.parse_assembly(text)
        module.triple = state["triple"]
        module.data_layout = state["layout"]
        tuning = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
        tuning.loop_vectorization = True
        tuning.slp_vectorization = True
        builder = llvm.create_pass_builder(state["tm"], tuning)
        builder.getModulePassManager().run(module, builder)
        return state["tm"].emit_object(module)
    finally:
        timer.cancel()


def _notice(name: str) -> None:
    if _NOTICE or switched_off("REVDIFF_COMPILE_NOTICE"):
        return
    _NOTICE.append(name)
    sys.stderr.write(f"revdiff: compiling {name} (a first call of a new program or argument types; "
                     f"the result is cached in {cache_dir()} for later processes)\n")


def entry_function(address: int):
    """A ctypes function of one pointer argument at ``address`` (a module's packed entry)."""
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)


def object_entry_function(address: int, count: int):
    """A ctypes function of ``count`` Python objects at ``address`` (a module's entry reading arrays)."""
    return ctypes.CFUNCTYPE(None, *([ctypes.py_object] * count))(address)


__all__ = ["load", "entry_function", "object_entry_function", "target_triple", "data_layout", "NOTICE_SECONDS"]
