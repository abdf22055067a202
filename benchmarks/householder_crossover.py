"""Where ``blocked_householder`` overtakes the column-by-column ``householder``: warm project_vjp
and qr_vjp of float64 tall matrices (m = 2n), one matrix and a batch, medians of alternating runs.
The measurement behind ``revdiff.programs.methods.BLOCKED_MIN_COLUMNS`` (while it runs the
"householder" rows, it raises that constant so that the method keeps its column-by-column program).

    python benchmarks/householder_crossover.py [--columns 16,32,48,64,96,128] [--batch 64] [--rounds 5]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from revdiff import programs as P
from revdiff.programs import methods


def _time(call, rounds: int) -> list:
    call()  # compiled and warm
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", default="16,32,48,64,96,128")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print("| batch | m x n | function | householder ms | blocked_householder ms | blocked / column-by-column |")
    print("|---|---|---|---|---|---|")
    for n in map(int, args.columns.split(",")):
        for b in (1, args.batch):
            A = rng.standard_normal((b, 2 * n, n))
            y, gz = rng.standard_normal((b, 2 * n)), rng.standard_normal((b, 2 * n))
            gQ, gR = rng.standard_normal((b, 2 * n, n)), rng.standard_normal((b, n, n))
            calls = {"project_vjp": lambda method: P.project_vjp(A, y, gz, method),
                     "qr_vjp": lambda method: P.qr_vjp(A, gQ, gR, method)}
            for name, call in calls.items():
                times = {method: [] for method in ("householder", "blocked_householder")}
                for _ in range(2):  # alternate
                    for method in times:
                        _column_by_column(lambda: times[method].extend(_time(lambda: call(method), args.rounds)))
                one, blocked = (float(np.median(times[method])) * 1e3 for method in times)
                print(f"| {b} | {2 * n} x {n} | {name} | {one:.2f} | {blocked:.2f} | {blocked / one:.2f} |", flush=True)


def _column_by_column(run) -> None:
    """``run()`` with "householder" running its column-by-column program at every size."""
    chosen, methods.BLOCKED_MIN_COLUMNS = methods.BLOCKED_MIN_COLUMNS, 1 << 62
    try:
        run()
    finally:
        methods.BLOCKED_MIN_COLUMNS = chosen

if __name__ == "__main__":
    main()
