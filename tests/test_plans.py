"""Plans (``revdiff/programs/plans.py``): a warm call of a high-level function on one host matrix
replays the compiled calls its checked path made, gives that path's results bit for bit, and hands
every unusual input back to it (which raises, scales or retries as before)."""
import threading

import numpy as np
import pytest

import revdiff
from revdiff import programs as P
from revdiff.programs import api, plans


@pytest.fixture
def replays(monkeypatch):
    """A counter of the plans' program runs (``execute.run_owned`` as the plans call it)."""
    count = {"runs": 0}
    original = plans.run_owned

    def counting(*args, **kwargs):
        count["runs"] += 1
        return original(*args, **kwargs)
    monkeypatch.setattr(plans, "run_owned", counting)
    plans.clear()
    yield count
    plans.clear()


def _calls(A, y, gz, gx, gQ, gR, method="auto"):
    """Every planned function on one matrix, by name."""
    return {"project": lambda: P.project(A, y, method=method),
            "project_vjp": lambda: P.project_vjp(A, y, gz, method=method),
            "lstsq": lambda: P.lstsq(A, y, method=method),
            "lstsq_vjp": lambda: P.lstsq_vjp(A, y, gx, method=method),
            "qr": lambda: P.qr(A, method=method),
            "qr r": lambda: P.qr(A, method=method, mode="r"),
            "qr_vjp": lambda: P.qr_vjp(A, gQ, gR, method=method),
            "qr_vjp gR None": lambda: P.qr_vjp(A, gQ, None, method=method),
            "qr_vjp r": lambda: P.qr_vjp(A, None, gR, method=method, mode="r")}


def _leaves(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
@pytest.mark.parametrize("shape", [(32, 16), (5, 5), (64, 32), (3, 7), (140, 128)])
def test_a_plan_gives_the_checked_paths_results_bit_for_bit(replays, shape, dtype):
    r = np.random.default_rng(shape[0] * shape[1])
    m, n = shape
    p = min(m, n)
    def draw(*s):
        return (r.standard_normal(s) + (1j * r.standard_normal(s) if np.dtype(dtype).kind == "c" else 0)).astype(dtype)
    A, y, gz, gx, gQ, gR = draw(m, n), draw(m), draw(m), draw(n), draw(m, p), draw(p, n)
    given = [a.copy() for a in (A, y, gz, gx, gQ, gR)]
    for name, call in _calls(A, y, gz, gx, gQ, gR).items():
        if name.startswith("lstsq") and m < n:
            continue
        checked = _leaves(call())
        runs = replays["runs"]
        planned = _leaves(call())
        assert replays["runs"] == runs + 1, f"{name}: no plan ran"
        assert len(planned) == len(checked)
        for got, want in zip(planned, checked):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want, err_msg=name)
        planned[0][...] = 0  # results are fresh arrays: a later call's are not these
        np.testing.assert_array_equal(_leaves(call())[0], checked[0])
    for a, b in zip((A, y, gz, gx, gQ, gR), given):
        np.testing.assert_array_equal(a, b)  # the inputs are never written


@pytest.mark.parametrize("method", ["cgs2", "mgs", "householder", "givens"])
def test_a_plan_for_each_method(replays, method):
    r = np.random.default_rng(3)
    A, y, g = r.standard_normal((12, 6)), r.standard_normal(12), r.standard_normal(12)
    calls = [lambda: P.qr(A, method=method), lambda: P.qr_vjp(A, np.ones((12, 6)), None, method=method)]
    if method != "givens":
        calls += [lambda: P.project_vjp(A, y, g, method=method), lambda: P.lstsq(A, y, method=method)]
    for call in calls:
        want = call()
        for got, w in zip(_leaves(call()), _leaves(want)):
            np.testing.assert_array_equal(got, w)
    assert replays["runs"] == len(calls)


def _warm(A, y, g):
    """Record the plans of project_vjp, project and qr for A's shape and dtype."""
    for _ in range(2):
        P.project_vjp(A, y, g), P.project(A, y), P.qr(A)


