"""QR with column pivoting written in the reversible language: A[:, perm] = Q R with |R[k, k]|
non-increasing (``scipy.linalg.qr(pivoting=True)``'s convention).

The pivots are chosen as Businger and Golub choose them: at step k, of the columns not yet taken,
the one farthest from the span of those taken (the first of equal ones), its distance computed
afresh from a Householder triangularisation of a work copy of A rather than downdated. The choice
depends on the data, so the permutation is an output, computed first and uncomputed last by the
inverse, which recomputes the same choice from the same state (as Givens QR keeps its angles).
Every method then factors the permuted copy of A, so the gradient is that of QR of A[:, perm]
with perm fixed: the comparisons that chose it have no derivative.
"""
from revdiff.function import reversible
from revdiff.language import routine, zeros
from revdiff.programs.elementwise import add_into
from revdiff.programs.gram_schmidt import _named, bcgs2, cgs2, norm2
from revdiff.programs.householder import householder, householder_vector, reflect


@reversible
def farthest_column(piv, k, W):
    """piv[k] += the index c >= k of the column of W[k:, :] with the largest norm, the first of equal
    norms (k when all are zero)."""
    m, n = W.shape
    norms = zeros(n, W.real.dtype)
    best = zeros(n, W.real.dtype)  # best[c]: the largest of norms[k:c + 1]
    with routine:
        for c in range(k, n):
            norm2(norms[c], W[k:, c])
        best[k] += norms[k]
        for c in range(k + 1, n):
            best[c] += max(best[c - 1], norms[c])
    for c in range(k + 1, n):
        piv[k] += (c if norms[c] == best[n - 1] else 0) if best[c - 1] < best[n - 1] else 0
    piv[k] += k if norms[k] == best[n - 1] else 0
    ~routine
    del best
    del norms


@reversible
def column_pivots(perm, A):
    """perm += the column order of QR with column pivoting of A (perm zero on entry)."""
    m, n = A.shape
    p = min(m, n)
    W = zeros((m, n), A.dtype)
    V = zeros((m, p), A.dtype)
    piv = zeros(p, perm.dtype)
    order = zeros(n, perm.dtype)
    with routine:
        add_into(W, A)
        for c in range(n):
            order[c] += c
        for k in range(p):
            farthest_column(piv, k, W)
            for i in range(m):
                W[i, k], W[i, piv[k]] = W[i, piv[k]], W[i, k]
            order[k], order[piv[k]] = order[piv[k]], order[k]
            householder_vector(V[k:, k], W[k:, k])
            for j in range(k, n):
                reflect(W[k:, j], V[k:, k])
    for c in range(n):
        perm[c] += order[c]
    ~routine
    del order
    del piv
    del V
    del W


def _pivoted(name: str, qr_program, doc: str):
    """``qr_program`` on A[:, perm], perm chosen by ``column_pivots``."""

    @reversible
    def pivoted_qr(Q, R, perm, A):
        m, n = A.shape
        column_pivots(perm, A)
        W = zeros((m, n), A.dtype)
        with routine:
            for i in range(m):
                for c in range(n):
                    W[i, c] += A[i, perm[c]]
        qr_program(Q, R, W)
        ~routine
        del W

    return _named(pivoted_qr, name, doc)


pivoted_cgs2 = _pivoted("pivoted_cgs2", cgs2, "QR with column pivoting by cgs2: A[:, perm] = Q R.")
pivoted_bcgs2 = _pivoted("pivoted_bcgs2", bcgs2, "QR with column pivoting by bcgs2: A[:, perm] = Q R.")
pivoted_householder = _pivoted("pivoted_householder", householder,
                               "QR with column pivoting by Householder reflections: A[:, perm] = Q R (Q thin or "
                               "complete, as ``householder``).")
