"""Batched tangent entries in SIMD lanes against one element per iteration: the first call of each
(cold compile, in a fresh cache directory) and medians of alternating rounds, for the 32x16 cgs2
projection's ``jvp`` (``BatchedFunction.jvp``) and ``hvp`` (``vjp_jvp``, the tangent of the fused
vjp), with a check that both layouts give the same bits.

    python benchmarks/tangent_lanes.py [--batch 10000] [--kinds jvp,hvp] [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=10000, help="matrices in the batch (default 10000)")
    parser.add_argument("--kinds", default="jvp,hvp", help="jvp, hvp or both (default jvp,hvp)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds; medians reported (default 5)")
    a = parser.parse_args()
    os.environ["REVDIFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="revdiff-tangent-lanes-")

    import numpy as np

    import revdiff
    from revdiff import programs as P
    B, m, n = a.batch, 32, 16
    rng = np.random.default_rng(0)
    args = (np.zeros((B, m)), np.zeros((B, n, n)), rng.standard_normal((B, m, n)), rng.standard_normal((B, m)))
    direction = (None, None, rng.standard_normal((B, m, n)), rng.standard_normal((B, m)))
    cotangents = (rng.standard_normal((B, m)), None, None, None)
    calls = {"jvp": lambda bf: bf.jvp(args, direction),
             "hvp": lambda bf: bf.vjp_jvp(args, cotangents, direction)}
    print(f"{B} x {m}x{n} float64 cgs2 projection, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores")
    print("| entry | layout | first call (compile) | median | elements / lanes | same bits |")
    print("|---|---|---|---|---|---|")
    for kind in a.kinds.split(","):
        layouts = {layout: revdiff.batched(P.project_cgs2, ("z", "R", "A", "y"), layout=layout)
                   for layout in ("lanes", "elements")}
        first, results, times = {}, {}, {layout: [] for layout in layouts}
        for layout, bf in layouts.items():
            start = time.perf_counter()
            try:
                results[layout] = calls[kind](bf)
            except ValueError as exc:  # above the size limit: lanes refused
                print(f"| {kind} | {layout} | refused: {exc} | | | |")
                continue
            first[layout] = time.perf_counter() - start
        for _ in range(a.rounds):
            for layout in results:
                start = time.perf_counter()
                calls[kind](layouts[layout])
                times[layout].append(time.perf_counter() - start)
        medians = {layout: statistics.median(times[layout]) for layout in results}
        same = "lanes" in results and all(np.array_equal(x, y)
                                          for got, want in zip(results["lanes"], results["elements"])
                                          for x, y in zip(got, want) if x is not None)
        for layout in results:
            ratio = f"{medians['elements'] / medians['lanes']:.2f}" if layout == "lanes" else ""
            print(f"| {kind} | {layout} | {first[layout]:.1f} s | {1000 * medians[layout]:.1f} ms | {ratio} | "
                  f"{same if layout == 'lanes' else ''} |", flush=True)


if __name__ == "__main__":
    main()
