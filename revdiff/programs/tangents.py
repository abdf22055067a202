"""Forward mode of the high-level programs: ``qr_jvp``, ``project_jvp``, ``lstsq_jvp``, ``normalize_jvp`` and
``tangent_project_jvp`` (and their ``*_vjp_jvp``, the second derivatives) run the tangent programs of
the same reversible programs (``BatchedFunction.jvp``, no rule of their own), on arguments checked
and scaled as ``api.py`` checks and scales them. A tangent is linear in its direction, so the
direction is scaled by a power of two of its own per batch element, and scaled back after."""
from __future__ import annotations

import numpy as np

from revdiff.programs import sphere
from revdiff.programs.api import (PROJECT_METHODS, QrCotangents, _as_given, _Kept, _batched, _empty_qr,
                                  _leading_projection, _least_squares, _pivoted, _qr_run, _resolved_program,
                                  _solution_cotangent, _truncating, _with_vector)
from revdiff.programs.sphere_functions import _normalized, _tangent_arguments
from revdiff.programs.arguments import Matrices, Vectors, scanned
from revdiff.programs.methods import check_method, resolved
from revdiff.programs.ranked import cgs2_where_refused, fresh, ranked
from revdiff.programs.inputs import (as_array, check_rank, check_result, direction_exponents, flat, negated,
                                     one_device, rank_tolerance, require_finite)


def _matrix_direction(dA, M: Matrices):
    """The checked tangent of A, flattened to (b, m, n); None: zero."""
    if dA is None:
        return M.xp.zeros_like(M.flat)
    d = as_array("dA", dA, 2, cotangent_of=M.dtype, role="tangent")
    if tuple(d.shape) != M.shape:
        raise ValueError(f"'dA' must have the shape of A, {M.shape}; got {tuple(d.shape)}")
    d = flat(d, 2)
    require_finite("dA", d, M.batch, M.xp)
    return d


def _vector_direction(dy, M: Matrices):
    """The checked tangent of y (a ``Vectors``), or None for zero."""
    if dy is None:
        return None
    return Vectors("dy", dy, M, M.batch + (M.m,), tangent=True, why="as the tangent of y it needs the shape of y,")


def _projection_directions(D, dY, M: Matrices, Y: Vectors) -> tuple:
    """(dA', dy', h): the tangents as a projection program reads them. z(A 2**-e, y 2**-f) =
    z(A, y) 2**-f: the tangents scaled as their values and by 2**-h together (h per element), in
    one step (``direction_exponents``)."""
    dv = dY.flat if dY is not None else M.xp.zeros_like(Y.v)
    h = direction_exponents(((D, M.e), (dv, Y.e)), M.dtype, M.xp)
    return M.scaled(D, negated(M.e), negated(h)), Y.scaled(dv, negated(Y.e), negated(h)), h


def _kept_direction(D, kept: _Kept, xp):
    """A's tangent over the columns truncation keeps (zero for those left out), as ``kept.A``."""
    return xp.where(kept.left_out[:, None, :], 0, xp.take_along_axis(D, kept.columns[:, None, :], axis=2))


@one_device
@cgs2_where_refused
def qr_jvp(A, dA, method: str = "auto", rank_tol: float | None = None, mode: str = "reduced",
           pivoting: bool = False) -> tuple:
    """``(qr(A, ...), (dQ, dR))``: the factors and their derivatives along dA (None: zero), in one
    run of the tangent of the QR program; options as in ``qr`` (for mode "r" the tangent is dR
    alone; with ``pivoting`` that of QR of A[..., perm], perm fixed)."""
    M = Matrices(A)
    tol = rank_tolerance(rank_tol, M.dtype)
    method = resolved(method, M.shape, M.gpu, mode, M.dtype)
    program, outputs, q = _qr_run(method, M, mode)
    D = _matrix_direction(dA, M)
    M, perm = _pivoted(M, pivoting)
    if M.empty:
        Q, R = _empty_qr(M, q, outputs)
        dQ, dR = M.xp.zeros_like(Q), M.xp.zeros_like(R)
    else:
        D, h = _scaled_direction(D, M, perm)
        (outs, douts), rows = ranked(
            lambda rows: program.value_jvp(fresh(outputs, rows) + (rows(M.A),), (None,) * len(outputs) + (rows(D),)),
            M, tol, method)
        Q, R = rows.back(outs[0]), outs[1]
        check_rank(R, M.batch, tol, M.xp, perm)
        R, dQ, dR = M.scaled(R, M.e), M.scaled(rows.back(douts[0]), h), M.scaled(douts[1], M.e, h)
        for name, value in (("R", R), ("dQ", dQ), ("dR", dR)):
            check_result("qr_jvp", name, value, M.batch, M.xp)
    values = (M.unflat(R, q, M.n),) if mode == "r" else (M.unflat(Q, M.m, q), M.unflat(R, q, M.n))
    tangents = (M.unflat(dR, q, M.n),) if mode == "r" else (M.unflat(dQ, M.m, q), M.unflat(dR, q, M.n))
    if pivoting:
        values += (M.unflat(perm, M.n),)
    return (values[0] if len(values) == 1 else values), (tangents[0] if len(tangents) == 1 else tangents)


