"""Seed 003: outputs on the unit sphere. Project z onto the sphere (z / |z|) and project a gradient
g onto the tangent plane at z (g - (g.z_hat) z_hat), differentiating both by running backwards."""
import numpy as np

from revdiff import formulas
from revdiff import programs as P

if __name__ == "__main__":
    rng = np.random.default_rng(3)
    z, g = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))  # a batch of 4 outputs
    u = P.normalize(z)
    print("norms after normalisation:", np.linalg.norm(u, axis=1))
    t = P.tangent_project(g, z)
    print("tangent components along z_hat (should be 0):", np.sum(t * u, axis=1))
    gz = P.normalize_vjp(z, g)
    print("the gradient through z / |z| is tangent too:", np.sum(gz * u, axis=1))
    err = np.abs(gz - formulas.normalize_vjp(z, g)).max()
    print(f"difference to the closed form: {err:.1e}")
    gg, gz2 = P.tangent_project_vjp(g, z, np.ones_like(g))
    print("d sum(tangent) / dg =", gg[0].round(6))
    assert err < 1e-14
