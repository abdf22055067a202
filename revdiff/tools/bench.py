"""``revdiff bench``: speed of revdiff's batched reversible gradients against PyTorch autograd
(``torch.linalg.qr``), ``jax.jit(jax.grad(...))`` (``jnp.linalg.qr``) and the NumPy formula
adjoints, timed in one run (median of repeats), with ratios, GFLOP/s against this machine's
measured matrix-product rate in the same dtype (dgemm, sgemm), the cold compile time and the time
to a first gradient in a fresh process.
Two comparisons: all cores against all cores (every library as it runs by default, revdiff's
batches split among threads), and one core against one core (a fresh process pinned to one CPU,
every library's threads set to one), so that a ratio never hides how many cores won it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

import numpy as np

from revdiff import formulas
from revdiff import programs as P
from revdiff.programs.api import last_run
from revdiff.programs.methods import resolved
from revdiff.tools import peers

FULL_CASES = [(10000, 32, 16), (1000, 64, 32), (100, 500, 250), (1, 2000, 1000)]
QUICK_CASES = [(1000, 32, 16), (100, 64, 32)]


def median_time(fn: Callable, repeats: int) -> float:
    fn()  # warm up (compilation, caches)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def gemm_gflops(dtypes, n: int = 2000, repeats: int = 3) -> dict:
    """dtype name -> GFLOP/s of an n x n matrix product in that dtype (NumPy's BLAS: dgemm, sgemm),
    the rate each dtype's GFLOP/s are a fraction of."""
    rates = {}
    for dtype in dtypes:
        a, b = np.random.default_rng(0).standard_normal((2, n, n)).astype(dtype)
        rates[np.dtype(dtype).name] = 2 * n ** 3 / median_time(lambda: a @ b, repeats) / 1e9
    return rates


def reversible_flops(loss: str, m: int, n: int) -> float:
    """Flops of a reversible CGS2 vjp, about 24 m n^2: forward, inverse and adjoint passes of two
    classical Gram-Schmidt sweeps (4 m n^2 each), and the projection's own products."""
    return 24.0 * m * n * n + (4.0 * m * n if loss == "projection" else 0.0)


#: revdiff's methods in the tables
OUR_METHODS = ("cgs2", "bcgs2", "householder")


def methods(loss: str) -> dict:
    """name -> gradient function of batched arrays (A, *inputs) -> gA; peers only when installed."""
    out: dict = {}
    if loss == "projection":
        for method in OUR_METHODS:
            out[f"revdiff {method}"] = lambda A, y, g, method=method: P.project_vjp(A, y, g, method)[0]
        out["numpy formula"] = lambda A, y, g: formulas.project_vjp(A, y, g)[0]
        torch_grad, jax_grad = peers.torch_projection(), peers.jax_projection()
    else:
        for method in OUR_METHODS:
            out[f"revdiff {method}"] = lambda A, gQ, gR, method=method: P.qr_vjp(A, gQ, gR, method)
        out["numpy formula"] = formulas.qr_vjp
        torch_grad, jax_grad = peers.torch_qr(), peers.jax_qr()
    if torch_grad is not None:
        out["torch"] = torch_grad
    if jax_grad is not None:
        out["jax"] = jax_grad
    return out


def inputs(loss: str, B: int, m: int, n: int, dtype, rng) -> tuple:
    A = rng.standard_normal((B, m, n)).astype(dtype)
    if loss == "projection":
        return A, rng.standard_normal((B, m)).astype(dtype), np.ones((B, m), dtype)
    return A, rng.standard_normal((B, m, n)).astype(dtype), np.triu(rng.standard_normal((B, n, n))).astype(dtype)


def run_cases(cases, dtypes, losses, repeats: int, out=sys.stdout) -> list:
    rows = []
    rng = np.random.default_rng(0)
    for loss in losses:
        for dtype in dtypes:
            for B, m, n in cases:
                args = inputs(loss, B, m, n, dtype, rng)
                row = {"loss": loss, "dtype": np.dtype(dtype).name, "B": B, "m": m, "n": n, "times": {}, "ran": {}}
                reps = repeats if B * m * n * n < 5e8 else 1
                for name, grad in methods(loss).items():
                    row["times"][name] = median_time(lambda g=grad: g(*args), reps)
                    if name.startswith("revdiff"):
                        function = "project_vjp" if loss == "projection" else "qr_vjp"
                        row["ran"][name] = last_run(function, name.split()[1], (B, m, n))
                    sys.stderr.write(f"\r{loss} {row['dtype']} {B}x{m}x{n} {name:14s}")
                rows.append(row)
    sys.stderr.write("\n")
    return rows


#: what the one-core process sets before any library starts its threads
ONE_CORE_ENVIRONMENT = {"REVDIFF_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                        "MKL_NUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false "
                                                            "intra_op_parallelism_threads=1"}
_WORKER = ("import json, os, sys; a = json.loads(sys.argv[1]); "
           "a['cpu'] is None or os.sched_setaffinity(0, {a['cpu']}); "  # pinned before any library starts threads
           "import numpy as np; from revdiff.tools import bench; "
           "rows = bench.run_cases([tuple(c) for c in a['cases']], [np.dtype(d) for d in a['dtypes']], a['losses'], "
           "a['repeats']); "
           "print(json.dumps({'rows': rows, 'gemm': bench.gemm_gflops(a['dtypes'], a['gemm_n'])}))")


def one_core(cases, dtypes, losses, repeats: int, gemm_n: int) -> tuple:
    """(rows, gemm GFLOP/s by dtype) of ``run_cases`` in a fresh process pinned to one CPU, with every
    library's thread count set to one before it is imported."""
    cpu = min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    task = json.dumps({"cases": cases, "dtypes": [np.dtype(d).name for d in dtypes], "losses": losses,
                       "repeats": repeats, "gemm_n": gemm_n, "cpu": cpu})
    done = subprocess.run([sys.executable, "-c", _WORKER, task], env=dict(os.environ, **ONE_CORE_ENVIRONMENT),
                          capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"the one-core run failed:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["rows"], result["gemm"]


def first_gradient_times(timeout: float = 600) -> dict:
    """Cold compile (empty cache) and warm start (cached) of a 32x16 projection gradient, each in a
    fresh process: seconds from process start to the first gradient, and the import time alone."""
    code = ("import time; t0 = time.perf_counter(); import numpy as np; from revdiff import programs as P; "
            "t1 = time.perf_counter(); A = np.random.default_rng(0).standard_normal((32, 16)); "
            "P.project_vjp(A, A[:, 0], A[:, 1]); t2 = time.perf_counter(); print(t1 - t0, t2 - t0)")
    result = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, REVDIFF_CACHE_DIR=cache)
        for label in ("cold", "warm"):
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                 timeout=timeout, check=True).stdout.split()
            result[label] = (float(out[0]), float(out[1]))
    return result


