"""``revdiff compare``: gradient accuracy and speed of revdiff's reversible programs against the
closed-form adjoints frameworks use, as the condition number of A grows.

Accuracy is the relative Frobenius error of the gradient of A against a reference computed with
mpmath at 60 significant digits; time is the median of repeated runs of the whole batch.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import formulas
from . import programs as P

DEFAULT_CONDS = (1e0, 1e2, 1e4, 1e6, 1e8, 1e10, 1e12)
REVDIFF_METHODS = ("cgs2", "mgs", "cgs")


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


# ----------------------------------------------------------------------------- references (mpmath)


def reference_projection_grad(A: np.ndarray, y: np.ndarray, gz: np.ndarray, dps: int = 60) -> np.ndarray:
    """Golub-Pereyra's gradient of z = A A^+ y, in mpmath via the normal equations (exact enough:
    kappa^2 <= 1e24 is far below 10^dps)."""
    import mpmath
    with mpmath.workdps(dps):
        Am = mpmath.matrix(A.tolist())
        ym, gm = mpmath.matrix(y.tolist()), mpmath.matrix(gz.tolist())
        AH = Am.H
        G = AH * Am
        x = mpmath.lu_solve(G, AH * ym)
        w = mpmath.lu_solve(G, AH * gm)
        r = ym - Am * x
        pg = Am * w
        m, n = A.shape
        out = np.empty(A.shape, dtype=A.dtype)
        for i in range(m):
            for j in range(n):
                v = (gm[i] - pg[i]) * mpmath.conj(x[j]) + r[i] * mpmath.conj(w[j])
                out[i, j] = complex(v) if np.iscomplexobj(A) else float(v)
    return out


def reference_normalize_grad(x: np.ndarray, gy: np.ndarray, dps: int = 60) -> np.ndarray:
    import mpmath
    with mpmath.workdps(dps):
        xm = [mpmath.mpmathify(v) for v in x.tolist()]
        nrm = mpmath.sqrt(mpmath.fsum(abs(v) ** 2 for v in xm))
        ym = [v / nrm for v in xm]
        dot = mpmath.re(mpmath.fsum(mpmath.conj(a) * b for a, b in zip(ym, gy.tolist())))
        out = [(g - a * dot) / nrm for a, g in zip(ym, gy.tolist())]
        return np.array([complex(v) if np.iscomplexobj(x) else float(v) for v in out], dtype=x.dtype)


# ----------------------------------------------------------------------------- peers


def _torch_projection():
    try:
        import torch
    except ImportError:
        return None

    def grad(A, y, gz):
        At = torch.tensor(A, requires_grad=True)
        Q, _ = torch.linalg.qr(At)
        z = Q @ (Q.mH @ torch.tensor(y))
        z.backward(torch.tensor(gz))
        return At.grad.numpy()

    return grad


def _jax_projection():
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
    except ImportError:
        return None

    def loss(A, y, gz):
        Q, _ = jnp.linalg.qr(A)
        return jnp.real(jnp.vdot(gz, Q @ (Q.conj().T @ y)))

    g = jax.jit(jax.grad(loss))

    def grad(A, y, gz):
        return np.asarray(g(A, y, gz)).conj() if np.iscomplexobj(A) else np.asarray(g(A, y, gz))

    return grad


@dataclass
class Method:
    name: str
    grad: Callable  # (A, y, gz) batched -> gA


def methods_for(loss: str, names: list) -> list:
    out = []
    for name in names:
        if name in REVDIFF_METHODS:
            if loss == "projection":
                out.append(Method(f"revdiff {name}", lambda A, y, g, k=name: P.project_vjp(A, y, g, method=k)[0]))
            elif name == "cgs2":
                out.append(Method("revdiff", lambda A, y, g: P.normalize_vjp(A, g)))
        elif name == "formula":
            if loss == "projection":
                out.append(Method("formula (Golub-Pereyra)", lambda A, y, g: formulas.project_vjp(A, y, g)[0]))
            else:
                out.append(Method("formula", lambda A, y, g: formulas.normalize_vjp(A, g)))
        elif name == "pinv" and loss == "projection":
            out.append(Method("formula (pinv)", lambda A, y, g: formulas.project_vjp_pinv(A, y, g)[0]))
        elif name in ("torch", "jax") and loss == "projection":
            peer = _torch_projection() if name == "torch" else _jax_projection()
            if peer is not None:
                out.append(Method(name, lambda A, y, g, f=peer: np.stack([f(a, b, c) for a, b, c in zip(A, y, g)])))
    return out


def _progress(k: int, total: int, label: str) -> None:
    width = 30
    done = int(width * k / total)
    sys.stderr.write(f"\r{label} [{'#' * done}{'.' * (width - done)}] {k}/{total}")
    if k == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def run(shape=(32, 16), dtype="float64", loss="projection", batch=1, methods=None, conds=DEFAULT_CONDS,
        repeats=3, seed=0, plot=None, out=None) -> dict:
    """Run the comparison and print the table; returns {method: [(kappa, error, seconds), ...]}."""
    out = out or sys.stdout
    dtype = np.dtype(dtype)
    m, n = shape
    names = methods or ["cgs2", "mgs", "cgs", "formula", "pinv", "torch", "jax"]
    rng = np.random.default_rng(seed)
    chosen = methods_for(loss, names)
    cases = []
    for k, kappa in enumerate(conds):
        if loss == "projection":
            A = np.stack([matrix_with_condition(m, n, kappa, rng, dtype) for _ in range(batch)])
            y = rng.standard_normal((batch, m)).astype(dtype)
            gz = np.ones((batch, m), dtype)  # the loss of seed 000: sum(Q Q^T y)
            ref = np.stack([reference_projection_grad(A[b].astype(np.complex128 if dtype.kind == "c" else np.float64),
                                                      y[b].astype(A.dtype), gz[b]) for b in range(batch)])
        else:
            A = (rng.standard_normal((batch, m)) * np.logspace(0, -np.log10(kappa), m)).astype(dtype)
            y = None
            gz = rng.standard_normal((batch, m)).astype(dtype)
            ref = np.stack([reference_normalize_grad(A[b].astype(np.float64), gz[b].astype(np.float64))
                            for b in range(batch)])
        cases.append((kappa, A, y, gz, ref))
        _progress(k + 1, len(conds), "mpmath reference")
    results: dict = {meth.name: [] for meth in chosen}
    for meth in chosen:
        for kappa, A, y, gz, ref in cases:
            try:
                meth.grad(A, y, gz)  # compile / warm up
                times, g = [], None
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    g = meth.grad(A, y, gz)
                    times.append(time.perf_counter() - t0)
                err = float(np.linalg.norm(g - ref) / np.linalg.norm(ref)) if np.all(np.isfinite(g)) else np.inf
                results[meth.name].append((kappa, err, statistics.median(times)))
            except Exception as exc:  # a peer that throws is part of the comparison
                results[meth.name].append((kappa, f"error: {type(exc).__name__}", float("nan")))
    _print_table(results, conds, shape, dtype, loss, batch, out)
    if plot:
        _plot(results, plot, shape, loss)
    return results


def _print_table(results, conds, shape, dtype, loss, batch, out) -> None:
    print(f"\nrelative error of the gradient of A (vs mpmath, 60 digits); {loss} loss, "
          f"A {shape[0]}x{shape[1]} {dtype}, batch {batch}; time = median per batch\n", file=out)
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shape", default="32x16", help="m x n of A (default 32x16)")
    p.add_argument("--dtype", default="float64", choices=["float32", "float64", "complex64", "complex128"])
    p.add_argument("--loss", default="projection", choices=["projection", "sphere"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--methods", default=None,
                   help="comma-separated: cgs2,mgs,cgs,formula,pinv,torch,jax (default: all available)")
    p.add_argument("--conds", default=None, help="comma-separated condition numbers (default 1,1e2,...,1e12)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default=None, metavar="FILE.png", help="draw error against condition number")


def main_from_args(args: argparse.Namespace) -> None:
    m, n = (int(v) for v in args.shape.lower().split("x"))
    conds = tuple(float(c) for c in args.conds.split(",")) if args.conds else DEFAULT_CONDS
    methods = args.methods.split(",") if args.methods else None
    run((m, n), args.dtype, args.loss, args.batch, methods, conds, args.repeats, args.seed, args.plot)
