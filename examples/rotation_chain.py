"""A chain of Givens rotations applied to a vector, undone exactly by its inverse."""
import numpy as np

import revdiff
from revdiff import reversible, rot


@reversible
def rotate_chain(v, angles):
    for k in range(len(angles)):
        rot(v[k], v[k + 1], angles[k])


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    v = rng.standard_normal(6)
    angles = rng.uniform(-np.pi, np.pi, 5)
    norm_before = np.linalg.norm(v)
    w, _ = rotate_chain(v.copy(), angles)
    print(f"norm before {norm_before:.15f}, after {np.linalg.norm(w):.15f} (rotations keep it)")
    back, _ = (~rotate_chain)(w.copy(), angles)
    print(f"round-trip error: {np.max(np.abs(back - v)):.2e}")
    print(f"gradient check (relative error): {revdiff.check_grad(rotate_chain, v, angles):.2e}")
