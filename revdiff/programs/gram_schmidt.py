"""Gram-Schmidt QR written in the reversible language: classical (cgs), modified (mgs), and
classical with re-orthogonalisation (cgs2, "twice is enough").

Each column is computed, copied into Q and R, and uncomputed, so no garbage is kept beyond Q and R.
For A of shape (m, n) and p = min(m, n): Q is (m, p) and R is (p, n), zero on entry; R has a
real nonnegative diagonal. Wide matrices (m < n) get R's extra columns as Q^H A[:, p:]. A column
whose residual is exactly zero (dependent on the earlier ones) gets R[k, k] = 0 and a zero column
of Q instead of a division by zero: the programs are defined for every input, and the high-level
functions (``revdiff.programs.qr``, ...) read rank deficiency off R's diagonal and raise.
"""
import numpy as np

from revdiff.function import reversible
from revdiff.language import routine, zero, zeros
from revdiff.programs.naming import named


@reversible
def classical_pass(v, r, Q, k):
    """r[:k] += Q[:, :k]^H v, then v -= Q[:, :k] r[:k] (all coefficients from the same v)."""
    r[:k] += Q[:, :k].conj().T @ v
    v[:] -= Q[:, :k] @ r[:k]


@reversible
def modified_pass(v, r, Q, k):
    """Project out one earlier column at a time, each coefficient from the updated v."""
    for j in range(k):
        r[j] += np.vdot(Q[:, j], v)
        v[:] -= r[j] * Q[:, j]


@reversible
def norm2(nrm, v):
    """nrm += ||v||_2 at any finite magnitude: one instruction of the language (``np.linalg.norm``),
    which sums the squares of v scaled by its largest magnitude, as LAPACK's nrm2 scales, and whose
    gradient is v / ||v|| directly (0 at v = 0, where the norm has none: PyTorch's choice)."""
    nrm += np.linalg.norm(v)


@reversible
def remaining_columns(R, Q, A):
    """R[:, p:] += Q^H A[:, p:] for the columns beyond min(m, n) of a wide matrix."""
    m, n = A.shape
    p = min(m, n)
    for k in range(p, n):
        R[:, k] += Q.conj().T @ A[:, k]


@reversible
def cgs2(Q, R, A):
    """QR by classical Gram-Schmidt with one re-orthogonalisation: orthogonal to O(u) while u*kappa << 1."""
    m, n = A.shape
    p = min(m, n)
    for k in range(p):
        v = zeros(m, A.dtype)
        r1 = zeros(p, A.dtype)
        r2 = zeros(p, A.dtype)
        nrm = zero(A.real.dtype)
        with routine:
            v[:] += A[:, k]
            classical_pass(v, r1, Q, k)
            classical_pass(v, r2, Q, k)
            norm2(nrm, v)
        R[:k, k] += r1[:k]
        R[:k, k] += r2[:k]
        R[k, k] += nrm
        for i in range(m):
            Q[i, k] += v[i] / nrm if nrm != 0 else 0.0  # a dependent column: R[k, k] = 0
        ~routine
        del nrm
        del r2
        del r1
        del v
    remaining_columns(R, Q, A)


def _block_cgs2(name: str, b: int, panel_qr, doc: str):
    """Block CGS2 with panels of up to ``b`` columns, each orthonormalised within itself by ``panel_qr``."""

    @reversible
    def block_qr(Q, R, A):
        m, n = A.shape
        p = min(m, n)
        for k in range(0, p, b):
            w = min(b, p - k)
            V = zeros((m, w), A.dtype)
            S1 = zeros((k, w), A.dtype)
            S2 = zeros((k, w), A.dtype)
            with routine:
                for i in range(m):
                    for j in range(w):
                        V[i, j] += A[i, k + j]
                S1[:, :] += Q[:, :k].conj().T @ V
                V[:, :] -= Q[:, :k] @ S1
                S2[:, :] += Q[:, :k].conj().T @ V
                V[:, :] -= Q[:, :k] @ S2
            panel_qr(Q[:, k:k + w], R[k:k + w, k:k + w], V)  # the panel's own QR, written in place
            for i in range(k):
                for j in range(w):
                    R[i, k + j] += S1[i, j]
                    R[i, k + j] += S2[i, j]
            ~routine
            del S2
            del S1
            del V
        remaining_columns(R, Q, A)

    return named(block_qr, name, doc)


bcgs2_panel = _block_cgs2(
    "bcgs2_panel", 8, cgs2,
    "QR by block CGS2 on panels of up to 8 columns, each by cgs2: the inner level of bcgs2's panels.")
bcgs2 = _block_cgs2(
    "bcgs2", 32, bcgs2_panel,
    """QR by block classical Gram-Schmidt with re-orthogonalisation (BCGS2 / BCGSI+) on two levels:
    each panel of up to 32 columns is projected twice against the earlier columns with matrix
    products (BLAS-3 on the CPU), then orthonormalised within itself by ``bcgs2_panel``, whose
    panels of 8 columns are projected the same way and finished by cgs2. (Panels of 64 ran 4 %
    faster but lost orthogonality: 1e-7 against 2e-13 at condition number 1e14.)""")


def _one_pass_qr(name: str, project_out, doc: str):
    """Gram-Schmidt QR with one projection pass per column (classical or modified)."""

    @reversible
    def qr(Q, R, A):
        m, n = A.shape
        p = min(m, n)
        for k in range(p):
            v = zeros(m, A.dtype)
            r = zeros(p, A.dtype)
            nrm = zero(A.real.dtype)
            with routine:
                for i in range(m):
                    v[i] += A[i, k]
                project_out(v, r, Q, k)
                norm2(nrm, v)
            R[:k, k] += r[:k]
            R[k, k] += nrm
            for i in range(m):
                Q[i, k] += v[i] / nrm if nrm != 0 else 0.0  # a dependent column: R[k, k] = 0
            ~routine
            del nrm
            del r
            del v
        remaining_columns(R, Q, A)

    return named(qr, name, doc)


cgs = _one_pass_qr("cgs", classical_pass, "QR by classical Gram-Schmidt: loses orthogonality like u*kappa^2.")
mgs = _one_pass_qr("mgs", modified_pass, "QR by modified Gram-Schmidt: loses orthogonality like u*kappa.")
