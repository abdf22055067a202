"""The compile worker's side (``compile_server.main``, started by ``compile_worker``): rebuild each requested
generated function from its files (``loader.rebuild``), compile it for the requested signature,
which saves it (and every program it compiled on the way) to Numba's disk cache, and reply.

Requests come on stdin and replies go out on what was stdout; anything the compile prints goes to
stderr. The worker exits at the end of its input, or after a reply once its memory passed the
request's ``recycle`` bytes (``compile_worker.recycle_bytes()``, read by the requesting process;
the reply says so).
"""
from __future__ import annotations

import os
import pickle
import signal
import sys
import warnings

import numba

from revdiff.runtime import loader, workers
from revdiff.runtime.compile_worker import code_files, receive, send


def compile_request(request: dict) -> dict:
    """Compile what ``request`` asks for, in a thread with a deep stack (Numba recurses through a
    large program); the reply: ok, the error's text (for diagnosis: the requesting process compiles
    again and raises the error itself), the warnings raised, and whether to exit. A request from a
    process running another Numba or revdiff is refused."""
    outcome: dict = {"ok": False, "error": "", "warnings": []}
    if request.get("code") != code_files():
        outcome["error"] = f"the worker runs {code_files()}, the request comes from {request.get('code')}"
        outcome["exit"] = False
        return outcome

    def work() -> None:
        saved = numba.core.config.SLP_VECTORIZE
        numba.core.config.SLP_VECTORIZE = request["slp"]
        try:
            with warnings.catch_warnings(record=True) as caught, loader.deep_recursion():
                warnings.simplefilter("always")
                loader.rebuild(request["recipe"]).compile(request["signature"])
                outcome["ok"] = True
        except BaseException as exc:  # reported; the requesting process compiles and raises it itself
            outcome["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            numba.core.config.SLP_VECTORIZE = saved
        outcome["warnings"] = [(str(w.message), w.category, w.filename, w.lineno) for w in caught]

    thread = workers.start_compile_thread(work, "revdiff-compile-worker")
    if thread is None:
        outcome["error"] = "no memory for the compile thread's stack"
    else:
        thread.join()
    outcome["exit"] = _memory() > request.get("recycle", 0)  # none given: exit, a fresh worker next
    return outcome


def _memory() -> int:
    """This process's largest resident size so far, in bytes (0 where it cannot be read)."""
    try:
        import resource
    except ImportError:  # Windows
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _travels(value) -> bool:
    """Whether ``value`` can be sent back (a warning whose category is importable by name)."""
    try:
        pickle.dumps(value)
        return True
    except Exception:
        return False


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the requesting process handles Ctrl-C, and ends this one
    requests = sys.stdin.buffer
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # printed output must not mix into the replies
    while True:
        data = receive(requests)
        if data is None:
            return
        reply = compile_request(pickle.loads(data))
        reply["warnings"] = [w for w in reply["warnings"] if _travels(w)]
        try:
            send(replies, pickle.dumps(reply))
        except OSError:  # the requesting process is gone
            return
        if reply["exit"]:
            return


if __name__ == "__main__":
    main()