@one_device
@cgs2_where_refused
def project_jvp(A, y, dA, dy, method: str = "auto", rank_tol: float | None = None,
                rank_deficient: str = "raise") -> tuple:
    """``(project(A, y, ...), dz)``: the projection and its derivative along (dA, dy) (None: zero),
    in one run of the tangent of the projection program. With ``rank_deficient="truncate"`` the
    first entry is (z, rank) and dz the derivative of the projection onto the kept columns (exact
    along directions that keep the rank, as ``project_vjp``'s gradient)."""
    truncate = _truncating(rank_deficient)
    check_method(PROJECT_METHODS, method)
    M, Y = _with_vector(A, y)
    method, program = _resolved_program(PROJECT_METHODS, method, M)
    tol = rank_tolerance(rank_tol, M.dtype)
    D, dY = _matrix_direction(dA, M), _vector_direction(dy, M)
    if M.empty:
        z = M.unflat(M.xp.zeros_like(Y.flat), M.m)
        return ((z, M.xp.zeros(M.batch, np.int64)) if truncate else z), M.xp.zeros_like(z)
    D, dv, h = _projection_directions(D, dY, M, Y)
    if truncate:
        kept = _Kept(M, tol)
        D = _kept_direction(D, kept, M.xp)
        leading = _leading_projection(method, M)
        (outs, douts), rows = ranked(
            lambda rows: leading.value_jvp((M.zeros(M.m), M.zeros(M.p, M.p), rows(kept.A), rows(Y.v), kept.rank),
                                           (None, None, rows(D), rows(dv), None)), M, tol, method, truncated=True)
    else:
        (outs, douts), rows = ranked(
            lambda rows: program.value_jvp((M.zeros(M.m), M.zeros(M.p, M.n), rows(M.A), rows(Y.v)),
                                           (None, None, rows(D), rows(dv))), M, tol, method)
        check_rank(outs[1], M.batch, tol, M.xp)
    z, dz = Y.scaled(rows.back(outs[0]), Y.e), Y.scaled(rows.back(douts[0]), Y.e, h)
    check_result("project_jvp", "z", z, M.batch, M.xp)
    check_result("project_jvp", "dz", dz, M.batch, M.xp)
    z, dz = M.unflat(z, M.m), M.unflat(dz, M.m)
    return ((z, kept.rank.reshape(M.batch)) if truncate else z), dz


def _scaled_direction(D, M: Matrices, perm):
    """A's tangent as the program reads it: pivoted, the columns scaled as A's, then by 2**-h (h
    per element, returned too)."""
    if perm is not None:
        D = M.xp.take_along_axis(D, perm[:, None, :], axis=2)
    h = direction_exponents(((D, M.e),), M.dtype, M.xp)
    return M.scaled(D, negated(M.e), negated(h)), h


