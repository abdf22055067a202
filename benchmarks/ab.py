"""A/B timing of revdiff's own gradients in two or more checkouts, alternating them in fresh
processes so that the shared machine's drift falls on all alike. Each round runs every checkout
once (its own cache directory, warmed by a first round that is not counted); the report gives
each cell's median over the rounds and its ratio to the first checkout.

    python benchmarks/ab.py --trees /tmp/before,. --cases 10000x32x16,100x500x250 --rounds 3

Only the public high-level functions are timed (``--loss``: "projection" times ``project_vjp``,
"qr" ``qr_vjp``, "forward" the projection itself, ``project``, "jvp" its ``project_jvp``), so any
two commits that have them compare.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKER = r"""
import json, sys, time
import numpy as np
from revdiff import programs as P
cases, losses, dtypes, methods, repeats = json.loads(sys.argv[1])
out = {}
for case in cases:
    B, m, n = case
    for dtype in dtypes:
        rng = np.random.default_rng(m * n)
        A = rng.standard_normal((B, m, n)).astype(dtype)
        y = rng.standard_normal((B, m)).astype(dtype)
        gz = rng.standard_normal((B, m)).astype(dtype)
        gQ = rng.standard_normal((B, m, n)).astype(dtype)
        gR = rng.standard_normal((B, n, n)).astype(dtype)
        for loss in losses:
            for method in methods:
                call = {"projection": lambda: P.project_vjp(A, y, gz, method=method),
                        "qr": lambda: P.qr_vjp(A, gQ, gR, method=method),
                        "forward": lambda: P.project(A, y, method=method),
                        "jvp": lambda: P.project_jvp(A, y, gQ, gz, method=method)}[loss]
                call()
                times = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - start)
                out[f"{loss} {dtype} {B}x{m}x{n} {method}"] = sorted(times)[len(times) // 2]
print("RESULT " + json.dumps(out))
"""


def run_tree(tree: Path, cache: Path, spec: list) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), REVDIFF_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", WORKER, json.dumps(spec)], env=env, capture_output=True,
                          text=True, cwd=tempfile.gettempdir())
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if done.returncode or line is None:
        raise SystemExit(f"{tree}: the worker failed\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", required=True, help="comma-separated checkouts; the first is the baseline")
    parser.add_argument("--cases", default="10000x32x16,100x500x250")
    parser.add_argument("--loss", default="projection,qr")
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--methods", default="cgs2,bcgs2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per cell and round (median)")
    parser.add_argument("--cache-root", help="keep each checkout's cache in DIR/ab<k> (default: fresh)")
    parser.add_argument("--warm-only", action="store_true", help="compile into the caches, time nothing")
    args = parser.parse_args(argv)
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    cases = [[int(x) for x in c.split("x")] for c in args.cases.split(",")]
    spec = [cases, args.loss.split(","), args.dtypes.split(","), args.methods.split(","), args.repeats]
    root = Path(args.cache_root) if args.cache_root else Path(tempfile.mkdtemp(prefix="ab_"))
    caches = [root / f"ab{k}" for k in range(len(trees))]
    for tree, cache in zip(trees, caches):  # compile (not counted)
        cache.mkdir(parents=True, exist_ok=True)
        run_tree(tree, cache, spec)
    if args.warm_only:
        return 0
    results: list = [[] for _ in trees]
    started = time.time()
    for _ in range(args.rounds):
        for k, (tree, cache) in enumerate(zip(trees, caches)):
            results[k].append(run_tree(tree, cache, spec))
    cells = list(results[0][0])
    print(f"{args.rounds} alternating rounds in {time.time() - started:.0f} s; median per call over rounds, ms")
    print("| cell | " + " | ".join(str(t) for t in trees) + " | " +
          " | ".join(f"{t.name} / {trees[0].name}" for t in trees[1:]) + " |")
    print("|---" * (2 * len(trees)) + "|")
    for cell in cells:
        medians = [statistics.median(r[cell] for r in tree_results) * 1e3 for tree_results in results]
        spread = [f"{m:.1f} ({min(r[cell] for r in tr) * 1e3:.1f}-{max(r[cell] for r in tr) * 1e3:.1f})"
                  for m, tr in zip(medians, results)]
        ratios = [f"{m / medians[0]:.3f}" for m in medians[1:]]
        print(f"| {cell} | " + " | ".join(spread) + " | " + " | ".join(ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
