"""Compiling in a helper process, so that this one keeps only the compiled code: this process's
side (the helper runs ``revdiff/runtime/compile_server.py``).

LLVM's JIT keeps every module Numba compiled, with the programs it linked in, for the life of the
process: a cold block-CGS2 gradient of a 70x40 matrix peaks at 598 MB, the same programs loaded
from Numba's disk cache at 194 MB (``benchmarks/compile_memory.py``). With ``REVDIFF_COMPILE_WORKER=1`` a generated program that is not
in the disk cache is compiled by a worker process (``compile_server.main``, in a session of its own)
into that cache, and this process loads it from there. The worker is started at the first such
compile, and exits after a compile that took its peak memory past ``REVDIFF_COMPILE_WORKER_MB``
megabytes (``recycle_bytes``; never on Windows, where the peak is not read): the next compile
starts a fresh one.

The compiled code is the same: the same generated file, Numba and options (the worker inherits the
environment as it starts, and the SLP vectoriser setting, which the lanes change at run time, goes
with each request). Whenever the worker cannot help (it cannot start, dies or cannot be sent the
request, a linked global cannot be named in another process, the compile fails there, its result is
not in the disk cache), Numba compiles in this process as it would without the worker, so errors and
warnings are reported as always. A worker that cannot start, or dies at MAX_FAILURES requests in a
row, is not started again in this process.
"""
from __future__ import annotations

import atexit
import os
import pickle
import re
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numba

#: the worker exits after a compile that leaves it above this many megabytes (the next one starts afresh)
RECYCLE_MB = 1000
#: requests in a row that the worker died at, after which this process compiles everything itself
MAX_FAILURES = 3
_SWITCH = "REVDIFF_COMPILE_WORKER"
_RECYCLE = "REVDIFF_COMPILE_WORKER_MB"
_ON = ("1", "true", "yes", "on")
_LOCK = threading.Lock()
_WORKER: list = [None]  # the running worker process, or None
_BROKEN: list = []  # a worker could not be started, or kept dying: compile here for the rest of the process
_FAILURES: list = [0]  # requests in a row the worker died at


def enabled() -> bool:
    """Whether compiles go to the worker: ``REVDIFF_COMPILE_WORKER`` is 1, true, yes or on (any
    case; anything else is off), and no worker failed for good in this process."""
    return os.environ.get(_SWITCH, "").strip().lower() in _ON and not _BROKEN and bool(sys.executable)


def recycle_bytes() -> int:
    """The memory after which the worker exits: ``REVDIFF_COMPILE_WORKER_MB`` (else RECYCLE_MB)
    megabytes; 0 means after every compile. Anything but a whole number raises ValueError naming
    the variable (a typo must not leave the default in force unnoticed)."""
    text = os.environ.get(_RECYCLE, "").strip()
    if not text:
        return RECYCLE_MB << 20
    if not re.fullmatch(r"[0-9]+", text):
        raise ValueError(f"{_RECYCLE} must be a whole number of megabytes (0: a fresh worker for every "
                         f"compile), not {os.environ[_RECYCLE]!r}")
    return int(text) << 20


def compile_elsewhere(recipe: dict, signature) -> list | None:
    """Have the worker compile the function ``recipe`` rebuilds (``loader.recipe``) for
    ``signature`` into the disk cache. The warnings the compile raised there, as (message,
    category, filename, lineno), when it did (none whose category could not be sent back); None
    when it did not."""
    recycle = recycle_bytes()  # read here, where a bad value is raised to the caller
    try:
        request = pickle.dumps({"recipe": recipe, "signature": signature, "slp": numba.core.config.SLP_VECTORIZE,
                                "code": code_files(), "recycle": recycle})
    except Exception:  # a type that does not travel: compile here
        return None
    with _LOCK:
        worker = _worker()
        if worker is None:
            return None
        try:
            send(worker.stdin, request)
            data = receive(worker.stdout)
            if data is None:
                raise EOFError("the compile worker closed its output")
            reply = pickle.loads(data)
        except (KeyboardInterrupt, SystemExit):  # interrupted mid-request: the worker's state is unknown
            _stop(worker)
            raise
        except Exception:  # the worker died (killed, out of memory): compile here
            _stop(worker)
            _FAILURES[0] += 1
            if _FAILURES[0] >= MAX_FAILURES:
                _BROKEN.append(True)
            return None
        _FAILURES[0] = 0
        if reply["exit"]:
            worker.wait()
            _WORKER[0] = None
    return reply["warnings"] if reply["ok"] else None


#: the worker's program: this revdiff's package root where ``python -c`` would put the working
#: directory first on the path (a ``revdiff`` or ``numba`` there must not be the one it runs)
_START = (f"import sys; sys.path[0] = {str(Path(__file__).resolve().parent.parent.parent)!r}; "
          "from revdiff.runtime.compile_server import main; main()")


def code_files() -> dict:
    """The files of the Numba and the revdiff this process runs: the worker compiles only with the same."""
    return {"numba": str(Path(numba.__file__).resolve()), "revdiff": str(Path(__file__).resolve())}


def _worker():
    """The running worker, started when there is none; None when it cannot be started."""
    worker = _WORKER[0]
    if worker is not None and worker.poll() is None:
        return worker
    env = dict(os.environ, **{_SWITCH: "0"})
    try:  # a session of its own: Ctrl-C at the terminal interrupts this process, which ends the worker
        worker = subprocess.Popen([sys.executable, "-c", _START], env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, start_new_session=True)
    except OSError:
        _BROKEN.append(True)
        return None
    _WORKER[0] = worker
    return worker


def _forget_after_fork() -> None:
    """A forked child starts its own worker, and lets go of its copies of the parent's pipes (the
    parent's worker must see the end of its input when the parent exits): each is pointed at the
    null device, so that its file object can still close it, or flush into it, harmlessly."""
    global _LOCK
    _LOCK = threading.Lock()
    worker, _WORKER[0] = _WORKER[0], None
    if worker is not None:
        try:
            null = os.open(os.devnull, os.O_RDWR)
            for stream in (worker.stdin, worker.stdout):
                os.dup2(null, stream.fileno())
            os.close(null)
        except (OSError, ValueError):
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


@atexit.register
def _shutdown() -> None:
    """End the worker with this process: the end of its requests, then (if it lingers) a kill."""
    worker = _WORKER[0]
    if worker is not None:
        try:
            worker.stdin.close()
            worker.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            _stop(worker)


def _stop(worker) -> None:
    _WORKER[0] = None
    try:
        worker.kill()
        worker.wait()
    except OSError:
        pass


def send(stream, data: bytes) -> None:
    """One message: its length, then its bytes."""
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def receive(stream) -> bytes | None:
    """The next message, or None at the end of the stream (raises EOFError on a cut message)."""
    head = stream.read(8)
    if not head:
        return None
    if len(head) < 8:
        raise EOFError("a message was cut short")
    size = struct.unpack("<Q", head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("a message was cut short")
    return data
