"""The CUDA backend without a GPU: every program's kernels compile with NVRTC (sm_90 and sm_80),
and the very kernel source, compiled as host C++ and run one thread after another, agrees with
the compiled backend (forward, inverse and both adjoints). GPU tests run only where a GPU is."""
import ctypes
import functools
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import revdiff
from revdiff import ancilla, release, zeros
from revdiff.targets.cuda import launch
from revdiff.targets.cuda import programs as kernels
from revdiff import programs as P
from revdiff.programs import leapfrog as L
from revdiff.programs import projection as PR

rng = np.random.default_rng(21)
B = 3


def rand(shape, dtype=np.float64):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def qr_case(program, m, n, dtype, extra=0):
    p = min(m, n)
    outs = (np.zeros((B, m, p), dtype), np.zeros((B, p, n), dtype)) + ((np.zeros((B, m, p), dtype),) if extra else ())
    return program, program.params, outs + (rand((B, m, n), dtype),)


def vector_case(program, m, n, dtype, out_len):
    p = min(m, n)
    return program, program.params, (np.zeros((B, out_len), dtype), np.zeros((B, p, n), dtype),
                                     rand((B, m, n), dtype), rand((B, m), dtype))


@revdiff.reversible
def special_functions(y, x):
    for i in range(x.shape[0]):
        y[i] += np.arcsin(x[i]) + np.arccos(x[i]) + np.arctanh(x[i]) + np.arcsinh(x[i]) + np.arccosh(x[i] + 2.0)
        y[i] += np.log1p(x[i]) + np.expm1(x[i]) + np.log2(x[i] + 2.0) + np.log10(x[i] + 2.0)
        y[i] += math.erf(x[i]) + math.erfc(x[i]) + np.sqrt(x[i] + 1.0) + np.log(x[i] + 1.5)


@revdiff.reversible
def whole_arrays(y, Y, x, A, w):
    y[:] += x * np.sin(w)
    Y[1:, :] -= A[:-1, :] * 0.5 + 1.0
    y[:] *= w * w + 1.0
    t = ancilla(x[:])
    y[:] /= t * t + 2.0
    release(t, x[:])


CASES = {
    "cgs2": lambda: qr_case(P.cgs2, 6, 4, np.float64),
    "cgs2 wide complex": lambda: qr_case(P.cgs2, 3, 5, np.complex128),
    "mgs": lambda: qr_case(P.mgs, 5, 3, np.float64),
    "bcgs2 two panels": lambda: qr_case(P.bcgs2, 40, 35, np.float64),
    "cgs float32": lambda: qr_case(P.cgs, 5, 3, np.float32),
    "householder complex": lambda: qr_case(P.householder, 5, 3, np.complex128),
    "blocked householder two panels": lambda: qr_case(P.blocked_householder, 40, 35, np.float64),
    "givens": lambda: qr_case(P.givens, 5, 3, np.float64, extra=1),
    "householder complete": lambda: (P.householder, P.householder.params,
                                     (np.zeros((B, 5, 5)), np.zeros((B, 5, 3)), rand((B, 5, 3)))),
    "project_leading_householder": lambda: (PR.LEADING_PROJECTIONS["householder"], ("z", "R", "A", "y", "r"),
                                            (np.zeros((B, 6)), np.zeros((B, 3, 3)), rand((B, 6, 3)), rand((B, 6)),
                                             np.array([3, 2, 0]))),
    "project_cgs2": lambda: vector_case(P.project_cgs2, 7, 3, np.float64, 7),
    "project_householder": lambda: vector_case(P.project_householder, 6, 3, np.float64, 6),
    "lstsq_mgs": lambda: vector_case(P.lstsq_mgs, 7, 3, np.float64, 3),
    "normalize": lambda: (P.normalize_program, ("y", "x"), (np.zeros((B, 5)), rand((B, 5)))),
    "tangent_project complex": lambda: (P.tangent_project_program, ("out", "g", "z"),
                                        (np.zeros((B, 4), complex), rand((B, 4), complex), rand((B, 4), complex))),
    "nbody_final_energy": lambda: (L.nbody_final_energy, ("E", "x", "v"),
                                   (np.zeros(B), rand((B, 3, 3)), 0.1 * rand((B, 3, 3)), np.ones(3), 1.0, 0.1,
                                    1e-3, 5)),
    "special_functions": lambda: (special_functions, ("y", "x"), (np.zeros((B, 5)), rng.uniform(-0.9, 0.9, (B, 5)))),
    "whole_arrays": lambda: (whole_arrays, ("y", "Y", "x", "A", "w"), (rand((B, 5)), rand((B, 3, 4)), rand((B, 5)),
                                                                    rand((B, 3, 4)), rand((B, 5)))),
    "chain_leapfrog": lambda: (L.chain_leapfrog, ("x", "v"), (rand((B, 6)), rand((B, 6)), 1.0, 1.0, 0.01, 7)),
}


