"""Householder QR written in the reversible language.

Each reflector is stored as a unit vector u, H = I - tau u u^H with tau = 2 Re(u[0]) / u[0] (2 for
real data; LAPACK's larfg, which maps a column to a real multiple of e_1), so a reflection needs no
norm, and u = 0 (a zero column) reflects nothing. The coefficients a reflection subtracts (a
multiple of u^H C) are kept while triangularising (``reflect_columns_kept``, until the whole
triangularisation is uncomputed); forming Q, they are recomputed from the reflected C, where they
are a unit multiple of themselves, and so uncompute themselves (``reflect_columns``).
Unit reflectors also keep every intermediate at the magnitude of A: v^H v would overflow or
underflow at entries beyond about 1e154 or below 1e-154. The triangularisation runs in a work copy
of A and is uncomputed after Q and R are copied out (compute-copy-uncompute), so, as with
Gram-Schmidt, nothing is kept beyond Q and R.

``householder`` applies one reflection at a time, to all the columns it acts on, sweeping them row
by row (LAPACK's geqr2). ``blocked_householder`` is blocked as LAPACK's geqrf: each panel of
``PANEL`` columns is reduced the same way (in sub-blocks of ``SUBPANEL``), and the rest of the
matrix, and Q, receive its reflectors at once in their compact WY form I - Y T Y^H (matrix
products, BLAS-3 on the CPU); from ``COPIED_PANEL_FROM`` columns each panel is reduced in a contiguous
copy. Forming Q, ``reflect_block`` uncomputes its own coefficients as
``reflect_columns`` does, by the blocked form of the same identity; triangularising,
``reflect_block_kept`` keeps them until the triangularisation is uncomputed, one product fewer.
Shapes and conventions as in ``gram_schmidt``: Q (m, p), R (p, n), diag(R) real nonnegative; or
the complete factorisation, Q (m, m) and R (m, n) with zero rows below p: ``householder`` reads the
width of Q, and a Q of q columns (p <= q <= m) receives the first q columns of the product of the
reflectors, which complete the basis.
"""
import numpy as np

from revdiff.function import reversible
from revdiff.language import routine, zero, zeros
from revdiff.programs.elementwise import add_into
from revdiff.programs.naming import named
from revdiff.programs.gram_schmidt import norm2


@reversible
def reflect_columns(C, u, adjoint):
    """C <- H C, or H^H C with ``adjoint``, for H = I - tau u u^H, u a unit (or zero) vector from
    ``householder_vector`` and tau = 2 Re(u[0]) / u[0] (2 for real u), sweeping C by rows (a
    row-major C is read contiguously). With s = tau (conj(tau) with ``adjoint``) and v = s conj(u),
    the coefficients d = C^T v = s conj(C^H u) are subtracted as a rank-one update (C -= u d^T, in all
    s u u^H C; the scale rides in v, so that no gradient of s is summed over C) and then uncomputed
    by the same product of the reflected C, whose C^T v is (1 - s) d: |1 - s| = 1, so d turned into
    -(1 - s) d (times 1 for real data, exactly) cancels against it. For real data v = 2 u, so d is
    2 C^T u and C gets the bits of C -= 2 u (u^T C) (barring products that underflow)."""
    d = zeros(C.shape[1], C.dtype)
    s = zero(C.dtype)
    v = zeros(len(u), C.dtype)
    with routine:
        s += (np.conj(2 * u[0].real / u[0]) if adjoint else 2 * u[0].real / u[0]) if u[0] != 0 else 0.0
        v[:] += s * np.conj(u)
    d[:] += C.T @ v
    C[:, :] -= np.outer(u, d)
    d[:] *= -(1.0 - s)
    d[:] += C.T @ v
    ~routine
    del v
    del d
    del s


