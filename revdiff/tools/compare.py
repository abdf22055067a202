"""``revdiff compare``: gradient accuracy and speed of revdiff's reversible programs against the
closed-form adjoints frameworks use, as the condition number of A grows.

Accuracy is the relative Frobenius error of the gradient of A against a reference computed with
mpmath at 60 significant digits; time is the median of repeated runs of the whole batch.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from revdiff import formulas
from revdiff import programs as P
from revdiff.runtime.threads import set_num_threads
from revdiff.tools import compare_rank, peers, reference

DEFAULT_CONDS = (1e0, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12)


def matrix_with_condition(m: int, n: int, kappa: float, rng: np.random.Generator, dtype) -> np.ndarray:
    """U diag(sigma) V^H with singular values log-spaced from 1 to 1/kappa."""
    cplx = np.issubdtype(dtype, np.complexfloating)

    def orthonormal(rows, cols):
        X = rng.standard_normal((rows, cols)) + (1j * rng.standard_normal((rows, cols)) if cplx else 0)
        return np.linalg.qr(X)[0]

    p = min(m, n)
    U, V = orthonormal(m, p), orthonormal(n, p)
    sigma = np.logspace(0, -np.log10(kappa), p)
    return ((U * sigma) @ V.conj().T).astype(dtype)


# ----------------------------------------------------------------------------- losses


@dataclass
class Method:
    name: str
    grad: Callable  # (A, *inputs) batched -> gA


@dataclass
class Loss:
    """A loss of A: how to draw its other inputs, its mpmath reference, and who can differentiate it."""
    name: str
    inputs: Callable  # (A, rng) -> tuple of the loss's other batched inputs (cotangents included)
    reference: Callable  # (A, *inputs) for one matrix -> gA
    methods: Callable  # (names) -> [Method]


def _revdiff_and_formulas(names, revdiff_grad, formula_methods, peers) -> list:
    out = []
    for name in names:
        if name in P.QR_METHODS and revdiff_grad(name) is not None:
            out.append(Method(f"revdiff {name}", revdiff_grad(name)))
        elif name in formula_methods:
            out.append(formula_methods[name])
        elif name in peers:
            grad = peers[name]()
            if grad is not None:
                out.append(Method(name, grad))
    return out


def _projection_methods(names) -> list:
    def revdiff_grad(method):
        if method not in P.PROJECT_METHODS:
            return None
        return lambda A, y, g: P.project_vjp(A, y, g, method=method)[0]
    formula_methods = {
        "formula": Method("formula (Golub-Pereyra)", lambda A, y, g: formulas.project_vjp(A, y, g)[0]),
        "pinv": Method("formula (pinv)", lambda A, y, g: formulas.project_vjp_pinv(A, y, g)[0])}
    return _revdiff_and_formulas(names, revdiff_grad, formula_methods,
                                 {"torch": peers.torch_projection, "jax": peers.jax_projection})


def _qr_methods(names) -> list:
    def revdiff_grad(method):
        return lambda A, gQ, gR: P.qr_vjp(A, gQ, gR, method=method)
    formula_methods = {"formula": Method("formula", formulas.qr_vjp)}
    return _revdiff_and_formulas(names, revdiff_grad, formula_methods, {"torch": peers.torch_qr, "jax": peers.jax_qr})


def _sphere_methods(names) -> list:
    out = [Method("revdiff", lambda x, g: P.normalize_vjp(x, g))] if any(n in P.QR_METHODS for n in names) else []
    return out + ([Method("formula", formulas.normalize_vjp)] if "formula" in names else [])


def _projection_inputs(A, rng):
    b, m = A.shape[0], A.shape[1]
    y = rng.standard_normal((b, m)).astype(A.dtype)
    return y, np.ones((b, m), A.dtype)  # the projection loss: sum(Q Q^T y)


def _qr_inputs(A, rng):
    b, m, n = A.shape
    p = min(m, n)
    cplx = np.iscomplexobj(A)

    def draw(shape):
        return rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if cplx else 0)
    return draw((b, m, p)).astype(A.dtype), np.triu(draw((b, p, n))).astype(A.dtype)


LOSSES = {
    "projection": Loss("projection", _projection_inputs, reference.projection_grad, _projection_methods),
    "qr": Loss("qr", _qr_inputs, reference.qr_grad, _qr_methods),
    "sphere": Loss("sphere", lambda x, rng: (rng.standard_normal(x.shape).astype(x.dtype),),
                   reference.normalize_grad, _sphere_methods),
}


def _progress(k: int, total: int, label: str) -> None:
    width = 30
    done = int(width * k / total)
    sys.stderr.write(f"\r{label} [{'#' * done}{'.' * (width - done)}] {k}/{total}")
    if k == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _case(loss: Loss, shape, dtype, batch: int, kappa: float, rng) -> tuple:
    """Batched inputs at condition number kappa (a vector with scales 1 ... 1/kappa for the sphere)."""
    m, n = shape
    if loss.name == "sphere":
        A = (rng.standard_normal((batch, m)) * np.logspace(0, -np.log10(kappa), m)).astype(dtype)
    else:
        A = np.stack([matrix_with_condition(m, n, kappa, rng, dtype) for _ in range(batch)])
    inputs = loss.inputs(A, rng)
    ref = np.stack([loss.reference(A[b], *(x[b] for x in inputs)) for b in range(batch)])
    return kappa, A, inputs, ref


def _measure(method: Method, A, inputs, ref, repeats: int) -> tuple:
    try:
        method.grad(A, *inputs)  # compile / warm up
        times, g = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            g = method.grad(A, *inputs)
            times.append(time.perf_counter() - t0)
    except Exception as exc:  # a method that throws is part of the comparison
        return f"error: {type(exc).__name__}", float("nan")
    err = float(np.linalg.norm(g - ref) / np.linalg.norm(ref)) if np.all(np.isfinite(g)) else np.inf
    return err, statistics.median(times)


@contextmanager
def thread_limit(threads: int):
    """Every method on at most ``threads`` threads: revdiff's batches, BLAS (NumPy's, SciPy's
    and so the formulas'), PyTorch's intra-op pool, and JAX's CPU backend when it starts here (XLA
    reads its thread flags once, at start). Unlimited pools fight each other and other work on a
    small machine, and a peer then looks many times slower than it is."""
    from threadpoolctl import threadpool_limits
    if threads == 1 and "jax" not in sys.modules:
        os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), "--xla_cpu_multi_thread_eigen=false",
                                            "intra_op_parallelism_threads=1"]).strip()
    torch_threads = []

    def limit_torch() -> None:
        """Limit torch's pool, once it is imported (the methods import it), remembering its size."""
        torch = sys.modules.get("torch")
        if torch is not None:
            if not torch_threads:
                torch_threads.append(torch.get_num_threads())
            torch.set_num_threads(threads)

    limit_torch()
    previous = set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield limit_torch
    finally:
        set_num_threads(previous)
        if torch_threads:  # also when the run imported torch: the caller's process gets its pool back
            sys.modules["torch"].set_num_threads(torch_threads[0])


