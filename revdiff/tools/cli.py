"""The ``revdiff`` command line (also ``python -m revdiff``)."""
from __future__ import annotations

import argparse

from revdiff import __version__
from revdiff.tools import bench, compare


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(prog="revdiff", description="instruction-level reversible differentiation")
    parser.add_argument("--version", action="version", version=f"revdiff {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compare", help="gradient accuracy and time: reversible programs vs closed-form adjoints")
    compare.add_arguments(p)
    b = sub.add_parser("bench", help="speed of batched gradients against PyTorch, JAX and NumPy formulas")
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