@one_device
@cgs2_where_refused
def qr_vjp_jvp(A, gQ, gR, dA, method: str = "auto", rank_tol: float | None = None, mode: str = "reduced",
               pivoting: bool = False) -> tuple:
    """``(gA, dgA, tangents)``: ``qr_vjp(A, gQ, gR, ...)``, its derivative along dA (the cotangents
    held fixed: the Hessian of <Q, gQ> + <R, gR> times dA) and the derivatives of the factors along
    dA (``qr_jvp``'s), in one run of the tangent of the fused vjp. What PyTorch's double backward
    through ``revdiff.torch.qr`` runs."""
    run = QrCotangents(A, gQ, gR, method, rank_tol, mode, pivoting)
    M = run.M
    D = _matrix_direction(dA, run.M)
    if M.empty:
        zero = M.xp.zeros(M.shape, M.dtype)
        q = run.outputs[0].shape[-1]
        tangents = (M.unflat(run.outputs[0], M.m, q), M.unflat(run.outputs[1], q, M.n))
        return zero, zero.copy(), tangents[1] if mode == "r" else tangents
    D, hv = _scaled_direction(D, M, run.perm)
    (outs, grads, douts, dgrads), rows = ranked(lambda rows: run.program.vjp_jvp(
        run.arguments(rows), run.cotangents_in(rows), (None,) * len(run.outputs) + (rows(D),)), M, run.tol,
        run.method)
    check_rank(outs[1], M.batch, run.tol, M.xp, run.perm)
    gA = run.gradient(rows.back(grads[-1]), "qr_vjp_jvp", "gA")
    dgA = run.gradient(rows.back(dgrads[-1]), "qr_vjp_jvp", "dgA", hv)
    dQ, dR = M.scaled(rows.back(douts[0]), hv), M.scaled(douts[1], M.e, hv)
    q = dQ.shape[-1]
    tangents = (M.unflat(dQ, M.m, q), M.unflat(dR, dR.shape[-2], M.n))
    return gA, dgA, tangents[1] if mode == "r" else tangents


@one_device
@cgs2_where_refused
def project_vjp_jvp(A, y, gz, dA, dy, method: str = "auto", rank_tol: float | None = None,
                    rank_deficient: str = "raise") -> tuple:
    """``((gA, gy), (dgA, dgy), dz)``: ``project_vjp(A, y, gz, ...)``, its derivatives along
    (dA, dy) with gz held fixed (the Hessian of <z, gz> times the direction) and ``project_jvp``'s
    dz, in one run of the tangent of the fused vjp. What PyTorch's double backward through
    ``revdiff.torch.project`` runs."""
    truncate = _truncating(rank_deficient)
    check_method(PROJECT_METHODS, method)
    M, Y = _with_vector(A, y, scan=False)
    method, program = _resolved_program(PROJECT_METHODS, method, M)
    tol = rank_tolerance(rank_tol, M.dtype)
    G = Vectors("gz", gz, M, M.batch + (M.m,), cotangent=True, why="as the cotangent of z it needs the shape of y,",
                scan=False)
    scanned(M, Y, G)
    D, dY = _matrix_direction(dA, M), _vector_direction(dy, M)
    if M.empty:
        gA, gy = M.xp.zeros(M.shape, M.dtype), M.unflat(M.xp.zeros_like(Y.flat), M.m)
        return (gA, gy), (gA.copy(), gy.copy()), gy.copy()
    D, dv, h = _projection_directions(D, dY, M, Y)
    if truncate:
        kept = _Kept(M, tol)
        D = _kept_direction(D, kept, M.xp)
        leading = _leading_projection(method, M)
        (_, grads, douts, dgrads), rows = ranked(lambda rows: leading.vjp_jvp(
            (M.zeros(M.m), M.zeros(M.p, M.p), rows(kept.A), rows(Y.v), kept.rank), (rows(G.v), None, None, None, None),
            (None, None, rows(D), rows(dv), None)), M, tol, method, truncated=True)
        grads = (kept.scatter(rows.back(grads[2]), M.xp), rows.back(grads[3]))
        dgrads = (kept.scatter(rows.back(dgrads[2]), M.xp), rows.back(dgrads[3]))
        douts = (rows.back(douts[0]),)
    else:
        (outs, grads, douts, dgrads), rows = ranked(lambda rows: program.vjp_jvp(
            (M.zeros(M.m), M.zeros(M.p, M.n), rows(M.A), rows(Y.v)), (rows(G.v), None, None, None),
            (None, None, rows(D), rows(dv))), M, tol, method)
        check_rank(outs[1], M.batch, tol, M.xp)
        grads, dgrads = tuple(map(rows.back, grads[2:])), tuple(map(rows.back, dgrads[2:]))
        douts = (rows.back(douts[0]),)
    values = []
    for (g_A, g_y), extra in ((grads, ()), (dgrads, (h,))):  # z(A D, y) = z(A, y), linear in y and gz
        g_A = _as_given(M.scaled(g_A, negated(M.e), Y.e, G.e, *extra), M.given)
        g_y = _as_given(G.scaled(g_y, G.e, *extra), Y.given)
        values.append((M.unflat(g_A, M.m, M.n), M.unflat(g_y, M.m)))
    dz = Y.scaled(douts[0], Y.e, h)
    for name, value in (("gA", values[0][0]), ("gy", values[0][1]), ("dgA", values[1][0]), ("dgy", values[1][1]),
                        ("dz", dz)):
        check_result("project_vjp_jvp", name, value, M.batch, M.xp)
    return values[0], values[1], M.unflat(dz, M.m)


