"""High-precision reference gradients (mpmath, 60 significant digits by default), against which
``revdiff compare`` measures every method. Exact formulas evaluated in high precision: at
kappa <= 1e12 the normal equations and Gram-Schmidt lose at most 24 of the 60 digits."""
from __future__ import annotations

import numpy as np


def _mp():
    import mpmath
    return mpmath


def _to_numpy(M, dtype) -> np.ndarray:
    cplx = np.issubdtype(dtype, np.complexfloating)
    return np.array([[complex(M[i, j]) if cplx else float(M[i, j]) for j in range(M.cols)] for i in range(M.rows)],
                    dtype=dtype)


def _widen(A: np.ndarray) -> np.ndarray:
    return A.astype(np.complex128 if np.iscomplexobj(A) else np.float64)


def projection_grad(A: np.ndarray, y: np.ndarray, gz: np.ndarray, dps: int = 60) -> np.ndarray:
    """Golub-Pereyra's gradient of z = A A^+ y with respect to A, via the normal equations."""
    mp = _mp()
    A, y, gz = _widen(A), _widen(y), _widen(gz)
    with mp.workdps(dps):
        Am = mp.matrix(A.tolist())
        ym, gm = mp.matrix(y.tolist()), mp.matrix(gz.tolist())
        AH = Am.H
        G = AH * Am
        x = mp.lu_solve(G, AH * ym)
        w = mp.lu_solve(G, AH * gm)
        r = ym - Am * x
        pg = Am * w
        m, n = A.shape
        out = mp.matrix(m, n)
        for i in range(m):
            for j in range(n):
                out[i, j] = (gm[i] - pg[i]) * mp.conj(x[j]) + r[i] * mp.conj(w[j])
        return _to_numpy(out, A.dtype)


def projection_grad_factored(B: np.ndarray, C: np.ndarray, y: np.ndarray, gz: np.ndarray, dps: int = 60) -> np.ndarray:
    """Golub-Pereyra's gradient for A = B C of rank r (B m x r, C r x n, both of rank r), exact in
    high precision: P = B (B^H B)^-1 B^H and A^+ = C^H (C C^H)^-1 (B^H B)^-1 B^H, the derivative of
    the projection onto the column space along directions that keep the rank."""
    mp = _mp()
    B, C, y, gz = _widen(B), _widen(C), _widen(y), _widen(gz)
    with mp.workdps(dps):
        Bm, Cm = mp.matrix(B.tolist()), mp.matrix(C.tolist())
        ym, gm = mp.matrix(y.tolist()), mp.matrix(gz.tolist())
        BH, CH = Bm.H, Cm.H
        G, H = BH * Bm, Cm * CH

        def pinv_times(v):  # A^+ v
            return CH * mp.lu_solve(H, mp.lu_solve(G, BH * v))

        def projected(v):  # P v
            return Bm * mp.lu_solve(G, BH * v)

        x, w = pinv_times(ym), pinv_times(gm)
        r, pg = ym - projected(ym), projected(gm)
        m, n = B.shape[0], C.shape[1]
        out = mp.matrix(m, n)
        for i in range(m):
            for j in range(n):
                out[i, j] = (gm[i] - pg[i]) * mp.conj(x[j]) + r[i] * mp.conj(w[j])
        return _to_numpy(out, B.dtype)


def _qr(Am, mp):
    """Thin QR by modified Gram-Schmidt in working precision, diag(R) positive real."""
    m, n = Am.rows, Am.cols
    Q, R = Am.copy(), mp.zeros(n, n)
    for k in range(n):
        for j in range(k):
            R[j, k] = sum(mp.conj(Q[i, j]) * Q[i, k] for i in range(m))
            for i in range(m):
                Q[i, k] -= Q[i, j] * R[j, k]
        R[k, k] = mp.sqrt(sum(abs(Q[i, k]) ** 2 for i in range(m)))
        for i in range(m):
            Q[i, k] /= R[k, k]
    return Q, R


def _qr_grad_square_or_tall(Am, gQ, gR, mp):
    Q, R = _qr(Am, mp)
    M = R * gR.H - gQ.H * Q
    n = M.rows
    C = mp.matrix(n, n)  # copyltu(M): Hermitian from the lower triangle, real diagonal
    for i in range(n):
        for j in range(n):
            C[i, j] = M[i, j] if i > j else (mp.conj(M[j, i]) if i < j else mp.re(M[i, i]))
    B = gQ + Q * C
    return B * mp.inverse(R).H, Q  # X R^H = B


def qr_grad(A: np.ndarray, gQ: np.ndarray, gR: np.ndarray, dps: int = 60) -> np.ndarray:
    """Gradient of Re<gQ, Q> + Re<gR, R> with respect to A for Q R = A (thin, diag(R) > 0);
    wide A by splitting A = [X Y] with X square (Q depends on X only, R = [R_X, Q^H Y])."""
    mp = _mp()
    A, gQ, gR = _widen(A), _widen(gQ), _widen(gR)
    m, n = A.shape
    with mp.workdps(dps):
        if m >= n:
            gA, _ = _qr_grad_square_or_tall(mp.matrix(A.tolist()), mp.matrix(gQ.tolist()), mp.matrix(gR.tolist()), mp)
            return _to_numpy(gA, A.dtype)
        X, Y = mp.matrix(A[:, :m].tolist()), mp.matrix(A[:, m:].tolist())
        gR1, gR2 = mp.matrix(gR[:, :m].tolist()), mp.matrix(gR[:, m:].tolist())
        Q, _ = _qr(X, mp)
        gX, _ = _qr_grad_square_or_tall(X, mp.matrix(gQ.tolist()) + Y * gR2.H, gR1, mp)
        return np.concatenate([_to_numpy(gX, A.dtype), _to_numpy(Q * gR2, A.dtype)], axis=1)


def normalize_grad(x: np.ndarray, gy: np.ndarray, dps: int = 60) -> np.ndarray:
    """Gradient of Re<gy, x / |x|> with respect to x."""
    mp = _mp()
    x, gy = _widen(x), _widen(gy)
    with mp.workdps(dps):
        xm = [mp.mpmathify(v) for v in x.tolist()]
        nrm = mp.sqrt(mp.fsum(abs(v) ** 2 for v in xm))
        ym = [v / nrm for v in xm]
        dot = mp.re(mp.fsum(mp.conj(a) * b for a, b in zip(ym, gy.tolist())))
        out = [(g - a * dot) / nrm for a, g in zip(ym, gy.tolist())]
        return np.array([complex(v) if np.iscomplexobj(x) else float(v) for v in out], dtype=x.dtype)
