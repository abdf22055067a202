"""Givens QR written in the reversible language (real matrices).

Each rotation is a reversible instruction; the angle that zeroes entry (i, k) is computed from the
entry and the diagonal one, (k, k), whose row it rotates with, and the angles are kept as the
program's extra output, like LAPACK keeps its reflectors: ``angles[i, k]`` is the angle that zeroed
entry (i, k), i > k. The work copy of A is uncomputed after Q and R are copied out, so nothing else
is kept.

Where the two entries of a rotation are both 0 its angle (atan2 at the origin) has no derivative,
so a gradient there raises by name. Rotating against the diagonal entry, that happens only where a
diagonal entry and an entry below it are both 0 when the column is reached; rotating adjacent rows
from the bottom would meet such pairs on every identity and triangular matrix.
Shapes and conventions as in ``gram_schmidt``: Q (m, p), R (p, n), angles (m, p), diag(R) >= 0; or
the complete factorisation, Q (m, m) and R (m, n) with zero rows below p (``givens`` reads the width
of Q, as ``householder`` does).
"""
import numpy as np

from revdiff.function import reversible
from revdiff.language import irot, rot, routine, zeros
from revdiff.programs.elementwise import add_into


@reversible
def givens_triangularize(W, T):
    """Reduce W to upper triangular form in place, each entry below the diagonal rotated into the
    diagonal one, top-down per column; T[i, k] += the angle used at (i, k)."""
    m, n = W.shape
    p = min(m, n)
    for k in range(p):
        for i in range(k + 1, m):
            T[i, k] += np.arctan2(W[i, k], W[k, k])
            for j in range(k, n):
                irot(W[k, j], W[i, j], T[i, k])


@reversible
def givens_apply_transpose(X, T):
    """X <- G^T X, where G is the product of the rotations recorded in T by givens_triangularize."""
    m, q = X.shape
    p = T.shape[1]
    for k in range(p - 1, -1, -1):
        for i in range(m - 1, k, -1):
            for j in range(q):
                rot(X[k, j], X[i, j], T[i, k])


@reversible
def givens(Q, R, angles, A):
    """QR by Givens rotations (real A): orthogonal to O(u) at any condition number. Q has p = min(m, n)
    columns (thin) or m (complete; R then has m rows, those below p zero)."""
    m, n = A.shape
    p = min(m, n)
    q = Q.shape[1]
    W = zeros((m, n), A.dtype)
    T = zeros((m, p), A.dtype)
    X = zeros((m, q), A.dtype)
    with routine:
        add_into(W, A)
        givens_triangularize(W, T)
        # a square or wide matrix's last diagonal entry is not set by a rotation: D = sign(diag(W)) (1
        # beyond p), R = D W
        for k in range(p):
            X[k, k] += 1 if W[k, k] >= 0 else -1
        for k in range(p, q):
            X[k, k] += 1
        givens_apply_transpose(X, T)
    add_into(Q, X)
    for k in range(p):
        for j in range(k, n):
            R[k, j] += (1 if W[k, k] >= 0 else -1) * W[k, j]
    for i in range(m):
        for k in range(p):
            angles[i, k] += T[i, k]
    ~routine
    del X
    del T
    del W
