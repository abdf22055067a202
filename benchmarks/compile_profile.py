"""Where the cold compile of the first projection gradient goes: Numba's compile time of every
generated function (and helper), inclusive and exclusive of the functions it compiles in turn.

    python benchmarks/compile_profile.py [--shape 32x16] [--batch 3] [--method bcgs2]

A batch of one runs the single-matrix programs; a larger batch (below the SIMD lanes' minimum)
compiles the batched entry around them too.

It runs in an empty revdiff cache (a temporary directory), so everything generated is compiled.
Numba's own cache of its internals and of revdiff/runtime/host.py is not cleared.
"""
import argparse
import os
import tempfile
import time
from collections import defaultdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="32x16", help="m x n of A (default 32x16)")
    parser.add_argument("--batch", type=int, default=1, help="matrices in the batch (default 1)")
    parser.add_argument("--method", default="cgs2", help="QR method of the projection (default cgs2)")
    a = parser.parse_args()
    m, n = (int(x) for x in a.shape.split("x"))
    os.environ["REVDIFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="revdiff-cold-")

    import numpy as np
    from numba.core import event

    from revdiff import programs as P

    inclusive: dict = defaultdict(float)
    exclusive: dict = defaultdict(float)
    stack: list = []  # [name, start, seconds spent in nested compiles]

    class Listener(event.Listener):
        def on_start(self, ev):
            stack.append([ev.data["dispatcher"].py_func.__name__, time.perf_counter(), 0.0])

        def on_end(self, ev):
            name, start, nested = stack.pop()
            spent = time.perf_counter() - start
            inclusive[name] += spent
            exclusive[name] += spent - nested
            if stack:
                stack[-1][2] += spent

    event.register("numba:compile", Listener())
    A = np.random.default_rng(0).standard_normal((a.batch, m, n))
    t0 = time.perf_counter()
    P.project_vjp(A, A[..., 0], A[..., 1], method=a.method)
    total = time.perf_counter() - t0
    print(f"first {a.batch} x {m}x{n} {a.method} projection gradient, empty revdiff cache: {total:.1f} s, "
          f"{len(inclusive)} functions compiled")
    print("| function | exclusive s | inclusive s |\n|---|---|---|")
    for name in sorted(exclusive, key=exclusive.get, reverse=True):
        if exclusive[name] >= 0.05:
            print(f"| {name} | {exclusive[name]:.2f} | {inclusive[name]:.2f} |")
    print(f"| (the rest) | {sum(v for v in exclusive.values() if v < 0.05):.2f} | |")


if __name__ == "__main__":
    main()
