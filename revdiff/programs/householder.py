"""Householder QR written in the reversible language.

A reflection H = I - 2 v v^H / (v^H v) is its own inverse: the coefficient d = v^H x / v^H v that
it subtracts is recomputed from the reflected x, where it equals -d, and so uncomputes itself.
The triangularisation runs in a work copy of A and is uncomputed after Q and R are copied out
(compute-copy-uncompute), so, as with Gram-Schmidt, nothing is kept beyond Q and R.
Shapes and conventions as in ``gram_schmidt``: Q (m, p), R (p, n), diag(R) real positive.
"""
import numpy as np

from ..function import reversible
from ..language import routine, zero, zeros
from .elementwise import add_into
from .gram_schmidt import norm2


@reversible
def reflect(x, v):
    """x <- (I - 2 v v^H / v^H v) x; the identity when v = 0."""
    vv = zero(float)
    d = zero(x.dtype)
    with routine:
        for i in range(len(v)):
            vv += (v[i] * np.conj(v[i])).real
    if vv > 0:
        for i in range(len(v)):
            d += np.conj(v[i]) * x[i] / vv
        for i in range(len(v)):
            x[i] -= 2 * v[i] * d
        for i in range(len(v)):
            d += np.conj(v[i]) * x[i] / vv
    ~routine
    del d
    del vv


@reversible
def householder_vector(v, x):
    """v += x + phase(x[0]) |x| e_1: the reflection along v maps x to -phase(x[0]) |x| e_1."""
    nrm = zero(float)
    with routine:
        norm2(nrm, x)
    for i in range(len(x)):
        v[i] += x[i]
    v[0] += nrm * (x[0] / abs(x[0]) if x[0] != 0 else 1)
    ~routine
    del nrm


@reversible
def householder_triangularize(W, V):
    """Reduce W to upper triangular form in place; column k of V receives the k-th reflector."""
    m, n = W.shape
    p = min(m, n)
    for k in range(p):
        householder_vector(V[k:, k], W[k:, k])
        for j in range(k, n):
            reflect(W[k:, j], V[k:, k])


@reversible
def householder(Q, R, A):
    """QR by Householder reflections: orthogonal to O(u) at any condition number."""
    m, n = A.shape
    p = min(m, n)
    W = zeros((m, n), A.dtype)
    V = zeros((m, p), A.dtype)
    X = zeros((m, p), A.dtype)
    with routine:
        add_into(W, A)
        householder_triangularize(W, V)
        # Q = H_0 ... H_{p-1} E_p D with D the phases of diag(W), so that R = D^H W has a positive diagonal
        for k in range(p):
            X[k, k] += W[k, k] / abs(W[k, k]) if W[k, k] != 0 else 1
        for k in range(p - 1, -1, -1):
            for j in range(p):
                reflect(X[k:, j], V[k:, k])
    add_into(Q, X)
    for k in range(p):
        for j in range(k, n):
            R[k, j] += np.conj(W[k, k] / abs(W[k, k]) if W[k, k] != 0 else 1) * W[k, j]
    ~routine
    del X
    del V
    del W
