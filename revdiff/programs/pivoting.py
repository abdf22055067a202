"""The column order of QR with column pivoting (Businger and Golub): at step k, of the columns not
yet taken, the one farthest from the span of those taken (the first of equal ones), and that
distance, |R[k, k]| of the pivoted factor. The high-level functions then run the QR programs on
A[:, perm]: the gradient is that of QR of A[:, perm] with perm fixed (the choice has none).

The choice is made here, by a compiled Householder triangularisation that keeps nothing, and not
by a reversible program: a program would have to uncompute the choice, and its uncompute sees the
reduced columns restored only to rounding, so equal residuals (an orthogonal matrix's) and those at
rounding level (every rank-deficient matrix has them) would choose differently going back.
"""
from __future__ import annotations

import numba
import numpy as np

from revdiff.runtime.cache import cached_njit


@cached_njit(nogil=True, parallel=True)
def _pivots(A, perm, residuals):
    b, m, n = A.shape
    p = min(m, n)
    for e in numba.prange(b):
        W = A[e].copy()
        for c in range(n):
            perm[e, c] = c
        for k in range(p):
            j, best = k, -1.0
            for c in range(k, n):  # the remaining parts' norms, scaled by their largest entry
                big = 0.0
                for i in range(k, m):
                    big = max(big, abs(W[i, c]))
                s = 0.0
                if big > 0.0:
                    for i in range(k, m):
                        s += abs(W[i, c] / big) ** 2
                norm = big * np.sqrt(s)
                if norm > best:
                    j, best = c, norm
            if j != k:
                for i in range(m):
                    W[i, k], W[i, j] = W[i, j], W[i, k]
                perm[e, k], perm[e, j] = perm[e, j], perm[e, k]
            residuals[e, k] = best
            if best == 0.0:
                continue
            x0 = W[k, k]
            phase = x0 / abs(x0) if x0 != 0 else 1.0
            nv = np.sqrt(2.0) * np.sqrt(best) * np.sqrt(best + abs(x0))  # |x + phase |x| e_1|, no overflow
            W[k, k] = x0 + phase * best
            for i in range(k, m):  # the unit reflector u, in place of the column it zeroes
                W[i, k] = W[i, k] / nv
            for c in range(k + 1, n):
                d = 0.0 * W[k, c]
                for i in range(k, m):
                    d += np.conj(W[i, k]) * W[i, c]
                for i in range(k, m):
                    W[i, c] -= 2.0 * d * W[i, k]


def column_pivots(A, xp=np) -> tuple:
    """(perm, residuals) for a batch of finite matrices A (b, m, n) of any magnitude: perm (b, n)
    int64 with the pivoted column order, residuals (b, min(m, n)) the distances |R[k, k]| of A
    scaled by a power of two per matrix (its largest entry in [1/2, 1): exact, so the order and
    the ratios, all that callers read, are A's own, and nothing near the overflow threshold
    overflows in the norms and reflectors), non-increasing. GPU arrays are copied to the host for it
    and the results back."""
    host = A if xp is np else xp.asnumpy(A)
    host = np.array(host, dtype=np.complex128 if np.iscomplexobj(host) else np.float64, order="C")
    b, m, n = host.shape
    if host.size:
        largest = np.abs(host).reshape(b, -1).max(axis=1)
        exponent = np.frexp(np.where(largest > 0, largest, 1.0))[1]
        host = np.ldexp(host, -exponent[:, None, None]) if not np.iscomplexobj(host) else \
            np.ldexp(host.real, -exponent[:, None, None]) + 1j * np.ldexp(host.imag, -exponent[:, None, None])
    perm, residuals = np.empty((b, n), np.int64), np.empty((b, min(m, n)))
    if host.size:
        _pivots(host, perm, residuals)
    else:
        perm[:] = np.arange(n)
    return (perm, residuals) if xp is np else (xp.asarray(perm), xp.asarray(residuals))
