"""Householder's refusals at the sign threshold (a column whose leading entry lies within rounding of it
cannot be uncomputed in its rows' order): the matrix is factored again with its rows reordered, a batch
reruns only what it refused, and a matrix refused in every order raises by name or, under the default,
runs with cgs2."""
import numpy as np
import pytest

import revdiff
from helpers import leaves
from revdiff import programs as P


#: random float32 40x32 matrices (``_at_the_sign_threshold``'s k) and the ulps from the sign
#: threshold at which Householder's program refuses them
REFUSED_AT_THE_THRESHOLD = ((0, -6), (4, 6), (5, 6))


def _at_the_sign_threshold(k: int, ulps: int) -> np.ndarray:
    """The k-th of a set of random float32 40x32 matrices, its first column's leading entry x0 put
    ``ulps`` ulps from the reflector's sign threshold, x0 = -|x| / 1000 (solved with the rest of the
    column fixed). The uncompute recomputes the sign from the column restored to rounding, a step
    of ulp(|x|), some hundreds of ulp(x0): on one side of the threshold, within a few ulps, every such
    matrix is refused with its rows as they are."""
    A = np.random.default_rng(7).standard_normal((k + 1, 40, 32)).astype(np.float32)[k]
    rest = np.linalg.norm(A[1:, 0].astype(np.float64))
    A[0, 0] = np.float32(-0.001 * rest / np.sqrt(1 - 1e-6))
    for _ in range(abs(ulps)):
        A[0, 0] = np.nextafter(A[0, 0], np.float32(np.sign(ulps) * np.inf))
    return A


def _refused_at_the_sign_threshold():
    """A float32 40x32 matrix that Householder's program refuses with its rows as they are, and a
    batch of random ones with it as element 4."""
    batch = np.random.default_rng(8).standard_normal((8, 40, 32)).astype(np.float32)
    batch[4] = _at_the_sign_threshold(*REFUSED_AT_THE_THRESHOLD[0])
    return batch[4], batch


def _counting_runs(monkeypatch) -> list:
    """The runs of the QR-based programs (``ranked``'s calls), each as the elements its failure
    reported (() for a run that did not fail)."""
    import revdiff.programs.api as api
    import revdiff.programs.tangents as tangents
    runs: list = []
    ranked = api.ranked

    def counted(call, *args, **kwargs):
        def run(rows):
            try:
                out = call(rows)
            except revdiff.ReversibilityError as exc:
                runs.append(exc.failed_elements)
                raise
            runs.append(())
            return out
        return ranked(run, *args, **kwargs)

    monkeypatch.setattr(api, "ranked", counted)
    monkeypatch.setattr(tangents, "ranked", counted)
    monkeypatch.setattr(api, "run_plan", lambda *a: None)  # a warm call's plan would run no ``ranked``
    return runs


#: the high-level functions whose results come from a forward run (``BatchedFunction.value``, and
#: ``value_jvp`` for the jvps): no uncompute, so no refusal; the others uncompute (a gradient does)
FORWARD_CALLS = ("qr", "project", "lstsq", "qr complete (R)", "qr pivoting", "qr_jvp", "project_jvp", "lstsq_jvp")


def _agree_with_cgs2(calls: dict, runs: list) -> None:
    """Each call with method "householder" refused once and rerun (a forward call: answered in its
    first run), its every output within float32 rounding of method "cgs2"'s (a call may name
    another method for "cgs2")."""
    for name, call in calls.items():
        runs.clear()
        got = leaves(call("householder"))
        assert [bool(r) for r in runs] == ([False] if name in FORWARD_CALLS else [True, False]), name
        for g, w in zip(got, leaves(call("cgs2"))):
            np.testing.assert_allclose(g, w, rtol=0, atol=2e-5 * max(float(np.abs(w).max()), 1e-30), err_msg=name)


