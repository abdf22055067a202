"""Orthogonal projection onto the column space of A and least squares, written in the reversible
language: z += Q Q^H y and x += R^-1 Q^H y, with Q and R from a Gram-Schmidt or Householder QR
computed and uncomputed around the result.

Both also copy out R, the triangular factor, so that callers can tell the rank: a column of A
dependent on the earlier ones shows as a zero (exactly dependent) or tiny R[k, k], and then the
projection is onto the span of the other columns and the solution meaningless. The high-level
functions (``revdiff.programs.project``, ``lstsq``) read it and raise ``RankDeficientError``.
"""

from revdiff.function import reversible
from revdiff.language import routine, zeros
from revdiff.programs.elementwise import add_into
from revdiff.programs.gram_schmidt import bcgs2, cgs, cgs2, mgs
from revdiff.programs.householder import blocked_householder, householder


def _leading_projection(name: str, qr):
    @reversible
    def project(z, R, A, y, r):
        """z += Q[:, :r] Q[:, :r]^H y, the projection of y onto the span of the first r columns of A
        (0 <= r <= min(m, n)); R += A's triangular factor. Q's later columns, which Householder QR
        makes unit vectors also for zero columns of A, are not used."""
        m, n = A.shape
        p = min(m, n)
        Q = zeros((m, p), A.dtype)
        T = zeros((p, n), A.dtype)
        c = zeros(p, A.dtype)
        with routine:
            qr(Q, T, A)
            c[:r] += Q[:, :r].conj().T @ y
        z[:] += Q[:, :r] @ c[:r]
        add_into(R, T)
        ~routine
        del c
        del T
        del Q

    project.__name__ = project.__qualname__ = name
    return project


def _projection(name: str, qr):
    """``_leading_projection`` of all columns, written out: as a call of it, the fused vjp could not
    elide a QR uncompute and recompute, and the lane program outgrew its size limit."""
    @reversible
    def project(z, R, A, y):
        """z += Q Q^H y, the projection of y onto the column space of A; R += A's triangular factor."""
        m, n = A.shape
        p = min(m, n)
        Q = zeros((m, p), A.dtype)
        T = zeros((p, n), A.dtype)
        c = zeros(p, A.dtype)
        with routine:
            qr(Q, T, A)
            c[:] += Q.conj().T @ y
        z[:] += Q @ c
        add_into(R, T)
        ~routine
        del c
        del T
        del Q

    project.__name__ = project.__qualname__ = name
    return project


#: the projections onto the leading columns (those of a rank-deficient A that truncation keeps)
LEADING_PROJECTIONS = {name: _leading_projection(f"project_leading_{name}", qr)
                       for name, qr in (("cgs2", cgs2), ("bcgs2", bcgs2), ("mgs", mgs), ("cgs", cgs),
                                        ("householder", householder), ("blocked_householder", blocked_householder))}
project_cgs2 = _projection("project_cgs2", cgs2)
project_bcgs2 = _projection("project_bcgs2", bcgs2)
project_mgs = _projection("project_mgs", mgs)
project_cgs = _projection("project_cgs", cgs)
project_householder = _projection("project_householder", householder)
project_blocked_householder = _projection("project_blocked_householder", blocked_householder)


def _least_squares(name: str, qr):
    @reversible
    def lstsq(x, R, A, y):
        """x += argmin |A x - y| = R^-1 Q^H y for A of full column rank (m >= n); R += A's
        triangular factor. A zero R[i, i] contributes nothing to x (no division by zero)."""
        m, n = A.shape
        Q = zeros((m, n), A.dtype)
        T = zeros((n, n), A.dtype)
        c = zeros(n, A.dtype)
        with routine:
            qr(Q, T, A)
            c[:] += Q.conj().T @ y
        for i in range(n - 1, -1, -1):  # back substitution, each x[i] written once
            for j in range(i + 1, n):
                x[i] -= T[i, j] * x[j] / T[i, i] if T[i, i] != 0 else 0.0
            x[i] += c[i] / T[i, i] if T[i, i] != 0 else 0.0
        add_into(R, T)
        ~routine
        del c
        del T
        del Q

    lstsq.__name__ = lstsq.__qualname__ = name
    return lstsq


lstsq_cgs2 = _least_squares("lstsq_cgs2", cgs2)
lstsq_bcgs2 = _least_squares("lstsq_bcgs2", bcgs2)
lstsq_mgs = _least_squares("lstsq_mgs", mgs)
lstsq_cgs = _least_squares("lstsq_cgs", cgs)
lstsq_householder = _least_squares("lstsq_householder", householder)
lstsq_blocked_householder = _least_squares("lstsq_blocked_householder", blocked_householder)
