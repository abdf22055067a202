"""Compile time against program size: the first call and the first gradient (``revdiff.grad``) of
reversible functions of growing size, each new (an empty cache directory), in one process:

- one statement ``s += x[0] * 1.0 + x[1] * 2.0 + ...`` of N terms (an expression N levels deep);
- N statements ``s += c * x[i] * x[j]``, one after another.

    python benchmarks/compile_growth.py [--terms 10,100,200,500,1000] [--statements 100,300,600,1200]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time


def _module(source: str, directory: str, name: str):
    path = os.path.join(directory, f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def sum_source(terms: int) -> str:
    expr = " + ".join(f"x[{k % 8}] * {k + 1}.0" for k in range(terms))
    return f"import revdiff\n\n@revdiff.reversible\ndef f(s, x):\n    s += {expr}\n"


def statements_source(count: int) -> str:
    body = "\n".join(f"    s += {1 + k % 5}.0 * x[{k % 8}] * x[{(7 * k + 3) % 8}]" for k in range(count))
    return f"import revdiff\n\n@revdiff.reversible\ndef f(s, x):\n{body}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--terms", default="10,100,200,500,1000")
    parser.add_argument("--statements", default="100,300,600,1200")
    a = parser.parse_args()
    os.environ["REVDIFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="revdiff-growth-")
    directory = tempfile.mkdtemp(prefix="revdiff-growth-src-")
    import numpy as np

    import revdiff

    x = np.arange(1.0, 9.0)
    print("| program | size | decoration s | first call s | first gradient s |")
    print("|---|---|---|---|---|")
    cases = [("sum of terms", int(t), sum_source) for t in a.terms.split(",")] + \
        [("statements", int(n), statements_source) for n in a.statements.split(",")]
    for k, (what, size, make) in enumerate(cases):
        t0 = time.perf_counter()
        f = _module(make(size), directory, f"growth_{k}").f
        t1 = time.perf_counter()
        args = (0.0, x)
        f(*args)
        t2 = time.perf_counter()
        revdiff.grad(f, 0)(*args)
        t3 = time.perf_counter()
        print(f"| {what} | {size} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} |", flush=True)


if __name__ == "__main__":
    main()
