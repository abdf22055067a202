"""``revdiff compare --rank-deficient``: the projection gradient of rank-deficient and nearly
deficient matrices, measured along directions that keep the rank.

A matrix of rank r < n has a projection onto its column space whose derivative exists only along
directions that keep the rank (dA = A X + Y A), where Golub and Pereyra's formula, with the
pseudoinverse, gives it. Each row draws such a matrix, a loss Re<gz, z>, and K such directions,
and reports, per method, the relative error of the K directional derivatives <gA, dA_k> against a
60-digit reference; a method that raises shows its exception, one that returns NaN or Inf shows
that. The reference is the projection onto the numerical column space: rank r for the deficient
rows, all n columns for the nearly deficient ones whose smallest singular value lies above
``rank_tol`` (100 eps), n - 1 columns for those below it (there the truncation is the answer).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

from revdiff import formulas
from revdiff import programs as P
from revdiff.tools import peers, reference

#: directions per row
DIRECTIONS = 4
NEARLY = (1e-6, 1e-10, 1e-13, 1e-15)  # the last below rank_tol (100 eps), the others above it


@dataclass
class Row:
    label: str
    B: np.ndarray  # A = B C
    C: np.ndarray
    reference_rank: int


def _orthonormal(rng, rows, cols, cplx):
    X = rng.standard_normal((rows, cols)) + (1j * rng.standard_normal((rows, cols)) if cplx else 0)
    return np.linalg.qr(X)[0]


def rows(m: int, n: int, dtype, rng) -> list:
    """Exactly deficient (ranks n - 1, n / 2, 1) and nearly deficient (smallest singular value
    ``NEARLY``; the others from 1 to 1e-2), each as factors B (m x k) C (k x n)."""
    cplx = np.issubdtype(dtype, np.complexfloating)
    tol = 100 * np.finfo(dtype).eps
    out = []
    for r in sorted({n - 1, max(n // 2, 1), 1}, reverse=True):
        U, V = _orthonormal(rng, m, r, cplx), _orthonormal(rng, n, r, cplx)
        out.append(Row(f"rank {r}", (U * np.logspace(0, -2, r)).astype(dtype), V.conj().T.astype(dtype), r))
    for smallest in NEARLY:
        U, V = _orthonormal(rng, m, n, cplx), _orthonormal(rng, n, n, cplx)
        sigma = np.append(np.logspace(0, -2, n - 1), smallest)
        out.append(Row(f"sigma_min {smallest:.0e}", (U * sigma).astype(dtype), V.conj().T.astype(dtype),
                       n if smallest > tol else n - 1))
    return out


def _reference(row: Row, y, gz) -> np.ndarray:
    """The 60-digit gradient of the projection onto the reference rank's column space."""
    if row.reference_rank == row.C.shape[0]:
        return reference.projection_grad_factored(row.B, row.C, y, gz)
    k = row.reference_rank  # the nearly deficient row below the tolerance: its leading singular triplets
    return reference.projection_grad_factored(row.B[:, :k], row.C[:k], y, gz)


def methods(names) -> list:
    """(label, gradient of A) for the names that apply: revdiff's programs with truncation, the
    formulas, and the frameworks' QR (where installed)."""
    out = []
    for name in names:
        if name in P.PROJECT_METHODS:
            out.append((f"revdiff {name} (truncate)",
                        lambda A, y, g, m=name: P.project_vjp(A, y, g, m, rank_deficient="truncate")[0]))
        elif name == "formula":
            out.append(("Golub-Pereyra (QR)", lambda A, y, g: formulas.project_vjp(A, y, g)[0]))
            out.append(("Golub-Pereyra (SVD, numerical rank)", lambda A, y, g: formulas.project_vjp_rank(
                A, y, g, int(np.linalg.matrix_rank(A[0])))[0]))
        elif name == "pinv":
            out.append(("pinv formula", lambda A, y, g: formulas.project_vjp_pinv(A, y, g)[0]))
        elif name in ("torch", "jax"):
            grad = (peers.torch_projection if name == "torch" else peers.jax_projection)()
            if grad is not None:
                out.append((name, grad))
    return out


def _error(grad: Callable, A, y, gz, ref, directions) -> str:
    try:
        with np.errstate(all="ignore"):
            g = np.asarray(grad(A[None], y[None], gz[None]))[0]
    except Exception as exc:  # a method that raises is part of the comparison
        return f"error: {type(exc).__name__}"
    if not np.all(np.isfinite(g)):
        return "NaN" if np.any(np.isnan(g)) else "Inf"
    mine = np.array([np.sum(np.real(np.conj(g) * d)) for d in directions])
    want = np.array([np.sum(np.real(np.conj(ref) * d)) for d in directions])
    return f"{np.linalg.norm(mine - want) / np.linalg.norm(want):.1e}"


def run(shape=(32, 16), dtype="float64", names=None, seed: int = 0, out=None) -> dict:
    """Print the table; returns {method: [cell per row]}."""
    out = out or sys.stdout
    dtype = np.dtype(dtype)
    m, n = shape
    rng = np.random.default_rng(seed)
    chosen = methods(names or ["cgs2", "formula", "pinv", "torch", "jax"])
    table = {label: [] for label, _ in chosen}
    labels = []
    for row in rows(m, n, dtype, rng):
        A = row.B @ row.C
        y, gz = (rng.standard_normal(m) + (1j * rng.standard_normal(m) if dtype.kind == "c" else 0)
                 for _ in range(2))
        y, gz = y.astype(dtype), gz.astype(dtype)
        X = rng.standard_normal((DIRECTIONS, n, n))
        Y = rng.standard_normal((DIRECTIONS, m, m))
        directions = [A @ X[k] + Y[k] @ A for k in range(DIRECTIONS)]
        ref = _reference(row, y, gz)
        labels.append(row.label)
        for label, grad in chosen:
            table[label].append(_error(grad, A, y, gz, ref, directions))
    print(f"\nrelative error of the projection gradient along {DIRECTIONS} directions that keep the rank "
          f"(vs mpmath, 60 digits); A {m}x{n} {dtype}\n", file=out)
    print("| A | " + " | ".join(table) + " |", file=out)
    print("|---" * (len(table) + 1) + "|", file=out)
    for i, label in enumerate(labels):
        print(f"| {label} | " + " | ".join(cells[i] for cells in table.values()) + " |", file=out)
    return table