def run(shape=(32, 16), dtype="float64", loss="projection", batch=1, methods=None, conds=DEFAULT_CONDS,
        repeats=3, seed=0, plot=None, out=None, threads: int = 1) -> dict:
    """Run the comparison and print the table; returns {method: [(kappa, error, seconds), ...]}.
    Every method is timed on ``threads`` threads (``thread_limit``)."""
    with thread_limit(threads) as limit_torch:
        return _run(shape, dtype, loss, batch, methods, conds, repeats, seed, plot, out or sys.stdout, threads,
                    limit_torch)


def _run(shape, dtype, loss, batch, methods, conds, repeats, seed, plot, out, threads, limit_torch) -> dict:
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; choose one of {', '.join(LOSSES)}")
    the_loss = LOSSES[loss]
    dtype = np.dtype(dtype)
    # bcgs2 and blocked_householder (at the default 32 x 16 each one panel, which cgs2 and householder
    # factor as well) and givens (which compiles for long) only on request: the default run must be quick
    names = list(methods or ["cgs2", "mgs", "cgs", "householder", "formula", "pinv", "torch", "jax"])
    rng = np.random.default_rng(seed)
    chosen = the_loss.methods(names)
    limit_torch()  # the methods import torch: limit its pool now
    cases = []
    for k, kappa in enumerate(conds):
        cases.append(_case(the_loss, shape, dtype, batch, kappa, rng))
        _progress(k + 1, len(conds), "mpmath reference")
    results = {meth.name: [(kappa,) + _measure(meth, A, inputs, ref, repeats) for kappa, A, inputs, ref in cases]
               for meth in chosen}
    _print_table(results, conds, shape, dtype, loss, batch, out, threads)
    if plot:
        _plot(results, plot, shape, loss)
    return results


