"""Householder QR written in the reversible language.

Each reflector is stored as a unit vector u, so a reflection H = I - 2 u u^H needs no norm: the
coefficient d = u^H x that it subtracts is recomputed from the reflected x, where it equals -d,
and so uncomputes itself; u = 0 (a zero column) reflects nothing. Unit reflectors also keep every
intermediate at the magnitude of A: v^H v would overflow or underflow at entries
beyond about 1e154 or below 1e-154.
The triangularisation runs in a work copy of A and is uncomputed after Q and R are copied out
(compute-copy-uncompute), so, as with Gram-Schmidt, nothing is kept beyond Q and R.
Shapes and conventions as in ``gram_schmidt``: Q (m, p), R (p, n), diag(R) real nonnegative; or
the complete factorisation, Q (m, m) and R (m, n) with zero rows below p: ``householder`` reads the
width of Q, and a Q of q columns (p <= q <= m) receives the first q columns of the product of the
reflectors, which complete the basis.
"""
import numpy as np

from revdiff.function import reversible
from revdiff.language import routine, zero, zeros
from revdiff.programs.elementwise import add_into
from revdiff.programs.gram_schmidt import norm2


@reversible
def reflect(x, u):
    """x <- (I - 2 u u^H) x for a unit (or zero) vector u."""
    d = zero(x.dtype)
    for i in range(len(u)):
        d += np.conj(u[i]) * x[i]
    for i in range(len(u)):
        x[i] -= 2 * u[i] * d
    for i in range(len(u)):
        d += np.conj(u[i]) * x[i]
    del d


@reversible
def householder_vector(u, x):
    """u += v / |v| for v = x + ph |x| e_1, whose reflection maps x to -ph |x| e_1; u stays 0 when
    x = 0. ph is the phase of x[0] (no cancellation in v[0]) where |x[0]| > |x| / 1000, else 1 (none
    either): the uncompute recomputes ph from x restored to rounding, and a phase read off an x[0]
    at rounding level (a zero entry of A) would flip. |v| = sqrt(2 |x| (|x| + Re(conj(ph) x[0]))),
    written so that it cannot overflow."""
    nrm = zero(x.real.dtype)
    ph = zero(x.dtype)
    nv = zero(x.real.dtype)
    with routine:
        norm2(nrm, x)
        ph += x[0] / abs(x[0]) if abs(x[0]) > 0.001 * nrm else 1
        nv += 2 * np.sqrt(nrm) * np.sqrt(0.5 * nrm + 0.5 * (np.conj(ph) * x[0]).real) if nrm > 0 else 0.0
    for i in range(len(x)):
        u[i] += x[i] / nv if nv > 0 else 0.0
    u[0] += nrm / nv * ph if nv > 0 else 0.0
    ~routine
    del nv
    del ph
    del nrm


@reversible
def householder_triangularize(W, V):
    """Reduce W to upper triangular form in place; column k of V receives the k-th unit reflector."""
    m, n = W.shape
    p = min(m, n)
    for k in range(p):
        householder_vector(V[k:, k], W[k:, k])
        for j in range(k, n):
            reflect(W[k:, j], V[k:, k])


@reversible
def householder(Q, R, A):
    """QR by Householder reflections: orthogonal to O(u) at any condition number. Q has p = min(m, n)
    columns (thin) or m (complete; R then has m rows, those below p zero)."""
    m, n = A.shape
    p = min(m, n)
    q = Q.shape[1]
    W = zeros((m, n), A.dtype)
    V = zeros((m, p), A.dtype)
    X = zeros((m, q), A.dtype)
    with routine:
        add_into(W, A)
        householder_triangularize(W, V)
        # Q = H_0 ... H_{p-1} E_q D with D the phases of diag(W) (1 beyond p), so that R = D^H W has
        # a nonnegative diagonal
        for k in range(p):
            X[k, k] += W[k, k] / abs(W[k, k]) if W[k, k] != 0 else 1
        for k in range(p, q):
            X[k, k] += 1
        for k in range(p - 1, -1, -1):
            for j in range(q):
                reflect(X[k:, j], V[k:, k])
    add_into(Q, X)
    for k in range(p):
        R[k, k] += abs(W[k, k])  # conj(w / |w|) w, written as the real number it is (exactly)
        for j in range(k + 1, n):
            R[k, j] += np.conj(W[k, k] / abs(W[k, k]) if W[k, k] != 0 else 1) * W[k, j]
    ~routine
    del X
    del V
    del W
