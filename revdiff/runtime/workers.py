"""The threads that run the parts of a batch (``calls.run_batch``) at once: compiled entries release
the GIL, so parts run in parallel. Daemon threads, started when no idle one is left and kept for
later calls: a call left running after a second Ctrl-C must not hold up the interpreter's exit,
and a batch of small matrices should not pay for starting threads every time."""
from __future__ import annotations

import queue
import threading
from typing import Callable

#: the stack of a thread that compiles: room for Numba's recursive compilation of a large program
COMPILE_STACK = 256 << 20
_TASKS: queue.SimpleQueue = queue.SimpleQueue()
_LOCK = threading.Lock()
_IDLE = [0]  # started threads not yet promised a task
_STARTING = threading.Lock()  # held while a thread starts: a compile thread changes threading.stack_size


def start(task: Callable[[], None]) -> bool:
    """Run ``task`` on a worker thread. False when no thread could be started (no memory for its
    stack): the caller runs it itself."""
    with _LOCK:
        if _IDLE[0]:
            _IDLE[0] -= 1
            _TASKS.put(task)
            return True
    with _STARTING:
        try:
            threading.Thread(target=_work, name="revdiff-worker", daemon=True).start()
        except RuntimeError:
            return False
    _TASKS.put(task)  # the new thread, or an older one that became idle first: either takes it
    return True


def start_compile_thread(task: Callable[[], None], name: str = "revdiff-compile") -> threading.Thread | None:
    """Run ``task`` on a fresh daemon thread with a deep stack (Numba compiles recursively, and a
    thread's default stack can be small); None when no memory is left for its stack."""
    with _STARTING:
        previous = threading.stack_size(COMPILE_STACK)
        try:
            thread = threading.Thread(target=task, name=name, daemon=True)
            thread.start()
            return thread
        except RuntimeError:
            return None
        finally:
            threading.stack_size(previous)


def _work() -> None:
    while True:
        _TASKS.get()()  # tasks catch their own exceptions (``calls.interruptible``)
        with _LOCK:
            _IDLE[0] += 1