@one_device
@cgs2_where_refused
def lstsq_jvp(A, y, dA, dy, method: str = "auto", rank_tol: float | None = None,
              rank_deficient: str = "raise") -> tuple:
    """``(lstsq(A, y, ...), dx)``: the least-squares solution and its derivative along (dA, dy)
    (None: zero), in one run of the tangent of the least-squares program. With
    ``rank_deficient="truncate"`` the first entry is (x, rank) and dx the derivative of the basic
    solution on the kept columns (zero on those left out; exact along directions that keep the rank)."""
    program, method, M, Y, tol, truncate = _least_squares(A, y, method, rank_tol, rank_deficient)
    D, dY = _matrix_direction(dA, M), _vector_direction(dy, M)
    if M.empty:
        x = M.xp.zeros(M.batch + (M.n,), M.dtype)
        return ((x, M.xp.zeros(M.batch, np.int64)) if truncate else x), x.copy()
    D, dv, h = _projection_directions(D, dY, M, Y)
    if truncate:
        kept = _Kept(M, tol)
        (outs, douts), _ = ranked(lambda rows: program.value_jvp(
            (M.zeros(M.p), M.zeros(M.p, M.p), rows(kept.A), rows(Y.v)),
            (None, None, rows(_kept_direction(D, kept, M.xp)), rows(dv))), M, tol, method, truncated=True)
        x, dx = kept.scatter(outs[0], M.xp), kept.scatter(douts[0], M.xp)
    else:
        (outs, douts), _ = ranked(
            lambda rows: program.value_jvp((M.zeros(M.n), M.zeros(M.n, M.n), rows(M.A), rows(Y.v)),
                                           (None, None, rows(D), rows(dv))), M, tol, method)
        check_rank(outs[1], M.batch, tol, M.xp)
        x, dx = outs[0], douts[0]
    x, dx = M.scaled(x, negated(M.e), Y.e), M.scaled(dx, negated(M.e), Y.e, h)  # (A D) x' = y: x = D x'
    check_result("lstsq_jvp", "x", x, M.batch, M.xp)
    check_result("lstsq_jvp", "dx", dx, M.batch, M.xp)
    x, dx = M.unflat(x, M.n), M.unflat(dx, M.n)
    return ((x, kept.rank.reshape(M.batch)) if truncate else x), dx


