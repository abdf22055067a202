"""The fused vjp program (forward and adjoint in one function, the final uncompute and the first
recompute elided where they cancel): same results as the forward program followed by the adjoint,
and the elision happens exactly when it is valid."""
import re

import numpy as np

import revdiff
from helpers import assert_gradient, copy_args, fused_vjp
from revdiff import programs as P
from revdiff.programs.gram_schmidt import bcgs2_panel
from revdiff import reversible, routine, zero, zeros
from revdiff.passes.fuse import split_for_fused_vjp

rng = np.random.default_rng(3)


def test_projection_vjp_is_fused_and_elides_one_qr_uncompute_and_recompute():
    src = P.project_cgs2.source("vjp", np.zeros(6), np.zeros((3, 3)), np.zeros((6, 3)), np.zeros(6))
    calls = re.findall(r"\b(cgs2_\w+)(?:\(| inlined)", src)  # the QR program called (or inlined) by its name
    assert sum(c.endswith("_forward") for c in calls) == 1, calls  # the forward QR, not its recompute
    assert sum(c.endswith("_adjoint") for c in calls) == 1, calls
    assert not any(c.endswith("_inverse") or c.endswith("_inverse_adjoint") for c in calls), calls


def test_fused_vjp_matches_forward_then_adjoint():
    m, n = 9, 4
    args = (np.zeros(m), np.zeros((n, n)), rng.standard_normal((m, n)), rng.standard_normal(m))
    gz = rng.standard_normal(m)
    outs, pullback = revdiff.vjp(P.project_cgs2, *copy_args(args))
    want = pullback(gz, None, None, None)
    saved, got = fused_vjp(P.project_cgs2, args, (gz, None, None, None))
    np.testing.assert_allclose(saved[0], outs[0], rtol=1e-13, atol=1e-13)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-12)


@reversible
def compute_writes_a_parameter(out, t, x):
    s = zero(float)
    with routine:
        s += x * x
        t += s  # the compute block writes a parameter: its cotangent is not zero, no elision
    out += s * t
    ~routine
    del s


@reversible
def kept_scalar_ancilla(out, x):
    s = zero(float)
    w = zeros(len(x), float)
    with routine:
        for i in range(len(x)):
            w[i] += x[i] * x[i]
        s += np.dot(w, x)
    out += np.sin(s)
    ~routine
    del w
    del s


def test_elision_only_where_the_compute_block_writes_ancillas_alone():
    callee = compute_writes_a_parameter._callee_modifies
    prefix, kept = split_for_fused_vjp(compute_writes_a_parameter.ir.body, callee)
    assert prefix is compute_writes_a_parameter.ir.body and kept == []
    body = kept_scalar_ancilla.ir.body
    prefix, kept = split_for_fused_vjp(body, kept_scalar_ancilla._callee_modifies)
    assert [a.name for a in kept] == ["s", "w"] and len(prefix) < len(body)


def test_fused_vjp_values_with_and_without_elision():
    for f, args, cots in ((compute_writes_a_parameter, (0.5, 0.3, 1.2), (1.0, 0.7, None)),
                          (kept_scalar_ancilla, (0.1, rng.standard_normal(5)), (1.0, None))):
        outs, pullback = revdiff.vjp(f, *copy_args(args))
        want = pullback(*cots)
        saved, got = fused_vjp(f, args, cots)
        modified = sorted(f.modified_positions())
        for k, s in zip(modified, saved):
            np.testing.assert_allclose(s.reshape(np.shape(outs[k])), outs[k], rtol=1e-14)
        for g, w in zip(got, [w for w in want if w is not None]):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_batched_vjp_uses_the_fused_program():
    bf = revdiff.batched(P.project_cgs2, ("z", "R", "A", "y"))
    types = bf._element_types((np.zeros((2, 5)), np.zeros((2, 2, 2)), np.zeros((2, 5, 2)), np.zeros((2, 5))))
    assert "project_cgs2_" in bf.source("vjp", types) and "_vjp(" in bf.source("vjp", types)


# The same reasoning inside any block of the adjoint: an uncompute whose ancillas are freed right
# after it restores values nothing reads, so its adjoint is the recompute alone.

@reversible
def routine_per_element(out, x):
    for i in range(len(x)):
        s = zero(float)
        with routine:
            s += x[i] * x[i]
        out += np.sin(s)
        ~routine
        del s


