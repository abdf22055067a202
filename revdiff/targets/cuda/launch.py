"""Running kernel modules: NVRTC compilation, a host (g++) build of the same source for testing
without a GPU, and the launch loop both share: rerun with more ancilla scratch while it runs out,
then turn the kernel's error record into the error the CPU backend raises."""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
from typing import Callable, NamedTuple

import numpy as np

from revdiff.targets.cuda.emit import PRELUDE
from revdiff.errors import ReversibilityError
from revdiff.ir import checks
from revdiff.runtime import cache, loader
from revdiff.runtime.device import cupy_module

HOST_SHIM = PRELUDE.with_name("revdiff_host.h")
#: error codes a kernel writes (``RD_CHECK_FAILED`` ... in ``revdiff_cuda.h``)
CHECK_FAILED, INDEX_OUT_OF_BOUNDS, SCRATCH_EXHAUSTED = 1, 2, 3
THREADS_PER_BLOCK = 128
_DEVICE_ERROR = np.dtype([("code", np.int32), ("fkey", np.int32), ("idx", np.int32), ("pad", np.int32),
                          ("batch", np.int64), ("v0", np.float64), ("v1", np.float64)])


class HostModule:
    """A kernel module compiled as host C++ (g++, unoptimised: it checks correctness, not speed)
    and called through ctypes, one thread at a time: the kernel source NVRTC compiles, run on the
    CPU to check it against the compiled (LLVM) backend."""

    def __init__(self, source: str, stem: str):
        digest = hashlib.sha256(source.encode()).hexdigest()[:20]
        directory = loader.cache_dir() / "host"
        directory.mkdir(exist_ok=True)
        src, lib = directory / f"{stem}_{digest}.cpp", directory / f"{stem}_{digest}.so"
        check = lib.with_suffix(".so.sha256")  # a damaged library is rebuilt, never loaded
        if not (lib.is_file() and check.is_file() and check.read_text() == cache.digest(lib.read_bytes())):
            cache.ensure_file(src, source.encode())
            built = lib.with_suffix(f".{os.getpid()}.tmp.so")
            cmd = ["g++", "-std=c++17", "-O0", "-ffp-contract=off", "-shared", "-fPIC", "-o", str(built), str(src)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"host compilation of {src} failed:\n{done.stderr[-4000:]}")
            cache.clear(lib)
            os.replace(built, lib)
            cache.write_atomically(check, cache.digest(lib.read_bytes()).encode())
        self.lib = ctypes.CDLL(str(lib))

    def entry(self, name: str):
        return getattr(self.lib, name + "_host")


class ErrorRecord(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("fkey", ctypes.c_int), ("idx", ctypes.c_int),
                ("batch", ctypes.c_longlong), ("v0", ctypes.c_double), ("v1", ctypes.c_double)]


