"""Time of each high-level function's first and second call in one fresh process, in the order a
user meets them (later calls reuse what earlier ones compiled): with an empty revdiff cache by
default, or with ``--cache DIR`` (run twice with the same DIR: the second run loads from disk).

    python benchmarks/first_calls.py [--shape 8x4] [--batch 4] [--method cgs2] [--dtype float64] [--cache DIR]
"""
import argparse
import os
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="8x4", help="m x n of A (default 8x4)")
    parser.add_argument("--batch", type=int, default=4, help="matrices in the batch (default 4)")
    parser.add_argument("--method", default="cgs2", help="QR method (default cgs2)")
    parser.add_argument("--dtype", default="float64", help="dtype of A (default float64)")
    parser.add_argument("--cache", default=None, help="revdiff cache directory (default: a new, empty one)")
    a = parser.parse_args()
    m, n = (int(x) for x in a.shape.split("x"))
    os.environ["REVDIFF_CACHE_DIR"] = a.cache or tempfile.mkdtemp(prefix="revdiff-cold-")

    import numpy as np

    from revdiff import programs as P

    rng = np.random.default_rng(0)
    A = rng.standard_normal((a.batch, m, n)).astype(a.dtype)
    y, gz = (rng.standard_normal((a.batch, m)).astype(a.dtype) for _ in range(2))
    gQ, gR = rng.standard_normal((a.batch, m, n)).astype(a.dtype), rng.standard_normal((a.batch, n, n)).astype(a.dtype)
    gx = rng.standard_normal((a.batch, n)).astype(a.dtype)
    calls = {
        "qr": lambda: P.qr(A, method=a.method),
        "qr_vjp": lambda: P.qr_vjp(A, gQ, gR, method=a.method),
        "project": lambda: P.project(A, y, method=a.method),
        "project_vjp": lambda: P.project_vjp(A, y, gz, method=a.method),
        "lstsq": lambda: P.lstsq(A, y, method=a.method),
        "lstsq_vjp": lambda: P.lstsq_vjp(A, y, gx, method=a.method),
    }
    print(f"{a.batch} x {m}x{n} {a.dtype}, method {a.method}, cache {os.environ['REVDIFF_CACHE_DIR']}\n")
    print("| call | first | second |\n|---|---|---|")
    for name, call in calls.items():
        times = []
        for _ in range(2):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        print(f"| {name} | {times[0]:.1f} s | {times[1] * 1e3:.1f} ms |", flush=True)


if __name__ == "__main__":
    main()
