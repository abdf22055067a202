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
    back, _ = (~damp_positive)(y.copy(), 0.5)
    print("inverse:", back, "(original:", x, ")")
    outs, pullback = revdiff.vjp(damp_positive, x, 0.5)
    gx, gfactor = pullback(np.ones(4), 0.0)
    print("d sum(y) / dx =", gx, " d sum(y) / dfactor =", gfactor)
