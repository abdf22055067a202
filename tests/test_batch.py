"""revdiff.batched: parallel batches equal per-element calls exactly, shared parameters get summed
gradients, and every failure names its batch element."""
import importlib.util
import textwrap

import numpy as np
import pytest

import revdiff
from revdiff import programs as P
from revdiff.programs import leapfrog as L

rng = np.random.default_rng(17)


@pytest.mark.parametrize("B, m, n", [(6, 9, 4), (3, 64, 40)], ids=["loops", "blas"])
def test_batched_projection_vjp_equals_per_matrix_exactly(B, m, n):
    """64 x 40 runs the large matrix-vector products through BLAS, threads and all."""
    A, y, gz = rng.standard_normal((B, m, n)), rng.standard_normal((B, m)), rng.standard_normal((B, m))
    bf = revdiff.batched(P.project_cgs2, ("z", "R", "A", "y"))
    outs, grads = bf.vjp((np.zeros((B, m)), np.zeros((B, n, n)), A, y), (gz, None, None, None))
    for b in range(B):
        single, pullback = revdiff.vjp(P.project_cgs2, np.zeros(m), np.zeros((n, n)), A[b], y[b])
        g = pullback(gz[b], None, None, None)
        np.testing.assert_array_equal(outs[0][b], single[0])
        np.testing.assert_array_equal(outs[1][b], single[1])
        np.testing.assert_array_equal(grads[2][b], g[2])
        np.testing.assert_array_equal(grads[3][b], g[3])
    Q, R = P.qr(A)
    for b in range(B):
        np.testing.assert_array_equal(Q[b], P.cgs2(np.zeros((m, n)), np.zeros((n, n)), A[b].copy())[0])


def test_shared_parameters_get_the_sum_of_per_element_gradients():
    B = 4
    x, v = rng.standard_normal((B, 3, 3)), 0.1 * rng.standard_normal((B, 3, 3))
    m = np.array([1.0, 0.5, 0.25])
    bf = revdiff.batched(L.nbody_final_energy, ("E", "x", "v"))
    outs, grads = bf.vjp((np.zeros(B), x, v, m, 1.0, 0.1, 1e-3, 20), (np.ones(B),) + (None,) * 7)
    total_m, total_G = np.zeros(3), 0.0
    for b in range(B):
        single, pullback = revdiff.vjp(L.nbody_final_energy, 0.0, x[b], v[b], m, 1.0, 0.1, 1e-3, 20)
        g = pullback(1.0, *(None,) * 7)
        assert outs[0][b] == single[0]
        np.testing.assert_array_equal(grads[1][b], g[1])
        total_m, total_G = total_m + g[3], total_G + g[4]
    np.testing.assert_allclose(grads[3], total_m, rtol=1e-14)
    np.testing.assert_allclose(grads[4], total_G, rtol=1e-14)
    assert grads[7] is None  # steps is an integer


@revdiff.reversible
def scaled_sum(y, s, x, a, w):
    for i in range(y.shape[0]):
        y[i] += a * x[i] * w[i]
    s += a * x[0]
    y[0] += s * x[1]  # so that s's gradient is more than its cotangent


@pytest.mark.parametrize("B", [1, 2], ids=["one element", "elements"])
def test_batched_and_shared_scalars_and_arrays_equal_per_element_calls(B):
    """Batches of one (the single-call programs, no batched entry) and of two (the batched entry)
    both equal per-element calls: batched scalars' final values and gradients written back into
    their arrays, shared parameters' gradients the sum over the elements (a shared cotangent is
    given to element 0 alone)."""
    y, s, x = rng.standard_normal((B, 5)), rng.standard_normal(B), rng.standard_normal((B, 5))
    a, w = 0.7, rng.standard_normal(5)
    bf = revdiff.batched(scaled_sum, ("y", "s", "x"))
    out = bf(y, s, x, a, w)
    gy, gs = rng.standard_normal((B, 5)), rng.standard_normal(B)
    outs, grads = bf.vjp((y, s, x, a, w), (gy, gs, None, 0.5, None))
    assert bf.last_paths["vjp"] == ("one element" if B == 1 else "elements on threads")
    total_a, total_w = 0.0, np.zeros(5)
    for b in range(B):
        single = scaled_sum(y[b].copy(), float(s[b]), x[b].copy(), a, w.copy())
        np.testing.assert_array_equal(out[0][b], single[0])
        assert out[1][b] == single[1]
        o, pullback = revdiff.vjp(scaled_sum, y[b].copy(), float(s[b]), x[b].copy(), a, w.copy())
        g = pullback(gy[b], float(gs[b]), None, 0.5 if b == 0 else 0.0, None)
        np.testing.assert_array_equal(outs[0][b], o[0])
        assert outs[1][b] == o[1] and grads[1][b] == g[1]
        np.testing.assert_array_equal(grads[0][b], g[0])
        np.testing.assert_array_equal(grads[2][b], g[2])
        total_a, total_w = total_a + g[3], total_w + g[4]
    assert type(grads[3]) is float and grads[3] == pytest.approx(total_a, rel=1e-14)
    np.testing.assert_allclose(grads[4], total_w, rtol=1e-14)
    with pytest.raises(revdiff.ReversibilityError, match="'y' and 'x' .* share memory"):
        bf(y, s, y, a, w, donate=True)


