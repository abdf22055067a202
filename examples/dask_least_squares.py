"""Many small least-squares fits and their gradients spread over the worker processes of a Dask
cluster (here a LocalCluster on this machine; pass a scheduler address to use a real one):
revdiff.dask runs each chunk of the batch as one revdiff call on a worker."""
import sys

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster

import revdiff.dask as rd
from revdiff import programs as P

if __name__ == "__main__":
    rng = np.random.default_rng(0)
    A = da.from_array(rng.standard_normal((400, 20, 4)), chunks=(100, 20, 4))  # 4 chunks of 100 fits
    y = da.from_array(rng.standard_normal((400, 20)), chunks=(100, 20))
    address = sys.argv[1] if len(sys.argv) > 1 else None
    cluster = None if address else LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None,
                                                silence_logs=40)
    with Client(address or cluster) as client:
        x = rd.lstsq(A, y)                                   # (400, 4) solutions
        gA, gy = rd.lstsq_vjp(A, y, da.ones_like(x))         # gradient of sum(x)
        x, gA = client.compute([x, gA], sync=True)
    if cluster is not None:
        cluster.close()
    reference = np.linalg.lstsq(A[0].compute(), y[0].compute(), rcond=None)[0]
    print(f"first solution {np.round(x[0], 6)}, numpy.linalg.lstsq differs by {np.abs(x[0] - reference).max():.1e}")
    local = P.lstsq_vjp(A[:100].compute(), y[:100].compute(), np.ones((100, 4)))[0]  # the first chunk, here
    print(f"gradient of sum(x) w.r.t. A: shape {gA.shape}, the first chunk equal to a local call: "
          f"{np.array_equal(gA[:100], local)}")
    assert np.abs(x[0] - reference).max() < 1e-12
