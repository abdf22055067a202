"""A loop with a reversible conditional: ``if (pre, post)`` records which branch ran in a
post-condition, so the inverse knows which branch to undo."""
import numpy as np

import revdiff
from revdiff import reversible


@reversible
def damp_positive(x, factor):
    for i in range(len(x)):
        if (x[i] > 0, x[i] > 0):  # scaling by a positive factor keeps the sign: post = pre
            x[i] *= factor
        else:
            x[i] -= factor


if __name__ == "__main__":
    x = np.array([1.5, -2.0, 0.7, -0.1])
    y, _ = damp_positive(x.copy(), 0.5)
    print("forward:", y)
    assert np.array_equal(y, np.where(x > 0, x * 0.5, x - 0.5))
    back, _ = (~damp_positive)(y.copy(), 0.5)
    print("inverse:", back, "(original:", x, ")")
    # halving and doubling are exact; x - 0.5 + 0.5 rounds, to within an ulp of 0.5
    assert np.max(np.abs(back - x)) <= np.spacing(0.5)
    outs, pullback = revdiff.vjp(damp_positive, x, 0.5)
    gx, gfactor = pullback(np.ones(4), 0.0)
    print("d sum(y) / dx =", gx, " d sum(y) / dfactor =", gfactor)
    # y = 0.5 x where x > 0, x - 0.5 elsewhere: dy/dx is 0.5 or 1, dsum(y)/dfactor = sum(x > 0) x - sum(x <= 0) 1
    assert np.array_equal(gx, np.where(x > 0, 0.5, 1.0))
    assert abs(gfactor - (np.sum(x[x > 0]) - np.sum(x <= 0))) <= 4 * np.spacing(2.0)
