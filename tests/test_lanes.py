"""Batches in SIMD lanes (revdiff/targets/lanes/rewrite.py): groups of elements side by side give exactly the
results of one element at a time, failures name their element, and programs whose control flow
depends on the data are refused with the reason."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import revdiff
from revdiff import programs as P
from revdiff.programs import leapfrog as L
from revdiff.programs.gram_schmidt import cgs

rng = np.random.default_rng(29)


def _equal(first: tuple, second: tuple) -> None:
    for a, b in zip(first, second):
        if a is not None:
            np.testing.assert_array_equal(a, b)


def test_projection_gradient_in_lanes_equals_one_element_at_a_time():
    """11 float64 elements: one full group of 8 lanes and one group whose last lanes repeat element 10."""
    B, m, n = 11, 12, 5
    args = (np.zeros((B, m)), np.zeros((B, n, n)), rng.standard_normal((B, m, n)), rng.standard_normal((B, m)))
    gz = rng.standard_normal((B, m))
    lanes = revdiff.batched(P.project_cgs2, ("z", "R", "A", "y"), layout="lanes")
    outs, grads = lanes.vjp(args, (gz, None, None, None))
    elements = revdiff.batched(P.project_cgs2, ("z", "R", "A", "y"), layout="elements")
    expected_outs, expected_grads = elements.vjp(args, (gz, None, None, None))
    _equal(outs, expected_outs)
    _equal(grads, expected_grads)
    single, pullback = revdiff.vjp(P.project_cgs2, np.zeros(m), np.zeros((n, n)), args[2][6], args[3][6])
    np.testing.assert_array_equal(grads[2][6], pullback(gz[6], None, None, None)[2])


def test_absent_cotangents_give_the_gradients_of_zero_cotangents_in_every_lane_group():
    """An absent cotangent's seed is never copied into the lanes: each group clears its buffer (three
    groups here, so a buffer left with the previous group's gradient would show)."""
    B, m, n = 19, 7, 4
    args = (np.zeros((B, m)), np.zeros((B, n, n)), rng.standard_normal((B, m, n)), rng.standard_normal((B, m)))
    gz = rng.standard_normal((B, m))
    lanes = revdiff.batched(P.project_householder, ("z", "R", "A", "y"), layout="lanes")
    zeros = (gz, np.zeros((B, n, n)), np.zeros((B, m, n)), np.zeros((B, m)))
    for wrt in (None, ("A", "y")):
        _, absent = lanes.vjp(args, (gz, None, None, None), wrt=wrt)
        _, given = lanes.vjp(args, zeros, wrt=wrt)
        _equal(absent, given)
        assert all(g is not None and np.any(g) for g in absent[2:])


def test_float32_runs_eight_lanes_and_equals_one_element_at_a_time():
    B, m, n = 11, 6, 4
    A = rng.standard_normal((B, m, n)).astype(np.float32)
    args = (np.zeros((B, m, n), np.float32), np.zeros((B, n, n), np.float32), A)
    lanes = revdiff.batched(cgs, ("Q", "R", "A"), layout="lanes")
    assert "in groups of 8 SIMD lanes" in lanes.lane_source("call", lanes._element_types(args))
    _equal(lanes(*args), revdiff.batched(cgs, ("Q", "R", "A"), layout="elements")(*args))


def test_shared_parameters_and_batched_scalars_in_lanes():
    """Scalars per element (E) become one scalar per lane; shared arrays (m) stay shared."""
    B = 5
    x, v = rng.standard_normal((B, 3, 3)), 0.1 * rng.standard_normal((B, 3, 3))
    args = (np.zeros(B), x, v, np.array([1.0, 0.5, 0.25]), 1.0, 0.1, 1e-3, 6)
    cts = (np.ones(B),) + (None,) * 7
    lanes = revdiff.batched(L.nbody_final_energy, ("E", "x", "v"), layout="lanes")
    elements = revdiff.batched(L.nbody_final_energy, ("E", "x", "v"), layout="elements")
    for got, expected in zip(lanes.vjp(args, cts), elements.vjp(args, cts)):
        _equal(got, expected)


