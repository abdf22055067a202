"""Leapfrog integrators in the language: gradients against finite differences and PyTorch, exact
fixed-point round trips, measured drift, and memory that does not grow with the steps."""
import numpy as np
import pytest

import revdiff
from helpers import assert_gradient
from revdiff.programs import leapfrog as L

G, SOFT, DT = 1.0, 0.01, 1e-3


def test_nbody_energy_gradient_matches_finite_differences():
    x, v, m = L.star_and_two_planets()
    assert_gradient(L.nbody_final_energy, 0.0, x, v, m, G, SOFT, DT, 30)


def test_chain_gradient_matches_finite_differences_and_conserves_energy():
    rng = np.random.default_rng(5)
    x, v = rng.standard_normal(6), rng.standard_normal(6)
    assert_gradient(L.chain_leapfrog, x, v, 2.0, 1.5, 0.01, 25)
    e0 = L.chain_energy(0.0, x, v, 2.0, 1.5)[0]
    xs, vs, *_ = L.chain_leapfrog(x.copy(), v.copy(), 2.0, 1.5, 0.01, 5000)
    e1 = L.chain_energy(0.0, xs, vs, 2.0, 1.5)[0]
    assert abs(e1 - e0) < 1e-3 * e0  # symplectic: the energy error stays O(dt^2)


def test_nbody_gradient_matches_pytorch():
    pytest.importorskip("torch")
    from revdiff.tools import peers
    x, v, m = L.star_and_two_planets()
    _, gx, gv, *_ = revdiff.grad(L.nbody_final_energy, "E")(0.0, x, v, m, G, SOFT, DT, 500)
    tx, tv = peers.torch_nbody_gradient()(x, v, m, G, SOFT, DT, 500)
    np.testing.assert_allclose(gx, tx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gv, tv, rtol=1e-10, atol=1e-12)


def test_fixed_point_round_trip_is_bit_exact():
    x, v, m = L.star_and_two_planets()
    scale = float(2 ** 40)
    xi, vi = np.round(x * scale).astype(np.int64), np.round(v * scale).astype(np.int64)
    report = revdiff.roundtrip_error(L.nbody_leapfrog_fixed, xi, vi, m, G, SOFT, DT, 20000, scale)
    assert report["x"] == (0.0, 0.0) and report["v"] == (0.0, 0.0)
    xf = L.nbody_leapfrog_fixed(xi.copy(), vi.copy(), m, G, SOFT, DT, 2000, scale)[0] / scale
    np.testing.assert_allclose(xf, L.nbody_leapfrog(x.copy(), v.copy(), m, G, SOFT, DT, 2000)[0], atol=1e-9)


def test_roundtrip_error_reports_every_parameter():
    x, v, m = L.star_and_two_planets()
    report = revdiff.roundtrip_error(L.nbody_leapfrog, x, v, m, G, SOFT, DT, 2000)
    assert set(report) == {"x", "v", "m", "G", "soft", "dt", "steps"}
    assert 0 < report["x"].rel < 1e-13 and report["v"].abs < 1e-13
    assert report["steps"] == (0.0, 0.0) and report["m"] == (0.0, 0.0)
    x32, v32, m32 = L.star_and_two_planets(np.float32)
    drift32 = revdiff.roundtrip_error(L.nbody_leapfrog, x32, v32, m32, G, SOFT, DT, 2000)["x"].rel
    assert 1e-9 < drift32 < 1e-4  # float32 drifts visibly, float64 barely


def test_gradient_memory_does_not_grow_with_steps():
    x, v, m = L.star_and_two_planets()
    grad = revdiff.grad(L.nbody_final_energy, "E")
    grad(0.0, x, v, m, G, SOFT, DT, 10)  # compile
    _, short = revdiff.peak_memory_growth(grad, 0.0, x, v, m, G, SOFT, DT, 100)
    _, long = revdiff.peak_memory_growth(grad, 0.0, x, v, m, G, SOFT, DT, 100_000)
    if long is None:
        pytest.skip("peak memory is measured through /proc (Linux)")
    assert long <= 1.1 * short + 2 ** 20, (short, long)  # a tape would need ~100 MB here