def _print_table(results, conds, shape, dtype, loss, batch, out, threads) -> None:
    print(f"\nrelative error of the gradient of A (vs mpmath, 60 digits); {loss} loss, "
          f"A {shape[0]}x{shape[1]} {dtype}, batch {batch}; time = median per batch, every method on "
          f"{threads} thread{'s' if threads > 1 else ''}\n", file=out)
    names = list(results)
    header = "| kappa | " + " | ".join(names) + " |"
    print(header, file=out)
    print("|---" * (len(names) + 1) + "|", file=out)
    for i, kappa in enumerate(conds):
        cells = []
        for name in names:
            _, err, _ = results[name][i]
            cells.append(f"{err:.1e}" if isinstance(err, float) else err)
        print(f"| {kappa:.0e} | " + " | ".join(cells) + " |", file=out)
    times = [f"{statistics.median(t for _, _, t in results[n] if t == t) * 1e3:.2f} ms"
             if any(t == t for _, _, t in results[n]) else "-" for n in names]
    print("| time | " + " | ".join(times) + " |", file=out)


def _plot(results, path, shape, loss) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install 'revdiff[plot]'") from None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, rows in results.items():
        pts = [(k, e) for k, e, _ in rows if isinstance(e, float)]
        if pts:
            ax.loglog(*zip(*pts), marker="o", label=name)
    ax.set_xlabel("condition number of A")
    ax.set_ylabel("relative error of the gradient")
    ax.set_title(f"{loss} loss, A {shape[0]}x{shape[1]}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


class UsageError(ValueError):
    """A command-line value ``revdiff compare`` cannot run on (the message says which and why)."""


MAX_ENTRIES = 250_000  # of one matrix; the batch may hold 16 times as many in all
METHOD_NAMES = ("cgs2", "bcgs2", "mgs", "cgs", "householder", "blocked_householder", "givens", "formula", "pinv",
                "torch", "jax")


def parse_shape(text: str, loss: str) -> tuple:
    """(m, n) from "MxN"; the sphere loss also takes a vector length "N" (its n is unused)."""
    parts = text.lower().split("x")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if len(dims) == 1 and loss == "sphere":
        dims = (dims[0], 1)
    if len(dims) != 2 or min(dims) < 1:
        raise UsageError(f"--shape takes MxN with positive integers (e.g. 32x16){' or N for the sphere' if loss == 'sphere' else ''}, "
                         f"got {text!r}")
    if loss == "projection" and dims[0] <= dims[1]:
        raise UsageError(f"--shape {text}: the projection loss needs a tall A (m > n); onto the column space of "
                         "a square or wide A of full rank the projection is the identity, whose gradient is zero")
    if loss == "sphere" and dims[0] < 2:
        raise UsageError(f"--shape {text}: the sphere loss needs vectors of at least 2 entries; x / |x| of a single "
                         "entry is its sign, whose gradient is zero")
    if dims[0] * dims[1] > MAX_ENTRIES:
        raise UsageError(f"--shape {text}: at most {MAX_ENTRIES:,} entries (the 60-digit reference takes hours "
                         "beyond a few thousand)")
    return dims


def parse_methods(text: str | None) -> list | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in METHOD_NAMES]
    if unknown or not names:
        raise UsageError(f"--methods: unknown {', '.join(map(repr, unknown)) or 'empty list'}; choose from "
                         f"{','.join(METHOD_NAMES)}")
    return names


def parse_conds(text: str | None) -> tuple:
    if text is None:
        return DEFAULT_CONDS
    try:
        conds = tuple(float(c) for c in text.split(","))
    except ValueError:
        conds = ()
    if not conds or not all(1 <= c < float("inf") for c in conds):
        raise UsageError(f"--conds takes condition numbers >= 1 separated by commas (e.g. 1,1e6,1e12), got {text!r}")
    return conds


