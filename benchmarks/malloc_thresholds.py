"""Warm gradients in fresh processes with glibc's malloc thresholds raised (``revdiff/runtime/heap.py``)
and left alone (``REVDIFF_MALLOC_THRESHOLDS=0``), alternating, one core. The inputs are made without
temporaries: freeing a large one would raise the thresholds itself and hide the difference.

    python benchmarks/malloc_thresholds.py [--cases 4x500x250,10000x32x16] [--rounds 3] [--repeats 8]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

WORKER = r"""
import sys, time
import numpy as np
from revdiff import programs as P
B, m, n = (int(v) for v in sys.argv[1].split("x"))
rng = np.random.default_rng(0)
A, y, gz = rng.standard_normal((B, m, n)), rng.standard_normal((B, m)), rng.standard_normal((B, m))
P.project_vjp(A, y, gz)
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    P.project_vjp(A, y, gz)
    times.append(time.perf_counter() - start)
print(min(times))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="4x500x250,10000x32x16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=8)
    a = parser.parse_args()
    for case in a.cases.split(","):
        times: dict = {"1": [], "0": []}
        for _ in range(a.rounds):
            for switch in times:
                env = dict(os.environ, REVDIFF_MALLOC_THRESHOLDS=switch, REVDIFF_NUM_THREADS="1",
                           OPENBLAS_NUM_THREADS="1")
                done = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", WORKER, case, str(a.repeats)],
                                      env=env, capture_output=True, text=True, check=True)
                times[switch].append(float(done.stdout) * 1e3)
        raised, left = statistics.median(times["1"]), statistics.median(times["0"])
        print(json.dumps({"case": case, "raised ms": round(raised, 1), "left alone ms": round(left, 1),
                          "raised / left alone": round(raised / left, 2)}))


if __name__ == "__main__":
    main()