#: ``householder_vector`` computes c |v| and multiplies x by r = 1 / (c |v|), c a power of two chosen
#: from |x| (|v| lies between 1.41 |x| and 2 |x|) so that c |x|, c |v| and r are normal numbers in
#: float32 and float64 alike. c = ``PRESCALE`` below ``PRESCALE_BELOW``, where |v| may be subnormal
#: (1 / |v| overflows in float32 below about 3e-39) and c |v| then lies between 1.41 2^-974 (float64's
#: smallest subnormal times c; 1.41 2^-49 in float32) and 2^-21. c = 1 / ``PRESCALE`` above
#: ``PRESCALE_ABOVE``, where 2 |x| may overflow and 1 / |v| be subnormal (above 2^126 in float32) and
#: c |v| then lies between 2^23 and 2^29 in float32 (2^925 in float64). c = 1 between. c x is exact:
#: x is scaled up, or down by 2^-100, where only entries 2^-100 |x| times smaller than the largest,
#: negligible in u, can lose digits.
PRESCALE = 2.0 ** 100
PRESCALE_BELOW = 1e-37
PRESCALE_ABOVE = 1e37


@reversible
def householder_vector(u, x):
    """u += v / |v| for v = x + ph |x| e_1, whose reflection H = I - tau u u^H (``reflect_columns``)
    maps x to the real -ph |x| e_1 (LAPACK's larfg: for complex x, H is not Hermitian, and tau is
    complex); u stays 0 when x = 0. ph = -1 where Re(x[0]) < -|x| / 1000, else 1: no cancellation in
    v[0], and ph does not move with x (no derivative of a phase, which grows like 1 / |x[0]|); the
    uncompute recomputes ph from x restored to rounding, which cannot cross the threshold unless
    Re(x[0]) lies within rounding of it. nv = c |v| = 2 sqrt(c |x|) sqrt((c |x| + ph c Re(x[0])) / 2)
    (c: see ``PRESCALE``), in which nothing overflows, no subnormal is halved and |v| itself, which may
    be neither normal nor finite, is never formed; |v| >= 1.41 |x|, so every |c x_i| r and
    |c |x|| r is below 0.71. x is multiplied by the reciprocal r = 1 / (c |v|), not divided by |v|
    entry by entry: divisions cost the adjoint ten times a multiplication, and choosing between the
    two per entry would cost a branch per entry. Where |x| itself is subnormal, its rounding (the
    norm of a column of subnormals keeps only their digits) makes u a unit vector only to those
    digits, and the uncompute's checks refuse what they cannot verify (the high-level functions
    scale A's columns to magnitude 1 first)."""
    nrm = zero(x.real.dtype)
    ph = zero(x.real.dtype)
    c = zero(x.real.dtype)
    nv = zero(x.real.dtype)
    r = zero(x.real.dtype)
    with routine:
        norm2(nrm, x)
        ph += -1.0 if x[0].real < -0.001 * nrm else 1.0
        c += PRESCALE if nrm < PRESCALE_BELOW else 1.0 / PRESCALE if nrm > PRESCALE_ABOVE else 1.0
        nv += 2 * np.sqrt(c * nrm) * np.sqrt(0.5 * (c * nrm) + 0.5 * ph * (c * x[0].real)) if nrm > 0 else 0.0
        r += 1.0 / nv if nv > 0 else 0.0
    for i in range(len(x)):
        u[i] += (x[i] * c) * r
    u[0] += (nrm * c) * r * ph
    ~routine
    del r
    del nv
    del c
    del ph
    del nrm


#: columns per panel of the blocked triangularisation (LAPACK's dgeqrf block size)
PANEL = 32


@reversible
def reflect_columns_kept(C, u, d):
    """C <- H C as ``reflect_columns`` (the same bits for C), its coefficients kept: d += C^T v,
    d a view of the caller's that must be zero on entry and stays until the whole triangularisation
    is uncomputed, so that a reflection reads C twice, not three times, and its inverse subtracts
    the very d the forward did. The product goes into a local e first and is copied into d
    (d = 0 + e = e exactly, so e -= d frees e exactly; uncomputing, e -= C^T v leaves rounding that
    e's deallocation check allows): as the first write of an ancilla of this block, the product
    needs no undo in the adjoint (``passes/adjoint.py``, dead undos), where d's would need one."""
    s = zero(C.dtype)
    v = zeros(len(u), C.dtype)
    e = zeros(C.shape[1], C.dtype)
    with routine:
        s += 2 * u[0].real / u[0] if u[0] != 0 else 0.0
        v[:] += s * np.conj(u)
    e[:] += C.T @ v
    d[:] += e
    C[:, :] -= np.outer(u, e)
    e[:] -= d
    ~routine
    del e
    del v
    del s


