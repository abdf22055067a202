"""revdiff inside JAX: QR, projection, least squares and the sphere as ``jax.custom_vjp`` functions
whose backward runs revdiff's reversible programs backwards (through ``jax.pure_callback`` on the
CPU), usable under ``jax.jit``, ``jax.grad`` and ``jax.vmap``.

JAX's cotangents of complex values are the conjugates of revdiff's (PyTorch's) convention; the
conversion happens here. Importing this module imports jax; importing revdiff does not.

Forward mode: ``jax.jvp`` of these functions raises JAX's "can't apply forward-mode autodiff (jvp)
to a custom_vjp function". A JAX function has a custom vjp or a custom jvp, not both, and with a
custom jvp JAX derives reverse mode by transposing the tangent computation, which for a host
callback it cannot (``pure_callback`` has no transpose rule, and in JAX 0.10 neither has a
``custom_vjp`` called inside a ``custom_jvp`` rule). So reverse mode keeps the custom vjp, and
forward mode is its own functions: ``qr_jvp``, ``project_jvp``, ``lstsq_jvp``, ``normalize_jvp`` and
``tangent_project_jvp`` (the tangent programs, under ``jit`` and ``vmap``; tangents are tangents, in
no conjugated convention; None is a zero tangent). They are not differentiable themselves
(``jax.grad`` through them raises by name), nor are the gradients of the others (``jax.grad`` of
``jax.grad`` raises by name; ``jax.hessian``, forward over reverse, raises JAX's custom_vjp error
above); second derivatives: ``revdiff.programs``' ``*_vjp_jvp`` on NumPy arrays.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from revdiff import programs as P
from revdiff.programs.api import LSTSQ_METHODS, PROJECT_METHODS
from revdiff.programs.methods import check_method, q_columns

__all__ = ["qr", "project", "lstsq", "normalize", "tangent_project", "qr_jvp", "project_jvp", "lstsq_jvp",
           "normalize_jvp", "tangent_project_jvp"]


def _callback(fn: Callable, shapes, *args):
    """Run a NumPy function on the host; batched by vmap as one call over all leading dimensions."""
    def host(*arrays):
        results = fn(*(np.asarray(a) for a in arrays))
        return tuple(np.asarray(r, dtype=s.dtype) for r, s in zip(results, shapes))
    return jax.pure_callback(host, tuple(shapes), *args, vmap_method="broadcast_all")


def _struct(shape, dtype) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype))


def _differentiable(name: str, forward: Callable, backward: Callable, output_shapes: Callable) -> Callable:
    """A custom_vjp function of arrays: ``forward`` (NumPy, returns a tuple), ``backward(*inputs,
    *cotangents)`` (NumPy, revdiff convention) and ``output_shapes(*inputs)``; differentiating its
    backward (grad of grad, ``jax.hessian``) raises by name, as ``_no_derivative`` says."""

    @jax.custom_vjp
    def f(*args):
        return _callback(forward, output_shapes(*args), *args)

    def f_fwd(*args):
        return f(*args), args

    def f_bwd(args, cotangents):
        def host(*arrays):
            inputs, cts = arrays[:len(args)], arrays[len(args):]
            grads = backward(*inputs, *(np.conj(c) for c in cts))
            return tuple(np.conj(g) for g in grads)
        guard = _no_derivative(f"{name}'s gradient")
        return _callback(host, [_struct(a.shape, a.dtype) for a in args], *(guard(a) for a in (*args, *cotangents)))

    f.defvjp(f_fwd, f_bwd)
    return f


def _no_derivative(name: str) -> Callable:
    """The identity, whose derivative raises: a ``*_jvp`` function's value and tangent, and the
    gradients of the others, come from a host callback, which JAX cannot differentiate (JAX's own
    error would point at ``custom_jvp``; zeros would be silently wrong)."""
    @jax.custom_jvp
    def guard(x):
        return x

    @guard.defjvp
    def _(primals, tangents):
        raise TypeError(f"revdiff.jax.{name} is not differentiable: it comes from a revdiff program run on the "
                        "host; second derivatives are revdiff.programs' *_vjp_jvp")
    return guard


def _forward_mode_arguments(name: str, primals: tuple, tangents: tuple) -> tuple:
    """A ``*_jvp`` function's primals and tangents as its host callback takes them: None tangents as
    zeros, floating dtypes (``_inexact``), and differentiating through them refused by name."""
    tangents = tuple(jnp.zeros_like(jnp.asarray(p)) if t is None else t for p, t in zip(primals, tangents))
    guard = _no_derivative(name)
    return tuple(guard(a) for a in _inexact(*primals, *tangents))


def _promoted(*arrays) -> jnp.dtype:
    return jnp.result_type(*arrays)


def _inexact(*arrays) -> tuple:
    """The arrays in a floating dtype: integers and bools become JAX's default float, as in
    ``jnp.linalg`` (the results are floats; computed in an integer dtype they would be truncated)."""
    out = []
    for a in arrays:
        a = jnp.asarray(a)
        if not jnp.issubdtype(a.dtype, jnp.inexact):
            a = a.astype(jnp.result_type(float))
        out.append(a)
    return tuple(out)


def qr(A, method: str = "auto", rank_tol: float | None = None, mode: str = "reduced"):
    """Q, R of A (..., m, n) with diag(R) real nonnegative; ``mode`` as in ``jnp.linalg.qr``:
    "reduced", "complete" (Q m x m; for a tall A with the default "auto", ``householder`` or
    ``givens``) or "r" (R alone); ``method`` and ``rank_tol`` as in ``revdiff.programs.qr``."""
    def shapes(a):
        m, n = a.shape[-2:]
        q = q_columns(method, mode, a.shape)
        return [_struct(a.shape[:-2] + (m, q), a.dtype), _struct(a.shape[:-2] + (q, n), a.dtype)]
    check_method(P.QR_METHODS, method)  # checked while tracing, as project's options are
    (A,) = _inexact(A)  # before the tolerance, which is checked against the dtype the QR runs in
    P.api.rank_tolerance(rank_tol, A.dtype)
    if mode == "r":
        f = _differentiable("qr", lambda a: (P.qr(a, method, rank_tol, mode),),
                            lambda a, gR: (P.qr_vjp(a, None, gR, method, rank_tol, mode),), lambda a: shapes(a)[1:])
        return f(A)[0]
    f = _differentiable("qr", lambda a: P.qr(a, method, rank_tol, mode),
                        lambda a, gQ, gR: (P.qr_vjp(a, gQ, gR, method, rank_tol, mode),), shapes)
    return f(A)


def _vector_result(A, y) -> list:
    return [_struct(y.shape, _promoted(A, y))]


def _solution_result(A, y) -> list:
    """The least-squares solution's shape: A's batch shape and its columns."""
    return [_struct(A.shape[:-2] + A.shape[-1:], _promoted(A, y))]


def _checked_options(A, method, rank_tol, rank_deficient, table, wide_ok=True):
    """The options checked while tracing, as the NumPy functions check them (inside the callback
    an error would reach the caller as JAX's runtime error)."""
    check_method(table, method)
    P.api.rank_tolerance(rank_tol, jnp.result_type(A))
    truncate = P.api._truncating(rank_deficient)
    if not wide_ok and not truncate and A.shape[-2] < A.shape[-1]:
        raise ValueError(f"lstsq needs a tall or square A (m >= n) of full column rank; A has shape {tuple(A.shape)} "
                         "(rank_deficient='truncate' gives the basic solution)")


def _value(out):
    """A result without the rank that rank_deficient="truncate" returns beside it."""
    return out[0] if isinstance(out, tuple) else out


def _rank(A, rank_tol):
    """The numerical rank of each matrix (``revdiff.programs.rank``); it has no derivative."""
    dtype = jnp.int64 if jax.config.jax_enable_x64 else jnp.int32  # JAX's default integer
    return _callback(lambda a: (P.rank(a, rank_tol),), [_struct(A.shape[:-2], dtype)], jax.lax.stop_gradient(A))[0]


def project(A, y, method: str = "auto", rank_tol: float | None = None, rank_deficient: str = "raise"):
    """Q Q^H y, the orthogonal projection of y (..., m) onto the column space of A (..., m, n);
    ``rank_deficient="truncate"``: onto the numerical column space, returning (z, rank), as
    ``revdiff.programs.project``."""
    f = _differentiable("project", lambda a, b: (_value(P.project(a, b, method, rank_tol, rank_deficient)),),
                        lambda a, b, gz: P.project_vjp(a, b, gz, method, rank_tol, rank_deficient), _vector_result)
    A, y = _inexact(A, y)
    _checked_options(A, method, rank_tol, rank_deficient, PROJECT_METHODS)
    z = f(A, y)[0]
    return (z, _rank(A.astype(_promoted(A, y)), rank_tol)) if rank_deficient == "truncate" else z


def lstsq(A, y, method: str = "auto", rank_tol: float | None = None, rank_deficient: str = "raise"):
    """argmin_x |A x - y| for A (..., m, n) of full column rank; ``rank_deficient="truncate"``: the
    basic solution and the rank, as ``revdiff.programs.lstsq``."""
    f = _differentiable("lstsq", lambda a, b: (_value(P.lstsq(a, b, method, rank_tol, rank_deficient)),),
                        lambda a, b, gx: P.lstsq_vjp(a, b, gx, method, rank_tol, rank_deficient),
                        _solution_result)
    A, y = _inexact(A, y)
    _checked_options(A, method, rank_tol, rank_deficient, LSTSQ_METHODS, wide_ok=False)
    x = f(A, y)[0]
    return (x, _rank(A.astype(_promoted(A, y)), rank_tol)) if rank_deficient == "truncate" else x


def normalize(x):
    """x / |x| along the last axis."""
    f = _differentiable("normalize", lambda a: (P.normalize(a),), lambda a, gy: (P.normalize_vjp(a, gy),),
                        lambda a: [_struct(a.shape, a.dtype)])
    return f(*_inexact(x))[0]


def tangent_project(g, z):
    """g - (z_hat^H g) z_hat along the last axis, z_hat = z / |z|."""
    f = _differentiable("tangent_project", lambda a, b: (P.tangent_project(a, b),),
                        lambda a, b, go: P.tangent_project_vjp(a, b, go),
                        lambda a, b: [_struct(a.shape, _promoted(a, b))])
    return f(*_inexact(g, z))[0]


def qr_jvp(A, dA, method: str = "auto", rank_tol: float | None = None, mode: str = "reduced") -> tuple:
    """``(qr(A, ...), tangents)``: the factors and their derivatives along dA (``(dQ, dR)``, or dR
    for mode "r"), from the tangent of the QR program (``revdiff.programs.qr_jvp``)."""
    A, dA = _forward_mode_arguments("qr_jvp", (A,), (dA,))
    m, n = A.shape[-2:]
    q = q_columns(method, mode, A.shape)
    shapes = [_struct(A.shape[:-2] + (m, q), A.dtype), _struct(A.shape[:-2] + (q, n), A.dtype)]

    def host(a, da):
        values, tangents = P.qr_jvp(a, da, method, rank_tol, mode)
        return (values, tangents) if mode == "r" else (*values, *tangents)

    out = _callback(host, shapes[1:] * 2 if mode == "r" else shapes * 2, A, dA)
    return (out[0], out[1]) if mode == "r" else ((out[0], out[1]), (out[2], out[3]))


def _vector_jvp(jvp: Callable, result: Callable, table: dict, wide_ok: bool, A, y, dA, dy, method: str,
                rank_tol, rank_deficient: str):
    """``(value, tangent)`` of ``jvp`` (``revdiff.programs.project_jvp`` or ``lstsq_jvp``) through a
    host callback; the value with the rank for rank_deficient="truncate"."""
    A, y, dA, dy = _forward_mode_arguments(jvp.__name__, (A, y), (dA, dy))
    _checked_options(A, method, rank_tol, rank_deficient, table, wide_ok=wide_ok)

    def host(a, b, da, db):
        value, tangent = jvp(a, b, da, db, method, rank_tol, rank_deficient)
        return _value(value), tangent

    v, dv = _callback(host, result(A, y) * 2, A, y, dA, dy)
    return ((v, _rank(A.astype(_promoted(A, y)), rank_tol)) if rank_deficient == "truncate" else v), dv


def project_jvp(A, y, dA, dy, method: str = "auto", rank_tol: float | None = None, rank_deficient: str = "raise"):
    """``(project(A, y, ...), dz)``: the projection and its derivative along (dA, dy), from the
    tangent of the projection program (``revdiff.programs.project_jvp``); with
    ``rank_deficient="truncate"`` the first entry is (z, rank)."""
    return _vector_jvp(P.project_jvp, _vector_result, PROJECT_METHODS, True, A, y, dA, dy, method, rank_tol,
                       rank_deficient)


def lstsq_jvp(A, y, dA, dy, method: str = "auto", rank_tol: float | None = None, rank_deficient: str = "raise"):
    """``(lstsq(A, y, ...), dx)``: the least-squares solution and its derivative along (dA, dy), from
    the tangent of the least-squares program (``revdiff.programs.lstsq_jvp``); with
    ``rank_deficient="truncate"`` the first entry is (x, rank)."""
    return _vector_jvp(P.lstsq_jvp, _solution_result, LSTSQ_METHODS, False, A, y, dA, dy, method, rank_tol,
                       rank_deficient)


def normalize_jvp(x, dx) -> tuple:
    """``(normalize(x), dy)``: x / |x| and its derivative along dx, from the tangent of the
    normalisation program (``revdiff.programs.normalize_jvp``)."""
    x, dx = _forward_mode_arguments("normalize_jvp", (x,), (dx,))
    shape = _struct(x.shape, x.dtype)
    return _callback(P.normalize_jvp, [shape, shape], x, dx)


def tangent_project_jvp(g, z, dg, dz) -> tuple:
    """``(tangent_project(g, z), dout)``: the projection onto the tangent plane at z and its
    derivative along (dg, dz), from the tangent of its program (``revdiff.programs.tangent_project_jvp``)."""
    g, z, dg, dz = _forward_mode_arguments("tangent_project_jvp", (g, z), (dg, dz))
    shape = _struct(g.shape, _promoted(g, z))
    return _callback(P.tangent_project_jvp, [shape, shape], g, z, dg, dz)