def check_plot_target(plot: str | None) -> None:
    """Before the run: --plot needs matplotlib (the install hint names the right extra), a file
    name whose extension matplotlib writes, and a directory to write it in."""
    if plot is None:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install matplotlib (or, from a checkout, "
                         "pip install \".[plot]\")") from None
    path = Path(plot)
    formats = plt.figure().canvas.get_supported_filetypes()
    plt.close("all")
    if path.suffix.lstrip(".").lower() not in formats:
        raise UsageError(f"--plot {plot}: name a file ending in one of {', '.join('.' + f for f in sorted(formats))}")
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK) or path.is_dir():
        raise UsageError(f"--plot {plot}: cannot write a file there")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", default="32x16", help="m x n of A (default 32x16; tall for the projection loss; "
                                                    "the vector length N for the sphere)")
    p.add_argument("--dtype", default="float64", choices=["float32", "float64", "complex64", "complex128"],
                   help="dtype of A and of every computation (default float64)")
    p.add_argument("--loss", default="projection", choices=list(LOSSES),
                   help="projection (default): Re<1, Q Q^H y>; qr: Re<gQ, Q> + Re<gR, R>; sphere: x / |x|")
    p.add_argument("--batch", type=int, default=1, help="matrices per condition number, timed as one batch "
                                                        "(default 1)")
    p.add_argument("--methods", default=None,
                   help="comma-separated: cgs2,bcgs2,mgs,cgs,householder,blocked_householder,givens (revdiff's "
                        "programs; householder runs blocked_householder on the CPU beyond 32 columns and 2048 entries), "
                        "formula "
                        "(Golub-Pereyra), pinv, torch, jax "
                        "(default: all but bcgs2, blocked_householder and givens, those that apply and are "
                        "installed)")
    p.add_argument("--conds", default=None, help="comma-separated condition numbers (default 1,1e2,...,1e12)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per method; the table shows the median "
                                                          "(default 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random matrices, drawn in turn for each condition number (default 0)")
    p.add_argument("--plot", default=None, metavar="FILE.png", help="draw error against condition number")
    p.add_argument("--rank-deficient", action="store_true",
                   help="instead: the projection gradient of rank-deficient and nearly deficient A along directions "
                        "that keep the rank, for revdiff with rank_deficient='truncate', the formulas, torch and jax "
                        "(takes --shape, --dtype, --methods, --seed)")
    p.add_argument("--threads", type=int, default=1,
                   help="threads for every method: revdiff's batch, BLAS, PyTorch, JAX (default 1, so that "
                        "times compare like with like)")


def main_from_args(args: argparse.Namespace) -> None:
    """Check every option (UsageError, before any work), then run."""
    shape = parse_shape(args.shape, args.loss)
    conds = parse_conds(args.conds)
    methods = parse_methods(args.methods)
    for name in ("batch", "repeats", "threads"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    if shape[0] * shape[1] * args.batch > MAX_ENTRIES * 16:
        raise UsageError(f"--batch {args.batch} with --shape {args.shape}: at most {MAX_ENTRIES * 16:,} entries in all")
    check_plot_target(args.plot)
    if args.rank_deficient:
        if args.loss != "projection" or args.plot or args.conds or args.batch != 1:
            raise UsageError("--rank-deficient measures the projection loss on its own matrices: it takes --shape, "
                             "--dtype, --methods and --seed (not --loss, --conds, --batch or --plot)")
        if shape[1] < 2:
            raise UsageError(f"--rank-deficient --shape {args.shape}: needs n >= 2 columns (a rank below n)")
        if methods is not None and not compare_rank.methods(methods):
            raise UsageError(f"--methods {args.methods}: none of them applies to --rank-deficient")
        compare_rank.run(shape, args.dtype, methods, args.seed)
        return
    if methods is not None and not LOSSES[args.loss].methods(methods):
        raise UsageError(f"--methods {args.methods}: none of them applies to the {args.loss} loss here (or their "
                         "frameworks are not installed)")
    run(shape, args.dtype, args.loss, args.batch, methods, conds, args.repeats, args.seed, args.plot,
        threads=args.threads)
