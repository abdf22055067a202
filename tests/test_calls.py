"""How a call reaches compiled code: the entries read NumPy's array objects (data pointer, shape,
strides) where their layout was found, and unpack words where it was not, with the same results;
a warm call finds its program with one lookup, and a rebound global is still seen."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import revdiff
from revdiff import programs as P
from revdiff import reversible
from revdiff.calls import argument_kinds, compiled
from revdiff.targets.llvm.array_fields import ARRAY_FIELDS, _matches

rng = np.random.default_rng(11)


@revdiff.reversible
def scale_rows(y, A, c):
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            y[i] += c * A[i, j]


def test_the_array_layout_is_found_and_holds_for_every_kind_of_array():
    assert ARRAY_FIELDS is not None  # CPython and NumPy as CI installs them
    arrays = [np.zeros((4, 6))[::2, 1::3], np.ones(7, np.complex64), np.empty((2, 3, 4), order="F"),
              np.zeros((0, 5)), np.broadcast_to(np.arange(3.0), (4, 3)), np.asfortranarray(rng.standard_normal((3, 2)))]
    assert all(_matches(a, ARRAY_FIELDS) for a in arrays)


def test_strided_views_and_scalars_reach_the_program_as_numpy_sees_them():
    A = rng.standard_normal((8, 10))[::2, ::-3]
    y = np.zeros(12)[::3]
    out = scale_rows(y, A, np.float64(0.5))
    np.testing.assert_allclose(out[0], 0.5 * A.sum(axis=1), rtol=1e-14)
    assert out[2] == 0.5 and type(out[2]) is np.float64


def test_a_program_refuses_arguments_it_was_not_compiled_for():
    c = compiled(scale_rows, "forward", (np.zeros(3), np.zeros((3, 2)), 1.0))
    record = np.zeros(8)
    with pytest.raises(TypeError, match="compiled for a float64 array of rank 2, not a float32 array"):
        c.program(np.zeros(3), np.zeros((3, 2), np.float32), 1.0, record)
    with pytest.raises(TypeError, match="non-native byte order"):
        c.program(np.zeros(3), np.zeros((3, 2), ">f8"), 1.0, record)
    with pytest.raises(TypeError, match="takes 3 arguments, got 2"):
        c.program(np.zeros(3), 1.0, record)


def test_the_packed_entries_give_the_same_results(tmp_path):
    """Where NumPy's layout is not found, every call packs its arguments into words: programs,
    gradients, batches and lanes alike, bit for bit the results of the entries reading arrays."""
    script = tmp_path / "packed.py"
    script.write_text(textwrap.dedent("""
        import sys
        import types
        import numpy as np
        if sys.argv[1] == "packed":  # as if NumPy's layout were not found: before revdiff reads it
            fields = types.ModuleType("revdiff.targets.llvm.array_fields")
            fields.ARRAY_FIELDS, fields.ArrayFields = None, tuple
            sys.modules[fields.__name__] = fields
        from revdiff import programs as P
        from revdiff.targets.llvm import entry_calls as native_calls
        assert (native_calls.NativeProgram.__call__ is native_calls.NativeProgram._call_packed) == (sys.argv[1] == "packed")
        rng = np.random.default_rng(3)
        A, y, g = rng.standard_normal((40, 6, 4)), rng.standard_normal((40, 6)), rng.standard_normal((40, 6))
        results = [*P.qr(A[0]), *P.project_vjp(A[0], y[0], g[0]), *P.project_vjp(A, y, g)]
        np.save(sys.argv[2], np.concatenate([r.ravel() for r in results]))
    """))
    env = dict(os.environ, REVDIFF_COMPILE_NOTICE="0")
    for how in ("packed", "objects"):
        done = subprocess.run([sys.executable, str(script), how, str(tmp_path / how)], capture_output=True, text=True,
                              env=env, timeout=600)
        assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "packed.npy"), np.load(tmp_path / "objects.npy"))


def test_a_warm_call_finds_its_program_by_the_kinds_of_its_arguments():
    args = (np.zeros(3), np.ones((3, 2)), 2.0)
    first = compiled(scale_rows, "forward", args)
    assert compiled(scale_rows, "forward", (np.ones(3), np.zeros((3, 2)), -1.0)) is first
    assert compiled(scale_rows, "forward", (np.zeros(3), np.ones((3, 2), np.float32), 2.0)) is not first
    assert compiled(scale_rows, "forward", (np.zeros(3), np.ones((3, 2)), 2)) is not first  # an int c
    assert argument_kinds((np.zeros(()),)) is None and argument_kinds((1 << 64,)) is None
    with pytest.raises(TypeError, match="does not fit in int64"):
        scale_rows(np.zeros(3), np.ones((3, 2)), 1 << 64)


def test_a_warm_vjp_and_its_pullback_run_python_in_six_modules():
    """The path README's "How it is built" draws: no module beyond these runs Python code."""
    args = (np.zeros(6), np.zeros((3, 3)), rng.standard_normal((6, 3)), rng.standard_normal(6))
    revdiff.vjp(P.project_cgs2, *args)[1](np.ones(6), None, None, None)  # compiled, warm
    seen: set = set()

    def record(frame, event, arg):
        if event == "call" and f"{os.sep}revdiff{os.sep}" in frame.f_code.co_filename:
            seen.add(frame.f_code.co_filename.rsplit(f"{os.sep}revdiff{os.sep}", 1)[1])

    sys.setprofile(record)
    try:
        revdiff.vjp(P.project_cgs2, *args)[1](np.ones(6), None, None, None)
    finally:
        sys.setprofile(None)
    assert seen == {"ad.py", "function.py", "execute.py", "calls.py", os.path.join("frontend", "bindings.py"),
                    os.path.join("targets", "llvm", "entry_calls.py")}


