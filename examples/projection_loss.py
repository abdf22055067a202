"""The gradient of the projection loss L = sum(Q Q^T y) (Q from the thin QR of a 32x16
matrix A, e.g. a network's output), by running the reversible CGS2 projection backwards; compared
with the Golub-Pereyra formula and with the pinv variant L = sum(A pinv(A) y)."""
import numpy as np

from revdiff import formulas
from revdiff import programs as P

if __name__ == "__main__":
    rng = np.random.default_rng(0)
    A, y = rng.standard_normal((32, 16)), rng.standard_normal(32)
    gz = np.ones(32)  # dL/dz for L = sum(z), z = Q Q^T y
    gA, gy = P.project_vjp(A, y, gz)
    fA, fy = formulas.project_vjp(A, y, gz)
    pA, py = formulas.project_vjp_pinv(A, y, gz)
    print(f"loss = {P.project(A, y).sum():.12f}")
    print(f"gradient of A: shape {gA.shape}, |gA| = {np.linalg.norm(gA):.12f}")
    print(f"difference to Golub-Pereyra: {np.linalg.norm(gA - fA) / np.linalg.norm(fA):.1e}")
    print(f"difference to the pinv variant: {np.linalg.norm(gA - pA) / np.linalg.norm(pA):.1e}")
    assert np.linalg.norm(gA - fA) / np.linalg.norm(fA) < 1e-12
