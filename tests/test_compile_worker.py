"""Compiling in a worker process (``REVDIFF_COMPILE_WORKER=1``): the results are bit for bit those
of compiling in the process, the process compiles none of its generated programs (it loads what
the worker put in the disk cache; revdiff's fixed runtime helpers still compile where they are used), and whenever the worker cannot help the process compiles as it would without it."""
import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent("""
    import sys
    import numpy as np
    import revdiff
    from revdiff import reversible
    from revdiff.runtime import compile_worker, loader
    {setup}

    @reversible
    def inner(y, x):
        for i in range(len(x)):
            y[i] += 2.5 * x[i] * x[i]

    @reversible
    def outer(y, A, x):
        inner(y, x)
        y += A @ x

    rng = np.random.default_rng(0)
    A, x = rng.standard_normal((5, 5)), rng.standard_normal((300, 5))
    results = [outer(np.zeros(5), A, x[0].copy())[0]]
    for layout in ("elements", "lanes"):
        f = revdiff.batched(outer, ("y", "x"), layout=layout)
        outs, grads = f.vjp((np.zeros((300, 5)), A, x.copy()), (np.ones((300, 5)), None, None))
        results += [outs[0], grads[1], grads[2]]
    print(" ".join(float(v).hex() for r in results for v in np.ravel(r)))
    compiled_here = sorted(name for (module, name), fn in loader._COMPILED.items()
                           if sum(getattr(fn, "_cache_misses", {{}}).values()))
    print("compiled here:", compiled_here)
    print("worker started:", compile_worker._WORKER[0] is not None)
    print("given up:", bool(compile_worker._BROKEN))
""")


def run(tmp_path, switch: str, setup: str = "", cache: str = "cache") -> list:
    script = tmp_path / f"program_{switch}.py"
    script.write_text(PROGRAM.format(setup=setup))
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / cache), REVDIFF_COMPILE_WORKER=switch)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    return run(tmp_path_factory.mktemp("in_process"), "0")


def test_the_worker_compiles_and_the_process_only_loads(tmp_path, in_process):
    values, compiled_here, started, _ = run(tmp_path, "1")
    assert values == in_process[0]  # bit for bit: the same code, compiled elsewhere
    assert compiled_here == "compiled here: []"
    assert started == "worker started: True"
    assert in_process[1] != "compiled here: []" and in_process[2] == "worker started: False"


@pytest.mark.parametrize("fault", ["cannot start", "killed", "recycled after every compile"])
def test_without_a_working_worker_the_process_compiles_itself(tmp_path, in_process, fault):
    setup = {
        "cannot start": "sys.executable = '/nonexistent/python'",
        # the worker dies at its first request: the process compiles that one itself, the next goes to a new worker
        "killed": textwrap.dedent("""
            _send = compile_worker.send
            def send_then_kill(stream, data, _first=[True]):
                _send(stream, data)
                if _first:
                    _first.clear()
                    compile_worker._WORKER[0].kill()
            compile_worker.send = send_then_kill
            """),
        "recycled after every compile": "import os; os.environ['REVDIFF_COMPILE_WORKER_MB'] = '1'",
    }[fault]
    values, compiled_here, started, _ = run(tmp_path, "1", setup)
    assert values == in_process[0]
    if fault == "recycled after every compile":
        assert compiled_here == "compiled here: []"
    else:  # the process compiled (the first program, or all of them) itself
        assert compiled_here != "compiled here: []"
    # after the kill, the next compile went to a new worker, which is still there at the end
    assert started == f"worker started: {fault == 'killed'}"


def test_a_worker_dying_at_every_request_is_given_up(tmp_path):
    """A worker that dies at MAX_FAILURES requests in a row is not started again: the process
    compiles itself instead of paying a worker's start for every program."""
    setup = textwrap.dedent("""
        _send = compile_worker.send
        def send_then_kill(stream, data):
            _send(stream, data)
            compile_worker._WORKER[0].kill()
        compile_worker.send = send_then_kill
        """)
    values, compiled_here, started, given_up = run(tmp_path, "1", setup)
    assert values == run(tmp_path, "0", cache="cache_in_process")[0]
    assert compiled_here != "compiled here: []" and started == "worker started: False"
    assert given_up == "given up: True"


