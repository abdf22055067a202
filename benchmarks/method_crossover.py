"""Where ``householder`` overtakes ``cgs2``: warm project_vjp and qr_vjp gradients of batches of
matrices (m = 2n), float64 and float32, on one core (one revdiff thread, one BLAS thread, the
process pinned to one CPU), the two methods alternating, best of ``--rounds`` runs each. The
measurement behind ``revdiff.programs.methods.AUTO_HOUSEHOLDER_MIN_COLUMNS``, the rule of the
default ``method="auto"``; its last column says which method the default runs at the shape.

    python benchmarks/method_crossover.py [--cases 10000x32x16,...] [--dtypes float64,float32]
                                          [--gradients projection,qr] [--rounds 3]
"""
from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # before NumPy loads its BLAS
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import revdiff  # noqa: E402
from revdiff import programs as P  # noqa: E402
from revdiff.programs.methods import resolved  # noqa: E402

CASES = "10000x32x16,4000x40x20,2000x48x24,1000x64x32,200x96x48,20x128x64,8x256x128,4x384x192,2x500x250"


def best_of(call, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES)
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--gradients", default="projection,qr", help="of projection, qr and lstsq")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    revdiff.set_num_threads(1)
    rng = np.random.default_rng(0)
    print("| B x m x n | dtype | gradient | cgs2 ms | householder ms | householder / cgs2 | auto runs |")
    print("|---|---|---|---|---|---|---|")
    for dtype in args.dtypes.split(","):
        for case in args.cases.split(","):
            b, m, n = map(int, case.split("x"))  # B x m x n
            p = min(m, n)
            A = rng.standard_normal((b, m, n)).astype(dtype)
            y, gz = rng.standard_normal((b, m)).astype(dtype), rng.standard_normal((b, m)).astype(dtype)
            gQ, gR = rng.standard_normal((b, m, p)).astype(dtype), rng.standard_normal((b, p, n)).astype(dtype)
            gx = rng.standard_normal((b, n)).astype(dtype)
            gradients = {"projection": lambda method: P.project_vjp(A, y, gz, method=method),
                         "qr": lambda method: P.qr_vjp(A, gQ, gR, method=method),
                         "lstsq": lambda method: P.lstsq_vjp(A, y, gx, method=method)}
            for name in args.gradients.split(","):
                gradient = gradients[name]
                times: dict = {"cgs2": [], "householder": []}
                for method in times:
                    gradient(method)  # compiled and warm
                for _ in range(2):  # alternating, so that the machine's noise falls on both
                    for method in times:
                        times[method].append(best_of(lambda: gradient(method), args.rounds))
                c, h = min(times["cgs2"]), min(times["householder"])
                chosen = resolved("auto", (m, n), dtype=dtype, projection=name != "qr")
                print(f"| {case} | {dtype} | {name} | {1e3 * c:.1f} | {1e3 * h:.1f} | {h / c:.2f} | {chosen} |",
                      flush=True)


if __name__ == "__main__":
    main()
