"""Running a QR-based program so that every matrix of full rank gets its result. Where a program fails
its own checks on a rank-deficient matrix, the rank check's ``RankDeficientError`` is raised. Where
a Householder program refuses a matrix of full rank, the matrix is factored again with its rows in
another order. Only an uncompute refuses, so only gradients (and their tangents) meet it: the
forward calls and their jvps run the fused vjp's forward half and its tangent (``BatchedFunction.value``,
``value_jvp``), and pass through here unchanged.

The refusal: each reflector's sign is a threshold on the leading entry of its column (Re(x0) <
-|x| / 1000, ``householder.householder_vector``), and the program's uncompute recomputes that sign
from the column restored to rounding; a column within rounding of the threshold can take the other
sign there, and the uncompute stops ("ancilla array 'V' is not zero"): about one float32 40x32
matrix in 40,000. Reordering the rows changes the columns the reflectors meet (their leading
entries first), and P A = (P Q) R: R, whose diagonal the programs make nonnegative, is unique for a
full-rank A, so the same R comes out, and Q, z and the gradients of A and y go back through P^T.
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from revdiff.errors import RankDeficientError, ReversibilityError
from revdiff.programs.arguments import Matrices
from revdiff.programs.inputs import batch_index
from revdiff.programs.methods import AUTO
from revdiff.programs.pivoting import column_pivots

#: the methods whose programs choose each reflector's sign by a threshold on its column's leading entry
THRESHOLD_METHODS = ("householder", "blocked_householder")
#: how many orders of a refused matrix's rows are tried: its own, reversed, reversed and rotated by half
ROW_ORDERS = 3


def numerical_rank(residuals, tol: float, xp):
    """#{k : |R[k, k]| > tol |R[0, 0]|} per matrix, from the pivoted residuals (b, p)."""
    if residuals.shape[1] == 0:
        return xp.zeros(residuals.shape[0], np.int64)
    return xp.sum(residuals > tol * residuals[:, :1], axis=1)


def fresh(outputs: tuple, rows: "Rows") -> tuple:
    """The outputs of a run in ``rows``' order: ``outputs`` (zeros) themselves for the first, in A's
    own order; zeros shaped as them for a rerun, since a refused run leaves its outputs written."""
    return outputs if rows.order is None else tuple(rows.xp.zeros_like(o) for o in outputs)