def _element(bf, args, b):
    """Copies of batch element b (a call updates its arguments in place)."""
    return tuple(a[b].copy() if p in bf.batched and isinstance(a[b], np.ndarray) else
                 (a[b] if p in bf.batched else a) for p, a in zip(bf.f.params, args))


def _per_element_call(bf, args):
    """The compiled backend, one element at a time (no batched entry to compile)."""
    results = [bf.f(*_element(bf, args, b)) for b in range(B)]
    return [np.stack([r[k] for r in results]) if p in bf.batched else results[0][k]
            for k, p in enumerate(bf.f.params)]


def _entries(program, batched, args, run=True):
    """(BatchedFunction, kind, types, arguments) of f and ~f; ~f runs on f's results. ``run=False``:
    only the kernels' types are wanted, and ~f gets f's arguments (same types) instead of its
    results, so no CPU program is compiled to produce them."""
    out = []
    forward = revdiff.batched(program, batched)
    inverse_inputs = _per_element_call(forward, args) if run else args
    for bf, inputs in ((forward, args), (revdiff.batched(~program, batched), inverse_inputs)):
        inputs = tuple(inputs)
        types = bf._element_types(inputs)
        out += [(bf, "call", types, inputs), (bf, "value", types, inputs), (bf, "vjp", types, inputs)]
    return out


def _tolerance(args):
    single = any(isinstance(a, np.ndarray) and a.dtype in (np.float32, np.complex64) for a in args)
    return 2e-5 if single else 1e-11


def _in_both_layouts(module, bf, kind, arrays, types):
    """Run the kernel in place on ``arrays`` in the interleaved layout, and on copies in the element
    layout: the two must agree bit for bit (the same arithmetic at other addresses)."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
    kernels.run_on_host(module, bf, kind, arrays, types, layout="interleaved")
    kernels.run_on_host(module, bf, kind, copies, types, layout="element")
    for k, (a, c) in enumerate(zip(arrays, copies)):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, c, err_msg=f"argument {k} of {kind} in the two layouts")


def _check_call(module, bf, types, args, tol, kind="call"):
    """The ``kind`` entry ("call", or "value": the fused vjp's forward half) against per-element calls."""
    want = _per_element_call(bf, args)
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    _in_both_layouts(module, bf, kind, got, types)
    for w, g in zip(want, got):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


def _check_vjp(module, bf, types, args, tol):
    cots = [rand(a.shape, a.dtype) if isinstance(a, np.ndarray) and p in bf.batched else None
            for p, a in zip(bf.f.params, args)]
    outs, grads = [], []
    for b in range(B):
        o, pullback = revdiff.vjp(bf.f, *_element(bf, args, b))
        outs.append(o)
        grads.append(pullback(*(c[b] if c is not None else None for c in cots)))
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    gbufs = []
    for p, a, c, t in zip(bf.f.params, args, cots, types):
        if t.differentiable:
            gbufs.append(c.copy() if c is not None else np.zeros((B,) + np.shape(a[0] if p in bf.batched else a),
                                                                  np.asarray(a).dtype))
    saved = [np.empty_like(args[bf.f.params.index(p)]) for p in bf.signature("vjp", types).saved]
    _in_both_layouts(module, bf, "vjp", copies + gbufs + saved, types)
    k = 0
    for i, (p, t) in enumerate(zip(bf.f.params, types)):
        if t.differentiable:
            want = np.stack([np.asarray(g[i]) for g in grads])
            got = gbufs[k]
            if p not in bf.batched:
                want, got = want.sum(axis=0), got.sum(axis=0)
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10, err_msg=f"gradient of {p}")
            k += 1
    for p, s_ in zip(bf.signature("vjp", types).saved, saved):
        want = np.stack([np.asarray(o[bf.f.params.index(p)]) for o in outs])
        np.testing.assert_allclose(s_, want, rtol=tol, atol=tol, err_msg=f"forward result {p}")


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for host emulation")
@pytest.mark.parametrize("case", list(CASES))
def test_host_emulation_of_kernel_source_matches_the_cpu(case):
    program, batched, args = CASES[case]()
    entries = _entries(program, batched, args)
    module = launch.HostModule(kernels.module_source([e[:3] for e in entries], host=True), "test_" + program.__name__)
    tol = _tolerance(args)
    for bf, kind, types, inputs in entries:
        if kind == "vjp":
            _check_vjp(module, bf, types, inputs, tol)
        else:
            _check_call(module, bf, types, inputs, tol, kind)