def test_a_matrix_refused_at_the_sign_threshold_is_factored_with_its_rows_reordered(monkeypatch):
    """P A = (P Q) R: every high-level function returns what it returns for another method (to
    float32 rounding), and in a batch the refused matrix alone is run again: the others keep their bits."""
    from revdiff.programs.householder import householder
    A, batch = _refused_at_the_sign_threshold()
    with pytest.raises(revdiff.ReversibilityError, match="'V' is not zero"):
        revdiff.batched(householder, ("Q", "R", "A"))(np.zeros((1, 40, 32), np.float32),
                                                      np.zeros((1, 32, 32), np.float32), A[None])
    r = np.random.default_rng(3)
    y, gz, gx = (r.standard_normal(k).astype(np.float32) for k in (40, 40, 32))
    gQ, gR, dA = (r.standard_normal(s).astype(np.float32) for s in ((40, 32), (32, 32), (40, 32)))
    calls = {"qr": lambda m: P.qr(A, method=m), "qr_vjp": lambda m: P.qr_vjp(A, gQ, gR, method=m),
             "project": lambda m: P.project(A, y, method=m),
             "project_vjp": lambda m: P.project_vjp(A, y, gz, method=m),
             "lstsq": lambda m: P.lstsq(A, y, method=m), "lstsq_vjp": lambda m: P.lstsq_vjp(A, y, gx, method=m),
             "qr_jvp": lambda m: P.qr_jvp(A, dA, method=m),
             "project_jvp": lambda m: P.project_jvp(A, y, dA, y, method=m),
             "project_vjp_jvp": lambda m: P.project_vjp_jvp(A, y, gz, dA, y, method=m),
             "qr_vjp_jvp": lambda m: P.qr_vjp_jvp(A, gQ, gR, dA, method=m),
             "lstsq_jvp": lambda m: P.lstsq_jvp(A, y, dA, y, method=m),
             "lstsq_vjp_jvp": lambda m: P.lstsq_vjp_jvp(A, y, gx, dA, y, method=m),
             "qr complete (R)": lambda m: P.qr(A, method="givens" if m == "cgs2" else m, mode="complete")[1]}
    _agree_with_cgs2(calls, _counting_runs(monkeypatch))
    zs = P.project_vjp(batch, np.tile(y, (8, 1)), np.tile(gz, (8, 1)), method="householder")[0]
    gAs = P.qr_vjp(batch, np.tile(gQ, (8, 1, 1)), None, method="householder")
    for k in (0, 1, 2, 3, 5, 6, 7):  # element 4 is A
        np.testing.assert_array_equal(zs[k], P.project_vjp(batch[k], y, gz, method="householder")[0])
        np.testing.assert_array_equal(gAs[k], P.qr_vjp(batch[k], gQ, None, method="householder"))
    np.testing.assert_array_equal(zs[4], P.project_vjp(A, y, gz, method="householder")[0])


def test_every_matrix_a_batch_refuses_is_reordered_in_one_more_run(monkeypatch):
    """Three refused matrices among three others, all reported by the first run: one more run of
    the batch, and every element the bits of its own call."""
    refused = [_at_the_sign_threshold(k, ulps) for k, ulps in REFUSED_AT_THE_THRESHOLD]
    r = np.random.default_rng(5)
    others = r.standard_normal((3, 40, 32)).astype(np.float32)
    batch = np.stack([others[0], refused[0], refused[1], others[1], refused[2], others[2]])
    y, gz = r.standard_normal((6, 40)).astype(np.float32), r.standard_normal((6, 40)).astype(np.float32)
    runs = _counting_runs(monkeypatch)
    gA, gy = P.project_vjp(batch, y, gz, method="householder")
    assert runs == [(1, 2, 4), ()]
    for k in range(6):
        one = P.project_vjp(batch[k], y[k], gz[k], method="householder")
        np.testing.assert_array_equal(gA[k], one[0])
        np.testing.assert_array_equal(gy[k], one[1])


def test_a_matrix_refused_with_its_columns_pivoted_is_factored_with_its_rows_reordered(monkeypatch):
    """As above, where the refusal comes with the columns in their pivoted order: QR with pivoting
    and every function with rank_deficient="truncate" (this full-rank matrix keeps every column)."""
    A = np.random.default_rng(2003).standard_normal((5000, 40, 32)).astype(np.float32)[4180]
    r = np.random.default_rng(4)
    y, gz, gx, dy = (r.standard_normal(k).astype(np.float32) for k in (40, 40, 32, 40))
    dA = r.standard_normal((40, 32)).astype(np.float32)
    t = {"rank_deficient": "truncate"}
    calls = {"qr pivoting": lambda m: P.qr(A, method=m, pivoting=True),
             "project": lambda m: P.project(A, y, method=m, **t),
             "project_vjp": lambda m: P.project_vjp(A, y, gz, method=m, **t),
             "lstsq": lambda m: P.lstsq(A, y, method=m, **t),
             "lstsq_vjp": lambda m: P.lstsq_vjp(A, y, gx, method=m, **t),
             "project_jvp": lambda m: P.project_jvp(A, y, dA, dy, method=m, **t),
             "project_vjp_jvp": lambda m: P.project_vjp_jvp(A, y, gz, dA, dy, method=m, **t),
             "lstsq_jvp": lambda m: P.lstsq_jvp(A, y, dA, dy, method=m, **t),
             "lstsq_vjp_jvp": lambda m: P.lstsq_vjp_jvp(A, y, gx, dA, dy, method=m, **t)}
    _agree_with_cgs2(calls, _counting_runs(monkeypatch))


