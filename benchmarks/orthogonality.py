"""Loss of orthogonality ||I - QᴴQ||₂ and backward error ||A - QR|| / ||A|| of the QR programs
against the condition number, on matrices with a graded spectrum (A = U diag(s) Wᵀ).

    python benchmarks/orthogonality.py [--shape 300x200] [--methods cgs2,bcgs2,householder,blocked_householder]

Block CGS2 projects whole panels at once, blocked Householder reflects them at once; this is where
their orthogonality is measured against column-by-column CGS2 and Householder. Each program runs
as itself (``P.QR_METHODS[name]``), so ``householder`` is the column-by-column program here, which
the method runs only up to one panel.
"""
import argparse

import numpy as np

from revdiff import programs as P


def graded(m: int, n: int, kappa: float, rng) -> np.ndarray:
    U, _ = np.linalg.qr(rng.standard_normal((m, n)))
    W, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return (U * np.logspace(0, -np.log10(kappa), n)) @ W.T


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="300x200")
    parser.add_argument("--methods", default="cgs2,bcgs2,householder,blocked_householder")
    parser.add_argument("--conds", default="1,1e4,1e8,1e12,1e14")
    parser.add_argument("--seed", type=int, default=3)
    a = parser.parse_args()
    m, n = (int(x) for x in a.shape.split("x"))
    methods = a.methods.split(",")
    rng = np.random.default_rng(a.seed)
    print(f"A {m}x{n} float64, graded singular values; ||I - Q^T Q||_2 (backward error ||A - QR||_F / ||A||_F)")
    print("| kappa | " + " | ".join(methods) + " |\n|---" * 1 + "|---" * len(methods) + "|")
    for kappa in (float(c) for c in a.conds.split(",")):
        A = graded(m, n, kappa, rng)
        cells = []
        for method in methods:
            p = min(m, n)
            Q, R, _ = P.QR_METHODS[method](np.zeros((m, p)), np.zeros((p, n)), A)
            loss = np.linalg.norm(np.eye(Q.shape[1]) - Q.T @ Q, 2)
            cells.append(f"{loss:.1e} ({np.linalg.norm(A - Q @ R) / np.linalg.norm(A):.1e})")
        print(f"| {kappa:.0e} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