def test_unusual_inputs_on_a_warm_plan_take_the_checked_path(replays):
    """NaN, a dependent column and extreme magnitudes under a recorded plan: the checked path's
    error or scaled result, as without plans."""
    r = np.random.default_rng(4)
    A, y, g = r.standard_normal((32, 16)), r.standard_normal(32), r.standard_normal(32)
    _warm(A, y, g)
    bad = A.copy()
    bad[3, 5] = np.nan
    with pytest.raises(ValueError, match="'A' contains NaN or Inf"):
        P.project_vjp(bad, y, g)
    with pytest.raises(ValueError, match="'gz' contains NaN or Inf"):
        P.project_vjp(A, y, np.full(32, np.inf))
    dependent = A.copy()
    dependent[:, 7] = dependent[:, 2] - 2 * dependent[:, 4]
    for call in (lambda: P.project(dependent, y), lambda: P.project_vjp(dependent, y, g), lambda: P.qr(dependent)):
        with pytest.raises(revdiff.RankDeficientError, match="column 7"):
            call()
    for scale in (2.0 ** 600, 2.0 ** -600):  # scaled by the checked path: exactly the unscaled gradient
        gA, gy = P.project_vjp(A * scale, y, g)
        want = P.project_vjp(A, y, g)
        np.testing.assert_array_equal(gA * scale, want[0])
        np.testing.assert_array_equal(gy, want[1])
    np.testing.assert_array_equal(P.project(A, y * 2.0 ** 700), P.project(A, y) * 2.0 ** 700)


def test_a_plan_whose_program_fails_or_gives_non_finite_results_hands_the_call_back(replays, monkeypatch):
    """A failed program (a refused Householder matrix sets its record) or a result that is not
    finite: the plan answers None and the checked path runs the call (here: correctly)."""
    r = np.random.default_rng(5)
    A, y, g = r.standard_normal((64, 32)), r.standard_normal(64), r.standard_normal(64)
    want = P.project_vjp(A, y, g)
    seen = []
    original = api.ranked
    monkeypatch.setattr(api, "ranked", lambda *a, **k: seen.append(1) or original(*a, **k))
    monkeypatch.setattr(plans, "run_owned", lambda *a: None)  # as a refused matrix's run answers
    for got, w in zip(P.project_vjp(A, y, g), want):
        np.testing.assert_array_equal(got, w)
    assert seen == [1]
    from revdiff.execute import run_owned

    def infinite(*a):
        outs, grads = run_owned(*a)
        grads[2][0, 0] = np.inf
        return outs, grads
    monkeypatch.setattr(plans, "run_owned", infinite)
    for got, w in zip(P.project_vjp(A, y, g), want):
        np.testing.assert_array_equal(got, w)
    assert seen == [1, 1]


def test_options_and_arguments_a_plan_does_not_take(replays):
    """A plan is keyed by the options' types and values and the arrays' kinds: a bool rank_tol, an
    unhashable method, another dtype, a strided or non-native array each take the checked path."""
    r = np.random.default_rng(6)
    A, y, g = r.standard_normal((20, 10)), r.standard_normal(20), r.standard_normal(20)
    for _ in range(2):
        P.project_vjp(A, y, g, rank_tol=0)
    with pytest.raises(TypeError, match="rank_tol must be a real number"):
        P.project_vjp(A, y, g, rank_tol=False)
    with pytest.raises(ValueError, match="unknown method"):
        P.project_vjp(A, y, g, method=["cgs2"])
    want = P.project_vjp(A, y, g)
    for a in (np.asfortranarray(A), A.astype(">f8")):
        for got, w in zip(P.project_vjp(a, y, g), want):
            np.testing.assert_array_equal(got, w)
    got = P.project_vjp(A, y.astype(np.float32), g)  # computed in float64, gy returned as y's dtype
    assert got[1].dtype == np.float32
    with pytest.raises(ValueError, match="has shape"):
        P.project_vjp(A, y[:19], g)


