"""Forward mode and second derivatives of one reversible program: a directional derivative (jvp),
Hessian-vector products (hvp) driving a Newton-CG minimisation, and the whole Hessian, all without a
tape: each is one run of a program generated from the same source."""
import numpy as np

import revdiff
from revdiff import reversible


@reversible
def rosenbrock(loss, x):
    for i in range(x.shape[0] - 1):
        loss += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2


def gradient(x: np.ndarray) -> np.ndarray:
    return revdiff.grad(rosenbrock, "loss")(0.0, x)[1]


def curvature(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """H(x) v: one run of the tangent of the fused vjp (rosenbrock.source("hvp"))."""
    return revdiff.hvp(rosenbrock, "loss", (0.0, x), (None, v))[1]


def newton_cg(x: np.ndarray, steps: int = 30, tol: float = 1e-8) -> np.ndarray:
    """Newton's method with the step from conjugate gradients on H p = -g, which needs only H v."""
    for _ in range(steps):
        g = gradient(x)
        if np.linalg.norm(g) < tol:
            break
        p, r = np.zeros_like(x), -g
        d = r.copy()
        for _ in range(x.size):
            Hd = curvature(x, d)
            dHd = d @ Hd
            if dHd <= 0:  # negative curvature: take the steepest descent direction found so far
                p = p if p.any() else -g
                break
            alpha = (r @ r) / dHd
            p, r_new = p + alpha * d, r - alpha * Hd
            if np.linalg.norm(r_new) < 1e-12 * np.linalg.norm(g):
                break
            d, r = r_new + (r_new @ r_new) / (r @ r) * d, r_new
        step, loss = 1.0, rosenbrock(0.0, x)[0]
        while rosenbrock(0.0, x + step * p)[0] > loss and step > 1e-8:  # backtracking
            step /= 2
        x = x + step * p
    return x


if __name__ == "__main__":
    x = np.array([-1.2, 1.0, -0.5, 0.8])
    d = np.array([1.0, -2.0, 0.5, 0.25])

    (loss, _), (dloss, _) = revdiff.jvp(rosenbrock, (0.0, x), (None, d))
    print(f"loss = {loss:.6f}, derivative along d: jvp {dloss:.10f}, gradient . d {gradient(x) @ d:.10f}")

    H = revdiff.hessian(rosenbrock, "loss", 0.0, x)[1][1]
    assert np.allclose(H @ d, curvature(x, d), rtol=1e-13) and np.allclose(H, H.T, rtol=1e-13)
    eps = 1e-6
    fd = (gradient(x + eps * d) - gradient(x - eps * d)) / (2 * eps)
    print(f"H d against central differences of the gradient: max difference {np.abs(fd - H @ d).max():.1e}")

    for start in (x, np.zeros(4)):  # the 4-d Rosenbrock function has a local minimum besides (1, 1, 1, 1)
        x_min = newton_cg(start)
        assert np.linalg.norm(gradient(x_min)) < 1e-8
        eigenvalues = np.linalg.eigvalsh(revdiff.hessian(rosenbrock, "loss", 0.0, x_min)[1][1])
        kind = "a minimum" if eigenvalues.min() > 0 else "a saddle point"
        print(f"Newton-CG from {start}: x = {np.round(x_min, 6)}, loss = {rosenbrock(0.0, x_min)[0]:.3g}, "
              f"{kind} (Hessian eigenvalues {eigenvalues.min():.3g} to {eigenvalues.max():.3g})")
    print(rosenbrock.source("jvp", 0.0, x))
