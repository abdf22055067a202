"""A reversible dot product: run it forward, backwards, and differentiate it."""
import numpy as np

import revdiff
from revdiff import reversible


@reversible
def dot(s, x, y):
    for i in range(len(x)):
        s += x[i] * y[i]


if __name__ == "__main__":
    x, y = np.arange(1.0, 5.0), np.array([0.5, -1.0, 2.0, 0.25])
    s, _, _ = dot(0.0, x, y)
    print(f"forward:  s = {s}  (numpy: {x @ y})")
    assert s == x @ y  # exact here: every product and partial sum is a short binary fraction
    s0, _, _ = (~dot)(s, x, y)
    print(f"inverse:  s = {s0}  (back to the initial value)")
    assert s0 == 0.0
    gs, gx, gy = revdiff.grad(dot, "s")(0.0, x, y)
    print(f"gradient: ds/dx = {gx} (= y), ds/dy = {gy} (= x)")
    assert gs == 1.0 and np.array_equal(gx, y) and np.array_equal(gy, x)
    print(dot.source("adjoint"))