@reversible
def reflect_block(C, Y):
    """C <- H_0^H ... H_{b-1}^H C = (I - Y T Y^H) C for the reflectors H_j = I - tau_j y_j y_j^H of
    the unit (or zero) vectors in Y's columns (``reflect_columns``), y_j zero above row j. T is upper
    triangular (LAPACK's larft, forward and columnwise, for the conj(tau_j)): T[j, j] = conj(tau_j)
    (0 for a zero reflector, whose y_j[j] is 0) and T[:j, j] = -T[j, j] T[:j, :j] G[:j, j],
    G = Y^H Y. The coefficients W = T Y^H C that it subtracts (Y W) uncompute themselves as
    ``reflect_columns``' d does: I - Y T Y^H unitary makes T + T^H = T^H G T (a zero reflector's row
    and column of T are zero, and it still holds), so after the update T^H Y^H C_new = -W, and
    Y^H C_new is Y^H C - G W, one small product from the Y^H C at hand; only that is then
    uncomputed against C. Three products of C's size in all."""
    b = Y.shape[1]
    n = C.shape[1]
    G = zeros((b, b), C.dtype)
    T = zeros((b, b), C.dtype)
    Th = zeros((b, b), C.dtype)
    S = zeros((b, n), C.dtype)
    W = zeros((b, n), C.dtype)
    with routine:
        G[:, :] += Y.conj().T @ Y
        block_factor(T, Th, Y, G)
    S[:, :] += Y.conj().T @ C
    W[:, :] += T @ S
    C[:, :] -= Y @ W
    S[:, :] -= G @ W
    W[:, :] += Th @ S
    S[:, :] -= Y.conj().T @ C
    ~routine
    del W
    del S
    del Th
    del T
    del G


@reversible
def reflect_vector_kept(x, u, d):
    """x <- H^H x: the reflection of ``reflect_columns`` with ``adjoint`` for one vector, as a
    dot product and an axpy (a one-column C would run a loop per row; complex results may differ from
    its in the last bit), its coefficient kept: d[0] += u^H x (without s), d a one-entry view, zero
    on entry, of an ancilla of the program that uncomputes the reflection and checks d is back to zero
    (``projection.reflected_projection``). x -= s d[0] u, s as in ``reflect_columns`` with
    ``adjoint``. x is read twice, not three times as by a reflection that uncomputes its own
    coefficient, and d being no ancilla here, u and x are not scanned for a zero check's scale (the
    owner's scale of d is at least d's magnitude and that of the x it reflected)."""
    s = zero(x.dtype)
    with routine:
        s += np.conj(2 * u[0].real / u[0]) if u[0] != 0 else 0.0
    d[0] += np.vdot(u, x)
    x[:] -= (s * d[0]) * u
    ~routine
    del s


@reversible
def apply_reflectors(x, V, coefficients):
    """x <- H_0^H ... H_{p-1}^H x for the reflectors in V's columns, one reflection at a time, with
    ``coefficients`` (p,) zero on entry: entry k receives u_k^H x as reflection k meets x
    (``reflect_vector_kept``), for the caller to uncompute."""
    p = V.shape[1]
    for k in range(p - 1, -1, -1):
        reflect_vector_kept(x[k:], V[k:, k], coefficients[k:k + 1])


@reversible
def form_q(X, V):
    """X <- H_0^H ... H_{p-1}^H X (``apply_reflectors`` on a matrix) for an X that starts as E_q D
    (``_householder``): reflection k (they come from the last) meets X's columns before k still zero
    in rows k and below, so it reflects only X[k:, k:]."""
    p = V.shape[1]
    for k in range(p - 1, -1, -1):
        reflect_columns(X[k:, k:], V[k:, k], True)


@reversible
def block_factor(T, Th, Y, G):
    """T += the upper triangular factor of H_0^H ... H_{b-1}^H = I - Y T Y^H for the reflectors in Y's
    columns and G = Y^H Y (``reflect_block``), and Th += T^H, lower triangular (what both block
    reflections apply)."""
    b = Y.shape[1]
    for j in range(b):
        T[j, j] += np.conj(2 * Y[j, j].real / Y[j, j]) if Y[j, j] != 0 else 0.0
        for i in range(j):
            for k in range(i, j):
                T[i, j] -= T[j, j] * T[i, k] * G[k, j]
    for i in range(b):
        for j in range(i + 1):
            Th[i, j] += np.conj(T[j, i])


