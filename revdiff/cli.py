"""The ``revdiff`` command line (also ``python -m revdiff``)."""
from __future__ import annotations

import argparse

from . import compare


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(prog="revdiff", description="instruction-level reversible differentiation")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compare", help="gradient accuracy and time: reversible programs vs closed-form adjoints")
    compare.add_arguments(p)
    args = parser.parse_args(argv)
    if args.command == "compare":
        compare.main_from_args(args)


if __name__ == "__main__":
    main()