@revdiff.reversible
def divide(x, y):
    x /= y


def test_failed_check_names_the_batch_element():
    bf = revdiff.batched(divide, ("x", "y"))
    with pytest.raises(revdiff.ReversibilityError, match="division by zero.* in batch element 2"):
        bf(np.ones(4), np.array([1.0, 2.0, 0.0, 4.0]))


@pytest.mark.parametrize("threads", [1, 3, 7])
@pytest.mark.parametrize("layout", ["elements", "lanes"])
def test_a_batch_split_among_threads_gives_the_same_bits_and_names_the_element(monkeypatch, threads, layout):
    """The batch runs in contiguous parts, one per thread (``runtime.threads.batch_threads()``), each on
    a worker thread: the results do not depend on the split, and a failure in any part names its
    element."""
    import revdiff.calls
    from revdiff.runtime import workers
    started = []
    start = workers.start
    monkeypatch.setattr(revdiff.calls, "batch_threads", lambda: threads)
    monkeypatch.setattr(workers, "start", lambda task: started.append(task) or start(task))
    B = 37  # lanes: 5 groups of 8, one chunk; elements: parts of 12 or 13 elements
    x, y = rng.standard_normal(B), rng.standard_normal(B)
    bf = revdiff.batched(divide, ("x", "y"), layout=layout)
    got = bf.vjp((x, y), (np.ones(B), None))
    want = [revdiff.vjp(divide, x[b], y[b]) for b in range(B)]
    np.testing.assert_array_equal(got[0][0], [w[0][0] for w in want])
    np.testing.assert_array_equal(got[1][1], [w[1](1.0, None)[1] for w in want])
    units = 1 if layout == "lanes" else B  # a lane entry's parts are chunks of 64 groups
    parts = min(threads, units)
    assert len(started) == (0 if parts == 1 else parts)  # one part runs in the caller's thread
    y[30] = 0.0
    with pytest.raises(revdiff.ReversibilityError, match="division by zero.* in batch element 30"):
        bf(x, y)


@revdiff.reversible
def copy_into(y, x):
    for i in range(len(x)):
        y[i] += x[i]


def test_donated_arguments_are_run_on_in_place_and_give_the_same_results():
    y, x, gy = np.zeros((3, 5)), rng.standard_normal((3, 5)), rng.standard_normal((3, 5))
    bf = revdiff.batched(copy_into, ("y", "x"))
    expected = bf(y, x)
    assert not expected[0] is y and not y.any()  # not donated: the caller's arrays are copies
    out = bf(y, x, donate=True)
    assert out[0] is y and out[1] is x
    np.testing.assert_array_equal(y, expected[0])
    y2 = np.zeros((3, 5))
    (outs, grads), (expected_outs, expected_grads) = bf.vjp((y2, x), (gy, None), donate=True), \
        bf.vjp((np.zeros((3, 5)), x), (gy, None))
    np.testing.assert_array_equal(outs[0], expected_outs[0])
    np.testing.assert_array_equal(grads[1], expected_grads[1])


def test_high_level_functions_leave_their_inputs_untouched():
    """They donate only the outputs they allocate; the programs never write A, y, x, g or z.
    300 elements run in SIMD lanes, the first 10 one element per iteration."""
    A, y, gz = rng.standard_normal((300, 8, 4)), rng.standard_normal((300, 8)), rng.standard_normal((300, 8))
    saved = [a.copy() for a in (A, y, gz)]
    for a in (A, y, gz):  # as JAX hands them to its callbacks
        a.flags.writeable = False
    P.lstsq(A[:1], y[:1])
    P.project(A[:10], y[:10])
    gA, gy = P.project_vjp(A, y, gz)
    P.qr_vjp(A[:10], gz[:10, :, None] * np.ones(4), None)
    P.lstsq_vjp(A[:10], y[:10], gz[:10, :4])
    P.tangent_project_vjp(y[:10], gz[:10], y[:10])
    for a, b in zip((A, y, gz), saved):
        np.testing.assert_array_equal(a, b)
    assert not np.shares_memory(gA, A) and not np.shares_memory(gy, y)


