"""Cost of the rank-revealing options against the plain programs, in one process, alternating:
qr(pivoting=True) against qr, qr_vjp(pivoting=True) against qr_vjp, and project / project_vjp with
rank_deficient="truncate" against the default, as time ratios (medians of alternating rounds).

    python benchmarks/rank_revealing.py [--cases 1000x32x16,100x64x32] [--methods cgs2,householder]
"""
import argparse
import statistics
import time

import numpy as np

from revdiff import programs as P


def cells(A, y, gz, gQ, gR, method):
    """(name, plain call, option call) for one case and method."""
    return [
        ("qr", lambda: P.qr(A, method), lambda: P.qr(A, method, pivoting=True)),
        ("qr_vjp", lambda: P.qr_vjp(A, gQ, gR, method), lambda: P.qr_vjp(A, gQ, gR, method, pivoting=True)),
        ("project", lambda: P.project(A, y, method), lambda: P.project(A, y, method, rank_deficient="truncate")),
        ("project_vjp", lambda: P.project_vjp(A, y, gz, method),
         lambda: P.project_vjp(A, y, gz, method, rank_deficient="truncate")),
    ]


def timed(call) -> float:
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="1000x32x16,100x64x32", help="BxMxN, comma-separated")
    parser.add_argument("--methods", default="cgs2,householder",
                        help="methods with pivoting (cgs2, bcgs2, householder)")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds; medians reported (default 7)")
    a = parser.parse_args()
    print("| case | method | call | plain | option | option / plain |\n|---|---|---|---|---|---|")
    for case in a.cases.split(","):
        b, m, n = (int(x) for x in case.split("x"))
        rng = np.random.default_rng(b * m * n)
        A, y, gz = rng.standard_normal((b, m, n)), rng.standard_normal((b, m)), rng.standard_normal((b, m))
        gQ, gR = rng.standard_normal((b, m, n)), np.triu(rng.standard_normal((b, n, n)))
        for method in a.methods.split(","):
            for name, plain, option in cells(A, y, gz, gQ, gR, method):
                plain(), option()  # compile
                times = {"plain": [], "option": []}
                for _ in range(a.rounds):
                    times["plain"].append(timed(plain))
                    times["option"].append(timed(option))
                p, o = statistics.median(times["plain"]), statistics.median(times["option"])
                print(f"| {case} | {method} | {name} | {p * 1e3:.1f} ms | {o * 1e3:.1f} ms | {o / p:.2f} |", flush=True)


if __name__ == "__main__":
    main()
