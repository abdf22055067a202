"""The methods and QR modes of the high-level functions, the programs the methods name, the method
the default "auto" runs (``resolved``), and the choice among a method's programs: ``householder``
runs one of two programs of the same factorisation, the one measured faster for the shape (as
LAPACK's geqrf runs its unblocked geqr2 on narrow matrices)."""
from __future__ import annotations

import numpy as np

from revdiff.programs import givens, gram_schmidt, householder, projection

QR_METHODS = {"cgs2": gram_schmidt.cgs2, "bcgs2": gram_schmidt.bcgs2, "mgs": gram_schmidt.mgs,
              "cgs": gram_schmidt.cgs, "householder": householder.householder,
              "blocked_householder": householder.blocked_householder, "givens": givens.givens}
PROJECT_METHODS = {"cgs2": projection.project_cgs2, "bcgs2": projection.project_bcgs2, "mgs": projection.project_mgs,
                   "cgs": projection.project_cgs, "householder": projection.project_householder,
                   "blocked_householder": projection.project_blocked_householder}
LSTSQ_METHODS = {"cgs2": projection.lstsq_cgs2, "bcgs2": projection.lstsq_bcgs2, "mgs": projection.lstsq_mgs,
                 "cgs": projection.lstsq_cgs, "householder": projection.lstsq_householder,
                 "blocked_householder": projection.lstsq_blocked_householder}
#: the methods that complete Q of a tall matrix to an m x m orthogonal matrix (their reflectors or
#: rotations construct the completion)
COMPLETE_METHODS = ("householder", "blocked_householder", "givens")

#: ``householder`` runs ``blocked_householder`` on matrices of more than one panel (p = min(m, n) >
#: ``BLOCKED_MIN_COLUMNS``) and more than ``BLOCKED_MIN_ELEMENTS`` entries, where its block products
#: call BLAS; the column-by-column program elsewhere (also in SIMD lanes, for batches of small
#: matrices) and on GPUs, where the blocked one has not run. ``benchmarks/householder_crossover.py``
#: (one core, one matrix and 64): the blocked program's time over the column-by-column one's, for
#: project_vjp and qr_vjp, 1.04-1.10 and 1.9-2.2 at 64 x 32 (one panel), 1.01-1.06 and 0.87-1.02 at
#: 80 x 40, 0.64 and 0.51-0.52 at 192 x 96.
BLOCKED_MIN_COLUMNS = householder.PANEL
BLOCKED_MIN_ELEMENTS = 2048

#: ``method="auto"`` (the default of the high-level functions) runs ``householder`` on real CPU
#: matrices with p = min(m, n) of at least this many, and for the complete Q of a tall matrix (which
#: cgs2 cannot form; any dtype, any device), ``cgs2`` otherwise: on smaller matrices, on complex
#: ones and on GPUs (where no crossover has been measured). ``python benchmarks/method_crossover.py``
#: (``benchmarks/RESULTS.md``, "The default method"; one core, m = 2n): householder's QR gradient
#: took 0.55-0.94 of cgs2's time from p = 128 and 0.78-1.01 at p = 32 to 64, but its forward QR 1.2-1.5
#: and its qr_jvp up to 3.1 at p = 32 to 48; one rule serves all of a function's calls, so it is
#: 128. Complex: householder's QR gradients took 1.78-3.28 of cgs2's time from p = 128, its other
#: gradients 0.69-1.32 there and 1.12-1.70 below (complex128). All cores and other aspect ratios
#: follow the rule unmeasured.
AUTO = "auto"
AUTO_HOUSEHOLDER_MIN_COLUMNS = 128
#: ``method="auto"`` runs ``householder`` for projections and least squares (which form no Q with it)
#: on real tall CPU matrices with n of at least this many: ``python benchmarks/method_crossover.py
#: --gradients projection,qr,lstsq`` (one core) measured householder's projection and least-squares
#: gradients at 0.32-0.81 of cgs2's time in float64 and 0.42-1.02 in float32 on batches from
#: 10000 x 32x16 to 2 x 500x250, 0.51-0.95 and 0.69-0.90 on one matrix of 32 x 16 to 128 x 64,
#: against 0.94-1.29 at 24 x 12 and 16 x 8.
AUTO_PROJECTION_MIN_COLUMNS = 16