SCRATCH_PROBE = r"""
template <typename T, int N>
int mark(const rd_array<T, N>& a, const char* scratch, rd_int total, int* owner, int id) {
    int bad = 0;
    rd_int size = 1;
    for (int d = 0; d < N; ++d) size *= a.shape[d];
    for (rd_int flat = 0; flat < size; ++flat) {
        rd_int rest = flat, offset = 0;
        for (int d = N - 1; d >= 0; --d) {
            offset += rest % a.shape[d] * a.stride[d];
            rest /= a.shape[d];
        }
        if (!(a.data[offset] == T(0))) ++bad;  // zero-filled
        for (rd_int k = 0; k < (rd_int)sizeof(T); ++k) {
            rd_int at = (const char*)(a.data + offset) - scratch + k;
            if (at < 0 || at >= total || (owner[at] && owner[at] != id)) ++bad;
            else owner[at] = id;
        }
    }
    return bad;
}

// every thread allocates ancillas of several types and ranks, releases some and allocates again, as
// device functions do; returns the bytes touched outside the scratch, by two ancillas at once, or
// not zero-filled, and writes each ancilla's first-element address for each thread to `first`
extern "C" int probe(rd_int threads, rd_int capacity, int interleaved, char* scratch, int* owner, long long* first) {
    int bad = 0;
    const rd_int total = threads * capacity;
    for (rd_int b = 0; b < threads; ++b) {
        rd_error err = {0, 0, 0, 0, 0.0, 0.0};
        rd_status st = {&err, b, interleaved ? scratch : scratch + b * capacity, 0, capacity, 0,
                        interleaved ? threads : 1};
        rd_array<double, 2> a = rd_alloc<double, 2>(&st, {3, 5});
        rd_array<float, 1> f = rd_alloc<float, 1>(&st, {7});
        const rd_int mark_ = st.used;
        rd_array<rd_complex<double>, 1> z = rd_alloc<rd_complex<double>, 1>(&st, {2});
        st.used = mark_;  // released, as a returning device function releases its ancillas
        rd_array<double, 3> c = rd_alloc<double, 3>(&st, {2, 2, 3});
        rd_array<char, 1> e = rd_alloc<char, 1>(&st, {0});
        if (err.code) return -1;
        bad += mark(a, scratch, total, owner, (int)(5 * b + 1)) + mark(f, scratch, total, owner, (int)(5 * b + 2))
             + mark(c, scratch, total, owner, (int)(5 * b + 4)) + mark(e, scratch, total, owner, (int)(5 * b + 5));
        bad += mark(z, scratch, total, owner, (int)(5 * b + 4));  // where c now lies
        first[4 * b + 0] = (const char*)a.data - scratch;
        first[4 * b + 1] = (const char*)f.data - scratch;
        first[4 * b + 2] = (const char*)z.data - scratch;
        first[4 * b + 3] = (const char*)c.data - scratch;
    }
    return bad;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to compile the prelude")
@pytest.mark.parametrize("layout", launch.LAYOUTS)
def test_ancilla_stacks_never_overlap_and_interleave_across_threads(layout):
    """rd_alloc's addresses: every byte of every thread's ancillas inside the scratch, no two live
    ancillas sharing one (also where threads allocate different types at one offset), each
    zero-filled; interleaved, thread b + 1's element sits one slot after thread b's (a warp's
    accesses coalesce), element-major a whole stack further."""
    source = (f'#define RD_ANCILLA_SLOT 16\n#include "{launch.HOST_SHIM}"\n#include "{launch.PRELUDE}"\n'
              + SCRATCH_PROBE)
    lib = launch.HostModule(source, "test_scratch").lib
    threads, capacity = 5, 1024
    scratch = np.full(threads * capacity, 0xFF, np.uint8)
    owner = np.zeros(threads * capacity, np.int32)
    first = np.zeros((threads, 4), np.int64)
    pointer = np.ctypeslib.ndpointer
    lib.probe.argtypes = [ctypes.c_longlong, ctypes.c_longlong, ctypes.c_int, pointer(np.uint8), pointer(np.int32),
                          pointer(np.int64)]
    assert lib.probe(threads, capacity, int(layout == "interleaved"), scratch, owner, first) == 0
    step = np.diff(first, axis=0)
    if layout == "interleaved":
        assert (step == 16).all()  # one slot (the largest element, complex128): consecutive across threads
    else:
        assert (step == capacity).all()


def test_the_layout_is_chosen_by_environment(monkeypatch):
    monkeypatch.delenv("REVDIFF_CUDA_LAYOUT", raising=False)
    assert launch.layout() == "interleaved"
    monkeypatch.setenv("REVDIFF_CUDA_LAYOUT", " Element ")
    assert launch.layout() == "element"
    monkeypatch.setenv("REVDIFF_CUDA_LAYOUT", "coalesced")
    with pytest.raises(ValueError, match="REVDIFF_CUDA_LAYOUT must be one of interleaved, element, not 'coalesced'"):
        launch.layout()


def test_interleaved_copies_keep_values_with_the_batch_axis_innermost():
    a = rand((3, 4, 5))[:, ::2, :]  # a strided view, as a user may pass
    v = launch.interleave(a, np)
    np.testing.assert_array_equal(v, a)
    assert v.strides[0] == a.itemsize and v.base is not None and v.base.flags.c_contiguous


@revdiff.reversible
def divide(x, y):
    x /= y


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for host emulation")
def test_host_emulation_reports_failed_checks_like_the_cpu():
    bf = revdiff.batched(divide, ("x", "y"))
    args = (np.ones(4), np.array([1.0, 2.0, 0.0, 4.0]))
    types = bf._element_types(args)
    module = launch.HostModule(kernels.module_source([(bf, "call", types)], host=True), "test_divide")
    with pytest.raises(revdiff.ReversibilityError, match="division by zero") as cpu:
        bf(*args)
    with pytest.raises(revdiff.ReversibilityError, match="division by zero") as emulated:
        kernels.run_on_host(module, bf, "call", [a.copy() for a in args], types)
    assert str(cpu.value) == str(emulated.value)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to compile the kernel source")
def test_compiler_messages_name_the_users_line(tmp_path):
    """The kernel source carries #line directives: an error in the code generated from a line of
    the user's function is reported at that file and line (NVRTC reads them as g++ does)."""
    bf = revdiff.batched(divide, ("x", "y"))
    types = bf._element_types((np.ones(4), np.ones(4)))
    lines = kernels.module_source([(bf, "call", types)], host=True).split("\n")
    user_line = divide.ir.body[0].loc.lineno
    here = f'#line {user_line} "{__file__}"'
    k = next(i for i, line in enumerate(lines) if line == here and lines[i + 1].strip().startswith("v_x"))
    lines[k + 1] += " not_valid_cuda;"
    broken = tmp_path / "broken.cpp"
    broken.write_text("\n".join(lines))
    done = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", str(broken)], capture_output=True, text=True)
    assert f"{__file__}:{user_line}:" in done.stderr, done.stderr[-2000:]
    assert "not_valid_cuda" in done.stderr


