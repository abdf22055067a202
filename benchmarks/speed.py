"""Speed benchmark: revdiff's batched reversible gradients against PyTorch, JAX and NumPy formula
adjoints, in one run. The same as `revdiff bench`; `--quick` runs the small cases only.

    python benchmarks/speed.py [--quick] [--loss projection,qr] [--repeats 5]
"""
import argparse

from revdiff.tools import bench

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    bench.add_arguments(parser)
    bench.main_from_args(parser.parse_args())