def test_the_plans_kept_are_bounded_and_concurrent_calls_agree(replays):
    r = np.random.default_rng(8)
    for m in range(2, plans.MAX_PLANS // 2 + 20):
        A, y = r.standard_normal((m, 1)), r.standard_normal(m)
        P.project(A, y), P.project_vjp(A, y, y)
    assert len(plans._PLANS) <= plans.MAX_PLANS
    A, y, g = r.standard_normal((24, 12)), r.standard_normal(24), r.standard_normal(24)
    want = P.project_vjp(A, y, g)
    failures = []

    def work():
        for _ in range(50):
            got = P.project_vjp(A, y, g)
            if not all(np.array_equal(a, b) for a, b in zip(got, want)):
                failures.append(got)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures and replays["runs"] >= 200


def test_a_plan_follows_the_rule_that_chooses_the_method(replays, monkeypatch):
    """The method "auto" runs is resolved again on every planned call: a rule changed since the
    plan was kept (a module constant) runs the method it now names."""
    r = np.random.default_rng(9)
    A = r.standard_normal((40, 20))
    for _ in range(2):
        Q = P.qr(A)[0]
    monkeypatch.setattr(revdiff.programs.methods, "AUTO_HOUSEHOLDER_MIN_COLUMNS", 1)
    np.testing.assert_array_equal(P.qr(A)[0], P.qr(A, method="householder")[0])
    monkeypatch.undo()
    np.testing.assert_array_equal(P.qr(A)[0], Q)


def test_zero_arguments_and_cotangents_are_planned_and_the_last_run_is_reported(replays):
    """A zero cotangent (what PyTorch passes for an unused output) or a zero y is left unscaled by
    the checked path, so its plan runs it; ``last_run`` names the path a planned call took."""
    r = np.random.default_rng(10)
    A, gQ = r.standard_normal((20, 8)), r.standard_normal((20, 8))
    zero = np.zeros((8, 8))
    for call in (lambda: P.qr_vjp(A, gQ, zero), lambda: P.project(A, np.zeros(20)), lambda: P.qr_vjp(A, 0 * gQ, zero)):
        want = call()
        runs = replays["runs"]
        for got, w in zip(_leaves(call()), _leaves(want)):
            np.testing.assert_array_equal(got, w)
        assert replays["runs"] == runs + 1
    P.qr(A)
    P.qr(A)
    assert api.last_run("qr", "auto", A.shape) == "cgs2, one element"


def test_results_near_the_overflow_threshold_under_raising_floating_point_errors(replays):
    """A finite result whose sum would overflow, and a result that overflows, under
    ``np.seterr(all="raise")``: the result, and the named ResultOverflowError, warm and cold."""
    A, y, gx = np.eye(3) * 2.0 ** -250, np.full(3, 2.0 ** 261), np.full(3, 2.0 ** 260)
    r = np.random.default_rng(0)
    B = r.standard_normal((6, 4))
    B[:, 2] *= 2.0 ** -600
    with np.errstate(all="raise"):
        for _ in range(2):
            gA, _ = P.lstsq_vjp(A, y, gx)
            assert np.all(np.isfinite(gA)) and np.all(np.abs(gA) > 1e307)
            with pytest.raises(revdiff.ResultOverflowError):
                P.lstsq_vjp(B, r.standard_normal(6), r.standard_normal(4))


def test_a_planned_call_passes_the_modules_the_readme_names(replays):
    """A warm ``project_vjp`` runs Python code in the thirteen modules README's "One call path" lists."""
    import sys
    A, y = np.random.default_rng(11).standard_normal((12, 6)), np.ones(12)
    P.project_vjp(A, y, y)
    P.project_vjp(A, y, y)
    seen = set()

    def note(frame, event, arg):
        name = frame.f_globals.get("__name__", "")
        if event == "call" and name.startswith("revdiff"):
            seen.add(name.rpartition(".")[2])
    sys.setprofile(note)
    try:
        P.project_vjp(A, y, y)
    finally:
        sys.setprofile(None)
    assert seen == {"inputs", "device", "ranked", "api", "plans", "calls", "function", "bindings", "methods",
                    "kernels", "scan", "execute", "entry_calls"}