@functools.lru_cache(maxsize=None)
def _all_kernels() -> str:
    """The kernel module of every case, generated once for both architectures."""
    entries = []
    for case in CASES.values():
        program, batched, args = case()
        entries += [e[:3] for e in _entries(program, batched, args, run=False)]
    return kernels.module_source(entries)


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_every_kernel_compiles_with_nvrtc(arch):
    """With the options CuPy's kernels get and ``--Ofast-compile=max``: the front end and PTX
    generation for the architecture without NVVM's optimiser (which takes 30x longer: 8 minutes for
    this module on a 2-core machine; the test below runs it on the kernel the GPU benchmarks run)."""
    pytest.importorskip("cuda.bindings.nvrtc")
    ptx = launch.nvrtc_compile(_all_kernels(), arch, optimize=False)
    assert b".entry" in ptx and b"project_cgs2" in ptx and f".target {arch}".encode() in ptx


def test_the_projection_gradient_kernel_compiles_fully_optimised():
    """The batched projection gradient (``benchmarks/gpu.py``'s kernel) through NVVM's optimiser for
    sm_90, as CuPy compiles it on an H100 or H200."""
    pytest.importorskip("cuda.bindings.nvrtc")
    program, batched, args = CASES["project_cgs2"]()
    bf, kind, types, _ = next(e for e in _entries(program, batched, args, run=False) if e[1] == "vjp")
    ptx = launch.nvrtc_compile(kernels.module_source([(bf, kind, types)]), "sm_90")
    assert b".entry" in ptx and b"project_cgs2" in ptx and b".target sm_90" in ptx


