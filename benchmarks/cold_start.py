"""Cold and warm start of two or more checkouts, alternating fresh processes: import revdiff and
run the first 1x32x16 projection gradient with an empty cache directory (cold), then again with
that cache (warm).

    python benchmarks/cold_start.py --trees /tmp/before,. --rounds 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r"""
import time
t0 = time.perf_counter()
import numpy as np
from revdiff import programs as P
rng = np.random.default_rng(0)
A, y, g = rng.standard_normal((1, 32, 16)), rng.standard_normal((1, 32)), rng.standard_normal((1, 32))
P.project_vjp(A, y, g)
print(f"SECONDS {time.perf_counter() - t0}")
"""


def start(tree: Path, cache: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree), REVDIFF_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", WORKER], env=env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    line = next((x for x in done.stdout.splitlines() if x.startswith("SECONDS ")), None)
    if done.returncode or line is None:
        raise SystemExit(f"{tree}: the worker failed\n{done.stderr[-3000:]}")
    return float(line.split()[1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", required=True, help="comma-separated checkouts")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    trees = [Path(t).resolve() for t in args.trees.split(",")]
    times: dict = {(t, kind): [] for t in trees for kind in ("cold", "warm")}
    for _ in range(args.rounds):
        for tree in trees:
            with tempfile.TemporaryDirectory(prefix="cold_") as cache:
                times[tree, "cold"].append(start(tree, Path(cache)))
                times[tree, "warm"].append(start(tree, Path(cache)))
    for (tree, kind), values in times.items():
        print(f"{tree} {kind}: median {statistics.median(values):.2f} s "
              f"({', '.join(f'{v:.2f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