STEP = 1.0


@revdiff.reversible
def add_step(y, x):
    y += STEP * x


def test_a_global_rebound_while_a_call_compiles_is_seen_by_the_next_call(monkeypatch):
    """Another thread rebinding a global between the parse and the end of compiling: the warm path
    compares the objects compiled in, so the next call compiles anew instead of keeping the old number."""
    global STEP
    from revdiff.function import ReversibleFunction
    watched = ReversibleFunction._watched

    def rebinding_meanwhile(self, seen):
        global STEP
        STEP = 2.0
        return watched(self, seen)

    try:
        monkeypatch.setattr(ReversibleFunction, "_watched", rebinding_meanwhile)
        add_step(0.0, 1.0)
        monkeypatch.setattr(ReversibleFunction, "_watched", watched)
        assert add_step(0.0, 1.0)[0] == 2.0
        assert revdiff.vjp(add_step, 0.0, 1.0)[1](1.0, 0.0)[1] == 2.0
    finally:
        STEP = 1.0


def test_arguments_a_program_cannot_honour_are_refused_by_name():
    from numpy.lib.stride_tricks import as_strided
    with pytest.raises(TypeError, match="argument 'A' of scale_rows\\(\\): masked arrays are not supported"):
        scale_rows(np.zeros(2), np.ma.MaskedArray(np.ones((2, 2)), mask=[[0, 1], [0, 0]]), 1.0)
    one = np.zeros(1)
    with pytest.raises(revdiff.ReversibilityError, match="'y' of scale_rows\\(\\) has entries that share memory"):
        scale_rows(as_strided(one, (2,), (0,), writeable=True), np.ones((2, 2)), 1.0)
    assert one[0] == 0.0
    rows = np.ones(3)  # rows of 2 that step by one entry: x[0, 1] is x[1, 0]
    with pytest.raises(revdiff.ReversibilityError, match="'y' of .* rows that overlap"):
        revdiff.batched(scale_rows, ["y", "A"])(as_strided(rows, (2, 2), (8, 8), writeable=True),
                                                np.ones((2, 2, 2)), 1.0, donate=True)
    assert rows.tolist() == [1.0, 1.0, 1.0]