def test_cuda_source_is_readable_for_any_shape():
    src = P.project_cgs2.source("adjoint", backend="cuda")
    assert "__device__" in src and "project_cgs2" in src and "rd_array<double, 2> v_A" in src
    assert "// line" in src  # the user's source lines, as in the Python code


def _gpu_available() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def gpu_only(test):
    return pytest.mark.gpu(pytest.mark.skipif(not _gpu_available(), reason="needs CuPy and a CUDA GPU")(test))


@gpu_only
@pytest.mark.parametrize("case", list(CASES))
def test_gpu_matches_the_cpu(case):
    import cupy
    program, batched, args = CASES[case]()
    bf = revdiff.batched(program, batched)
    want = bf(*args)
    got = bf(*(cupy.asarray(a) if isinstance(a, np.ndarray) else a for a in args))
    tol = _tolerance(args)
    for w, g in zip(want, got):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(cupy.asnumpy(g), w, rtol=tol, atol=tol)


@gpu_only
def test_gpu_projection_gradient_matches_cpu():
    import cupy
    A, y, gz = rand((64, 32, 16)), rand((64, 32)), rand((64, 32))
    gA, gy = P.project_vjp(A, y, gz)
    dA, dy = P.project_vjp(cupy.asarray(A), cupy.asarray(y), cupy.asarray(gz))
    assert isinstance(dA, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(dA), gA, atol=1e-11)
    np.testing.assert_allclose(cupy.asnumpy(dy), gy, atol=1e-11)


@gpu_only
def test_gpu_tangents_and_hessian_vector_products_match_cpu():
    """The tangent kernels launched: the projection's jvp and vjp-jvp (the kernel an hvp runs),
    through the program and through a batched entry."""
    import cupy
    A, y, gz = rand((64, 32, 16)), rand((64, 32)), rand((64, 32))
    dA, dy = rand((64, 32, 16)), rand((64, 32))
    on_gpu = lambda *a: tuple(cupy.asarray(x) for x in a)
    (z, dz), (z_gpu, dz_gpu) = P.project_jvp(A, y, dA, dy), P.project_jvp(*on_gpu(A, y, dA, dy))
    assert isinstance(dz_gpu, cupy.ndarray)
    np.testing.assert_allclose(cupy.asnumpy(z_gpu), z, atol=1e-11)
    np.testing.assert_allclose(cupy.asnumpy(dz_gpu), dz, atol=1e-10)
    (gA, gy), (dgA, dgy), dz = P.project_vjp_jvp(A, y, gz, dA, dy)
    (gA_, gy_), (dgA_, dgy_), dz_ = P.project_vjp_jvp(*on_gpu(A, y, gz, dA, dy))
    for w, g in zip((gA, gy, dgA, dgy, dz), (gA_, gy_, dgA_, dgy_, dz_)):
        assert isinstance(g, cupy.ndarray)
        np.testing.assert_allclose(cupy.asnumpy(g), w, atol=1e-10)
    program, batched, args = CASES["project_cgs2"]()
    bf = revdiff.batched(program, batched)
    directions = tuple(rand(np.shape(a)) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else None for a in args)
    cotangents = tuple(rand(np.shape(a)) if d is not None else None for a, d in zip(args, directions))
    to_gpu = lambda values: tuple(cupy.asarray(v) if isinstance(v, np.ndarray) else v for v in values)
    for w, g in zip(bf.vjp_jvp(args, cotangents, directions), bf.vjp_jvp(to_gpu(args), to_gpu(cotangents),
                                                                          to_gpu(directions))):
        assert len(w) == len(g)
        for wi, gi in zip(w, g):
            if isinstance(wi, np.ndarray):
                assert isinstance(gi, cupy.ndarray)
                np.testing.assert_allclose(cupy.asnumpy(gi), wi, rtol=1e-10, atol=1e-10)
            else:
                assert gi is None if wi is None else type(gi) is type(wi)