def _meta(a: np.ndarray) -> np.ndarray:
    return np.array(list(a.shape) + [s // a.itemsize for s in a.strides], dtype=np.int64)


def _complex_ctype(part):
    """``rd_complex<T>`` by value: (re, im), as CuPy passes a complex scalar to a kernel."""
    struct = type(f"rd_complex_{part.__name__}", (ctypes.Structure,), {"_fields_": [("re", part), ("im", part)]})
    return lambda z: struct(z.real, z.imag)


_SCALAR_CTYPES = {"float64": ctypes.c_double, "float32": ctypes.c_float, "int64": ctypes.c_longlong,
                  "int32": ctypes.c_int, "bool": ctypes.c_bool, "complex128": _complex_ctype(ctypes.c_double),
                  "complex64": _complex_ctype(ctypes.c_float)}


#: how batched arrays and ancillas are laid out for a kernel (``REVDIFF_CUDA_LAYOUT``, read at every
#: launch): "interleaved" (the default: element b of every batched array with axes besides the batch
#: axis, and of every ancilla, next to element b + 1, so that a warp's accesses coalesce) or
#: "element" (each element's arrays and ancilla stack contiguous, as the user's arrays are: the
#: threads of a warp access addresses a matrix apart, one transaction each)
LAYOUTS = ("interleaved", "element")


def layout(value: str | None = None) -> str:
    """The layout kernels run with: ``value``, else ``REVDIFF_CUDA_LAYOUT``, else "interleaved"."""
    if value is None:
        value = os.environ.get("REVDIFF_CUDA_LAYOUT", "")
    value = value.strip().lower() or LAYOUTS[0]
    if value not in LAYOUTS:
        raise ValueError(f"REVDIFF_CUDA_LAYOUT must be one of {', '.join(LAYOUTS)}, not {value!r}")
    return value


def interleave(a, xp):
    """Batched array ``a`` (batch axis first) copied into storage with the batch axis innermost, and
    viewed batch-first again: the same values and shape, batch stride 1. A kernel thread reads its
    element through the strides (``rd_element``), so thread b + 1 reads next to thread b."""
    return xp.moveaxis(xp.ascontiguousarray(xp.moveaxis(a, 0, -1)), -1, 0)


class Argument(NamedTuple):
    """How a kernel treats one argument: whether it has a batch axis, and whether the kernel may
    write it (an unmodified parameter and its tangent are only read)."""

    batched: bool
    written: bool


def launch(run: Callable[[list, int, bool], tuple], arrays: list, kinds: list, interleaved: bool, xp, entry: str,
           scratch_bytes: int, limit: int) -> None:
    """``run(work, scratch_bytes, interleaved)`` launches the kernel once on argument list ``work``
    and returns its error record (code, function key, check index, batch element, two values).
    ``kinds``: an ``Argument`` per argument. Interleaved, the batched arrays with axes besides the
    batch axis run as interleaved copies, and those the kernel may write are copied back after the
    last launch; otherwise the kernel runs in place. A kernel whose ancillas did not fit in the
    scratch runs again, its arguments as they were, with four times as much, up to ``limit`` bytes
    per element: interleaved ancillas take a slot of the module's largest element each, so past the
    limit it runs once more in the element layout before giving up."""
    start = scratch_bytes
    originals: list = [None] * len(arrays)  # what the kernel may change in place, to run it again
    while True:
        copied = [interleaved and k.batched and isinstance(a, xp.ndarray) and a.ndim >= 2 for a, k in zip(arrays, kinds)]
        for i, (a, k, c) in enumerate(zip(arrays, kinds, copied)):
            if originals[i] is None and k.written and not c and isinstance(a, xp.ndarray):
                originals[i] = a.copy()
        work = [interleave(a, xp) if c else a for a, c in zip(arrays, copied)]
        code, fkey, idx, batch, v0, v1 = run(work, scratch_bytes, interleaved)
        if code != SCRATCH_EXHAUSTED:
            break
        scratch_bytes *= 4
        if scratch_bytes > limit:
            if not interleaved:
                raise MemoryError(f"ancillas need more than {limit >> 20} MiB of scratch per batch element")
            interleaved, scratch_bytes = False, start
        for a, original in zip(arrays, originals):
            if original is not None:
                a[...] = original
    for a, w, k, c in zip(arrays, work, kinds, copied):
        if c and k.written:
            a[...] = w
    if code == CHECK_FAILED:
        raise checks.to_error(fkey, idx, v0, v1, batch) from None
    if code == INDEX_OUT_OF_BOUNDS:
        raise IndexError(f"index {int(v0)} is out of bounds for axis {idx} with size {int(v1)} "
                         f"in {entry} (batch element {batch})")
    if code:
        raise ReversibilityError(f"kernel {entry} failed with code {code}")


def run_host(module: HostModule, entry: str, arrays: list, kinds: list, batch: int,
             interleaved: bool, scratch_bytes: int = 1 << 16) -> None:
    """Run kernel ``entry`` of a host-compiled module in place on ``arrays`` (the argument list of
    the compiled batched entry; ``kinds`` an ``Argument`` for each), one batch element at a time, in the
    layout a GPU runs (``interleaved`` or not)."""

    def run(work: list, size: int, interleaved: bool) -> tuple:
        keep, cargs = [], []
        for a in work:
            if isinstance(a, np.ndarray):
                meta = _meta(a)
                keep.append(meta)
                cargs += [a.ctypes.data_as(ctypes.c_void_p), meta.ctypes.data_as(ctypes.c_void_p)]
            else:
                cargs.append(_SCALAR_CTYPES[np.asarray(a).dtype.name](a))
        err = ErrorRecord()
        scratch = np.zeros(batch * size, np.uint8)
        module.entry(entry)(*cargs, ctypes.c_longlong(batch), ctypes.byref(err),
                            scratch.ctypes.data_as(ctypes.c_void_p), ctypes.c_longlong(size),
                            ctypes.c_longlong(int(interleaved)))
        return err.code, err.fkey, err.idx, int(err.batch), err.v0, err.v1

    launch(run, arrays, kinds, interleaved, np, entry, scratch_bytes, 1 << 30)


def run_device(module, entry: str, arrays: list, kinds: list, batch: int, interleaved: bool,
               scratch_bytes: int = 1 << 14) -> None:
    """Launch kernel ``entry`` of a CuPy ``RawModule`` in place on ``arrays`` (CuPy arrays and host
    scalars: the argument list of the CPU batched entry; ``kinds`` an ``Argument`` for each), one
    thread per batch element, on CuPy's current stream."""
    cupy = cupy_module()
    kernel = module.get_function(entry)
    blocks = (batch + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK

    def run(work: list, size: int, interleaved: bool) -> tuple:
        kargs = []
        for a in work:
            if isinstance(a, cupy.ndarray):
                kargs += [a, cupy.asarray(_meta(a))]
            else:
                kargs.append(np.asarray(a).dtype.type(a))
        err = cupy.zeros(_DEVICE_ERROR.itemsize, np.uint8)
        scratch = cupy.zeros(batch * size, np.uint8)
        kernel((blocks,), (THREADS_PER_BLOCK,), tuple(kargs) + (np.int64(batch), err, scratch, np.int64(size),
                                                               np.int64(int(interleaved))))
        r = cupy.asnumpy(err).view(_DEVICE_ERROR)[0]
        return (int(r["code"]), int(r["fkey"]), int(r["idx"]), int(r["batch"]), float(r["v0"]), float(r["v1"]))

    launch(run, arrays, kinds, interleaved, cupy, entry, scratch_bytes, 1 << 26)


def nvrtc_options(fmad: bool) -> tuple:
    """The NVRTC options of every kernel module (CuPy's ``RawModule`` and ``nvrtc_compile`` alike): FMA
    contraction only where the function allows it (``fmad=True``), so that by default a forward value
    is exactly what its inverse subtracts."""
    return ("--std=c++17", f"--fmad={'true' if fmad else 'false'}")


def nvrtc_compile(source: str, arch: str = "sm_90", fmad: bool = False, optimize: bool = True) -> bytes:
    """Compile kernel source with NVRTC (``cuda-bindings``; no driver needed) and return the PTX;
    raises RuntimeError with NVRTC's log on failure. ``optimize=False`` adds ``--Ofast-compile=max``:
    the front end and PTX generation for ``arch`` without NVVM's optimiser (30x faster on
    revdiff's kernels), to check that source is valid for an architecture."""
    from cuda.bindings import nvrtc
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), b"revdiff.cu", 0, [], [])
    _nvrtc_ok(nvrtc, err)
    try:
        fast = () if optimize else ("--Ofast-compile=max",)
        opts = [option.encode() for option in (f"--gpu-architecture={arch}",) + nvrtc_options(fmad) + fast]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(f"NVRTC failed for {arch}:\n{log.decode(errors='replace')[-6000:]}")
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        nvrtc.nvrtcGetPTX(prog, ptx)
    finally:  # a failed compile's program too
        nvrtc.nvrtcDestroyProgram(prog)
    return ptx


def _nvrtc_ok(nvrtc, err) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"NVRTC error {err}")