def test_intricate_strides_are_checked_for_sharing_within_a_bound(monkeypatch):
    """NumPy's exact overlap test can take seconds on such strides (of 1.5 GB, NumPy's own hard case):
    within a bound of work it answers; past it, the pair counts as sharing, and the refusal says so."""
    from numpy.lib.stride_tricks import as_strided
    import revdiff.calls
    x = np.zeros(192163)
    a = as_strided(x, strides=(3667 * 8, 6111 * 8, 8556 * 8), shape=(10,) * 3)
    b = as_strided(x[64023:], strides=(1222 * 8, 1223 * 8, 8), shape=(10, 10, 1))
    assert revdiff.calls.sharing(a, b) is None  # worked out: they do not
    assert revdiff.calls.sharing(x[:5], x[3:9]) == ""
    monkeypatch.setattr(revdiff.calls, "MAX_WORK", 1)
    assert "too intricate" in revdiff.calls.sharing(a, b)


def test_a_callee_name_rebound_to_the_class_of_a_reversible_function_is_refused(tmp_path):
    script = tmp_path / "rebind_class.py"
    script.write_text(textwrap.dedent("""
        import revdiff

        @revdiff.reversible
        def inner(y, x):
            y += x

        @revdiff.reversible
        def outer(y, x):
            inner(y, x)

        outer(0.0, 1.0)
        inner = type(inner)
        try:
            outer(0.0, 1.0)
        except revdiff.ReversibilityError as exc:
            assert "'inner' is not a reversible function" in str(exc), exc
        else:
            raise AssertionError("ran")
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, REVDIFF_COMPILE_NOTICE="0"))
    assert done.returncode == 0, done.stderr



def test_calls_from_other_threads_never_leave_a_rebound_global_s_old_program_behind(tmp_path):
    """Two threads calling f while this one rebinds the global it reads: a call made after the rebinding
    sees the new value (a program compiled from the old one, cached as if for the new, ran before)."""
    script = tmp_path / "threads_rebind.py"
    script.write_text(textwrap.dedent("""
        import threading, time
        import revdiff
        K = 1.0

        @revdiff.reversible
        def f(y, x):
            y += K * x

        stop, errors, stale = False, [], 0
        def worker():
            while not stop:
                try:
                    f(0.0, 1.0)
                except Exception as exc:
                    errors.append(repr(exc))
        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for i in range(200):
            K = float(i % 5)
            time.sleep(0.001)
            stale += f(0.0, 1.0)[0] != K
        stop = True
        for t in threads:
            t.join()
        assert not errors and not stale, (errors[:3], stale)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, REVDIFF_COMPILE_NOTICE="0"))
    assert done.returncode == 0, done.stderr


@reversible(atol=1e-11)  # options of its own: called, not inlined
def _two_products(s, t, x, y):
    for i in range(len(x)):
        s += x[i] * y[i]
        t += x[i] * y[i]


@reversible
def _same_row_twice(s, t, Q, j, k):
    _two_products(s, t, Q[j, :], Q[k, :])


def test_a_callee_given_one_array_twice_read_only_gets_both_gradients():
    """With j = k the callee reads one row through both parameters, which is allowed (it writes
    neither); its adjoint then writes both gradients into one row of g_Q, so the compiled programs
    may not assume that arrays of different names are different memory (LLVM's noalias lost one
    of the two updates)."""
    Q = np.random.default_rng(0).standard_normal((4, 6))
    _, pullback = revdiff.vjp(_same_row_twice, 0.0, 0.0, Q, 1, 1)
    g_Q = pullback(3.0, 5.0, None, None, None)[2]
    want = np.zeros_like(Q)
    want[1] = 16 * Q[1]  # d/dQ (3 + 5) |Q[1]|^2
    np.testing.assert_allclose(g_Q, want, rtol=1e-13, atol=1e-13)
