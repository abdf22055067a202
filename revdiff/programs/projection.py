"""Orthogonal projection onto the column space of A, written in the reversible language:
z += Q Q^H y, with Q from a Gram-Schmidt or Householder QR computed and uncomputed around the copy."""

from ..function import reversible
from ..language import routine, zeros
from .gram_schmidt import bcgs2, cgs, cgs2, mgs
from .householder import householder


def _projection(name: str, qr):
    @reversible
    def project(z, A, y):
        m, n = A.shape
        p = min(m, n)
        Q = zeros((m, p), A.dtype)
        R = zeros((p, n), A.dtype)
        c = zeros(p, A.dtype)
        with routine:
            qr(Q, R, A)
            c[:] += Q.conj().T @ y
        z[:] += Q @ c
        ~routine
        del c
        del R
        del Q

    project.__name__ = project.__qualname__ = name
    return project


project_cgs2 = _projection("project_cgs2", cgs2)
project_bcgs2 = _projection("project_bcgs2", bcgs2)
project_mgs = _projection("project_mgs", mgs)
project_cgs = _projection("project_cgs", cgs)
project_householder = _projection("project_householder", householder)


def _least_squares(name: str, qr):
    @reversible
    def lstsq(x, A, y):
        """x += argmin |A x - y| = R^-1 Q^H y for A of full column rank (m >= n)."""
        m, n = A.shape
        Q = zeros((m, n), A.dtype)
        R = zeros((n, n), A.dtype)
        c = zeros(n, A.dtype)
        with routine:
            qr(Q, R, A)
            c[:] += Q.conj().T @ y
        for i in range(n - 1, -1, -1):  # back substitution, each x[i] written once
            for j in range(i + 1, n):
                x[i] -= R[i, j] * x[j] / R[i, i]
            x[i] += c[i] / R[i, i]
        ~routine
        del c
        del R
        del Q

    lstsq.__name__ = lstsq.__qualname__ = name
    return lstsq


lstsq_cgs2 = _least_squares("lstsq_cgs2", cgs2)
lstsq_bcgs2 = _least_squares("lstsq_bcgs2", bcgs2)
lstsq_mgs = _least_squares("lstsq_mgs", mgs)
lstsq_cgs = _least_squares("lstsq_cgs", cgs)
lstsq_householder = _least_squares("lstsq_householder", householder)
