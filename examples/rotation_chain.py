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
    assert abs(np.linalg.norm(w) - norm_before) <= 8 * np.finfo(float).eps * norm_before
    back, _ = (~rotate_chain)(w.copy(), angles)
    print(f"round-trip error: {np.max(np.abs(back - v)):.2e}")
    assert np.max(np.abs(back - v)) <= 16 * np.finfo(float).eps * norm_before  # rounding, not exact
    error = revdiff.check_grad(rotate_chain, v, angles)
    print(f"gradient check (relative error): {error:.2e}")
    assert error < 1e-7  # against central differences, whose own error is about 1e-9 here