def _tangent_entry(bf, method, *args):
    """(kind, element types, the argument list of the batched entry ``bf.<method>(*args)`` runs,
    what the compiled entry leaves in it)."""
    calls = []
    cpu_execute = bf.run

    def spy(kind, types, arrays, xp, *unread):
        calls.append((kind, types, [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]))
        return cpu_execute(kind, types, arrays, xp, *unread)

    bf.run = spy
    try:
        getattr(bf, method)(*args)
    finally:
        del bf.run
    ((kind, types, inputs),) = calls
    expected = cpu_execute(kind, types, tuple(a.copy() if isinstance(a, np.ndarray) else a for a in inputs), np)
    return kind, types, inputs, expected


def _run_tangent_kernels(runs: list, stem: str, tol: float) -> list:
    """Build one host module of the tangent entries ``runs`` ((bf, ``_tangent_entry`` result) each),
    run each in both layouts and compare it with the compiled entry to ``tol``; returns the entries."""
    entries = [(bf, kind, types) for bf, (kind, types, _, _) in runs]
    module = launch.HostModule(kernels.module_source(entries, host=True), stem)
    for bf, (kind, types, inputs, expected) in runs:
        got = [a.copy() if isinstance(a, np.ndarray) else a for a in inputs]
        _in_both_layouts(module, bf, kind, got, types)
        for g, w in zip(got, expected):
            if isinstance(g, np.ndarray):
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=f"{bf.f.__qualname__} {kind}")
    return entries


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for host emulation")
def test_host_emulation_of_tangent_kernels_matches_the_cpu():
    """The jvp, value_jvp and vjp-jvp (hvp) entries as CUDA kernels, run as host C++ against the
    compiled entries, and compiled by NVRTC."""
    runs = []
    for case in ("project_cgs2", "tangent_project complex"):
        program, batched, args = CASES[case]()
        bf = revdiff.batched(program, batched)
        directions = tuple(rand(np.shape(a), a.dtype) if isinstance(a, np.ndarray) and a.dtype.kind in "fc"
                           else None for a in args)
        cotangents = tuple(rand(np.shape(a), a.dtype) if d is not None else None for a, d in zip(args, directions))
        runs.append((bf, _tangent_entry(bf, "jvp", args, directions)))
        runs.append((bf, _tangent_entry(bf, "value_jvp", args, directions)))
        runs.append((bf, _tangent_entry(bf, "vjp_jvp", args, cotangents, directions)))
    entries = _run_tangent_kernels(runs, "test_tangents", 1e-11)
    try:
        import cuda.bindings.nvrtc  # noqa: F401
    except ImportError:
        return
    assert b".entry" in launch.nvrtc_compile(kernels.module_source(entries), "sm_80", optimize=False)


MODULE_DIGEST = """
import hashlib
import numpy as np
import revdiff
from revdiff import programs as P
from revdiff.targets.cuda import programs as kernels
args = (np.zeros((2, 7)), np.zeros((2, 3, 3)), np.ones((2, 7, 3)), np.ones((2, 7)))
bf = revdiff.batched(P.project_cgs2, P.project_cgs2.params)
types = bf._element_types(args)
print(hashlib.sha256(kernels.module_source([(bf, "call", types), (bf, "vjp", types)]).encode()).hexdigest())
"""