@reversible
def routine_per_element_writing_a_parameter(out, t, x):
    for i in range(len(x)):
        s = zero(float)
        with routine:
            s += x[i] * x[i]
            t += s
        out += np.sin(s) * t
        ~routine
        del s


def _gradient_updates(src: str, name: str) -> int:
    return len(re.findall(rf"^\s*{name}(\[[^\]]*\])? [+-]= ", src, re.M))


def test_adjoint_recomputes_an_uncompute_whose_ancillas_are_freed_without_gradient_work():
    x = rng.standard_normal(5)
    src = routine_per_element.source("adjoint", 0.0, x)
    assert _gradient_updates(src, "g_x") == 1, src  # from the compute block only
    assert_gradient(routine_per_element, 0.3, x)
    # the compute block writes t, which outlives it: the uncompute keeps its gradient rule
    src = routine_per_element_writing_a_parameter.source("adjoint", 0.0, 0.2, x)
    assert _gradient_updates(src, "g_x") == 2, src
    assert_gradient(routine_per_element_writing_a_parameter, 0.3, 0.2, x)


@reversible
def products_into_ancillas(out, A, x):
    m, n = A.shape
    s = zeros(n, A.dtype)
    t = zeros(n, A.dtype)
    t[0] += x[0]  # t is touched before its product
    with routine:
        s[:] += A.T @ x
        t[:] += A.T @ x
    out[:] += A @ s
    out[:] += A @ t
    ~routine
    t[0] -= x[0]
    del t
    del s


def test_adjoint_leaves_out_the_dead_undo_of_a_product_into_a_fresh_ancilla():
    """s's first write is a matrix product; after its undo the adjoint would reach s's allocation
    with nothing reading s in between: the undo and s's zero check are left out. t is written
    before its product, so its undo and zero check stay. Gradients are unchanged."""
    args = (np.zeros(5), rng.standard_normal((5, 3)), rng.standard_normal(5))
    src = products_into_ancillas.source("adjoint", *args)
    assert not re.search(r"^\s*s\[\w+\] -= ", src, re.M), src
    assert re.search(r"^\s*t\[\w+\] -= ", src, re.M), src
    assert "abs(t[" in src and "abs(s[" not in src, src
    assert_gradient(products_into_ancillas, *args)
    bcgs2 = P.bcgs2.source("adjoint", np.zeros((70, 40)), np.zeros((40, 40)), np.zeros((70, 40)))
    assert re.search(r"_host_matmat\(S1\[[^)]*, 1\)", bcgs2)  # the recompute of the panel's coefficients
    assert not re.search(r"_host_matmat\(S[12]\[[^)]*, -1\)", bcgs2), bcgs2  # but not their undo


@reversible
def reflected(x, u):
    """x <- (I - 2 u u^T) x for a unit u through a coefficient d = u . x uncomputed by a scaling and a
    dot product (as the Householder reflections uncompute theirs)."""
    d = zero(x.dtype)
    d += np.dot(u, x)
    x[:] -= (2.0 * d) * u
    d *= -1.0
    d -= np.dot(u, x)
    del d