def test_a_refused_rank_deficient_matrix_is_named_by_its_batch_index():
    """The rank check after a refusal scans the refused matrices alone (here the second and third of
    a batch (2, 2): the first full-rank, the second of rank 2) and names the deficient one in A's batch."""
    from revdiff.programs.arguments import Matrices
    from revdiff.programs.ranked import ranked
    local = np.random.default_rng(0)
    A = local.standard_normal((2, 2, 9, 4))
    A[1, 0] = local.standard_normal((9, 2)) @ local.standard_normal((2, 4))
    M = Matrices(A)

    def refuse(rows):
        error = revdiff.ReversibilityError("ancilla array 'V' is not zero")
        error.failed_elements = (1, 2)
        raise error

    with pytest.raises(revdiff.RankDeficientError, match=r"batch index \(1, 0\) has numerical rank 2"):
        ranked(refuse, M, 1e-12, "householder")


@pytest.mark.parametrize("method, attempts", [("householder", 3), ("cgs2", 1)])
def test_a_refusal_is_retried_in_the_other_row_orders_then_raised(method, attempts):
    """Only Householder's refusals are retried, each refused matrix in its own orders (reversed,
    then reversed and rotated by half: each leads with another row), the others kept; then the last
    refusal is raised, marked as refused in every order. (The error here names its element only, as
    a GPU batch's does.)"""
    from revdiff.programs.arguments import Matrices
    from revdiff.programs.ranked import ranked
    M = Matrices(np.random.default_rng(0).standard_normal((3, 4, 2)))
    orders = []

    def refuse_element_1(rows):
        orders.append(rows(np.tile(np.arange(4), (3, 1))))
        error = revdiff.ReversibilityError("ancilla array 'V' is not zero")
        error.batch_element = 1
        raise error

    with pytest.raises(revdiff.ReversibilityError, match="'V' is not zero") as caught:
        ranked(refuse_element_1, M, 1e-12, method)
    assert ("with its rows reversed" in str(caught.value)) == (method == "householder")
    assert caught.value.refused_in_every_order == (method == "householder")
    assert len(orders) == attempts
    for order in orders:
        np.testing.assert_array_equal(order[[0, 2]], [[0, 1, 2, 3]] * 2)
    assert [list(order[1]) for order in orders] == [[0, 1, 2, 3], [3, 2, 1, 0], [1, 0, 3, 2]][:attempts]