@one_device
@cgs2_where_refused
def lstsq_vjp_jvp(A, y, gx, dA, dy, method: str = "auto", rank_tol: float | None = None,
                  rank_deficient: str = "raise") -> tuple:
    """``((gA, gy), (dgA, dgy), dx)``: ``lstsq_vjp(A, y, gx, ...)``, its derivatives along (dA, dy)
    with gx held fixed (the Hessian of <x, gx> times the direction) and ``lstsq_jvp``'s dx, in one
    run of the tangent of the fused vjp. What PyTorch's double backward through
    ``revdiff.torch.lstsq`` runs."""
    program, method, M, Y, tol, truncate = _least_squares(A, y, method, rank_tol, rank_deficient, scan=False)
    G = Vectors("gx", gx, M, M.batch + (M.n,), cotangent=True, why="as the cotangent of x it needs the shape of x,",
                scan=False)
    scanned(M, Y, G)
    D, dY = _matrix_direction(dA, M), _vector_direction(dy, M)
    if M.empty:
        gA, gy = M.xp.zeros(M.shape, M.dtype), M.unflat(M.xp.zeros_like(Y.flat), M.m)
        return (gA, gy), (gA.copy(), gy.copy()), M.xp.zeros(M.batch + (M.n,), M.dtype)
    g, hg = _solution_cotangent(G, M)
    D, dv, h = _projection_directions(D, dY, M, Y)
    if truncate:
        kept = _Kept(M, tol)
        (_, grads, douts, dgrads), rows = ranked(lambda rows: program.vjp_jvp(
            (M.zeros(M.p), M.zeros(M.p, M.p), rows(kept.A), rows(Y.v)),
            (M.xp.take_along_axis(g, kept.columns, axis=1), None, None, None),
            (None, None, rows(_kept_direction(D, kept, M.xp)), rows(dv))), M, tol, method, truncated=True)
        grads = (kept.scatter(rows.back(grads[2]), M.xp), rows.back(grads[3]))
        dgrads = (kept.scatter(rows.back(dgrads[2]), M.xp), rows.back(dgrads[3]))
        dx = kept.scatter(douts[0], M.xp)
    else:
        (outs, grads, douts, dgrads), rows = ranked(lambda rows: program.vjp_jvp(
            (M.zeros(M.n), M.zeros(M.n, M.n), rows(M.A), rows(Y.v)), (g, None, None, None),
            (None, None, rows(D), rows(dv))), M, tol, method)
        check_rank(outs[1], M.batch, tol, M.xp)
        grads, dgrads, dx = tuple(map(rows.back, grads[2:])), tuple(map(rows.back, dgrads[2:])), douts[0]
    values = []
    for (g_A, g_y), extra in ((grads, ()), (dgrads, (h,))):  # linear in gx, and in the direction
        g_A = _as_given(M.scaled(g_A, negated(M.e), Y.e, hg, *extra), M.given)
        g_y = _as_given(M.scaled(g_y, hg, *extra), Y.given)
        values.append((M.unflat(g_A, M.m, M.n), M.unflat(g_y, M.m)))
    dx = M.scaled(dx, negated(M.e), Y.e, h)
    for name, value in (("gA", values[0][0]), ("gy", values[0][1]), ("dgA", values[1][0]), ("dgy", values[1][1]),
                        ("dx", dx)):
        check_result("lstsq_vjp_jvp", name, value, M.batch, M.xp)
    return values[0], values[1], M.unflat(dx, M.n)


def _sphere_direction(name: str, d, V: Vectors, why: str):
    """The checked tangent ``d`` of the vectors V, flattened as V (None: zero)."""
    if d is None:
        return V.xp.zeros_like(V.v)
    return Vectors(name, d, V, V.shape, tangent=True, why=why).flat


def _normalized_with_direction(x, dx) -> tuple:
    """(X, D, y): x and its tangent dx checked for the normalisation program, and its zero output y."""
    X = _normalized(x)
    return X, _sphere_direction("dx", dx, X, "as the tangent of x it needs the shape of x,"), X.xp.zeros_like(X.flat)


@one_device
def normalize_jvp(x, dx) -> tuple:
    """``(normalize(x), dy)``: x / |x| and its derivative along dx (None: zero), in one run of the
    tangent of the normalisation program (complex x: the real derivative, as ``jax.jvp``)."""
    X, D, y = _normalized_with_direction(x, dx)
    if X.empty:
        return X.xp.zeros(X.shape, X.dtype), X.xp.zeros(X.shape, X.dtype)
    h = direction_exponents(((D, X.e),), X.dtype, X.xp)  # y(c x) = y(x): dy is linear in dx / |x|
    outs, douts = _batched(sphere.normalize).value_jvp((y, X.v), (None, X.scaled(D, negated(X.e), negated(h))))
    dy = X.scaled(douts[0], h)
    check_result("normalize_jvp", "dy", dy, X.batch, X.xp)
    return outs[0].reshape(X.shape), dy.reshape(X.shape)


@one_device
def normalize_vjp_jvp(x, gy, dx) -> tuple:
    """``(gx, dgx, dy)``: ``normalize_vjp(x, gy)``, its derivative along dx with gy held fixed (the
    Hessian of <y, gy> times dx) and ``normalize_jvp``'s dy, in one run of the tangent of the fused
    vjp. What PyTorch's double backward through ``revdiff.torch.normalize`` runs."""
    X, D, y = _normalized_with_direction(x, dx)
    G = Vectors("gy", gy, X, X.shape, cotangent=True, why="as the cotangent of y = x / |x| it needs the shape of x,")
    if X.empty:
        return tuple(X.xp.zeros(X.shape, X.dtype) for _ in range(3))
    h = direction_exponents(((D, X.e),), X.dtype, X.xp)
    _, grads, douts, dgrads = _batched(sphere.normalize).vjp_jvp((y, X.v), (G.v, None),
                                                                 (None, X.scaled(D, negated(X.e), negated(h))))
    gx = X.scaled(grads[1], negated(X.e), G.e)  # x scaled by c: gx by 1/c, dgx by 1/c**2
    dgx = X.scaled(dgrads[1], negated(X.e), G.e, h)
    dy = X.scaled(douts[0], h)
    for name, value in (("gx", gx), ("dgx", dgx), ("dy", dy)):
        check_result("normalize_vjp_jvp", name, value, X.batch, X.xp)
    return gx.reshape(X.shape), dgx.reshape(X.shape), dy.reshape(X.shape)