@reversible
def reflect_block_kept(C, Y, K):
    """C <- H_{b-1} ... H_0 C = (I - Y T^H Y^H) C (``reflect_block``'s adjoint), in two products of
    C's size instead of three: the coefficients it subtracts, K += T^H Y^H C, stay in K (a zero view of the caller's,
    uncomputed with the whole triangularisation), and S = Y^H C is uncomputed from them as
    S -= (T^H)^-1 K, a product with a b x b matrix. The inverse of the lower triangular T^H is
    built by substitution; a zero reflector's row and column of T^H are zero, and so are its row of
    S and K, and its row and column of the inverse (the inverse of the other reflectors' part)."""
    b = Y.shape[1]
    n = C.shape[1]
    G = zeros((b, b), C.dtype)
    T = zeros((b, b), C.dtype)
    L = zeros((b, b), C.dtype)
    Li = zeros((b, b), C.dtype)
    S = zeros((b, n), C.dtype)
    with routine:
        G[:, :] += Y.conj().T @ Y
        block_factor(T, L, Y, G)
        for j in range(b):  # Li = L^-1, column by column, each entry from the ones above it
            Li[j, j] += 1.0 / L[j, j] if L[j, j] != 0 else 0.0
            for i in range(j + 1, b):
                for k in range(j, i):
                    Li[i, j] -= L[i, k] * Li[k, j] / L[i, i] if L[i, i] != 0 else 0.0
    S[:, :] += Y.conj().T @ C
    K[:, :] += L @ S
    S[:, :] -= Li @ K
    C[:, :] -= Y @ K
    ~routine
    del S
    del Li
    del L
    del T
    del G


def _blocked_triangularization(name: str, panel: int, reduce_panel, reduce_copied, copied_from: int,
                               doc: str):
    """``triangularize_columns`` panel by panel (the first p = V.shape[1] columns of W reduced, the
    later ones reflected): each panel of ``panel`` columns reduced by ``reduce_panel`` (by
    ``reduce_copied`` where W has ``copied_from`` columns or more), its reflectors then applied to
    the columns after it as one block (``reflect_block_kept``, whose coefficients K keeps: K (p, n)
    zero on entry, each block's in its own rows and columns)."""

    @reversible
    def blocked(W, V, K):
        n = W.shape[1]
        p = V.shape[1]
        for k in range(0, p, panel):
            b = min(panel, p - k)
            if n >= copied_from:
                reduce_copied(W[k:, k:k + b], V[k:, k:k + b], K[k:k + b, k:k + b])
            else:
                reduce_panel(W[k:, k:k + b], V[k:, k:k + b], K[k:k + b, k:k + b])
            if k + b < n:
                reflect_block_kept(W[k:, k + b:], V[k:, k:k + b], K[k:k + b, k + b:])

    return named(blocked, name, doc)


@reversible
def triangularize_columns(W, V, K):
    """Reduce the first p columns of W (m, n) to upper triangular form in place, p = V.shape[1] (at
    most min(m, n)), column by column: the k-th reflection maps W[k:, k] to a multiple of e_1 and is
    applied to W[k:, k + 1:] in the same sweep, so that columns after p (a right-hand side) receive
    every reflection; column k of V receives the k-th unit reflector and row k of K (p, n), zero on
    entry, its coefficients (``reflect_columns_kept``)."""
    p = V.shape[1]
    for k in range(p):
        householder_vector(V[k:, k], W[k:, k])
        reflect_columns_kept(W[k:, k:], V[k:, k], K[k, k:])


#: columns per sub-panel: a panel's own columns are reduced in blocks of this many in turn
SUBPANEL = 8
triangularize_panel = _blocked_triangularization(
    "triangularize_panel", SUBPANEL, triangularize_columns, triangularize_columns, 0,  # never copied: one callee
    f"``triangularize_columns`` on a panel, in blocks of {SUBPANEL} columns: the panel's own trailing columns "
    "receive each block's reflections as one block reflection.")
