"""The on-disk cache across processes: a program edited two calls deep must not reuse a caller
compiled against its old version (the caller's own generated text is unchanged), and a cache
damaged on disk is rebuilt, never trusted."""
import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent("""
    import numpy as np
    import revdiff
    from revdiff import reversible

    @reversible
    def inner(y, x):
        y += {scale} * x

    @reversible
    def middle(y, x):
        inner(y, x)

    @reversible
    def outer(y, x):
        middle(y, x)

    print(revdiff.batched(outer, ("y", "x"))(np.zeros(4), np.ones(4))[0].tolist())
""")


def run_edited(tmp_path, scale: str) -> str:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM.format(scale=scale))
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_callee_edited_two_calls_deep_recompiles_its_callers(tmp_path):
    assert run_edited(tmp_path, "2.0") == "[2.0, 2.0, 2.0, 2.0]"
    assert run_edited(tmp_path, "3.0") == "[3.0, 3.0, 3.0, 3.0]"


FAULT_PROGRAM = textwrap.dedent("""
    import numpy as np
    import revdiff
    from revdiff import reversible

    @reversible
    def axpy(y, x):
        for i in range(len(x)):
            y[i] += 2.5 * x[i]

    y, x = axpy(np.zeros(3), np.arange(3.0))
    outs, grads = revdiff.batched(axpy, ("y", "x")).vjp((np.zeros((4, 3)), np.ones((4, 3))), (np.ones((4, 3)), None))
    print(y.tolist(), grads[1][0].tolist())
""")
EXPECTED = "[0.0, 2.5, 5.0] [2.5, 2.5, 2.5]"