def _tangent_directions(dg, dz, G: Vectors, Z: Vectors) -> tuple:
    """(dg', dz', h): the tangents of g and z scaled as their values and by 2**-h together (h per
    element), in one step: out(g 2**-a, z 2**-b) = out(g, z) 2**-a, linear in g and unchanged by
    z's scale."""
    why = "as a tangent of g and z it needs their shape,"
    Dg, Dz = _sphere_direction("dg", dg, G, why), _sphere_direction("dz", dz, Z, why)
    h = direction_exponents(((Dg, G.e), (Dz, Z.e)), Z.dtype, Z.xp)
    return G.scaled(Dg, negated(G.e), negated(h)), Z.scaled(Dz, negated(Z.e), negated(h)), h


@one_device
def tangent_project_jvp(g, z, dg, dz) -> tuple:
    """``(tangent_project(g, z), dout)``: the projection and its derivative along (dg, dz) (None:
    zero), in one run of the tangent of the tangent-projection program."""
    G, Z = _tangent_arguments(g, z)
    Dg, Dz, h = _tangent_directions(dg, dz, G, Z)
    if Z.empty:
        return Z.xp.zeros(Z.shape, Z.dtype), Z.xp.zeros(Z.shape, Z.dtype)
    outs, douts = _batched(sphere.tangent_project).value_jvp((Z.xp.zeros_like(G.v), G.v, Z.v), (None, Dg, Dz))
    out, dout = G.scaled(outs[0], G.e), G.scaled(douts[0], G.e, h)
    check_result("tangent_project_jvp", "out", out, Z.batch, Z.xp)
    check_result("tangent_project_jvp", "dout", dout, Z.batch, Z.xp)
    return out.reshape(Z.shape), dout.reshape(Z.shape)


@one_device
def tangent_project_vjp_jvp(g, z, gout, dg, dz) -> tuple:
    """``((gg, gz), (dgg, dgz), dout)``: ``tangent_project_vjp(g, z, gout)``, its derivatives along
    (dg, dz) with gout held fixed and ``tangent_project_jvp``'s dout, in one run of the tangent of the
    fused vjp. What PyTorch's double backward through ``revdiff.torch.tangent_project`` runs."""
    G, Z = _tangent_arguments(g, z)
    O = Vectors("gout", gout, Z, Z.shape, cotangent=True,
                why="as the cotangent of the projection it needs the shape of g and z,")
    Dg, Dz, h = _tangent_directions(dg, dz, G, Z)
    if Z.empty:
        zero = Z.xp.zeros(Z.shape, Z.dtype)
        return (zero, zero.copy()), (zero.copy(), zero.copy()), zero.copy()
    _, grads, douts, dgrads = _batched(sphere.tangent_project).vjp_jvp(
        (Z.xp.zeros_like(G.v), G.v, Z.v), (O.v, None, None), (None, Dg, Dz))
    values = []
    for (_, g_g, g_z), extra in ((grads, ()), (dgrads, (h,))):  # linear in g, gout and the direction
        g_g = _as_given(G.scaled(g_g, O.e, *extra), G.given)
        g_z = _as_given(Z.scaled(g_z, negated(Z.e), G.e, O.e, *extra), Z.given)
        values.append((g_g.reshape(Z.shape), g_z.reshape(Z.shape)))
    dout = G.scaled(douts[0], G.e, h)
    for name, value in (("gg", values[0][0]), ("gz", values[0][1]), ("dgg", values[1][0]), ("dgz", values[1][1]),
                        ("dout", dout)):
        check_result("tangent_project_vjp_jvp", name, value, Z.batch, Z.xp)
    return values[0], values[1], dout.reshape(Z.shape)