@given(B=st.integers(2, 13), m=st.integers(1, 9), n=st.integers(1, 9), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_any_batch_and_shape_in_lanes_equals_one_element_at_a_time(B, m, n, seed):
    """Groups full and partial, tall and wide matrices: one compiled lane program for every shape."""
    A = np.random.default_rng(seed).standard_normal((B, m, n))
    p = min(m, n)
    args = (np.zeros((B, m, p)), np.zeros((B, p, n)), A)
    _equal(revdiff.batched(cgs, ("Q", "R", "A"), layout="lanes")(*args),
           revdiff.batched(cgs, ("Q", "R", "A"), layout="elements")(*args))


@revdiff.reversible
def divide(x, y):
    x /= y


@pytest.mark.parametrize("bad", [2, 5, 6])
def test_failed_check_in_a_lane_names_its_batch_element(bad):
    y = np.arange(1.0, 8.0)
    y[bad] = 0.0
    bf = revdiff.batched(divide, ("x", "y"), layout="lanes")
    with pytest.raises(revdiff.ReversibilityError, match=f"division by zero.* in batch element {bad}"):
        bf(np.ones(7), y)


@revdiff.reversible
def copy_into(y, x):
    for i in range(len(x)):
        y[i] += x[i]


def test_index_errors_are_reported_from_lanes():
    bf = revdiff.batched(copy_into, ("y", "x"), layout="lanes")
    with pytest.raises(IndexError, match="index i is out of bounds for axis 0 of 'y'"):
        bf(np.zeros((6, 2)), np.ones((6, 5)))


def test_lane_source_is_readable():
    bf = revdiff.batched(copy_into, ("y", "x"), layout="lanes")
    src = bf.lane_source("vjp", bf._element_types((np.zeros((2, 3)), np.zeros((2, 3)))))
    assert "_lane_y[_i0, _k] = y[min(_b + _k, _n - 1), _i0]" in src and "for _c in range(_lo, _hi):" in src
    assert "y[i, 0]" in src and "y[i, 3]" in src  # the lane axis comes last


@revdiff.reversible
def guarded_scale(y, x, s):
    for i in range(len(x)):
        y[i] += x[i] / s if s > 0 else -x[i]


@revdiff.reversible
def norm_of(r, x):
    r += np.linalg.norm(x)


@pytest.mark.parametrize("signs", ["mixed", "all taken", "none taken"])
def test_lane_dependent_selects_equal_one_element_at_a_time(signs):
    """``a if c else b`` with c per lane: a group whose lanes all take one arm runs that arm written in
    (vector instructions); a mixed group chooses per lane. Every case gives the element's own bits,
    gradients included (the adjoint's guarded cotangent updates are such selects too), in
    statements and in the lane scalars they define. Groups of the "mixed" batch may still happen to
    be uniform; the others are uniform by construction."""
    B, m = 19, 7
    s = {"mixed": rng.choice([-1.5, 0.0, 0.75, 3.0], B), "all taken": rng.uniform(0.5, 2, B),
         "none taken": -rng.uniform(0.5, 2, B)}[signs]
    args = (np.zeros((B, m)), rng.standard_normal((B, m)), s)
    cts = (rng.standard_normal((B, m)), None, None)
    lanes = revdiff.batched(guarded_scale, ("y", "x", "s"), layout="lanes")
    elements = revdiff.batched(guarded_scale, ("y", "x", "s"), layout="elements")
    _equal(lanes(*args), elements(*args))
    for got, expected in zip(lanes.vjp(args, cts), elements.vjp(args, cts)):
        _equal(got, expected)
    src = lanes.lane_source("vjp", lanes._element_types(args))
    assert "if s__l0 > 0 and s__l1 > 0 and" in src.replace("(", "").replace(")", "")
    # the scaled sum of squares of a norm chooses in lane scalars (Locals): zero vectors take the other arm
    x = args[1] * (s > 0)[:, None]
    norms = revdiff.batched(norm_of, ("r", "x"), layout="lanes")
    one_by_one = revdiff.batched(norm_of, ("r", "x"), layout="elements")
    nargs, ncts = (np.zeros(B), x), (rng.standard_normal(B), None)
    _equal(norms(*nargs), one_by_one(*nargs))
    for got, expected in zip(norms.vjp(nargs, ncts), one_by_one.vjp(nargs, ncts)):
        _equal(got, expected)
    norm_src = norms.lane_source("vjp", norms._element_types(nargs)).replace("(", "").replace(")", "")
    assert re.search(r"if _scale\w*__l0 > 0 and _scale\w*__l1 > 0 and", norm_src)  # a Local's fast path


@revdiff.reversible
def promoting_select(y, x, s, n):
    for i in range(len(x)):
        y[i] += (x[i] if s > 0 else 0.1) * x[i] / 3 + (n if s > 0 else 0.5) * n


@pytest.mark.parametrize("signs", [[1.0], [-1.0], [1.0, -1.0]])
def test_a_uniformly_chosen_select_keeps_the_type_of_both_arms(signs):
    """A select is as wide as its widest arm: float32 x or the int n against a float arm computes in
    float64 (n * n past 2**63 is no int wraparound) also where every lane takes the narrow arm,
    including the last group, whose spare lanes repeat its last element."""
    B, m = 9, 6
    x = rng.standard_normal((B, m)).astype(np.float32)
    s = np.resize(np.array(signs, np.float32), B)
    args = (np.zeros((B, m), np.float32), x, s, 2 ** 40)
    lanes = revdiff.batched(promoting_select, ("y", "x", "s"), layout="lanes")
    elements = revdiff.batched(promoting_select, ("y", "x", "s"), layout="elements")
    got = lanes(*args)
    _equal(got, elements(*args))
    assert np.all(got[0][s > 0] > 1e24)


@revdiff.reversible
def clip_step(x, y):
    if y > 0:
        x += y


def test_data_dependent_control_flow_is_refused_with_the_reason():
    bf = revdiff.batched(clip_step, ("x", "y"), layout="lanes")
    with pytest.raises(ValueError, match="cannot run in SIMD lanes: a branch condition in clip_step_forward "
                                         "depends on batch data"):
        bf(np.zeros(4), np.ones(4))
    auto = revdiff.batched(clip_step, ("x", "y"))
    x, _ = auto(np.zeros(300), np.linspace(-1, 1, 300))  # auto: one element per iteration instead
    np.testing.assert_array_equal(x, np.maximum(np.linspace(-1, 1, 300), 0))
    with pytest.raises(ValueError, match="SIMD lanes need real float32 or float64"):
        revdiff.batched(divide, ("x", "y"), layout="lanes")(np.ones(4, complex), np.ones(4, complex))
    with pytest.raises(ValueError, match="layout must be one of"):
        revdiff.batched(divide, ("x", "y"), layout="simd")


def test_elements_up_to_the_blas_threshold_run_in_lanes_and_equal_single_calls():
    """48 x 32 = 1536 entries: above the old 1024-entry limit, below BLAS_MIN_ELEMENTS, so the
    high-level function's batch runs in lanes and single calls compile without BLAS branches."""
    from revdiff.targets.lanes.modules import LANE_MAX_ELEMENTS, LANE_MIN_BATCH
    B, m, n = LANE_MIN_BATCH + 3, 48, 32
    assert 1024 < m * n <= LANE_MAX_ELEMENTS
    A, y, gz = rng.standard_normal((B, m, n)), rng.standard_normal((B, m)), rng.standard_normal((B, m))
    bf = revdiff.batched(P.project_cgs2, ("z", "R", "A", "y"))
    element = (np.zeros(m), np.zeros((n, n)), A[0], y[0])
    assert bf.lanes("vjp", P.project_cgs2.argument_types(element), (np.zeros((B, m)), np.zeros((B, n, n)), A, y))
    gA, gy = P.project_vjp(A, y, gz, method="cgs2")
    for b in (0, B - 1):
        _, pullback = revdiff.vjp(P.project_cgs2, np.zeros(m), np.zeros((n, n)), A[b], y[b])
        _, _, g_A, g_y = pullback(gz[b], None, None, None)
        np.testing.assert_array_equal(gA[b], g_A)
        np.testing.assert_array_equal(gy[b], g_y)


def test_block_cgs2_gradients_run_in_lanes_and_equal_single_calls():
    """A batch of block-CGS2 gradients in lanes (the largest lane program: once beyond the size the
    compiler could take) runs in lanes under "auto", bit for bit what one element at a time gives."""
    B, m, n = 256, 32, 16
    A = np.random.default_rng(3).standard_normal((B, m, n))
    args = (np.zeros((B, m, n)), np.zeros((B, n, n)), A)
    cots = (np.ones((B, m, n)), np.ones((B, n, n)), None)
    auto = revdiff.batched(P.bcgs2, ("Q", "R", "A"))
    assert auto.lanes("vjp", auto._element_types(args), args) == 8
    _, grads = auto.vjp(args, cots)
    _, single = revdiff.batched(P.bcgs2, ("Q", "R", "A"), layout="elements").vjp(args, cots)
    np.testing.assert_array_equal(grads[2], single[2])


@revdiff.reversible
def _sines_with_scalar(y, s, x, w):
    for i in range(x.shape[0]):
        y[i] += np.sin(x[i]) * w[i] + s * x[i] * x[i]
    s += y[0] * y[x.shape[0] - 1]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tangent_entries_in_lanes_equal_one_element_at_a_time(dtype):
    """jvp and the tangent of the fused vjp (Hessian-vector products) in lanes: a batched array and
    a batched scalar that the program modifies, a batched input and a shared one (w), whose tangent
    stays shared; 11 elements fill one group of 8 lanes and part of a second."""
    B, m = 11, 5
    args = (np.zeros((B, m), dtype), np.zeros(B, dtype), rng.standard_normal((B, m)).astype(dtype),
            rng.standard_normal(m).astype(dtype))
    tangents = tuple(rng.standard_normal(np.shape(a)).astype(dtype) for a in args)
    cotangents = (rng.standard_normal((B, m)).astype(dtype), np.ones(B, dtype), None, None)
    lanes = revdiff.batched(_sines_with_scalar, ("y", "s", "x"), layout="lanes")
    elements = revdiff.batched(_sines_with_scalar, ("y", "s", "x"), layout="elements")
    assert "in groups of 8 SIMD lanes" in lanes.lane_source("hvp", lanes._element_types(args))
    for got, expected in zip(lanes.jvp(args, tangents), elements.jvp(args, tangents)):
        _equal(got, expected)
    hvp = lanes.vjp_jvp(args, cotangents, tangents)
    for got, expected in zip(hvp, elements.vjp_jvp(args, cotangents, tangents)):
        _equal(got, expected)
    assert np.any(hvp[3][0] != 0) and np.any(hvp[3][3] != 0)  # Hessian times the tangents, shared w summed


@revdiff.reversible
def _named_like_entry_locals(b, e, n, x):
    for i in range(x.shape[0]):
        b[i] += x[i] * x[i]
        e[i] += n * x[i]


def test_parameters_named_like_the_lane_entrys_own_variables():
    """The lane buffers of b, e and n are not the entry's _b (group start), _e (error record), _n."""
    B = 9
    args = (np.zeros((B, 3)), np.zeros((B, 3)), 2.0, rng.standard_normal((B, 3)))
    lanes = revdiff.batched(_named_like_entry_locals, ("b", "e", "x"), layout="lanes")
    elements = revdiff.batched(_named_like_entry_locals, ("b", "e", "x"), layout="elements")
    _equal(lanes(*args), elements(*args))
    tangents = (None, None, 1.0, np.ones((B, 3)))
    for got, expected in zip(lanes.jvp(args, tangents), elements.jvp(args, tangents)):
        _equal(got, expected)


@revdiff.reversible
def _weighted_add(y, x, w):
    for i in range(len(x)):
        y[i] += w[i] * x[i]


def test_lanes_on_fortran_ordered_and_strided_arrays_return_and_donate_their_results():
    """Lanes run on C-ordered copies of other arrays; the results go back into the arrays given: the
    saved outputs a vjp returns (allocated like a Fortran-ordered y) and donated arrays."""
    B, n = 300, 5
    rng = np.random.default_rng(8)
    x, w = np.asfortranarray(rng.standard_normal((B, n))), rng.standard_normal(2 * n)[::2]
    w.flags.writeable = False
    lanes = revdiff.batched(_weighted_add, ("y", "x"), layout="lanes")
    elements = revdiff.batched(_weighted_add, ("y", "x"), layout="elements")
    cots = (np.ones((B, n)), None, None)
    outs, grads = lanes.vjp((np.zeros((B, n), order="F"), x, w), cots, donate=True)
    want_outs, want_grads = elements.vjp((np.zeros((B, n)), np.ascontiguousarray(x), w), cots)
    np.testing.assert_array_equal(outs[0], want_outs[0])
    for got, want in zip(grads, want_grads):
        np.testing.assert_array_equal(got, want)
    y = np.zeros((B, n), order="F")
    result = lanes(y, x, w, donate=True)
    np.testing.assert_array_equal(y, want_outs[0])
    np.testing.assert_array_equal(result[0], want_outs[0])


def _lane_copies(t: str) -> tuple:
    """The compiled gather and scatter of ``targets/llvm/lane_copy.py`` for LLVM type ``t``, callable."""
    import ctypes

    from revdiff.targets.llvm import jit, lane_copy
    texts = [lane_copy.definition(t, gather) for gather in (True, False)]
    for kind in ("gather", "scatter"):
        texts.append(f"define void @test_lanes_{kind}_{t}(ptr %b, ptr %s, i64 %st, i64 %f, i64 %c, i64 %n) {{\n"
                     f"entry:\n  call void @rd_lanes_{kind}_{t}(ptr %b, ptr %s, i64 %st, i64 %f, i64 %c, i64 %n)\n"
                     f"  ret void\n}}")
    names = [f"test_lanes_gather_{t}", f"test_lanes_scatter_{t}"]
    addresses = jit.load("\n\n".join(texts), f"test_lane_copy_{t}", names)
    proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 2 + [ctypes.c_int64] * 4))
    return tuple(proto(addresses[n]) for n in names)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lane_copies_transpose_blocks_and_tails_exactly(dtype):
    """The compiled copies between a group of eight elements and a lane buffer (8 x 8 transposes in
    registers, then entry by entry): every entry lands in its lane and row, a last partial group
    gathers its last element into its spare lanes and scatters only the lanes holding an element, and
    rows of elements further apart than their length (a view) are read and written in place."""
    gather, scatter = _lane_copies("double" if dtype == np.float64 else "float")
    for n in (1, 7, 8, 9, 17, 67):
        for count, first in ((16, 0), (16, 8), (11, 8), (9, 8), (1, 0)):
            whole = rng.standard_normal((count, n + 5)).astype(dtype)
            src = whole[:, 2:n + 2]  # contiguous rows, a row stride longer than the row
            buf = np.full((n, 8), np.nan, dtype)
            gather(buf.ctypes.data, src.ctypes.data, src.strides[0], first, count, n)
            lanes = np.minimum(np.arange(first, first + 8), count - 1)
            np.testing.assert_array_equal(buf, src[lanes].T)
            values = rng.standard_normal((n, 8)).astype(dtype)
            before = whole.copy()
            scatter(values.ctypes.data, src.ctypes.data, src.strides[0], first, count, n)
            held = np.arange(first, min(first + 8, count))
            expected = before.copy()
            expected[held, 2:n + 2] = values[:, :len(held)].T
            np.testing.assert_array_equal(whole, expected)


def test_the_transpose_network_transposes():
    from revdiff.targets.llvm.lane_copy import TRANSPOSE_STAGES
    rows = [np.arange(8) + 10 * k for k in range(8)]
    for stage in TRANSPOSE_STAGES:
        rows = [np.concatenate([rows[a], rows[b]])[list(mask)] for a, b, mask in stage]
    np.testing.assert_array_equal(np.array(rows), (np.arange(8)[None, :] + 10 * np.arange(8)[:, None]).T)