class Rows:
    """The order of each batch element's rows that a program runs on (``order`` (b, m); None: A's
    own): calling it puts an array's rows (axis 1 of (b, m) or (b, m, k)) in that order, ``back``
    puts a result's rows back in A's."""

    def __init__(self, xp, order=None):
        self.xp, self.order = xp, order
        self._inverse = None if order is None else xp.argsort(order, axis=1)

    def __call__(self, a):
        return a if self.order is None else self._take(a, self.order)

    def back(self, a):
        return a if self.order is None else self._take(a, self._inverse)

    def _take(self, a, order):
        return self.xp.take_along_axis(a, order if a.ndim == 2 else order[:, :, None], axis=1)

    def reordered(self, element: int, attempt: int, batch: int, m: int) -> "Rows":
        """These orders with ``element``'s the ``attempt``-th other one (``batch`` elements of ``m``
        rows): reversed (1), then reversed and rotated by half (2), so that each order leads with
        another row (m - 1, then m // 2 - 1; of three rows or more) than A's own (row 0)."""
        xp = self.xp
        order = xp.tile(xp.arange(m), (batch, 1)) if self.order is None else self.order.copy()
        order[element] = xp.roll(xp.arange(m)[::-1], 0 if attempt == 1 else max(2, m // 2))
        return Rows(xp, order)


def ranked(call, M: Matrices, tol: float, method: str, truncated: bool = False) -> tuple:
    """(``call(rows)``, rows): a QR-based program run on M's matrices. ``call`` puts its arguments
    with a row axis (A, y, Q's and z's cotangents, the tangents of A and y) in the order of ``rows``
    (``Rows``, A's own unless a matrix was refused); the caller puts its results with a row axis
    (Q, z, the gradients and tangents of A, y, Q and z; not R or x) back with ``rows.back``.

    On a ReversibilityError, or a program check's ZeroDivisionError (the derivative of a Givens
    angle of a zero column): the matrices it reports (``_failed_elements``) that are rank-deficient
    raise the rank check's RankDeficientError (Householder's reflector of a residual at rounding
    level does not uncompute to zero, and the program stops before R is read), except where the
    program runs on the columns truncation kept (``truncated``: those beyond the numerical rank are
    zero, which the programs pass over). A Householder program's refused matrices then run again,
    in their next row order (``ROW_ORDERS``), all in one more run of the batch on the CPU (a GPU
    reports one at a time); the other matrices keep their order and their bits. A matrix refused in
    every order raises the last ReversibilityError."""
    rows = Rows(M.xp)
    attempts: dict = {}  # refused matrix -> orders tried (1: its own); each rank-checked at its first refusal
    while True:
        try:
            return call(rows), rows
        except (ReversibilityError, ArithmeticError) as exc:
            if not hasattr(exc, "failed_elements"):  # an arithmetic error outside the program's checks
                raise
            refused = _failed_elements(exc)
            new = [b for b in refused if b not in attempts]
            if not truncated and (new or not refused):
                _raise_if_rank_deficient(M, tol, exc, new if refused else None)
            if not isinstance(exc, ReversibilityError) or method not in THRESHOLD_METHODS or not refused:
                raise
            if any(attempts.get(b, 1) >= ROW_ORDERS for b in refused):
                error = ReversibilityError(f"{exc.message}; the matrix was refused with its rows reversed, and "
                                           "reversed and rotated, too", exc.loc, written=True)
                error.refused_in_every_order = True  # method="auto" then runs cgs2 (``cgs2_where_refused``)
                raise error from exc
            for b in refused:
                attempts[b] = attempts.get(b, 1) + 1
                rows = rows.reordered(b, attempts[b] - 1, M.b, M.m)


def _failed_elements(exc: Exception) -> tuple:
    """The batch elements ``exc`` reports: on the CPU every one whose error record is set (a batch's
    entries run every element, each with its own record: ``calls.run``), on a GPU the one whose
    failure was recorded first."""
    failed, b = exc.failed_elements, exc.batch_element
    return tuple(int(e) for e in failed) if failed else (() if b is None else (int(b),))


def _raise_if_rank_deficient(M: Matrices, tol: float, exc: Exception, elements) -> None:
    """RankDeficientError, from ``exc``, naming the first of the matrices ``elements`` (None: all)
    whose numerical rank is below min(m, n), by the pivoted scan of those alone (others, if
    deficient, fail the rank check of R after the run)."""
    chosen = list(range(M.b)) if elements is None else list(elements)
    rank = numerical_rank(column_pivots(M.flat[chosen], M.xp)[1], tol, M.xp)  # of A itself, as truncation reads it
    short = M.xp.argwhere(rank < M.p)
    if short.size:
        k = int(short[0][0])
        raise RankDeficientError(f"matrix at batch index {batch_index(M.batch, chosen[k])} has numerical rank "
                                 f"{int(rank[k])} < {M.p} (QR with column pivoting: residuals at most {tol:.1e} of "
                                 "the largest); rank_deficient='truncate' projects onto its numerical column space"
                                 ) from exc


def cgs2_where_refused(function):
    """``function`` (a high-level function with ``method`` and ``mode`` parameters) called again with
    method="cgs2" where ``method="auto"`` chose Householder and a matrix was refused in every row
    order (``ranked``): the default answers every matrix of full rank, an explicit "householder"
    raises. A complete Q, which cgs2 cannot form, keeps the refusal. Nothing is bound on a call that
    succeeds."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except ReversibilityError as exc:
            if not exc.refused_in_every_order:
                raise
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            if bound.arguments["method"] != AUTO or bound.arguments.get("mode") == "complete":
                raise
            bound.arguments["method"] = "cgs2"
        return function(*bound.args, **bound.kwargs)
    return call

