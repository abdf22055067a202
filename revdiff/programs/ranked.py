"""Running a QR-based program so that every matrix of full rank gets its result. Where a program fails
its own checks on a rank-deficient matrix, the rank check's ``RankDeficientError`` is raised. Where
a Householder program refuses a matrix of full rank, the matrix is factored again with its rows in
another order.

The refusal: each reflector's sign is a threshold on the leading entry of its column (Re(x0) <
-|x| / 1000, ``householder.householder_vector``), and the program's uncompute recomputes that sign
from the column restored to rounding; a column within rounding of the threshold can take the other
sign there, and the uncompute stops ("ancilla array 'V' is not zero"): about one float32 40x32
matrix in 40,000. Reordering the rows moves every column's leading entry, and P A = (P Q) R, so
the same R comes out and Q, z and the gradients of A and y go back through P^T.
"""
from __future__ import annotations

import numpy as np

from revdiff.errors import RankDeficientError, ReversibilityError
from revdiff.programs.arguments import Matrices
from revdiff.programs.inputs import batch_index
from revdiff.programs.pivoting import column_pivots

#: the methods whose programs choose each reflector's sign by a threshold on its column's leading entry
THRESHOLD_METHODS = ("householder", "blocked_householder")
#: the orders of a refused matrix's rows tried in turn: its own, reversed, reversed and rotated by one
ROW_ORDERS = 3


def numerical_rank(residuals, tol: float, xp):
    """#{k : |R[k, k]| > tol |R[0, 0]|} per matrix, from the pivoted residuals (b, p)."""
    if residuals.shape[1] == 0:
        return xp.zeros(residuals.shape[0], np.int64)
    return xp.sum(residuals > tol * residuals[:, :1], axis=1)


def fresh(outputs: tuple, xp) -> tuple:
    """Zeros shaped as ``outputs``, for each run: a refused run leaves its outputs written."""
    return tuple(xp.zeros_like(o) for o in outputs)


class Rows:
    """The order of each batch element's rows that a program runs on (``order`` (b, m), None: A's
    own): calling it puts an array's rows (axis 1 of (b, m) or (b, m, k)) in that order, ``back``
    puts a result's rows back in A's."""

    def __init__(self, xp, order=None):
        self.xp, self.order = xp, order

    def __call__(self, a):
        if self.order is None:
            return a
        index = self.order if a.ndim == 2 else self.order[:, :, None]
        return self.xp.take_along_axis(a, index, axis=1)

    def back(self, a):
        return a if self.order is None else Rows(self.xp, self.xp.argsort(self.order, axis=1))(a)

    def reordered(self, b: int, attempt: int, batch: int, m: int) -> "Rows":
        """These orders with element ``b``'s the ``attempt``-th other one: reversed (1), then reversed
        and rotated by one (2)."""
        xp = self.xp
        order = xp.tile(xp.arange(m), (batch, 1)) if self.order is None else self.order.copy()
        order[b] = xp.roll(xp.arange(m)[::-1], attempt - 1)
        return Rows(xp, order)


def ranked(call, M: Matrices, tol: float, method: str, truncated: bool = False) -> tuple:
    """(``call(rows)``, rows): a QR-based program run on M's matrices, its arrays with a row axis put
    in the order of ``rows`` (``Rows``: A's own unless a matrix was refused), results with a row axis
    to be put back with ``rows.back``. A ReversibilityError becomes the rank check's
    RankDeficientError where a matrix is rank-deficient (Householder's reflector of a residual at
    rounding level does not uncompute to zero, and the program stops before R is read), unless the
    program runs on the columns truncation kept (``truncated``); a matrix that a Householder program
    refuses otherwise is run again in its other row orders (``ROW_ORDERS``), the whole batch with it
    and with every other matrix refused in the same run (the others get the same bits again)."""
    rows, attempts = Rows(M.xp), {}
    while True:
        try:
            return call(rows), rows
        except ReversibilityError as exc:
            refused = _refused(exc)
            unchecked = [b for b in refused if b not in attempts]
            if not truncated and (unchecked or not refused):
                _refuse_rank_deficient(M, tol, exc, unchecked)
            if method not in THRESHOLD_METHODS or not refused or any(attempts.get(b, 1) >= ROW_ORDERS for b in refused):
                raise
            for b in refused:  # all at once: one more run however many the batch holds
                attempts[b] = attempts.get(b, 1) + 1
                rows = rows.reordered(b, attempts[b] - 1, M.b, M.m)


def _refused(exc: Exception) -> tuple:
    """The batch elements ``exc`` says failed: every one whose error record is set where the batch
    ran on the CPU (``calls.run``), else the one it names (a GPU batch reports its first)."""
    failed = getattr(exc, "failed_elements", ())
    b = getattr(exc, "batch_element", None)
    return tuple(int(e) for e in failed) if failed else (() if b is None else (int(b),))


def _refuse_rank_deficient(M: Matrices, tol: float, exc: Exception, refused: tuple) -> None:
    """RankDeficientError, from ``exc``, naming the first of the ``refused`` matrices (all where none
    is named) of numerical rank below min(m, n): the pivoted scan of those alone (the others, if
    deficient, fail the rank check of R after the run)."""
    chosen = list(refused) if refused else list(range(M.b))
    rank = numerical_rank(column_pivots(M.flat[chosen], M.xp)[1], tol, M.xp)  # of A itself, as truncation reads it
    short = M.xp.argwhere(rank < M.p)
    if short.size:
        k = int(short[0][0])
        b = chosen[k]
        raise RankDeficientError(f"matrix at batch index {batch_index(M.batch, b)} has numerical rank {int(rank[k])} "
                                 f"< {M.p} (QR with column pivoting: residuals at most {tol:.1e} of the largest); "
                                 "rank_deficient='truncate' projects onto its numerical column space") from exc
