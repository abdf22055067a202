"""The GPU path of the Python API without a GPU: CuPy replaced by a strict host stand-in
(``emulated_gpu``) and the CUDA kernels run as host C++. Every derivative a GPU array can ask for
(``vjp``, ``jvp``, ``vjp_jvp``, ``hvp``, ``hessian``, batched and single calls, the high-level
programs) must give what the CPU gives, as arrays of the GPU, and refuse what the CPU refuses."""
import shutil

import numpy as np
import pytest

import revdiff
from revdiff import programs as P

import emulated_gpu

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to run the kernel source")

rng = np.random.default_rng(5)
TOL = dict(rtol=1e-11, atol=1e-12)


@revdiff.reversible
def weighted(loss, y, x, w, c):
    """Per element: y += sin(x) w c, loss += |y|²; w and c are shared by the batch."""
    for i in range(x.shape[0]):
        y[i] += np.sin(x[i]) * w[i] * c
    for i in range(y.shape[0]):
        loss += y[i] * y[i]


@revdiff.reversible
def picked(y, x, k):
    """y[0] += x[k]²: an index from the data, negative ones counting from the end."""
    y[0] += x[k] * x[k]


@pytest.fixture
def gpu(monkeypatch):
    return emulated_gpu.install(monkeypatch)


def _batch(b=3, n=4):
    return (rng.standard_normal(b), rng.standard_normal((b, n)), rng.standard_normal((b, n)),
            rng.standard_normal(n), 0.7)


def _on(gpu, values):
    return tuple(gpu.asarray(v) if isinstance(v, np.ndarray) else v for v in values)