def _refused_everywhere(seed: int, m: int = 64, n: int = 32) -> tuple:
    """(A, y): a well-conditioned A whose first column's leading entry sits at Householder's sign
    threshold (-|x| / 1000) in rows 0, m - 1 and m // 2 - 1, the leading rows of all three orders
    (whether rounding puts it on the refused side depends on the matrix and the machine's BLAS)."""
    r = np.random.default_rng(seed)
    A, y = r.standard_normal((m, n)), r.standard_normal(m)
    rows, t = [0, m - 1, m // 2 - 1], 1 / 1000
    A[rows, 0] = -t * (np.linalg.norm(np.delete(A[:, 0], rows)) / np.sqrt(1 - len(rows) * t * t))
    return A, y


def test_the_default_equals_its_elements_and_any_split_of_a_batch_bit_for_bit():
    """What "auto" runs depends on each matrix, never on the batch: a batch's results equal the
    calls of its elements one by one and of any split of it (``revdiff.dask``'s chunks) bit for bit,
    in SIMD lanes (300 matrices) and out of them, below and within the projection rule's shapes."""
    r = np.random.default_rng(11)
    for shape in ((300, 32, 16), (300, 48, 24)):
        A, y = r.standard_normal(shape), r.standard_normal(shape[:2])
        for call in (lambda a, v: P.project(a, v), lambda a, v: P.project_vjp(a, v, v)[0],
                     lambda a, v: P.qr(a)[1]):
            whole = call(A, y)
            np.testing.assert_array_equal(whole, np.concatenate([call(A[:100], y[:100]), call(A[100:], y[100:])]))
            np.testing.assert_array_equal(whole[7], call(A[7:8], y[7:8])[0])


def test_auto_runs_cgs2_where_householder_refuses_a_matrix_in_every_order(monkeypatch):
    """Where Householder refuses a full-rank matrix in all three row orders, an explicit
    "householder" raises and the default ("auto", Householder at 64 x 32 for projections and least
    squares) answers with cgs2, bit for bit, in every function that takes a method: with the
    refusal forced, and on a matrix that Householder refuses (found among a few crafted ones), whose
    projection (a forward run, which uncomputes nothing) Householder answers."""
    from revdiff.programs import api, tangents
    r = np.random.default_rng(8)
    A, y = r.standard_normal((64, 32)), r.standard_normal(64)
    g, dA, gQ = np.ones(32), np.ones((64, 32)), np.ones((64, 32))
    calls = (lambda **k: P.project(A, y, **k), lambda **k: P.project_vjp(A, y, y, **k),
             lambda **k: P.lstsq(A, y, **k), lambda **k: P.lstsq_vjp(A, y, g, **k),
             lambda **k: P.project_jvp(A, y, dA, y, **k), lambda **k: P.project_vjp_jvp(A, y, y, dA, y, **k),
             lambda **k: P.lstsq_jvp(A, y, dA, y, **k), lambda **k: P.lstsq_vjp_jvp(A, y, g, dA, y, **k),
             lambda **k: P.qr(A, **k), lambda **k: P.qr_vjp(A, gQ, None, **k), lambda **k: P.qr_jvp(A, dA, **k),
             lambda **k: P.qr_vjp_jvp(A, gQ, None, dA, **k))
    wants = [call(method="cgs2") for call in calls]
    for module in (api, tangents):
        original = module.ranked

        def refusing(call, M, tol, method, *a, _original=original, **k):
            if method == "householder":
                error = revdiff.ReversibilityError("refused")
                error.refused_in_every_order = True
                raise error
            return _original(call, M, tol, method, *a, **k)
        monkeypatch.setattr(module, "ranked", refusing)
    monkeypatch.setattr(api, "run_plan", lambda *a: None)  # a plan an earlier test left would not refuse
    monkeypatch.setattr(revdiff.programs.methods, "AUTO_HOUSEHOLDER_MIN_COLUMNS", 1)  # QR too: Householder
    for call, want in zip(calls, wants):
        for got, w in zip(leaves(call()), leaves(want)):
            np.testing.assert_array_equal(got, w)
        with pytest.raises(revdiff.ReversibilityError, match="refused"):
            call(method="householder")
    monkeypatch.undo()
    for seed in range(40):
        A, y = _refused_everywhere(seed)
        try:
            P.project_vjp(A, y, y, method="householder")
        except revdiff.ReversibilityError as exc:
            assert exc.refused_in_every_order and np.linalg.cond(A) < 10
            break
    else:
        pytest.skip("none of the crafted matrices was refused in every order on this machine")
    for got, want in zip(P.project_vjp(A, y, y), P.project_vjp(A, y, y, method="cgs2")):
        np.testing.assert_array_equal(got, want)
    for method in ("auto", "householder"):
        np.testing.assert_allclose(P.project(A, y, method=method), A @ np.linalg.lstsq(A, y, rcond=None)[0],
                                   atol=1e-13)


def test_the_cgs2_fallback_keeps_other_errors_and_a_complete_q():
    """``cgs2_where_refused`` reruns only a refusal in every order under "auto" (not one of another
    kind, nor with an explicit method, nor for a complete Q, which cgs2 cannot form)."""
    from revdiff.programs.ranked import cgs2_where_refused
    calls = []

    def refuses(A, method="auto", mode="reduced", everywhere=True):
        calls.append(method)
        if method == "cgs2":
            return "cgs2"
        error = revdiff.ReversibilityError("refused")
        error.refused_in_every_order = everywhere
        raise error

    f = cgs2_where_refused(refuses)
    assert f(None) == f(None, "auto") == "cgs2" and calls == ["auto", "cgs2"] * 2
    for kwargs in ({"method": "householder"}, {"mode": "complete"}, {"everywhere": False}):
        with pytest.raises(revdiff.ReversibilityError):
            f(None, **kwargs)


def test_row_orders_put_rows_in_order_and_back():
    """``Rows`` on an order that is not its own inverse (the orders the retry uses are): element k's
    row i is row order[k, i] of A, and ``back`` undoes it, for vectors and matrices alike."""
    from revdiff.programs.ranked import Rows
    order = np.array([[0, 1, 2, 3], [1, 2, 3, 0]])
    rows = Rows(np, order)
    a = np.arange(8.0).reshape(2, 4)
    np.testing.assert_array_equal(rows(a), [[0, 1, 2, 3], [5, 6, 7, 4]])
    A = np.arange(24.0).reshape(2, 4, 3)
    np.testing.assert_array_equal(rows(A)[1], A[1][[1, 2, 3, 0]])
    np.testing.assert_array_equal(rows.back(rows(A)), A)
    np.testing.assert_array_equal(rows.back(rows(a)), a)
    assert Rows(np)(a) is a and Rows(np).back(a) is a
