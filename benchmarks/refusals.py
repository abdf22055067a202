"""How often Householder's sign threshold refuses random matrices: batches of random float32 40x32
matrices through the ``householder`` program's own run (forward and uncompute) and the fused vjp of
``project_householder``, counting the matrices each reports refused (``ReversibilityError``'s
``failed_elements``); the high-level functions would factor those again with their rows reordered.

    python benchmarks/refusals.py [--batches 200] [--batch 5000] [--dtype float32]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import revdiff
from revdiff.programs.householder import householder
from revdiff.programs.projection import project_householder


def refused(call) -> int:
    """How many matrices ``call`` reports refused (0 when it runs)."""
    try:
        call()
    except revdiff.ReversibilityError as error:
        return len(error.failed_elements)
    return 0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--shape", default="40x32")
    args = parser.parse_args(argv)
    m, n = map(int, args.shape.split("x"))
    b, dt = args.batch, np.dtype(args.dtype)
    qr = revdiff.batched(householder, ("Q", "R", "A"))
    projection = revdiff.batched(project_householder, ("z", "R", "A", "y"))
    counts = {"householder": 0, "project_householder vjp": 0}
    start = time.perf_counter()
    for seed in range(args.batches):
        A = np.random.default_rng(1000 + seed).standard_normal((b, m, n)).astype(dt)
        y = np.ones((b, m), dt)
        counts["householder"] += refused(lambda: qr(np.zeros((b, m, n), dt), np.zeros((b, n, n), dt), A))
        counts["project_householder vjp"] += refused(lambda: projection.vjp(
            (np.zeros((b, m), dt), np.zeros((b, n, n), dt), A, y), (y, None, None, None)))
    total = args.batches * b
    print(f"{total} random {args.dtype} {m}x{n} matrices ({time.perf_counter() - start:.0f} s): "
          + ", ".join(f"{name} refused {count}" for name, count in counts.items()))


if __name__ == "__main__":
    main()
