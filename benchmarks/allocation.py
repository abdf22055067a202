"""What the ancilla allocations of one SIMD-lane group of the 32x16 projection vjp cost, to weigh
per-thread scratch: the 15 zeroed arrays its programs allocate per group (projection: Q, R, c and
their gradients; CGS2 forward: v, r1, r2; CGS2 adjoint: v, r1, r2 and their gradients), each with
the trailing lane axis of 4, in a Numba loop. Compare with the group's time from
``benchmarks/profile.py`` (4 x the per-matrix lane time).

    python benchmarks/allocation.py
"""
import time

import numba
import numpy as np


@numba.njit
def allocate_group(repeats: int, m: int, n: int, lanes: int) -> float:
    total = 0.0
    for _ in range(repeats):
        projection = (np.zeros((m, n, lanes)), np.zeros((m, n, lanes)), np.zeros((n, n, lanes)),
                      np.zeros((n, n, lanes)), np.zeros((n, lanes)), np.zeros((n, lanes)))
        forward = (np.zeros((m, lanes)), np.zeros((n, lanes)), np.zeros((n, lanes)))
        adjoint = (np.zeros((m, lanes)), np.zeros((n, lanes)), np.zeros((n, lanes)),
                   np.zeros((m, lanes)), np.zeros((n, lanes)), np.zeros((n, lanes)))
        for a in projection[:4]:
            total += a[0, 0, 0]
        for a in projection[4:] + forward + adjoint:
            total += a[0, 0]
    return total


if __name__ == "__main__":
    allocate_group(10, 32, 16, 4)
    repeats = 100000
    start = time.perf_counter()
    allocate_group(repeats, 32, 16, 4)
    print(f"15 zeroed allocations of one 32x16 projection-vjp lane group: "
          f"{(time.perf_counter() - start) / repeats * 1e6:.2f} us")
