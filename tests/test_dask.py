"""revdiff.dask: the programs over Dask arrays chunked along batch axes equal one NumPy call bit for
bit, on the threaded scheduler and across the worker processes of a dask.distributed LocalCluster,
whose workers compile into the same cache; a chunked matrix axis is refused by name."""
import os

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import revdiff.dask as rd  # noqa: E402  (after the importorskip)
from revdiff import programs as P  # noqa: E402
from revdiff.runtime.cache import cache_dir  # noqa: E402

rng = np.random.default_rng(3)


def arrays(b=40, m=7, n=3, dtype=np.float64):
    return (rng.standard_normal((b, m, n)).astype(dtype), rng.standard_normal((b, m)).astype(dtype),
            rng.standard_normal((b, m)).astype(dtype))


def test_every_function_equals_the_numpy_call_bit_for_bit():
    A, y, g = arrays()
    dA, dy = da.from_array(A, chunks=(15, 7, 3)), da.from_array(y, chunks=(10, 7))
    gR = np.triu(rng.standard_normal((40, 3, 3)))
    gQ = rng.standard_normal((40, 7, 7))
    cases = [(rd.qr(dA), P.qr(A)), (rd.qr_vjp(dA, None, gR), P.qr_vjp(A, None, gR)),
             (rd.qr(dA, "householder", mode="complete"), P.qr(A, "householder", mode="complete")),
             (rd.qr_vjp(dA, gQ, None, "householder", mode="complete"), P.qr_vjp(A, gQ, None, "householder",
                                                                                mode="complete")),
             (rd.qr(dA, mode="r"), P.qr(A, mode="r")), (rd.qr_vjp(dA, None, gR, mode="r"), P.qr_vjp(A, None, gR, mode="r")),
             (rd.project(dA, dy), P.project(A, y)), (rd.project_vjp(dA, dy, g), P.project_vjp(A, y, g)),
             (rd.lstsq(dA, dy), P.lstsq(A, y)), (rd.lstsq_vjp(dA, dy, g[:, :3]), P.lstsq_vjp(A, y, g[:, :3])),
             (rd.normalize(dy), P.normalize(y)), (rd.normalize_vjp(dy, g), P.normalize_vjp(y, g)),
             (rd.tangent_project(g, dy), P.tangent_project(g, y)),
             (rd.tangent_project_vjp(g, dy, y), P.tangent_project_vjp(g, y, y))]
    for got, want in cases:
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.compute(), b)


def test_batch_axes_broadcast_as_in_a_gufunc_and_dtypes_follow_the_programs():
    A, y, _ = arrays(dtype=np.float32)
    z = rd.project(da.from_array(A, chunks=(8, 7, 3)), y[0].astype(np.float64))
    assert z.dtype == np.float64
    np.testing.assert_array_equal(z.compute(), P.project(A, np.broadcast_to(y[0], y.shape).astype(np.float64)))


def test_empty_matrices_and_wide_least_squares_as_in_numpy_calls():
    for shape in ((2, 0, 3), (2, 4, 0), (0, 4, 3)):
        A = np.zeros(shape)
        for got, want in zip(rd.qr(da.from_array(A)), P.qr(A)):
            assert got.shape == want.shape
            np.testing.assert_array_equal(got.compute(), want)
    np.testing.assert_array_equal(rd.normalize(da.zeros((2, 0))).compute(), np.zeros((2, 0)))
    with pytest.raises(ValueError, match="lstsq needs a tall or square A"):
        rd.lstsq(da.zeros((2, 3, 5)), da.zeros((2, 3)))


def test_a_chunked_matrix_axis_is_refused_by_name():
    A, y, _ = arrays()
    with pytest.raises(ValueError, match=r"'A' is split into 2 chunks along axis 2 .* rechunk it"):
        rd.project(da.from_array(A, chunks=(10, 7, 2)), y)
    with pytest.raises(ValueError, match=r"'x' is split into 2 chunks along axis 1"):
        rd.normalize(da.from_array(y, chunks=(10, 4)))


def test_a_projection_gradient_across_the_processes_of_a_local_cluster():
    distributed = pytest.importorskip("dask.distributed")
    A, y, g = arrays(b=120, m=12, n=5)
    expected = P.project_vjp(A, y, g)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as client:
        gA, gy = rd.project_vjp(da.from_array(A, chunks=(60, 12, 5)), da.from_array(y, chunks=(60, 12)), g)
        got = [future.result(timeout=600) for future in client.compute([gA, gy])]
        pids = client.run(os.getpid)
        caches = client.run(lambda: str(cache_dir()))
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    assert set(caches.values()) == {str(cache_dir())}  # the workers compile into this process's cache


def test_a_gradient_is_declared_in_the_dtype_its_chunks_hold_when_precisions_mix():
    """Dask's declared dtype is what the chunks compute: the programs' (the inputs' promoted dtype,
    real for a real input), so that code trusting ``.dtype`` before computing (``da.store``) is right."""
    A, y, g = arrays(b=6, dtype=np.float32)
    y64, g64 = y.astype(np.float64), g.astype(np.float64)
    dA = da.from_array(A, chunks=(3, 7, 3))
    cases = [rd.project_vjp(dA, y64, g64), rd.lstsq_vjp(dA, y64, g64[:, :3]),
             rd.project_vjp(dA.astype(np.complex64), y64, g64), rd.tangent_project_vjp(g, y64, g64),
             rd.normalize_vjp(da.from_array(y, chunks=(3, 7)), g64),
             rd.qr_vjp(dA, rng.standard_normal((6, 7, 3)), None)]
    for grads in cases:
        for grad in grads if isinstance(grads, tuple) else (grads,):
            assert grad.compute().dtype == grad.dtype


def test_unknown_chunk_sizes_are_named_with_the_fix():
    """A boolean mask leaves Dask's chunk sizes unknown (NaN): the argument is named with the call
    that makes them known, not Dask's internal '__loopdim0__'; after it, the result is NumPy's."""
    A, y, _ = arrays()
    keep = rng.standard_normal(len(A)) > 0
    dA, dy = da.from_array(A, chunks=(10, 7, 3))[da.from_array(keep, chunks=10)], da.from_array(y, chunks=(10, 7))
    dy = dy[da.from_array(keep, chunks=10)]
    with pytest.raises(ValueError, match=r"'A', 'y' have unknown chunk sizes.*compute_chunk_sizes\(\)"):
        rd.project(dA, dy)
    got = rd.project(dA.compute_chunk_sizes(), dy.compute_chunk_sizes()).compute()
    np.testing.assert_array_equal(got, P.project(A[keep], y[keep]))