def test_argument_errors():
    bf = revdiff.batched(copy_into, ("y", "x"))
    with pytest.raises(IndexError, match="index i is out of bounds for axis 0 of 'y'"):
        bf(np.zeros((3, 2)), np.ones((3, 5)))
    with pytest.raises(ValueError, match="batch sizes 3 and 4"):
        bf(np.zeros((3, 5)), np.ones((4, 5)))
    with pytest.raises(ValueError, match="'y' is modified by .*copy_into, so every element needs its own"):
        revdiff.batched(copy_into, ("x",))(np.zeros(5), np.ones((3, 5)))
    with pytest.raises(ValueError, match="'z' is not a parameter"):
        revdiff.batched(copy_into, ("z",))


def test_batched_entry_source_is_readable():
    bf = revdiff.batched(copy_into, ("y", "x"))
    types = bf._element_types((np.zeros((2, 3)), np.zeros((2, 3))))
    src = bf.source("vjp", types)
    assert "for _b in range(_lo, _hi):" in src and "_errors[_b]" in src


def test_an_entry_calls_its_program_by_symbol_not_a_linked_copy(tmp_path):
    """The compiled entry's module holds its loop and only declares the program it calls: the program
    is compiled once, in its own module, and found by its symbol when the entry is loaded."""
    scale = f"{rng.uniform(1, 2)!r}"
    (tmp_path / "unique_program.py").write_text(textwrap.dedent(f"""
        import revdiff

        @revdiff.reversible
        def scaled_copy(y, x):
            for i in range(len(x)):
                y[i] += {scale} * x[i]
    """))
    spec = importlib.util.spec_from_file_location("unique_program", tmp_path / "unique_program.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    bf = revdiff.batched(module.scaled_copy, ("y", "x"), layout="elements")
    y, x = np.zeros((3, 4)), rng.standard_normal((3, 4))
    np.testing.assert_array_equal(bf(y, x)[0], float(scale) * x)
    ir = bf.source("call", bf._element_types((y, x)), blas=False, arrays=(y, x), backend="llvm")
    defined = [line for line in ir.splitlines() if line.startswith("define") and "internal" not in line]
    declared = [line for line in ir.splitlines() if line.startswith("declare")]
    assert all("scaled_copy_batch_call" in line for line in defined), defined
    assert any("scaled_copy_" in line and "_forward_" in line for line in declared), declared


@revdiff.reversible
def weighted_add(y, x, w):
    for i in range(len(x)):
        y[i] += w[i] * x[i]


@pytest.mark.parametrize("layout", ["C", "F", "strided", "read-only"])
def test_an_entry_calls_the_program_compiled_for_its_arguments_layout(layout):
    """An entry passes each element ``x[_b]`` to the program it calls through its address with the
    element's own strides (C-ordered, Fortran-ordered or strided batches), also a shared read-only
    argument: the results are those of NumPy."""
    B, n = 5, 6
    x, w = rng.standard_normal((B, n)), rng.standard_normal(n)
    y = np.zeros((B, n))
    if layout == "F":
        x, y = np.asfortranarray(x), np.asfortranarray(y)
    elif layout == "strided":
        x, y = rng.standard_normal((B, 2 * n))[:, ::2], np.zeros((B, 2 * n))[:, ::2]
    elif layout == "read-only":
        x.flags.writeable = w.flags.writeable = False
    bf = revdiff.batched(weighted_add, ("y", "x"), layout="elements")
    expected = y + w * x
    np.testing.assert_array_equal(bf(y, x, w, donate=layout != "read-only")[0], expected)
    _, grads = bf.vjp((y, x, w), (np.ones((B, n)), None, None))
    np.testing.assert_array_equal(grads[1], np.broadcast_to(w, (B, n)))
    np.testing.assert_array_equal(grads[2], x.sum(axis=0))


def test_a_batch_of_a_plain_python_function_calls_its_program_directly():
    """backend="python": the entry and its program are plain Python, and ``_call_at`` a plain call."""
    f = copy_into.with_options(backend="python")
    x = rng.standard_normal((3, 4))
    np.testing.assert_array_equal(revdiff.batched(f, ("y", "x"))(np.zeros((3, 4)), x)[0], x)
    _, grads = revdiff.batched(f, ("y", "x")).vjp((np.zeros((3, 4)), x), (np.ones((3, 4)), None))
    np.testing.assert_array_equal(grads[1], np.ones((3, 4)))


def test_a_batch_runs_every_element_with_single_threaded_blas(monkeypatch):
    """OpenBLAS threads would spin beside the batch's workers (measured: a fifth of the time of
    10 x 500x250 block-CGS2 gradients on two cores)."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import revdiff.batching
    seen = []
    run = revdiff.batching.run

    def record(*args):
        seen.append(max(info["num_threads"] for info in threadpoolctl.threadpool_info()
                        if info["user_api"] == "blas"))
        return run(*args)

    monkeypatch.setattr(revdiff.batching, "run", record)
    B, m, n = 2, 64, 40
    A, y, gz = rng.standard_normal((B, m, n)), rng.standard_normal((B, m)), rng.standard_normal((B, m))
    revdiff.batched(P.project_cgs2, ("z", "R", "A", "y")).vjp((np.zeros((B, m)), np.zeros((B, n, n)), A, y),
                                                              (gz, None, None, None))
    assert seen == [1]


def test_batches_in_other_threads_leave_blas_threads_as_they_were():
    """A batch lowers BLAS to one thread only when called from the main thread, and restores it
    there: OpenBLAS does not always take a raise of its thread count from another thread, and
    batches in worker threads that lowered and restored it left NumPy on one thread for the rest of
    the process. A batch in the main thread overlapping one in another thread restores it when it
    ends."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import threading
    from concurrent.futures import ThreadPoolExecutor
    from revdiff.runtime.threads import blas_single_threaded

    def blas_threads():
        return max(i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")

    before = blas_threads()  # OpenBLAS's own count: a limit set here first would hide the fault
    if before < 2:
        pytest.skip("BLAS runs on one thread here")
    bf = revdiff.batched(divide, ("x", "y"), layout="elements")
    x, y = rng.standard_normal(1000000), rng.standard_normal(1000000) + 3.0
    bf(x[:4], y[:4])  # compiled before the threads start, so that their batches overlap
    start = threading.Barrier(4)

    def batches(_):
        start.wait(10)
        for _ in range(10):
            bf(x, y)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(batches, range(4)))
    assert blas_threads() == before
    b_inside, a_ended, seen = threading.Event(), threading.Event(), []

    def batch_b():
        with blas_single_threaded():
            b_inside.set()
            a_ended.wait(10)
            seen.append(blas_threads())

    with blas_single_threaded():
        assert blas_threads() == 1
        thread = threading.Thread(target=batch_b)
        thread.start()
        assert b_inside.wait(10)
    a_ended.set()
    thread.join(10)
    assert seen == [before] and blas_threads() == before


def test_batches_called_from_several_threads_at_once_give_each_its_own_results():
    """Callers' threads share the workers that run the parts of their batches (and the first calls
    race to compile): each caller gets exactly what a call alone returns."""
    from concurrent.futures import ThreadPoolExecutor
    bf = revdiff.batched(divide, ("x", "y"), layout="elements")
    inputs = [(rng.standard_normal(50), rng.standard_normal(50) + 3.0) for _ in range(8)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda xy: bf.vjp(xy, (np.ones(50), None)), inputs))
    for (x, y), (outs, grads) in zip(inputs, got):
        alone = bf.vjp((x, y), (np.ones(50), None))
        np.testing.assert_array_equal(outs[0], alone[0][0])
        np.testing.assert_array_equal(grads[1], alone[1][1])