#: ``triangularize_blocked`` reduces each panel in a contiguous copy (``triangularize_panel_copied``)
#: in matrices of this many columns or more, where a walk down a panel's columns in place steps a
#: page (4 KiB) a row in float64. One core (CPU time per projection gradient, minima and medians of 3
#: alternating rounds, the copy over in place): float64 0.80-0.81 at 2000 x 1000, 0.79-0.81 at
#: 1400 x 700, 0.92-0.99 at 1000 x 500, 0.98-1.04 at 800 x 400, 1.02-1.09 at 500 x 250, 1.13-1.15 at
#: 256 x 128; float32 0.80-0.85 at 2000 x 1000 but 1.13-1.16 at 1000 x 500 (rows of 2 KiB), where
#: the rule, a count of columns (the language has no test of a dtype), keeps it in place.
COPIED_PANEL_FROM = 512


@reversible
def triangularize_panel_copied(W, V, K):
    """``triangularize_panel`` on a contiguous copy of the panel W, whose rows lie a row of the
    matrix apart in place, moved in and out exactly (W minus its copy is zero), its reflectors written
    into a contiguous Vc and added into V's panel (zero on entry), Vc then uncomputed against it."""
    m, b = W.shape
    Wc = zeros((m, b), W.dtype)
    Vc = zeros((m, b), V.dtype)
    add_into(Wc, W)
    ~add_into(W, Wc)
    triangularize_panel(Wc, Vc, K)
    add_into(W, Wc)
    ~add_into(Wc, W)
    add_into(V, Vc)
    ~add_into(Vc, V)
    del Vc
    del Wc


triangularize_blocked = _blocked_triangularization(
    "triangularize_blocked", PANEL, triangularize_panel, triangularize_panel_copied, COPIED_PANEL_FROM,
    f"``triangularize_columns`` in panels of {PANEL} columns (each reduced by ``triangularize_panel``, in a "
    f"contiguous copy from {COPIED_PANEL_FROM} columns), each panel's reflections applied to the columns after it "
    "as one block reflection.")


@reversible
def form_q_blocked(X, V):
    """``form_q`` a panel at a time from the last, each panel's reflections as one block on X[k:, k:]."""
    p = V.shape[1]
    for k in range((p - 1) // PANEL * PANEL, -1, -PANEL):
        b = min(PANEL, p - k)
        reflect_block(X[k:, k:], V[k:, k:k + b])


@reversible
def upper_factor(R, W):
    """R += D^H W for the triangularised W, D the phases of its diagonal (1 where it is 0): R's
    diagonal is real and nonnegative."""
    m, n = W.shape
    p = min(m, n)
    for k in range(p):
        R[k, k] += abs(W[k, k])  # conj(w / |w|) w, written as the real number it is (exactly)
        for j in range(k + 1, n):
            R[k, j] += np.conj(W[k, k] / abs(W[k, k]) if W[k, k] != 0 else 1) * W[k, j]


def _householder(name: str, triangularize_, form_q_, doc: str):
    """Householder QR with the given triangularisation (its kept coefficients in a (p, n) K) and
    formation of Q."""

    @reversible
    def householder(Q, R, A):
        m, n = A.shape
        p = min(m, n)
        q = Q.shape[1]
        W = zeros((m, n), A.dtype)
        V = zeros((m, p), A.dtype)
        K = zeros((p, n), A.dtype)
        X = zeros((m, q), A.dtype)
        with routine:
            add_into(W, A)
            triangularize_(W, V, K)
            # Q = H_0^H ... H_{p-1}^H E_q D with D the phases of diag(W) (1 beyond p), so that
            # R = D^H W has a nonnegative diagonal
            for k in range(p):
                X[k, k] += W[k, k] / abs(W[k, k]) if W[k, k] != 0 else 1
            for k in range(p, q):
                X[k, k] += 1
            form_q_(X, V)
        add_into(Q, X)
        upper_factor(R, W)
        ~routine
        del X
        del K
        del V
        del W

    return named(householder, name, doc)


householder = _householder(
    "householder", triangularize_columns, form_q,
    """QR by Householder reflections, one column at a time: orthogonal to O(u) at any condition
    number. Q has p = min(m, n) columns (thin) or m (complete; R then has m rows, those below p zero).""")
blocked_householder = _householder(
    "blocked_householder", triangularize_blocked, form_q_blocked,
    f"""``householder`` blocked: panels of {PANEL} columns, each applied to the rest of A and to Q as one
    block reflector by matrix products. The same factorisation to rounding, faster beyond one panel
    of BLAS-sized matrices (where the method ``householder`` runs it: ``methods.chosen_method``).""")