def test_adjoint_leaves_out_the_gradients_that_meet_a_freed_ancillas_zero_cotangent():
    """An ancilla's last writes before it is freed (d *= -1; d -= u . x) see a zero cotangent in
    the adjoint: only their undos are emitted (no gradient work), and the gradients stay right."""
    u = np.array([0.6, 0.8, 0.0])
    args = (rng.standard_normal(3), u)
    lines = reflected.source("adjoint", *args).splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().startswith("# line")]
    blocks = {lines[i].split(":", 1)[1].strip(): "\n".join(lines[i:j]) for i, j in zip(starts, starts[1:] + [len(lines)])}
    for statement in ("d -= np.dot(u, x)", "d *= -1.0"):
        assert "g_" not in blocks[statement], blocks[statement]  # the undo alone
    assert "g_u" in blocks["d += np.dot(u, x)"] and "g_d" in blocks["x[:] -= (2.0 * d) * u"]
    x, g = args[0], rng.standard_normal(3)  # (differences would move u off the unit sphere, where d is not uncomputed)
    outs, pullback = revdiff.vjp(reflected, *copy_args(args))
    gx, gu = pullback(g, np.zeros(3))
    np.testing.assert_allclose(gx, g - 2 * u * (u @ g), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(gu, -2 * (g * (u @ x) + x * (u @ g)), rtol=1e-14, atol=1e-15)


@reversible
def two_routines(y, z, x):
    """Two routines undone back to back: the adjoint inverts each (new statements), the first's
    dead gradients (u's uncompute) beside the second's live ones (s, not freed there)."""
    n = len(x)
    w = zeros(n, float)
    s = zeros(n, float)
    with routine:
        u = zeros(n, float)
        u[:] += x * 1.0
        u[:] += x * 2.0
        w[:] += u * x
        u[:] -= x * 1.0
        u[:] -= x * 2.0
        del u
    with routine:
        s[:] += x * 1.5
        s[:] += x * 2.5
    y[:] += s * x
    z[:] += w * x
    ~routine
    ~routine
    z[:] += s * x
    y[:] += w * x
    del s
    del w


def test_dead_gradients_are_known_by_the_statements_themselves():
    """The adjoint marks dead gradients in statements that inverted blocks create and drop: it keeps
    the statements, so a later statement can never reuse a marked one's id (and lose its gradient;
    which ids Python reuses depends on the allocations before, so a failure here is not certain)."""
    x = rng.standard_normal(4)
    outs, pullback = revdiff.vjp(two_routines, np.zeros(4), np.zeros(4), x.copy())
    np.testing.assert_allclose(outs[0], 4 * x ** 2, rtol=1e-15)  # y = s x, s = 4 x
    np.testing.assert_allclose(outs[1], 3 * x ** 3, rtol=1e-15)  # z = w x, w = u x, u = 3 x
    np.testing.assert_allclose(pullback(np.ones(4), np.ones(4), None)[2], 8 * x + 9 * x ** 2, rtol=1e-14)
    assert_gradient(two_routines, np.zeros(4), np.zeros(4), x)


def test_qr_adjoints_call_no_inverse_adjoint():
    A = np.zeros((6, 3))
    for qr in (P.cgs2, P.bcgs2, P.mgs):
        calls = re.findall(r"\b(\w+)\(", qr.source("adjoint", np.zeros((6, 3)), np.zeros((3, 3)), A))
        assert not any(c.endswith("_inverse_adjoint") for c in calls), (qr, calls)
        if qr is P.cgs2:  # each column's projections are recomputed by the forward program
            assert any(c.startswith("classical_pass_") and c.endswith("_forward") for c in calls), calls


def test_the_forward_half_leaves_out_uncomputes_of_ancillas_it_frees():
    """In a fused vjp the adjoint half recomputes and uncomputes every routine whose ancillas are
    freed right after it, on the same values, and checks them there: the forward half (and the
    callees it runs, as `vjp_forward` programs) leaves those uncomputes and their checks out."""
    m, n = 70, 40  # two block-CGS2 panels
    args = (np.zeros(m), np.zeros((n, n)), rng.standard_normal((m, n)), rng.standard_normal(m))
    src = P.project_bcgs2.source("vjp", *args)
    assert "left out in the vjp's forward half" in src
    # the panel's QR (bcgs2_panel, whose panels are cgs2's), and cgs2 below it, run as vjp_forward programs
    assert re.search(r"\bbcgs2_panel_[0-9a-f]{16}_vjp_forward\(", src) and not re.search(r"_[0-9a-f]{16}_forward\(", src)
    inner = bcgs2_panel.source("vjp_forward", np.zeros((m, 32)), np.zeros((32, 32)), rng.standard_normal((m, 32)))
    assert re.search(r"\bcgs2_[0-9a-f]{16}_vjp_forward\(", inner) and not re.search(r"_[0-9a-f]{16}_forward\(", inner)
    assert re.search(r"abs\(bcgs2_adjoint_V\[", src)  # the adjoint half still checks its panel ancillas
    assert not re.search(r"abs\(bcgs2_forward_V\[", src)
    panel = P.cgs2.source("vjp_forward", np.zeros((m, 32)), np.zeros((32, 32)), rng.standard_normal((m, 32)))
    full = P.cgs2.source("forward", np.zeros((m, 32)), np.zeros((32, 32)), rng.standard_normal((m, 32)))
    assert "classical_pass" in panel and "_inverse(" not in panel and "_inverse(" in full
    gz = rng.standard_normal(m)
    outs, pullback = revdiff.vjp(P.project_bcgs2, *copy_args(args))
    saved, got = fused_vjp(P.project_bcgs2, args, (gz, None, None, None))
    np.testing.assert_allclose(saved[0], outs[0], rtol=1e-13, atol=1e-13)
    for g, w in zip(got, pullback(gz, None, None, None)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-11)
    assert_gradient(P.project_bcgs2, *args)
