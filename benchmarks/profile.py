"""Where the time of a projection gradient goes: single-thread time per matrix of the generated
programs (QR and projection: forward then inverse, forward then adjoint, and the fused vjp), with
runtime checks on (the default) and off, called from a Numba loop so no Python overhead counts;
then the batched projection vjp per matrix, one element per iteration and in SIMD lanes.

    python benchmarks/profile.py [--shape 32x16] [--repeats 2000]
"""
import argparse
import time

import numba
import numpy as np

import revdiff
from revdiff import programs as P
from revdiff.calls import ERROR_RECORD, blas_for
from revdiff.compiler.lane_modules import LANE_MAX_ELEMENTS


def program(f, name: str, args: tuple):
    spec = f.specialize(f.argument_types(args), blas_for(args))  # the programs a call on args runs
    return spec.callable(name)


def per_call(first, second, args: tuple, extra: tuple, repeats: int) -> float:
    """Median over 5 runs of the time (microseconds) of ``first(*args)`` followed by
    ``second(*args, *extra)`` (None: nothing), which returns the state to where it started."""
    err = np.zeros(ERROR_RECORD)
    if second is None:
        @numba.njit
        def loop(args, extra, n, err):
            for _ in range(n):
                first(*args, err)
    else:
        @numba.njit
        def loop(args, extra, n, err):
            for _ in range(n):
                first(*args, err)
                second(*(args + extra), err)
    loop(args, extra, 1, err)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        loop(args, extra, repeats, err)
        times.append((time.perf_counter() - t) / repeats)
    if err[0]:
        raise RuntimeError("a runtime check failed while timing: the timing would be meaningless")
    return 1e6 * float(np.median(times))


def per_matrix_in_batch(pr, layout: str, A, y, gz, repeats: int) -> float:
    """Median time (microseconds) per matrix of ``revdiff.batched(pr).vjp`` on a batch of
    ``repeats`` copies, on one thread (set NUMBA_NUM_THREADS=1 to keep it so)."""
    B = max(repeats, 256)
    bf = revdiff.batched(pr, ("z", "R", "A", "y"), layout=layout)
    n = A.shape[1]
    args = (np.zeros((B,) + y.shape), np.zeros((B, n, n)), np.repeat(A[None], B, 0), np.repeat(y[None], B, 0))
    cts = (np.repeat(gz[None], B, 0), None, None, None)
    bf.vjp(args, cts)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        bf.vjp(args, cts)
        times.append((time.perf_counter() - t) / B)
    return 1e6 * float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="32x16")
    parser.add_argument("--repeats", type=int, default=2000)
    a = parser.parse_args()
    m, n = (int(x) for x in a.shape.split("x"))
    rng = np.random.default_rng(0)
    A = rng.standard_normal((m, n))
    y, gz = rng.standard_normal(m), rng.standard_normal(m)
    print(f"single-thread time per {m}x{n} float64 matrix (microseconds), median of 5 x {a.repeats} calls")
    print("| programs | checks on | checks off |\n|---|---|---|")
    rows: dict = {}
    for check in (True, False):
        qr = P.cgs2.with_options(check=check)
        pr = P.project_cgs2.with_options(check=check)
        qr_args = (np.zeros((m, n)), np.zeros((n, n)), A)
        qr_grads = (np.ones((m, n)), np.ones((n, n)), np.zeros((m, n)))
        pr_args = (np.zeros(m), np.zeros((n, n)), A, y)
        pr_grads = (gz, np.zeros((n, n)), np.zeros((m, n)), np.zeros(m))
        forward, project = program(qr, "forward", qr_args), program(pr, "forward", pr_args)
        cases = {
            "cgs2 forward + inverse": (forward, program(qr, "inverse", qr_args), qr_args, ()),
            "cgs2 forward + adjoint": (forward, program(qr, "adjoint", qr_args), qr_args, qr_grads),
            "projection forward + inverse": (project, program(pr, "inverse", pr_args), pr_args, ()),
            "projection forward + adjoint": (project, program(pr, "adjoint", pr_args), pr_args, pr_grads),
            "projection fused vjp": (program(pr, "vjp", pr_args), None,
                                     pr_args + pr_grads + (np.zeros(m), np.zeros((n, n))), ()),
        }
        for name, (first, second, args, extra) in cases.items():
            rows.setdefault(name, []).append(per_call(first, second, args, extra, a.repeats))
        if m * n <= LANE_MAX_ELEMENTS:  # the batched fused vjp, one element per iteration and in lanes
            for layout in ("elements", "lanes"):
                name = f"projection batch vjp, {layout}"
                rows.setdefault(name, []).append(per_matrix_in_batch(pr, layout, A, y, gz, a.repeats))
    for name, (on, off) in rows.items():
        print(f"| {name} | {on:.1f} | {off:.1f} |")
    print("check=False reaches the callees too: 'checks off' runs no runtime check at all")


if __name__ == "__main__":
    main()
