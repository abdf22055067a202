"""The ``revdiff`` command line (also ``python -m revdiff``)."""
from __future__ import annotations

import argparse

from revdiff import __version__
from revdiff.tools import bench, compare


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(prog="revdiff", description="instruction-level reversible differentiation")
    parser.add_argument("--version", action="version", version=f"revdiff {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compare", help="gradient accuracy and time: reversible programs vs closed-form adjoints",
                       description="For matrices of growing condition number, the relative error of each "
                                   "method's gradient of A against a 60-digit mpmath reference, and its median "
                                   "time, as a table (the first run compiles for a few seconds, cached afterwards).")
    compare.add_arguments(p)
    b = sub.add_parser("bench", help="speed of batched gradients against PyTorch, JAX and NumPy formulas",
                       description="Times batched projection and QR gradients of revdiff (cgs2, bcgs2, householder) against "
                                   "PyTorch autograd, jax.jit(jax.grad) and the NumPy formula adjoints in one run, "
                                   "in float64 and float32, every method with all threads; prints ratios and "
                                   "GFLOP/s. The full run takes about 15 minutes on 2 cores.")
    bench.add_arguments(b)
    args = parser.parse_args(argv)
    try:
        if args.command == "compare":
            compare.main_from_args(args)
        elif args.command == "bench":
            bench.main_from_args(args)
    except compare.UsageError as exc:
        (p if args.command == "compare" else b).error(str(exc))


if __name__ == "__main__":
    main()