#: the QR modes, named and shaped as in ``torch.linalg.qr``
QR_MODES = ("reduced", "complete", "r")


def _choices(names) -> str:
    """'a', 'b' or 'c'."""
    quoted = [repr(name) for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def q_columns(method: str, mode, shape: tuple) -> int:
    """The columns of Q for A of ``shape`` (..., m, n) in ``mode``: p = min(m, n), or m for the
    complete Q of a tall A (ValueError for an unknown mode or a method that cannot complete Q)."""
    if not isinstance(mode, str) or mode not in QR_MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(map(repr, QR_MODES))}")
    m, n = shape[-2:]
    if mode != "complete" or m <= n:
        return min(m, n)
    check_method(QR_METHODS, method)
    if resolved(method, shape, mode=mode) not in COMPLETE_METHODS:
        raise ValueError(f"mode='complete' of a tall A (shape {tuple(shape)}) needs a method that completes Q to "
                         f"an orthogonal {m} x {m} matrix: {_choices((AUTO,) + COMPLETE_METHODS)}; "
                         f"{method!r} computes the first {n} columns only")
    return m


def check_method(table: dict, method) -> None:
    """ValueError naming the choices unless ``method`` is "auto" or one of ``table``'s."""
    if not isinstance(method, str) or method not in table and method != AUTO:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join((AUTO, *table))}")


def resolved(method: str, shape: tuple, gpu: bool = False, mode: str = "reduced", dtype="float64",
             projection: bool = False) -> str:
    """The method that runs for ``method`` on matrices of ``shape`` (..., m, n) and ``dtype`` in QR
    ``mode`` (``projection``: for a projection or least squares): itself, or for "auto"
    ``householder`` or ``cgs2`` (``AUTO_HOUSEHOLDER_MIN_COLUMNS``, ``AUTO_PROJECTION_MIN_COLUMNS``).
    The rule reads the shape, the dtype, the QR mode and the device, never the batch size: a batch
    equals its elements called one by one bit for bit, and ``revdiff.dask``'s chunks a single call
    (so a method goes where both one matrix and batches of it measured faster)."""
    if not (isinstance(method, str) and method == AUTO):
        return method
    m, n = shape[-2:]
    complete = mode == "complete" and m > n
    real_cpu = not gpu and np.dtype(dtype).kind == "f"
    large = real_cpu and min(m, n) >= AUTO_HOUSEHOLDER_MIN_COLUMNS
    tall_projection = projection and real_cpu and m >= n >= AUTO_PROJECTION_MIN_COLUMNS
    return "householder" if complete or large or tall_projection else "cgs2"


def chosen_method(method: str, shape: tuple, gpu: bool = False) -> str:
    """The method whose program runs for ``method`` (a resolved one: ``resolved`` turns "auto" into one
    where a call starts, so that everything after it sees the method that runs) on matrices of ``shape``."""
    if method == AUTO:
        raise ValueError("methods.chosen_method takes the method 'auto' resolves to (methods.resolved)")
    m, n = shape[-2:]
    if (method == "householder" and not gpu and min(m, n) > BLOCKED_MIN_COLUMNS
            and m * n > BLOCKED_MIN_ELEMENTS):
        return "blocked_householder"
    return method


def program_for(table: dict, method, shape: tuple, gpu: bool = False):
    """The reversible program ``method`` runs on matrices of ``shape`` (ValueError for an unknown method)."""
    check_method(table, method)
    return table[chosen_method(method, shape, gpu)]