def run_fault_program(tmp_path) -> str:
    script = tmp_path / "faults.py"
    script.write_text(FAULT_PROGRAM)
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def _flip_a_byte(path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


FAULTS = ["flipped byte", "truncated", "emptied", "swapped with another module's", "directories in place of files",
          "FIFOs for every file", "links to /dev/zero"]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_damaged_cache_is_rebuilt_not_trusted(tmp_path, fault):
    """A fault in the on-disk cache of compiled programs is detected in a fresh process and rebuilt
    there: the results are right, and the next process finds a sound cache again."""
    assert run_fault_program(tmp_path) == EXPECTED
    cache = tmp_path / "cache"
    compiled = sorted((cache / "native").glob("*.o"))
    assert len(compiled) >= 2
    if fault == "flipped byte":
        for path in compiled:
            _flip_a_byte(path)
    elif fault == "truncated":
        for path in compiled:
            path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    elif fault == "emptied":
        for path in compiled:
            path.write_bytes(b"")
    elif fault == "swapped with another module's":
        datas = [path.read_bytes() for path in compiled]
        for path, data in zip(compiled, datas[1:] + datas[:1]):
            path.write_bytes(data)
    else:  # a read would never end (a FIFO waits for a writer, /dev/zero has no end), or cannot be made
        for path in compiled:
            path.unlink()
            if fault == "FIFOs for every file":
                os.mkfifo(path)
            elif fault == "links to /dev/zero":
                path.symlink_to("/dev/zero")
            else:
                path.mkdir()
    assert run_fault_program(tmp_path) == EXPECTED
    assert run_fault_program(tmp_path) == EXPECTED
    for path in (cache / "native").glob("*.o"):  # every file holds sound code again
        assert path.is_file() and not path.is_symlink() and path.stat().st_size > 0


def test_a_cached_entry_calls_the_program_compiled_now(tmp_path):
    """A batched entry calls its program by symbol: where the entry comes from the disk cache and its
    program's compiled code is gone (the program compiles anew, elsewhere in memory), the results
    are still right."""
    assert run_fault_program(tmp_path) == EXPECTED
    compiled = list((tmp_path / "cache" / "native").glob("*.o"))
    programs = [p for p in compiled if "_batch_" not in p.name]
    entries = [p for p in compiled if "_batch_" in p.name]
    assert programs and entries
    for path in programs:
        path.unlink()
    assert run_fault_program(tmp_path) == EXPECTED
    assert all(path.exists() for path in entries)
    assert run_fault_program(tmp_path) == EXPECTED


CLEARED_PROGRAM = textwrap.dedent("""
    import shutil
    import numpy as np
    import revdiff
    from revdiff.targets.llvm import jit as native
    from revdiff.runtime.cache import cache_dir

    @revdiff.reversible
    def weighted_sum(s, x, a):
        for i in range(len(x)):
            s += a * x[i]

    compile = native._compile

    def compiled_then_cleared(*args):  # someone clears the cache while revdiff compiles
        code = compile(*args)
        shutil.rmtree(cache_dir())
        return code

    native._compile = compiled_then_cleared
    s, x, a = weighted_sum(0.0, np.arange(3.0), 2.0)
    g = revdiff.grad(weighted_sum, "s")(0.0, np.arange(3.0), 2.0)
    print(s, g[1].tolist(), g[2])
""")


def test_a_cache_cleared_while_a_process_compiles_is_written_again(tmp_path):
    """The cache directory removed between a compile and its write (cleared by another process) is
    made again and written, not a raw error."""
    script = tmp_path / "cleared.py"
    script.write_text(CLEARED_PROGRAM)
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "6.0 [2.0, 2.0, 2.0] 3.0"
    assert list((tmp_path / "cache" / "native").glob("*.o"))


NOTICE_PROGRAM = textwrap.dedent("""
    import time
    import llvmlite.binding as llvm
    import numpy as np
    import revdiff
    from revdiff.targets.llvm import jit as native

    native.NOTICE_SECONDS = 0.05
    parse = llvm.parse_assembly

    def slow_parse(text):  # a compile that takes longer than the notice waits
        time.sleep(0.3)
        return parse(text)

    llvm.parse_assembly = slow_parse

    @revdiff.reversible
    def add_twice(y, x):
        y += 2.0 * x

    print(add_twice(0.0, 1.5)[0], revdiff.grad(add_twice, "y")(0.0, 1.5)[1])
""")


@pytest.mark.parametrize("setting", [None, "0"])
def test_a_long_compile_is_announced_once_unless_silenced(tmp_path, setting):
    """A compile that takes longer than NOTICE_SECONDS says so on standard error, once per process,
    naming what it compiles and the cache; REVDIFF_COMPILE_NOTICE=0 silences it."""
    script = tmp_path / "notice.py"
    script.write_text(NOTICE_PROGRAM)
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("REVDIFF_COMPILE_NOTICE", None)
    if setting is not None:
        env["REVDIFF_COMPILE_NOTICE"] = setting
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["3.0", "2.0"]
    notices = [line for line in done.stderr.splitlines() if line.startswith("revdiff: compiling")]
    if setting == "0":
        assert notices == []
    else:
        assert len(notices) == 1 and "add_twice" in notices[0] and str(tmp_path / "cache") in notices[0]


RACE_PROGRAM = textwrap.dedent("""
    import threading
    import numpy as np
    import revdiff
    from revdiff import programs as P

    AXPYS
    functions = [(axpy_2, 2.0), (axpy_3, 3.0), (axpy_4, 4.0), (axpy_5, 5.0)]
    results, errors = [], []
    start = threading.Barrier(8)

    def own(f, scale):
        start.wait()
        try:
            got = f(np.zeros(3), np.arange(3.0))[0]
            results.append(bool(np.array_equal(got, scale * np.arange(3.0))))
        except BaseException as exc:
            errors.append(repr(exc))

    def shared():
        start.wait()
        try:
            A = np.random.default_rng(0).standard_normal((300, 8, 4))
            Q, R = P.qr(A)
            results.append(bool(np.allclose(Q @ R, A)))
        except BaseException as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=own, args=fs) for fs in functions]
    threads += [threading.Thread(target=shared) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(sorted(results), errors)
""").replace("AXPYS\n", "".join(f"@revdiff.reversible\ndef axpy_{k}(y, x):\n    for i in range(len(x)):\n"
                                   f"        y[i] += {k}.0 * x[i]\n\n" for k in range(2, 6)))  # four distinct programs


def test_threads_compiling_at_once_from_a_cold_process(tmp_path):
    """Eight threads making their first calls at once in a fresh process with an empty cache (the
    JIT itself made by whichever comes first, four distinct programs and four of one): every result
    right, no crash (two threads creating LLVM's target at once crashed)."""
    script = tmp_path / "race.py"
    script.write_text(RACE_PROGRAM)
    for run in range(3):
        env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / f"cache{run}"))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.strip() == "[True, True, True, True, True, True, True, True] []"


FULL_DISK = textwrap.dedent("""
    import resource, signal, warnings
    import numpy as np
    import revdiff
    from revdiff import reversible

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (256, 256))  # no object file fits: a full disk, to the writer

    @reversible
    def scale(y, x):
        y += 3.0 * x

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = scale(0.0, 1.0)
        second = revdiff.grad(scale, 0)(0.0, 1.0)
    print(first, second)
    for w in caught:
        print(w.category.__name__, w.message)
""")


def test_a_cache_directory_that_takes_no_file_is_a_warning_and_the_program_runs(tmp_path):
    """A full disk (here a file-size limit, which fails writes with EFBIG as a full disk fails them
    with ENOSPC) is a RuntimeWarning naming the directory and the way out, once per process; the
    compiled programs run uncached."""
    script = tmp_path / "full.py"
    script.write_text(FULL_DISK)
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "(3.0, 1.0) (1.0, 3.0)"
    warned = [line for line in lines[1:] if line.startswith("RuntimeWarning")]
    assert len(warned) == 1, done.stdout
    assert str(tmp_path / "cache") in warned[0] and "File too large" in warned[0]
    assert "REVDIFF_CACHE_DIR" in warned[0]