def test_kernel_module_source_is_the_same_in_every_process(tmp_path):
    """CuPy keeps compiled kernel modules on disk, keyed by their source (``CUPY_CACHE_DIR``): a new
    process skips NVRTC only if it generates the very same source, whatever its hash seed and cache."""
    root = str(Path(revdiff.__file__).resolve().parent.parent)
    digests = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, REVDIFF_CACHE_DIR=str(tmp_path / seed),
                   PYTHONPATH=os.pathsep.join([root] + os.environ.get("PYTHONPATH", "").split(os.pathsep)))
        done = subprocess.run([sys.executable, "-c", MODULE_DIGEST], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        digests.add(done.stdout.strip())
    assert len(digests) == 1


@revdiff.reversible
def complex64_ancilla(y, x):
    """A float64 function computing through a complex64 ancilla: its tangents mix precisions."""
    c = zeros(1, np.complex64)
    c[0] += 1.0
    y[0] += c[0].real * x[0]
    c[0] -= 1.0
    del c


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for host emulation")
def test_mixed_precision_complex_in_tangent_kernels():
    """complex128 with complex64 arithmetic (a float64 function's tangent of a complex64 ancilla)
    promotes as NumPy does; the kernels compiled (the operator was ambiguous) and match the CPU."""
    bf = revdiff.batched(complex64_ancilla, ("y", "x"))
    args = (np.zeros((B, 3)), rand((B, 3)))
    runs = [(bf, _tangent_entry(bf, "jvp", args, (rand((B, 3)), rand((B, 3))))),
            (bf, _tangent_entry(bf, "vjp_jvp", args, (rand((B, 3)), None), (rand((B, 3)), rand((B, 3)))))]
    _run_tangent_kernels(runs, "test_complex64_ancilla", 1e-6)


def test_launch_retries_then_falls_back_to_the_element_layout_and_writes_back_what_the_kernel_writes():
    """The launch loop: scratch grows fourfold per retry up to the limit, then (interleaved slots
    being the module's largest element) the element layout runs before MemoryError; every retry
    starts from the arguments as they were; only arguments the kernel writes are copied back, so a
    read-only broadcast input is never assigned to."""
    y = rand((3, 2, 2))
    x = np.broadcast_to(rand((2, 2)), (3, 2, 2))
    start = y.copy()
    calls = []

    def run(work, size, interleaved):
        calls.append((size, interleaved, work[0].strides[0]))
        work[0][...] += 1.0  # the kernel writes y
        return (launch.SCRATCH_EXHAUSTED if interleaved or size < 64 else 0), 0, 0, 0, 0.0, 0.0

    kinds = [launch.Argument(True, True), launch.Argument(True, False)]
    launch.launch(run, [y, x], kinds, True, np, "k", 16, 64)
    assert calls == [(16, True, 8), (64, True, 8), (16, False, 32), (64, False, 32)]
    np.testing.assert_array_equal(y, start + 1.0)
    calls.clear()
    with pytest.raises(MemoryError, match="more than 0 MiB of scratch per batch element"):
        launch.launch(lambda work, size, interleaved: (launch.SCRATCH_EXHAUSTED, 0, 0, 0, 0.0, 0.0),
                      [y, x], kinds, True, np, "k", 16, 64)
    np.testing.assert_array_equal(y, start + 1.0)  # as it was before the failed launch


@revdiff.reversible
def names_of_cpp(st, new, double, sqrt, x):
    """Parameters named as C++ keywords, the kernel's status pointer and a prelude function."""
    for i in range(x.shape[0]):
        st[i] += new * np.sqrt(x[i]) + double
    sqrt += new * 2.0


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ for host emulation")
def test_user_names_that_are_cpp_words_compile_in_kernels():
    """Every user name is spelled ``v_<name>`` in CUDA C: a parameter named ``st``, ``new``,
    ``double`` or ``sqrt`` compiles and runs (host emulation) as on the CPU."""
    bf = revdiff.batched(names_of_cpp, ("st", "new", "double", "sqrt", "x"))
    args = (np.zeros((3, 2)), np.full(3, 2.0), np.full(3, 0.5), np.zeros(3), np.full((3, 2), 4.0))
    types = bf._element_types(args)
    module = launch.HostModule(kernels.module_source([(bf, "call", types)], host=True), "test_cpp_names")
    arrays = [a.copy() for a in args]
    kernels.run_on_host(module, bf, "call", arrays, types)
    want = bf(*(a.copy() for a in args))
    for got, w in zip(arrays, want):
        np.testing.assert_array_equal(got, w)
