"""Small building blocks shared by the QR programs."""
from revdiff.function import reversible


@reversible
def add_into(W, A):
    """W += A, element by element (a copy when W is a zero ancilla)."""
    m, n = A.shape
    for i in range(m):
        for j in range(n):
            W[i, j] += A[i, j]


@reversible
def exchange(X, Y):
    """X, Y = Y, X element by element: a move into a zero X that leaves Y zero (a packed copy)."""
    m, n = X.shape
    for i in range(m):
        for j in range(n):
            X[i, j], Y[i, j] = Y[i, j], X[i, j]
