"""Differentiate a Bessel function series J_n(x) = sum_k (-1)^k (x/2)^(2k+n) / (k! (k+n)!)
by running the program backwards, and check it against the identity J_n' = (J_{n-1} - J_{n+1}) / 2
and against central finite differences."""
import numpy as np

import revdiff
from revdiff import reversible, routine, zeros


@reversible
def besselj(out, x, n, terms_count):
    half = 0.5 * x
    terms = zeros(terms_count + 1, float)
    with routine:  # compute every term of the series
        terms[0] += 1.0
        for j in range(1, n + 1):
            terms[0] *= half / j
        for k in range(terms_count):
            terms[k + 1] -= terms[k] * half * half / ((k + 1) * (k + n + 1))
    for k in range(terms_count + 1):  # copy their sum out
        out += terms[k]
    ~routine  # uncompute the terms so the ancilla is zero again
    del terms


def j(n: int, x: float, terms: int = 30) -> float:
    return besselj(0.0, x, n, terms)[0]


if __name__ == "__main__":
    x, n = 1.0, 2
    value = j(n, x)
    gout, gx, _, _ = revdiff.grad(besselj, "out")(0.0, x, n, 30)
    identity = 0.5 * (j(n - 1, x) - j(n + 1, x))
    h = 1e-6
    central = (j(n, x + h) - j(n, x - h)) / (2 * h)
    print(f"J_{n}({x}) = {value:.16f}")
    print(f"dJ/dx reversible AD  = {gx:.16f}")
    print(f"(J_1 - J_3) / 2      = {identity:.16f}   difference {abs(gx - identity):.1e}")
    print(f"central differences  = {central:.16f}   difference {abs(gx - central):.1e}")
    assert abs(gx - identity) < 1e-14 and abs(gx - central) < 1e-8
    print(f"check_grad relative error: {revdiff.check_grad(besselj, 0.0, x, n, 30):.1e}")
