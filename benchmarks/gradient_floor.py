"""The BLAS floor of a reversible projection gradient, float64 on one core: the products of the
trailing matrix that running a blocked Householder QR forward and then backward cannot leave out,
timed alone on arrays of their shapes, beside the closed-form peer (Golub-Pereyra,
``revdiff.formulas.project_vjp``, the peer of ``revdiff bench``: one QR, two n x n solves and
matrix-vector products) and revdiff's own gradient (``method="householder"``).

Per panel of b = ``householder.PANEL`` columns, with Y (m' x b) its reflectors and C (m' x n') the
columns after it: forward S = Yᵀ C and C -= Y K (K = Tᵀ S kept); backward the undo C += Y K and the
gradients gY -= gC Kᵀ, gK = -Yᵀ gC, gY += C gSᵀ, gC += Y gS: seven products. LAPACK's QR with Q
formed (geqrf, orgqr) makes four of the same sizes. Each product here runs as one in-place BLAS
call on Fortran-ordered arrays (beta = 1: no scratch copy, faster than revdiff's reversible
subtraction of a product), and the b x b products (T, its inverse, S from K, gS from gK) and the
panels' own reductions are left out, so the floor bounds from below any gradient of this form on a
machine where dgemm sets the pace. Tall matrices (m >= n) only; those of one panel or fewer have
no trailing products (no floor).

    python benchmarks/gradient_floor.py [--cases 100x500x250,1x2000x1000] [--rounds 5]
"""
from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # before NumPy loads its BLAS
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import argparse  # noqa: E402

import numpy as np  # noqa: E402
from scipy.linalg import blas  # noqa: E402

import revdiff  # noqa: E402
from revdiff import formulas  # noqa: E402
from revdiff import programs as P  # noqa: E402
from revdiff.programs.householder import PANEL  # noqa: E402
from revdiff.tools.bench import median_time  # noqa: E402

CASES = "100x500x250,2x1000x500,1x2000x1000"


def panel_operands(m: int, n: int, rng) -> list:
    """Fortran-ordered Y, K, S, C, gC, gY, gK, gS of every panel of a tall m x n matrix that has
    columns after it (every panel but the last)."""
    def f(rows: int, cols: int) -> np.ndarray:
        return np.asfortranarray(rng.standard_normal((rows, cols)))

    return [(f(m - k, PANEL), f(PANEL, n - k - PANEL), f(PANEL, n - k - PANEL), f(m - k, n - k - PANEL),
             f(m - k, n - k - PANEL), f(m - k, PANEL), f(PANEL, n - k - PANEL), f(PANEL, n - k - PANEL))
            for k in range(0, n - PANEL, PANEL)]


def floor_products(operands: list) -> None:
    """The seven trailing-matrix products of every panel (in place where the gradient accumulates)."""
    for Y, K, S, C, gC, gY, gK, gS in operands:
        blas.dgemm(1.0, Y, C, trans_a=True, beta=0.0, c=S, overwrite_c=True)  # S = Y^T C
        blas.dgemm(-1.0, Y, K, beta=1.0, c=C, overwrite_c=True)  # C -= Y K
        blas.dgemm(1.0, Y, K, beta=1.0, c=C, overwrite_c=True)  # undo: C += Y K
        blas.dgemm(-1.0, gC, K, trans_b=True, beta=1.0, c=gY, overwrite_c=True)  # gY -= gC K^T
        blas.dgemm(-1.0, Y, gC, trans_a=True, beta=1.0, c=gK, overwrite_c=True)  # gK -= Y^T gC
        blas.dgemm(1.0, C, gS, trans_b=True, beta=1.0, c=gY, overwrite_c=True)  # gY += C gS^T
        blas.dgemm(1.0, Y, gS, beta=1.0, c=gC, overwrite_c=True)  # gC += Y gS


def main(argv: list | None = None) -> None:
    """Print the table: the floor, np.linalg.qr, the peer and revdiff for each case, and two ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=CASES)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    revdiff.set_num_threads(1)
    rng = np.random.default_rng(0)
    print("| B x m x n | seven products (floor) | np.linalg.qr | Golub-Pereyra (NumPy) | revdiff householder | "
          "floor / peer | revdiff / floor |")
    print("|---|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        batch, m, n = map(int, case.split("x"))
        if m < n:
            parser.error(f"{case}: the floor is for tall matrices (m >= n)")
        A = rng.standard_normal((batch, m, n))
        y, gz = rng.standard_normal((batch, m)), rng.standard_normal((batch, m))
        operands = panel_operands(m, n, rng)
        if not operands:
            print(f"| {case} | (one panel: no trailing products) | | | | | |")
            continue
        floor = batch * median_time(lambda: floor_products(operands), args.rounds)
        qr = median_time(lambda: np.linalg.qr(A), args.rounds)
        peer = median_time(lambda: formulas.project_vjp(A, y, gz), args.rounds)
        ours = median_time(lambda: P.project_vjp(A, y, gz, method="householder"), args.rounds)
        print(f"| {case} | {1e3 * floor:.1f} ms | {1e3 * qr:.1f} ms | {1e3 * peer:.1f} ms | {1e3 * ours:.1f} ms | "
              f"{floor / peer:.2f} | {ours / floor:.2f} |")


if __name__ == "__main__":
    main()