@revdiff.reversible
def fourteen(x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13):
    x0 += x1 * x2
    x3 += x4 * x5
    x6 += x7 * x8
    x9 += x10 * x11
    x12 /= x13


def test_an_entry_calling_a_program_of_many_arguments():
    """A vjp entry whose program takes 34 arguments: same results as per-element calls, and a
    failure still names its element."""
    B = 5
    params = fourteen.params
    args = [rng.standard_normal(B) + 2.0 for _ in params]
    bf = revdiff.batched(fourteen, params, layout="elements")
    signature = bf.signature("vjp", bf._element_types(tuple(args)))
    assert len(signature.params) + len(signature.grads) + len(signature.saved) + 1 == 34
    outs, grads = bf.vjp(args, [np.ones(B)] * len(params))
    for b in range(B):
        single, pullback = revdiff.vjp(fourteen, *[a[b] for a in args])
        np.testing.assert_array_equal([o[b] for o in outs], single)
        np.testing.assert_array_equal([g[b] for g in grads], pullback(*[1.0] * len(params)))
    args[13][3] = 0.0
    with pytest.raises(revdiff.ReversibilityError, match="division by zero.* in batch element 3"):
        bf.vjp(args, [np.ones(B)] * len(params))


@pytest.mark.parametrize("B, m, n", [(1, 32, 16), (7, 12, 5), (300, 32, 16), (2, 90, 70)],
                         ids=["one element", "elements", "lanes", "blas"])