BAD_LIMIT = textwrap.dedent("""
    import os
    import numpy as np
    import revdiff
    from revdiff import reversible

    @reversible
    def twice(y, x):
        for i in range(len(x)):
            y[i] += 2.0 * x[i]

    os.environ["REVDIFF_COMPILE_WORKER_MB"] = "2G"
    for call in (lambda: twice(np.zeros(3), np.ones(3))[0],
                 lambda: revdiff.batched(twice, ("y", "x"))(np.zeros((4, 3)), np.ones((4, 3)))[0]):
        try:
            call()
            print("ran")
        except ValueError as exc:
            print(exc)
    os.environ["REVDIFF_COMPILE_WORKER_MB"] = " 0 "
    print(twice(np.zeros(3), np.ones(3))[0].tolist(),
          revdiff.batched(twice, ("y", "x"))(np.zeros((4, 3)), np.ones((4, 3)))[0].tolist())
""")


def test_a_memory_limit_that_is_no_number_is_refused_by_name(tmp_path):
    """``REVDIFF_COMPILE_WORKER_MB=2G`` raises ValueError naming the variable at the compile that
    would start the worker (a typo must not leave the default, 1000, in force unnoticed); after it, with a valid
    value (0: a fresh worker for every compile), the same calls compile and run."""
    script = tmp_path / "bad_limit.py"
    script.write_text(BAD_LIMIT)
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / "cache"), REVDIFF_COMPILE_WORKER="1")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    refusal = ("REVDIFF_COMPILE_WORKER_MB must be a whole number of megabytes (0: a fresh worker for every "
               "compile), not '2G'")
    assert lines[:2] == [refusal, refusal]
    assert lines[2] == str([2.0] * 3) + " " + str([[2.0] * 3] * 4)


@pytest.mark.parametrize("switch, on", [("1", True), ("TRUE", True), ("on", True), ("0", False),
                                        ("false", False), ("no", False), ("", False), ("2", False)])
def test_the_switch_reads_like_a_boolean(monkeypatch, switch, on):
    from revdiff.runtime import compile_worker
    monkeypatch.setenv("REVDIFF_COMPILE_WORKER", switch)
    assert compile_worker.enabled() == on


def test_rebuild_refuses_a_generated_file_that_does_not_hold_its_text(tmp_path, monkeypatch):
    """The worker compiles only the text the requesting process generated: its rebuild refuses a
    file changed since (and the requesting process then compiles itself)."""
    from revdiff.runtime import compile_server, compile_worker, loader

    monkeypatch.setenv("REVDIFF_CACHE_DIR", str(tmp_path))
    source = "def nothing():\n    return 1\n"
    path = loader.source_file(source, "tampered")
    module = loader._module(path, source, "numba")
    recipe = {"modules": {module.__name__: (str(path), "numba", {})}, "target": (module.__name__, "nothing")}
    path.write_text(source + "\n# edited\n")
    request = {"recipe": recipe, "signature": (), "slp": 0, "code": compile_worker.code_files()}
    reply = compile_server.compile_request(request)
    assert not reply["ok"] and "does not hold the text its name promises" in reply["error"]


def test_the_worker_refuses_a_request_from_another_numba_or_revdiff():
    from revdiff.runtime import compile_server, compile_worker

    for part in ("numba", "revdiff"):
        code = {**compile_worker.code_files(), part: "/elsewhere/__init__.py"}
        reply = compile_server.compile_request({"recipe": {}, "signature": (), "slp": 0, "code": code})
        assert not reply["ok"] and "/elsewhere/__init__.py" in reply["error"]
