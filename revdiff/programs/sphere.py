"""The unit sphere in the reversible language: normalisation x / |x| and the projection of a
vector g onto the tangent plane at z, g - (g . z_hat) z_hat."""
import numpy as np

from revdiff.function import reversible
from revdiff.language import routine, zero, zeros
from revdiff.programs.gram_schmidt import norm2


@reversible
def normalize(y, x):
    """y += x / |x|."""
    nrm = zero(x.real.dtype)
    with routine:
        norm2(nrm, x)
    for i in range(len(x)):
        y[i] += x[i] / nrm
    ~routine
    del nrm


@reversible
def tangent_project(out, g, z):
    """out += g - (z_hat^H g) z_hat with z_hat = z / |z|."""
    zh = zeros(len(z), z.dtype)
    d = zero(z.dtype)
    with routine:
        normalize(zh, z)
        for i in range(len(z)):
            d += np.conj(zh[i]) * g[i]
    for i in range(len(z)):
        out[i] += g[i] - d * zh[i]
    ~routine
    del d
    del zh
