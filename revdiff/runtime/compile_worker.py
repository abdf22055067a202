"""Compiling in a helper process, so that this one keeps only the compiled code.

LLVM's JIT keeps every module Numba compiled, with the programs it linked in, for the life of the
process: a cold block-CGS2 gradient leaves about 460 MB behind, the same program loaded from
Numba's disk cache about 90 MB. With ``REVDIFF_COMPILE_WORKER=1`` a generated program that is not
in the disk cache is compiled by a worker process (``python -m revdiff.runtime.compile_server``)
into that cache, and this process loads it from there. The worker is started at the first such
compile and replaced when its memory passes ``REVDIFF_COMPILE_WORKER_MB`` megabytes
(``recycle_bytes``).

The compiled code is the same: the same generated file, Numba and options (the worker inherits the
environment, and the SLP vectoriser setting is passed along). Whenever the worker cannot help (it
cannot start or be sent the request, the compile fails there, no disk cache is writable), Numba
compiles in this process as it would without the worker, so errors are reported as always.
"""
from __future__ import annotations

import atexit
import os
import pickle
import struct
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numba

#: the worker exits after a compile that leaves it above this many megabytes (the next one starts afresh)
RECYCLE_MB = 1000
_SWITCH = "REVDIFF_COMPILE_WORKER"
_LOCK = threading.Lock()
_WORKER: list = [None]  # the running worker process, or None
_BROKEN: list = []  # a worker could not be started: compile here for the rest of the process


def enabled() -> bool:
    """Whether compiles go to the worker (``REVDIFF_COMPILE_WORKER`` set, and not to 0)."""
    return os.environ.get(_SWITCH, "0").strip() not in ("", "0") and not _BROKEN and bool(sys.executable)


def recycle_bytes() -> int:
    """The memory after which the worker exits: ``REVDIFF_COMPILE_WORKER_MB`` (else RECYCLE_MB) megabytes."""
    try:
        return int(os.environ.get("REVDIFF_COMPILE_WORKER_MB", RECYCLE_MB)) << 20
    except ValueError:
        return RECYCLE_MB << 20


def compile_elsewhere(recipe: dict, signature) -> bool:
    """Have the worker compile the function ``recipe`` rebuilds (``loader.recipe``) for
    ``signature`` into the disk cache; True when it did. Warnings the compile raised are raised
    here too."""
    try:
        request = pickle.dumps({"recipe": recipe, "signature": signature, "slp": numba.core.config.SLP_VECTORIZE})
    except Exception:  # a type that does not travel: compile here
        return False
    with _LOCK:
        worker = _worker()
        if worker is None:
            return False
        try:
            send(worker.stdin, request)
            reply = pickle.loads(receive(worker.stdout) or b"")
        except (KeyboardInterrupt, SystemExit):  # interrupted mid-request: the worker's state is unknown
            _stop(worker)
            raise
        except Exception:  # the worker died (killed, out of memory): compile here
            _stop(worker)
            return False
        if reply["exit"]:
            worker.wait()
            _WORKER[0] = None
    for message, category, filename, lineno in reply["warnings"]:
        warnings.warn_explicit(message, category, filename, lineno)
    return reply["ok"]


def _worker():
    """The running worker, started when there is none; None when it cannot be started."""
    worker = _WORKER[0]
    if worker is not None and worker.poll() is None:
        return worker
    package_root = str(Path(__file__).resolve().parent.parent.parent)  # this revdiff, not another install
    env = dict(os.environ, **{_SWITCH: "0"})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    try:
        worker = subprocess.Popen([sys.executable, "-m", "revdiff.runtime.compile_server"], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except OSError:
        _BROKEN.append(True)
        return None
    _WORKER[0] = worker
    return worker


def _forget_after_fork() -> None:
    """A forked child starts its own worker: the parent's pipes are the parent's."""
    global _LOCK
    _LOCK = threading.Lock()
    _WORKER[0] = None


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
