"""Closed-form adjoints as PyTorch, JAX and TensorFlow use them, for comparison with revdiff's
reversible programs. Batched over leading dimensions; LAPACK QR is normalised to a positive real
diagonal of R so that results are comparable with Gram-Schmidt."""
from __future__ import annotations

import numpy as np


def _h(x: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(x, -1, -2))


def qr_positive(A: np.ndarray) -> tuple:
    """LAPACK's thin QR with the sign (phase) of R's diagonal moved into Q."""
    Q, R = np.linalg.qr(A)
    d = np.diagonal(R, axis1=-2, axis2=-1)
    phase = np.where(d == 0, 1, d / np.where(d == 0, 1, np.abs(d)))
    return Q * phase[..., None, :], R * np.conj(phase)[..., :, None]


def _copyltu(M: np.ndarray) -> np.ndarray:
    """Hermitian matrix from the lower triangle of M, with a real diagonal."""
    low = np.tril(M, -1)
    return low + _h(low) + np.real(np.triu(np.tril(M)))


def _identity_like(X: np.ndarray) -> np.ndarray:
    """The identity of X's (square) shape and type, also for CuPy arrays (np.eye(like=) passes
    CuPy arguments it does not take)."""
    return np.triu(np.tril(np.ones_like(X)))


def _solve_right_h(B: np.ndarray, R: np.ndarray) -> np.ndarray:
    """X with X R^H = B (a solve with R^H from the right)."""
    return _h(np.linalg.solve(R, _h(B)))


def qr_vjp(A: np.ndarray, gQ: np.ndarray, gR: np.ndarray) -> np.ndarray:
    """The common rule for tall or square A: gA = [gQ + Q copyltu(M)] R^-H, M = R gR^H - gQ^H Q;
    wide A by the rule of Liao et al. on its leading square block."""
    m, n = A.shape[-2:]
    if m < n:
        X, Y = A[..., :, :m], A[..., :, m:]
        Q, R = qr_positive(A)
        gR1, gR2 = gR[..., :, :m], gR[..., :, m:]
        gX = qr_vjp(X, gQ + Y @ _h(gR2), gR1)
        return np.concatenate([gX, Q @ gR2], axis=-1)
    Q, R = qr_positive(A)
    M = R @ _h(gR) - _h(gQ) @ Q
    return _solve_right_h(gQ + Q @ _copyltu(M), R)


def project_vjp(A: np.ndarray, y: np.ndarray, gz: np.ndarray) -> tuple:
    """Golub-Pereyra: for z = P y, gA = (I - P) gz x^H + r w^H, gy = P gz,
    with x = A^+ y, r = (I - P) y, w = A^+ gz (A of full column rank)."""
    Q, R = qr_positive(A)
    qy = (_h(Q) @ y[..., None])[..., 0]
    qg = (_h(Q) @ gz[..., None])[..., 0]
    x = np.linalg.solve(R, qy[..., None])[..., 0]
    w = np.linalg.solve(R, qg[..., None])[..., 0]
    r = y - (Q @ qy[..., None])[..., 0]
    pg = (Q @ qg[..., None])[..., 0]
    gA = (gz - pg)[..., :, None] * np.conj(x)[..., None, :] + r[..., :, None] * np.conj(w)[..., None, :]
    return gA, pg


def project_vjp_rank(A: np.ndarray, y: np.ndarray, gz: np.ndarray, rank: int) -> tuple:
    """Golub-Pereyra for A of rank r, through its r leading singular triplets: the derivative of the
    projection onto the column space along directions that keep the rank (as ``project_vjp``, with
    P = U_r U_r^H and the rank-r pseudoinverse A^+ = V_r S_r^-1 U_r^H)."""
    U, s, Vh = np.linalg.svd(A, full_matrices=False)
    U, s, Vh = U[..., :rank], s[..., :rank], Vh[..., :rank, :]
    pinv = _h(Vh) @ (_h(U) / s[..., :, None])
    x, w = (pinv @ y[..., None])[..., 0], (pinv @ gz[..., None])[..., 0]
    pg = (U @ (_h(U) @ gz[..., None]))[..., 0]
    r = y - (U @ (_h(U) @ y[..., None]))[..., 0]
    gA = (gz - pg)[..., :, None] * np.conj(x)[..., None, :] + r[..., :, None] * np.conj(w)[..., None, :]
    return gA, pg


def project_vjp_pinv(A: np.ndarray, y: np.ndarray, gz: np.ndarray) -> tuple:
    """z = A (A^+ y) differentiated through PyTorch's pinv rule (valid while the rank is constant)."""
    P_plus = np.linalg.pinv(A)
    x = (P_plus @ y[..., None])[..., 0]
    gA = gz[..., :, None] * np.conj(x)[..., None, :]
    gx = (_h(A) @ gz[..., None])[..., 0]
    G = gx[..., :, None] * np.conj(y)[..., None, :]  # cotangent of A^+
    gy = (_h(P_plus) @ gx[..., None])[..., 0]
    AP, PA = A @ P_plus, P_plus @ A
    Ppl_h = _h(P_plus)
    gA = gA - Ppl_h @ G @ Ppl_h \
        + (_identity_like(AP) - AP) @ _h(G) @ P_plus @ Ppl_h \
        + Ppl_h @ P_plus @ _h(G) @ (_identity_like(PA) - PA)
    return gA, gy


def normalize_vjp(x: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """y = x / |x|: gx = (gy - y Re(y^H gy)) / |x|."""
    nrm = np.linalg.norm(x, axis=-1, keepdims=True)
    y = x / nrm
    return (gy - y * np.real(np.sum(np.conj(y) * gy, axis=-1, keepdims=True))) / nrm
