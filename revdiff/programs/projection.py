"""Orthogonal projection onto the column space of A and least squares, written in the reversible
language: z += Q Q^H y and x += R^-1 Q^H y, with Q and R from a Gram-Schmidt QR computed and
uncomputed around the result. The Householder programs form no Q (Q = H E D, so z = H E E^T H^H y
and x = W[:n, :n]^-1 (H^H y)[:n] for the triangularised W): they triangularise the augmented matrix
[A y] (Golub's least squares), so that the triangularisation's own sweeps and block products turn y
into H^H y, and the projection reflects E E^T H^H y back by p reflections of one vector, O(m n)
where forming Q costs as much as the triangularisation.

Both also copy out R, the triangular factor, so that callers can tell the rank: a column of A
dependent on the earlier ones shows as a zero (exactly dependent) or tiny R[k, k], and then the
projection is onto the span of the other columns and the solution meaningless. The high-level
functions (``revdiff.programs.project``, ``lstsq``) read it and raise ``RankDeficientError``.
"""

from revdiff.function import reversible
from revdiff.language import routine, zeros
from revdiff.programs.elementwise import add_into
from revdiff.programs.naming import named
from revdiff.programs.gram_schmidt import bcgs2, cgs, cgs2, mgs
from revdiff.programs.householder import apply_reflectors, triangularize_blocked, triangularize_columns, upper_factor


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

    return named(project, name)


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

    return named(project, name)


@reversible
def reflected_projection(z, w, V, r):
    """z += H E_r E_r^H w for w = H^H y, the projection of y onto the first r columns of Q = H E D,
    for H = H_0^H ... H_{p-1}^H and the reflectors H_k in V's columns (``householder.apply_reflectors``);
    w is the column the triangularisation reflected along with A (``_householder_projection``)."""
    m, p = V.shape
    projected = zeros(m, V.dtype)  # H E_r E_r^H w
    coefficients = zeros(p, V.dtype)  # u_k^H of what each reflection on the way back to z met
    with routine:
        projected[:r] += w[:r]
        apply_reflectors(projected, V, coefficients)
    z[:] += projected
    ~routine
    del coefficients
    del projected


def _householder_leading_projection(name: str, triangularize_):
    @reversible
    def project(z, R, A, y, r):
        """z += Q[:, :r] Q[:, :r]^H y for Householder's Q (0 <= r <= min(m, n)); R += A's triangular
        factor. y rides along as a last column of the triangularised A, its reflections part of the
        triangularisation's sweeps and block products, and is reflected back from there
        (``reflected_projection``): no Q is formed."""
        m, n = A.shape
        p = min(m, n)
        W = zeros((m, n + 1), A.dtype)  # [A y], triangularised: [H^H A, H^H y]
        V = zeros((m, p), A.dtype)
        K = zeros((p, n + 1), A.dtype)
        with routine:
            add_into(W[:, :n], A)
            W[:, n] += y
            triangularize_(W, V, K)
        reflected_projection(z, W[:, n], V, r)
        upper_factor(R, W[:, :n])
        ~routine
        del K
        del V
        del W

    return named(project, name)


def _householder_projection(name: str, triangularize_):
    @reversible
    def project(z, R, A, y):
        """z += Q Q^H y for Householder's Q, as ``_householder_leading_projection`` with r = p; R += A's
        triangular factor."""
        m, n = A.shape
        p = min(m, n)
        W = zeros((m, n + 1), A.dtype)  # [A y], triangularised: [H^H A, H^H y]
        V = zeros((m, p), A.dtype)
        K = zeros((p, n + 1), A.dtype)
        with routine:
            add_into(W[:, :n], A)
            W[:, n] += y
            triangularize_(W, V, K)
        reflected_projection(z, W[:, n], V, p)
        upper_factor(R, W[:, :n])
        ~routine
        del K
        del V
        del W

    return named(project, name)


#: the projections onto the leading columns (those of a rank-deficient A that truncation keeps)
LEADING_PROJECTIONS = {
    **{name: _leading_projection(f"project_leading_{name}", qr)
       for name, qr in (("cgs2", cgs2), ("bcgs2", bcgs2), ("mgs", mgs), ("cgs", cgs))},
    "householder": _householder_leading_projection("project_leading_householder", triangularize_columns),
    "blocked_householder": _householder_leading_projection("project_leading_blocked_householder",
                                                           triangularize_blocked)}
project_cgs2 = _projection("project_cgs2", cgs2)
project_bcgs2 = _projection("project_bcgs2", bcgs2)
project_mgs = _projection("project_mgs", mgs)
project_cgs = _projection("project_cgs", cgs)
project_householder = _householder_projection("project_householder", triangularize_columns)
project_blocked_householder = _householder_projection("project_blocked_householder", triangularize_blocked)


@reversible
def solve_upper(x, T, c):
    """x += T^-1 c by back substitution for an upper triangular T, each x[i] written once; a zero
    T[i, i] contributes nothing to x (no division by zero)."""
    n = len(x)
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            x[i] -= T[i, j] * x[j] / T[i, i] if T[i, i] != 0 else 0.0
        x[i] += c[i] / T[i, i] if T[i, i] != 0 else 0.0


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
        solve_upper(x, T, c)
        add_into(R, T)
        ~routine
        del c
        del T
        del Q

    return named(lstsq, name)


def _householder_least_squares(name: str, triangularize_):
    @reversible
    def lstsq(x, R, A, y):
        """x += argmin |A x - y| = W^-1 (H^H y)[:n] for A of full column rank (m >= n), W the
        triangularised A, with y riding along as its last column (Q^H y by the triangularisation's
        own reflections, no Q formed); R += A's triangular factor."""
        m, n = A.shape
        W = zeros((m, n + 1), A.dtype)  # [A y], triangularised: [H^H A, H^H y]
        V = zeros((m, n), A.dtype)
        K = zeros((n, n + 1), A.dtype)
        with routine:
            add_into(W[:, :n], A)
            W[:, n] += y
            triangularize_(W, V, K)
        solve_upper(x, W[:, :n], W[:n, n])
        upper_factor(R, W[:, :n])
        ~routine
        del K
        del V
        del W

    return named(lstsq, name)


lstsq_cgs2 = _least_squares("lstsq_cgs2", cgs2)
lstsq_bcgs2 = _least_squares("lstsq_bcgs2", bcgs2)
lstsq_mgs = _least_squares("lstsq_mgs", mgs)
lstsq_cgs = _least_squares("lstsq_cgs", cgs)
lstsq_householder = _householder_least_squares("lstsq_householder", triangularize_columns)
lstsq_blocked_householder = _householder_least_squares("lstsq_blocked_householder", triangularize_blocked)
