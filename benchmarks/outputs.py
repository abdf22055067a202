"""Outputs of the high-level programs on the benchmark shapes, saved or compared bit for bit: a
change to the compiler that should not change the generated arithmetic (a refactoring, a new pass
that only moves code) must reproduce the previous commit's numbers exactly.

    PYTHONPATH=<old checkout> python benchmarks/outputs.py --save /tmp/before.npz
    python benchmarks/outputs.py --compare /tmp/before.npz

Cases: QR, projection and least-squares values and gradients by cgs2, bcgs2 and Householder, on
10000 x 32x16 (SIMD lanes) in float64 and float32 and on 4 x 500x250 (BLAS) in float64;
``--methods`` and ``--shapes`` (``BxMxN:dtype``) keep some of them, for a commit that cannot run
the others.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from revdiff import programs as P

SHAPES = [((10000, 32, 16), np.float64), ((10000, 32, 16), np.float32), ((4, 500, 250), np.float64)]
METHODS = ("cgs2", "bcgs2", "householder")


def outputs(methods=METHODS, shapes=SHAPES) -> dict:
    results = {}
    for (batch, m, n), dtype in shapes:
        rng = np.random.default_rng(m * n)
        A = rng.standard_normal((batch, m, n)).astype(dtype)
        y = rng.standard_normal((batch, m)).astype(dtype)
        gQ = rng.standard_normal((batch, m, n)).astype(dtype)
        gR = rng.standard_normal((batch, n, n)).astype(dtype)
        g = rng.standard_normal((batch, m)).astype(dtype)
        gx = rng.standard_normal((batch, n)).astype(dtype)
        for method in methods:
            tag = f"{method}_{batch}x{m}x{n}_{np.dtype(dtype).name}"
            Q, R = P.qr(A, method=method)
            results[f"qr_Q_{tag}"], results[f"qr_R_{tag}"] = Q, R
            results[f"qr_vjp_{tag}"] = P.qr_vjp(A, gQ, gR, method=method)
            results[f"project_{tag}"] = P.project(A, y, method=method)
            for k, grad in enumerate(P.project_vjp(A, y, g, method=method)):
                results[f"project_vjp{k}_{tag}"] = grad
            results[f"lstsq_{tag}"] = P.lstsq(A, y, method=method)
            for k, grad in enumerate(P.lstsq_vjp(A, y, gx, method=method)):
                results[f"lstsq_vjp{k}_{tag}"] = grad
    return results


def _shape_name(shape) -> str:
    (batch, m, n), dtype = shape
    return f"{batch}x{m}x{n}:{np.dtype(dtype).name}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", metavar="FILE", help="write the outputs to FILE (.npz)")
    group.add_argument("--compare", metavar="FILE", help="compare the outputs with FILE, bit for bit")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated QR methods")
    parser.add_argument("--shapes", default=",".join(_shape_name(s) for s in SHAPES),
                        help="comma-separated BxMxN:dtype cases")
    args = parser.parse_args(argv)
    shapes = [s for s in SHAPES if _shape_name(s) in args.shapes.split(",")]
    results = outputs(tuple(args.methods.split(",")), shapes)
    if args.save:
        np.savez(args.save, **results)
        print(f"{len(results)} arrays written to {args.save}")
        return 0
    before = np.load(args.compare)
    differ = []
    for name, now in results.items():
        old = before[name] if name in before.files else None
        if old is None or old.shape != now.shape or old.dtype != now.dtype or \
                not np.array_equal(old.view(np.uint8), now.view(np.uint8)):
            worst = float(np.max(np.abs(old - now))) if old is not None and old.shape == now.shape else float("nan")
            differ.append(f"{name}: largest difference {worst:.3g}")
    missing = sorted(name for name in set(before.files) - set(results)
                     if any(f"_{method}_" in name for method in args.methods.split(","))
                     and any(name.endswith("_" + _shape_name(s).replace(":", "_")) for s in shapes))
    print(f"{len(results) - len(differ)} of {len(results)} arrays equal bit for bit")
    for line in differ + [f"{name}: missing" for name in missing]:
        print("  " + line)
    return 1 if differ or missing else 0


if __name__ == "__main__":
    sys.exit(main())
