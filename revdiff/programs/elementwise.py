"""Small building blocks shared by the QR programs."""
from revdiff.function import reversible


@reversible
def add_into(W, A):
    """W += A, element by element (a copy when W is a zero ancilla)."""
    m, n = A.shape
    for i in range(m):
        for j in range(n):
            W[i, j] += A[i, j]
