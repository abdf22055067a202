"""High-level functions on the unit sphere over the reversible programs of ``sphere.py``: normalising
vectors and projecting onto the tangent space of a point, with their gradients, checked and scaled as
the QR-based functions are (``api.py``, ``inputs.py``)."""
from __future__ import annotations

import numpy as np

from revdiff.programs import sphere
from revdiff.programs.api import _as_given, _batched
from revdiff.programs.arguments import Vectors
from revdiff.programs.inputs import as_array, check_result, negated, one_device

__all__ = ["normalize", "normalize_vjp", "tangent_project", "tangent_project_vjp"]


class _Dtype:
    """The dtype the vectors of the sphere functions share (``Vectors`` reads ``like.dtype``)."""

    def __init__(self, *arrays):
        self.dtype = np.result_type(*(a.dtype for a in arrays))


def _normalized(x) -> Vectors:
    """x checked for the normalisation program: no vector zero (it would have no direction)."""
    x = as_array("x", x, 1)
    return Vectors("x", x, _Dtype(x), direction=True)


@one_device
def normalize(x) -> np.ndarray:
    """x / |x| along the last axis (ValueError for a zero vector, which has no direction)."""
    X = _normalized(x)
    if X.empty:
        return X.xp.zeros(X.shape, X.dtype)
    return _batched(sphere.normalize).value(X.xp.zeros_like(X.flat), X.v, donate=True)[0].reshape(X.shape)


@one_device
def normalize_vjp(x, gy) -> np.ndarray:
    """The cotangent of x given that of y = x / |x|."""
    X = _normalized(x)
    G = Vectors("gy", gy, X, X.shape, cotangent=True, why="as the cotangent of y = x / |x| it needs the shape of x,")
    if X.empty:
        return X.xp.zeros(X.shape, X.dtype)
    _, (_, gx) = _batched(sphere.normalize).vjp((X.xp.zeros_like(X.flat), X.v), (G.v, None), donate=True)
    gx = X.scaled(gx, negated(X.e), G.e)  # y(x) = y(cx): gx = c gx', linear in gy
    check_result("normalize_vjp", "gx", gx, X.batch, X.xp)
    return gx.reshape(X.shape)


def _tangent_arguments(g, z) -> tuple:
    g_array, z_array = as_array("g", g, 1), as_array("z", z, 1)
    if tuple(g_array.shape) != tuple(z_array.shape):
        raise ValueError(f"g of shape {tuple(g_array.shape)} and z of shape {tuple(z_array.shape)} differ")
    like = _Dtype(g_array, z_array)
    G, Z = Vectors("g", g_array, like), Vectors("z", z_array, like, direction=True)
    G.given, Z.given = g_array.dtype, z_array.dtype
    return G, Z


@one_device
def tangent_project(g, z) -> np.ndarray:
    """g - (z_hat^H g) z_hat along the last axis, z_hat = z / |z| (ValueError for a zero z)."""
    G, Z = _tangent_arguments(g, z)
    if Z.empty:
        return Z.xp.zeros(Z.shape, Z.dtype)
    out = _batched(sphere.tangent_project).value(Z.xp.zeros_like(G.v), G.v, Z.v, donate=True)[0]
    out = G.scaled(out, G.e)  # linear in g, the same for every scaling of z
    check_result("tangent_project", "out", out, Z.batch, Z.xp)
    return out.reshape(Z.shape)


@one_device
def tangent_project_vjp(g, z, gout) -> tuple:
    """(gg, gz) given the cotangent of the tangent projection."""
    G, Z = _tangent_arguments(g, z)
    O = Vectors("gout", gout, Z, Z.shape, cotangent=True,
                 why="as the cotangent of the projection it needs the shape of g and z,")
    if Z.empty:
        return Z.xp.zeros(Z.shape, Z.dtype), Z.xp.zeros(Z.shape, Z.dtype)
    _, (_, gg, gz) = _batched(sphere.tangent_project).vjp((Z.xp.zeros_like(G.v), G.v, Z.v), (O.v, None, None),
                                                          donate=True)
    gg = _as_given(G.scaled(gg, O.e), G.given)
    gz = _as_given(Z.scaled(gz, negated(Z.e), G.e, O.e), Z.given)
    for name, value in (("gg", gg), ("gz", gz)):
        check_result("tangent_project_vjp", name, value, Z.batch, Z.xp)
    return gg.reshape(Z.shape), gz.reshape(Z.shape)