def test_value_is_the_calls_final_values_bit_for_bit(B, m, n):
    """``BatchedFunction.value`` runs the fused vjp's forward half (ancillas freed, not uncomputed):
    the call's final values bit for bit in every path, on the path the call takes, and ``value_jvp``
    (its tangent) ``jvp``'s values and tangents; ``~f``'s value is its call."""
    from revdiff import programs as P
    r = np.random.default_rng(m * n)
    A, y = r.standard_normal((B, m, n)), r.standard_normal((B, m))
    p = min(m, n)
    for f in (P.project_cgs2, P.project_householder, P.lstsq_mgs, P.cgs2):
        bf = revdiff.batched(f, f.params)
        first = (np.zeros((B, m)), np.zeros((B, p, n))) if f.params[0] == "z" else \
            (np.zeros((B, n)), np.zeros((B, n, n))) if f.params[0] == "x" else (np.zeros((B, m, p)), np.zeros((B, p, n)))
        args = first + ((A, y) if len(f.params) == 4 else (A,))
        if f is P.lstsq_mgs and m < n:
            continue
        want, got = bf(*args), bf.value(*args)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        assert bf.last_paths["value"] == bf.last_paths["call"]
        tangents = (None, None, r.standard_normal(A.shape)) + ((r.standard_normal(y.shape),) if f is not P.cgs2
                                                                 else ())
        want, got = bf.jvp(args, tangents), bf.value_jvp(args, tangents)  # and its tangent, too
        for g, w in zip(got[0] + got[1], want[0] + want[1]):
            if w is not None:
                np.testing.assert_array_equal(g, w)
    inverse = revdiff.batched(~P.cgs2, ("Q", "R", "A"))
    Q, R, _ = revdiff.batched(P.cgs2, ("Q", "R", "A"))(np.zeros((B, m, p)), np.zeros((B, p, n)), A)
    for g, w in zip(inverse.value(Q, R, A), inverse(Q, R, A)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("layout, B", [("lanes", 11), ("elements", 11), ("auto", 1)])
def test_a_vjp_returns_the_cotangents_wrt_names_and_only_those(layout, B):
    """``wrt``: the named parameters' cotangents, the bits of the full vjp (lanes leave the others in
    their buffers), None for the others; the final values as before; any iterable of names. A batch
    of one runs the single program. An unknown name, or a bare string, is refused by name."""
    A, y, gz = rng.standard_normal((B, 12, 5)), rng.standard_normal((B, 12)), rng.standard_normal((B, 12))
    bf = revdiff.batched(P.project_householder, ("z", "R", "A", "y"), layout=layout)

    def args():
        return (np.zeros((B, 12)), np.zeros((B, 5, 5)), A.copy(), y.copy())
    outs, grads = bf.vjp(args(), (gz, None, None, None))
    some_outs, some = bf.vjp(args(), (gz, None, None, None), wrt=("A", "y"))
    assert some[0] is None and some[1] is None
    np.testing.assert_array_equal(some[2], grads[2])
    np.testing.assert_array_equal(some[3], grads[3])
    for got, want in zip(some_outs[:2], outs[:2]):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(bf.vjp(args(), (gz, None, None, None), wrt=iter(["A"]))[1][2], grads[2])
    with pytest.raises(ValueError, match=r"wrt names 'B', not parameters of project_householder \(z, R, A, y\)"):
        bf.vjp(args(), (gz, None, None, None), wrt=("A", "B"))
    with pytest.raises(TypeError, match="a sequence of parameter names"):
        bf.vjp(args(), (gz, None, None, None), wrt="A")