def report(rows: list, gemm: dict, starts: dict, out=sys.stdout, cores: str = "all cores") -> None:
    print(f"\n## {cores}: machine {platform.node()}, {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}; Python {platform.python_version()}, NumPy {np.__version__}; "
          + ", ".join(f"{'d' if d == 'float64' else 's'}gemm {rate:.1f}" for d, rate in gemm.items())
          + f" GFLOP/s on {cores}", file=out)
    if not rows:
        print("\n(no cases)", file=out)
        return
    names = list(rows[0]["times"])
    ours = [k for k in names if k.startswith("revdiff")]
    print("\n| loss | dtype | B x m x n | " + " | ".join(names) + " | "
          + " | ".join(f"fastest peer / {k}" for k in ours)
          + " | fastest peer / default (auto) | revdiff cgs2 GFLOP/s (of the dtype's gemm) |", file=out)
    print("|---" * (len(names) + len(ours) + 5) + "|", file=out)
    for r in rows:
        t = r["times"]
        peers_t = [v for k, v in t.items() if not k.startswith("revdiff")]
        ratios = " | ".join(f"{min(peers_t) / t[k]:.2f}" if peers_t else "nan" for k in ours)
        chosen = resolved("auto", (r["m"], r["n"]), dtype=r["dtype"], projection=r["loss"] == "projection")
        default = (f"{min(peers_t) / t[f'revdiff {chosen}']:.2f} ({chosen})"
                   if peers_t and f"revdiff {chosen}" in t else f"- ({chosen} not timed)")
        rate = r["B"] * reversible_flops(r["loss"], r["m"], r["n"]) / t["revdiff cgs2"] / 1e9
        cells = " | ".join(f"{t[k] * 1e3:.1f} ms" for k in names)
        print(f"| {r['loss']} | {r['dtype']} | {r['B']}x{r['m']}x{r['n']} | {cells} | {ratios} | {default} | "
              f"{rate:.2f} ({100 * rate / gemm[r['dtype']]:.0f}%) |", file=out)
    ran = [f"{r['loss']} {r['dtype']} {r['B']}x{r['m']}x{r['n']}: "
           + "; ".join(f"{k.split()[1]} ran {v}" for k, v in r["ran"].items()) for r in rows if r.get("ran")]
    if ran:
        print("\nwhat ran (program, path):\n" + "\n".join(f"- {line}" for line in ran), file=out)
    if starts:
        cold, warm = starts["cold"], starts["warm"]
        print(f"\nfirst 32x16 projection gradient in a fresh process: cold cache {cold[1]:.1f} s "
              f"(import {cold[0]:.1f} s), warm cache {warm[1]:.2f} s (import {warm[0]:.2f} s)", file=out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="small cases only (B=1000x32x16, 100x64x32), float64")
    p.add_argument("--loss", default="projection,qr", help="comma-separated: projection,qr (default both)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per case and method; tables show medians "
                                                          "(default 5)")
    p.add_argument("--no-startup", action="store_true",
                   help="skip the time to the first gradient in fresh processes (one on an empty cache, which "
                        "compiles, one on a warm cache)")
    p.add_argument("--cores", choices=("both", "all", "one"), default="both",
                   help="all cores against all cores, one core against one core (a fresh process pinned to one "
                        "CPU, every library on one thread), or both in one run (default)")
    p.add_argument("--cases", help="comma-separated BxMxN cases instead of the built-in ones (10000x32x16, "
                                   "1000x64x32, 100x500x250, 1x2000x1000), e.g. 10000x32x16")


def parse_cases(text: str) -> list:
    try:
        cases = [tuple(int(x) for x in case.split("x")) for case in text.split(",")]
    except ValueError:
        cases = []
    if not cases or any(len(c) != 3 or min(c) < 1 for c in cases):
        raise SystemExit(f"--cases takes BxMxN triples of positive integers separated by commas, got {text!r}")
    return cases


def main_from_args(args: argparse.Namespace) -> None:
    cases = parse_cases(args.cases) if args.cases else QUICK_CASES if args.quick else FULL_CASES
    dtypes = [np.float64] if args.quick else [np.float64, np.float32]
    losses = args.loss.split(",")
    print(f"# revdiff bench{' --quick' if args.quick else ''} ({time.strftime('%Y-%m-%d')})")
    starts = {} if args.no_startup else first_gradient_times()
    gemm_n = 1000 if args.quick else 2000
    if args.cores in ("both", "all"):
        report(run_cases(cases, dtypes, losses, args.repeats), gemm_gflops(dtypes, gemm_n), starts)
        starts = {}
    if args.cores in ("both", "one"):
        rows, gemm = one_core(cases, dtypes, losses, args.repeats, gemm_n)
        report(rows, gemm, starts, cores="one core")
