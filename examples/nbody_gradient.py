"""The gradient of a long N-body simulation without a tape: d(final energy) / d(initial state) of a
star and two planets after 10^5 leapfrog steps, the memory it took, and what running backwards
costs in floating-point drift (float64, float32, and the bit-exact int64 fixed-point variant)."""
import numpy as np

import revdiff
from revdiff.programs import leapfrog as L

G, SOFT, DT = 1.0, 0.01, 1e-3

if __name__ == "__main__":
    x, v, m = L.star_and_two_planets()
    grad = revdiff.grad(L.nbody_final_energy, "E")
    grad(0.0, x, v, m, G, SOFT, DT, 10)  # compile (cached on disk for the next run)
    for steps in (1_000, 100_000):
        (_, gx, gv, *_), grown = revdiff.peak_memory_growth(grad, 0.0, x, v, m, G, SOFT, DT, steps)
        shown = "n/a" if grown is None else f"{grown / 1024:.0f} KiB"
        print(f"{steps:>7d} steps: dE/dx0[planet 1] = {np.array2string(gx[1], precision=6)}, "
              f"peak memory growth {shown}")
    print("(PyTorch's tape for the same gradient grows by about 32 MB per 1000 steps: benchmarks/memory.py)")

    print("\nround trip (forward, then inverse) after 10^5 steps, max relative drift of x:")
    for dtype in (np.float64, np.float32):
        xd, vd, md = L.star_and_two_planets(dtype)
        drift = revdiff.roundtrip_error(L.nbody_leapfrog, xd, vd, md, G, SOFT, DT, 100_000)
        print(f"  {np.dtype(dtype).name:8s} {drift['x'].rel:.1e}")
    scale = float(2 ** 40)
    xi, vi = np.round(x * scale).astype(np.int64), np.round(v * scale).astype(np.int64)
    drift = revdiff.roundtrip_error(L.nbody_leapfrog_fixed, xi, vi, m, G, SOFT, DT, 100_000, scale)
    print(f"  int64 fixed point (1/2^40): {drift['x'].abs:.0f} units, bit-exact")
    assert drift["x"].abs == 0 and drift["v"].abs == 0