def assert_same(got, want, gpu, tol=TOL):
    """``got`` (from the GPU) equals ``want`` (from the CPU) entry by entry, arrays staying on the GPU."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
        elif isinstance(w, tuple):
            assert_same(g, w, gpu, tol)
        elif isinstance(w, np.ndarray):
            assert isinstance(g, gpu.ndarray), f"{type(g)} where a GPU array was expected"
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(gpu.asnumpy(g), w, **tol)
        else:
            assert type(g) is type(w), f"{type(g)} where {type(w)} was expected"
            np.testing.assert_allclose(g, w, **tol)


def test_batched_derivatives_on_the_gpu_match_the_cpu(gpu):
    bf = revdiff.batched(weighted, ("loss", "y", "x"))
    args = _batch()
    directions = (rng.standard_normal(3), rng.standard_normal((3, 4)), rng.standard_normal((3, 4)),
                  rng.standard_normal(4), 0.3)
    cotangents = (rng.standard_normal(3), None, rng.standard_normal((3, 4)), rng.standard_normal(4), 1.5)
    assert_same(bf.jvp(_on(gpu, args), _on(gpu, directions)), bf.jvp(args, directions), gpu)
    assert_same(bf.vjp_jvp(_on(gpu, args), _on(gpu, cotangents), _on(gpu, directions)),
                bf.vjp_jvp(args, cotangents, directions), gpu)
    assert_same(bf.hvp("loss", _on(gpu, args), _on(gpu, directions)), bf.hvp("loss", args, directions), gpu)
    assert_same(bf.vjp(_on(gpu, args), _on(gpu, cotangents)), bf.vjp(args, cotangents), gpu)
    assert_same(bf.value(*_on(gpu, args)), bf(*args), gpu)


def test_batched_gradients_and_their_tangents_are_the_single_calls(gpu):
    """Independently of the batched CPU code: per element, the single CPU call's gradients and their
    tangents; for the shared w and c, their sum over the batch."""
    bf = revdiff.batched(weighted, ("loss", "y", "x"))
    args = _batch()
    directions = (rng.standard_normal(3), rng.standard_normal((3, 4)), rng.standard_normal((3, 4)),
                  rng.standard_normal(4), 0.3)
    cotangents = (rng.standard_normal(3), rng.standard_normal((3, 4)), None, None, None)
    element = lambda values, i: tuple(v if v is None or k >= 3 else v[i] for k, v in enumerate(values))
    singles = [revdiff.vjp_jvp(weighted, element(args, i), element(cotangents, i), element(directions, i))
               for i in range(3)]
    got = bf.vjp_jvp(_on(gpu, args), _on(gpu, cotangents), _on(gpu, directions))
    for part in (1, 3):  # the gradients, their tangents
        for k in range(5):
            per_element = [single[part][k] for single in singles]
            want = np.stack(per_element) if k < 3 else sum(per_element)
            value = got[part][k]
            np.testing.assert_allclose(gpu.asnumpy(value) if k != 4 else value, want, **TOL)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
@pytest.mark.parametrize("b", [0, 1, 5])
def test_batched_tangents_on_the_gpu_in_every_dtype_and_batch_size(gpu, dtype, b):
    bf = revdiff.batched(weighted, ("loss", "y", "x"))
    scalar = np.dtype(dtype).type
    args = tuple(a.astype(dtype) for a in _batch(b)[:4]) + (scalar(0.7),)
    directions = tuple(a.astype(dtype) for a in _batch(b)[:4]) + (scalar(0.3),)
    cotangents = tuple(a.astype(dtype) for a in _batch(b)[:4]) + (scalar(-1.0),)
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else TOL
    assert_same(bf.jvp(_on(gpu, args), _on(gpu, directions)), bf.jvp(args, directions), gpu, tol)
    got = bf.vjp_jvp(_on(gpu, args), _on(gpu, cotangents), _on(gpu, directions))
    assert_same(got, bf.vjp_jvp(args, cotangents, directions), gpu, tol)
    if b == 0:  # nothing to differentiate: the shared parameters' gradients are their cotangents
        np.testing.assert_array_equal(gpu.asnumpy(got[1][3]), cotangents[3])
        assert got[1][4] == cotangents[4] and got[3][4] == 0
        assert got[1][0].shape == (0,) and got[3][2].shape == (0, 4)


def test_host_tangents_of_gpu_arguments_are_moved_to_the_gpu(gpu):
    bf = revdiff.batched(weighted, ("loss", "y", "x"))
    args = _batch()
    directions = (None, None, rng.standard_normal((3, 4)), None, None)
    assert_same(bf.jvp(_on(gpu, args), directions)[1], bf.jvp(args, directions)[1], gpu)


def test_single_calls_on_the_gpu_match_the_cpu(gpu):
    x, w = rng.standard_normal(4), rng.standard_normal(4)
    args = (0.0, np.zeros(4), x, w, 0.7)
    d = (0.5, rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4), -0.25)
    ct = (1.0, rng.standard_normal(4), None, None, 0.0)
    assert_same(revdiff.jvp(weighted, _on(gpu, args), _on(gpu, d)), revdiff.jvp(weighted, args, d), gpu)
    assert_same(revdiff.vjp_jvp(weighted, _on(gpu, args), _on(gpu, ct), _on(gpu, d)),
                revdiff.vjp_jvp(weighted, args, ct, d), gpu)
    assert_same(revdiff.hvp(weighted, "loss", _on(gpu, args), _on(gpu, d)), revdiff.hvp(weighted, "loss", args, d),
                gpu)
    want = revdiff.hessian(weighted, "loss", *args)
    got = revdiff.hessian(weighted, "loss", *_on(gpu, args))
    assert len(got) == len(want)
    for g, w_ in zip(got, want):
        assert_same(g, w_, gpu)
    assert len(gpu.host_modules) == 1, "every single call and Hessian column reuses one kernel module"


def _normal(*shape):
    return rng.standard_normal(shape)


PROGRAM_TANGENTS = {  # the shapes of the PyTorch operation tests, whose CPU programs the disk cache then holds
    "qr_jvp": lambda: (_normal(2, 5, 3), _normal(2, 5, 3)),
    "qr_vjp_jvp": lambda: (_normal(5, 3), _normal(5, 3), np.triu(_normal(3, 3)), _normal(5, 3), "householder"),
    "project_jvp": lambda: (_normal(6, 3), _normal(6), _normal(6, 3), _normal(6)),
    "project_vjp_jvp": lambda: (_normal(2, 6, 3), _normal(2, 6), _normal(2, 6), _normal(2, 6, 3), _normal(2, 6)),
    "lstsq_jvp": lambda: (_normal(6, 3), _normal(6), _normal(6, 3), _normal(6)),
    "lstsq_vjp_jvp": lambda: (_normal(2, 6, 3), _normal(2, 6), _normal(2, 3), _normal(2, 6, 3), _normal(2, 6)),
    "normalize_jvp": lambda: (_normal(4, 5), _normal(4, 5)),
    "normalize_vjp_jvp": lambda: (_normal(4, 5), _normal(4, 5), _normal(4, 5)),
    "tangent_project_jvp": lambda: (_normal(3, 4), _normal(3, 4), _normal(3, 4), _normal(3, 4)),
    "tangent_project_vjp_jvp": lambda: (_normal(3, 4), _normal(3, 4), _normal(3, 4), _normal(3, 4), _normal(3, 4)),
}


PROGRAM_VALUES = {  # the forward calls, which run the fused vjp's forward half (the "value" kernels)
    "qr": lambda: (_normal(2, 5, 3),),
    "project": lambda: (_normal(6, 3), _normal(6)),
    "lstsq": lambda: (_normal(2, 6, 3), _normal(2, 6)),
    "normalize": lambda: (_normal(4, 5),),
    "tangent_project": lambda: (_normal(3, 4), _normal(3, 4)),
}


@pytest.mark.parametrize("name", {**PROGRAM_VALUES, **PROGRAM_TANGENTS})
def test_the_programs_forward_calls_and_tangents_on_the_gpu_are_the_cpus(gpu, name):
    args = {**PROGRAM_VALUES, **PROGRAM_TANGENTS}[name]()
    program = getattr(P, name)
    got, want = program(*_on(gpu, args)), program(*args)
    assert_same(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,), gpu)


BAD_TANGENTS = [  # (tangents or cotangents of the batch of 3 x 4, error)
    ((None, None, np.zeros((3, 5)), None, None), ValueError),  # the shape of a tangent
    ((None, None, np.zeros((3, 4), complex), None, None), TypeError),  # complex into real
    ((None, None, None, None, "x"), TypeError),  # not a number
    ((None, None, np.zeros(3), None, None), ValueError),  # an array missing an axis
    ((np.zeros((3, 2)), None, None, None, None), (ValueError, TypeError)),  # an array for a (batched) scalar
    ((None, None, None), TypeError),  # one per argument
    ((None, None, np.full((3, 4), None), None, None), TypeError),  # not numeric (would become NaN)
    ((None, None, np.full((3, 4), "x"), None, None), TypeError),  # not numeric
]


def _single(values):
    """Element 0 of batch values: the single call's tangents, as malformed as the batch's."""
    if len(values) != 5:
        return values
    element = lambda v: v[0] if np.ndim(v) > 1 else v[0].item()  # a batched scalar: a Python number
    return tuple(element(v) if np.ndim(v) and k < 3 else v for k, v in enumerate(values))


CALLS = {  # how a malformed sequence reaches the GPU: as tangents or as cotangents, batched or single
    "batched jvp": lambda args, bad: revdiff.batched(weighted, ("loss", "y", "x")).jvp(args, bad),
    "batched vjp_jvp cotangents": lambda args, bad: revdiff.batched(weighted, ("loss", "y", "x")).vjp_jvp(
        args, bad, (None,) * 5),
    "single jvp": lambda args, bad: revdiff.jvp(weighted, _single(args), _single(bad)),
    "single vjp_jvp cotangents": lambda args, bad: revdiff.vjp_jvp(weighted, _single(args), _single(bad),
                                                                      (None,) * 5),
}


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("bad, error", BAD_TANGENTS)
def test_the_gpu_refuses_what_the_cpu_refuses(gpu, call, bad, error):
    args = _batch()
    with pytest.raises(error) as cpu:
        CALLS[call](args, bad)
    with pytest.raises(error) as on_gpu:
        CALLS[call](_on(gpu, args), _on(gpu, bad))
    assert str(on_gpu.value) == str(cpu.value)


@pytest.mark.parametrize("single", [False, True])
def test_a_0d_array_for_a_scalar_parameter_is_refused_by_name(gpu, single):
    """A kernel takes a shared scalar by value: a 0-d array there is refused, as a single call refuses it."""
    loss, y, x, w, _ = _batch()
    args = (loss[0], y[0], x[0], w) if single else (loss, y, x, w)
    run = (lambda a: revdiff.jvp(weighted, a, (None,) * 5)) if single else \
        (lambda a: revdiff.batched(weighted, ("loss", "y", "x")).jvp(a, (None,) * 5))
    with pytest.raises(TypeError, match="argument 'c' of weighted\\(\\): 0-d arrays are not supported") as cpu:
        run(args + (np.array(0.7),))
    with pytest.raises(TypeError) as on_gpu:
        run(_on(gpu, args) + (gpu.asarray(np.array(0.7)),))
    assert str(on_gpu.value) == str(cpu.value)


def test_negative_indices_count_from_the_end_on_the_gpu_as_on_the_cpu(gpu):
    bf = revdiff.batched(picked, ("y", "x", "k"))
    args = (np.zeros((3, 1)), rng.standard_normal((3, 4)), np.array([1, -1, -4]))
    directions = (None, rng.standard_normal((3, 4)), None)
    assert_same(bf.jvp(_on(gpu, args), _on(gpu, directions)), bf.jvp(args, directions), gpu)
    args = args[:2] + (np.array([0, -5, 2]),)  # -5 is out of bounds for 4
    with pytest.raises(IndexError, match=r"line \d+, column 4, in picked: .*\(index = -5, size = 4\)") as cpu:
        bf(*args)
    with pytest.raises(IndexError) as on_gpu:
        bf(*_on(gpu, args))
    assert str(cpu.value).startswith(str(on_gpu.value))  # file, line, index, size, batch element


from test_tables import EXAMPLES, CASES, HVP_CASES  # noqa: E402


def _stacked(results):
    """Per-element results (tuples of per-parameter values) stacked as a batch computes them."""
    return tuple(None if r[0] is None else np.stack([np.asarray(x) for x in r]) for r in zip(*results))


@pytest.mark.parametrize("name, cplx", CASES, ids=[f"{n}-{'complex' if c else 'real'}" for n, c in CASES])
def test_every_table_entry_runs_on_the_gpu_as_on_the_cpu(gpu, name, cplx):
    """Each example of the instruction and function tables, batched, through the CUDA kernels of its
    call, gradient, tangent and (for a real scalar loss) Hessian-vector product: what the compiled
    CPU programs compute element by element, in real and complex. The references are the programs the
    table tests compile (same types), so the disk cache serves them."""
    f, make, _ = EXAMPLES[name]
    bf = revdiff.batched(f, f.params)
    draws = [make(cplx) for _ in range(2)]
    floats = [isinstance(a, (float, complex, np.inexact)) or np.asarray(a).dtype.kind in "fc" for a in draws[0]]
    directions = [tuple(v if fl else None for v, fl in zip(make(cplx), floats)) for _ in draws]
    cotangents = [tuple(v if fl else None for v, fl in zip(make(cplx), floats)) for _ in draws]
    args, dirs, cts = _stacked(draws), _stacked(directions), _stacked(cotangents)
    copy = lambda d: tuple(a.copy() if isinstance(a, np.ndarray) else a for a in d)
    tol = dict(rtol=1e-10, atol=1e-12)
    assert_same(bf(*_on(gpu, args)), _stacked([f(*copy(d)) for d in draws]), gpu, tol)
    want = _stacked([revdiff.vjp(f, *d)[1](*c) for d, c in zip(draws, cotangents)])
    assert_same(bf.vjp(_on(gpu, args), _on(gpu, cts))[1], want, gpu, tol)
    outs, douts = zip(*(revdiff.jvp(f, d, v) for d, v in zip(draws, directions)))
    for got, want in zip(bf.jvp(_on(gpu, args), _on(gpu, dirs)), (_stacked(outs), _stacked(douts))):
        assert_same(got, want, gpu, tol)
    if (name, cplx) in HVP_CASES:
        want = _stacked([revdiff.hvp(f, 0, d, v) for d, v in zip(draws, directions)])
        assert_same(bf.hvp(0, _on(gpu, args), _on(gpu, dirs)), want, gpu, tol)


@revdiff.reversible
def add_twice(y, x):
    """y += 2 x, elementwise."""
    for i in range(x.shape[0]):
        y[i] += 2.0 * x[i]


@pytest.mark.parametrize("layout", ["interleaved", "element"])
def test_gpu_arguments_sharing_memory_are_refused_and_read_only_inputs_accepted(gpu, monkeypatch, layout):
    """As on the CPU, a modified GPU argument sharing memory with another is refused by name (the
    interleaved layout's copies would otherwise each be written back, the last one winning); an
    input the function only reads may be a broadcast view, and is never written."""
    monkeypatch.setenv("REVDIFF_CUDA_LAYOUT", layout)
    bf = revdiff.batched(add_twice, ("y", "x"))
    base = rng.standard_normal((3, 4))
    a = gpu.asarray(base)
    with pytest.raises(revdiff.ReversibilityError, match=r"arguments 'y' and 'x' of add_twice\(\) share memory "
                                                         r"\(their byte ranges on the GPU overlap\)"):
        bf(a, a, donate=True)
    with pytest.raises(revdiff.ReversibilityError, match="share memory"):
        bf(a[:, :2], a[:, 1:3], donate=True)
    x = gpu.broadcast_to(gpu.asarray(base[0]), base.shape)
    with pytest.raises(ValueError, match="argument 'y' of add_twice\\(\\) is read-only, but the function modifies it"):
        bf(x, gpu.asarray(base), donate=True)  # a broadcast view: every element would write the same memory
    got = bf(gpu.asarray(base), x, donate=True)
    want = bf(base.copy(), np.broadcast_to(base[0], base.shape), donate=True)
    assert_same(got, want, gpu)
    cotangents = (np.ones(base.shape), None)
    outs, grads = bf.vjp((gpu.asarray(base), x), _on(gpu, cotangents), donate=True)
    want_outs, want_grads = bf.vjp((base.copy(), np.broadcast_to(base[0], base.shape)), cotangents, donate=True)
    assert_same(outs, want_outs, gpu)
    assert_same(grads, want_grads, gpu)


@revdiff.reversible
def remainder_and_floor_quotient(r, q, s, x, w, c, k):
    """r += x % w, q += x // w elementwise, s += x % c, k // w, k % w and x % 2 (a double, an
    integer and a literal with x's dtype): Python's float semantics."""
    for i in range(x.shape[0]):
        r[i] += x[i] % w[i]
        q[i] += x[i] // w[i]
        s[i] += x[i] % c
        s[i] += k // w[i]
        s[i] += k % w[i]
        s[i] += x[i] % 2


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_remainder_and_floor_division_on_the_gpu_are_pythons_bit_for_bit(gpu, dtype):
    """``%`` and ``//`` of floats give the CPU's (Python's) bits on the GPU too: the
    remainder has the divisor's sign and lies in [0, |w|), exactly, also where ``x / w`` is too
    large for ``x - floor(x / w) * w`` (1e20 % 3 is 1, not 0), and signed zeros are Python's; a
    float32 with a double computes in double, with an integer in float32 (2**24 + 1 rounds to 2**24
    first: k % 2.0 is 0), as on the CPU."""
    x = np.array([1e20, -1e20, 7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 0.3, -1e-20, 1e-20, 5.0, 1e30, 3.0], dtype)
    w = np.array([3.0, 3.0, 2.0, 2.0, -2.0, -2.0, 2.0, -2.0, 0.1, 1.0, -1.0, 0.5, 7.0, 1e-30], dtype)
    bf = revdiff.batched(remainder_and_floor_quotient, ("r", "q", "s", "x", "w", "c", "k"))
    zeros = np.zeros((1, x.size), dtype)
    args = (zeros, zeros, zeros, x[None], w[None], np.array([0.7]), np.array([2 ** 24 + 1]))
    want = bf(*(a.copy() for a in args))
    got = bf(*_on(gpu, tuple(a.copy() for a in args)))
    for g, v in zip(got[:3], want[:3]):
        np.testing.assert_array_equal(gpu.asnumpy(g).view(np.uint8), v.view(np.uint8))
    if dtype == np.float64:
        np.testing.assert_array_equal(want[0][0], [float(a) % float(b) for a, b in zip(x, w)])
