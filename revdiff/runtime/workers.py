"""The threads that run the parts of a batch (``calls.run_batch``) at once: compiled entries release
the GIL, so parts run in parallel. Daemon threads, started when no idle one is left and kept for
later calls: a call left running after a second Ctrl-C must not hold up the interpreter's exit,
and a batch of small matrices should not pay for starting threads every time."""
from __future__ import annotations

import queue
import threading
from typing import Callable

_TASKS: queue.SimpleQueue = queue.SimpleQueue()
_LOCK = threading.Lock()
_IDLE = [0]  # started threads not yet promised a task
_STARTING = threading.Lock()  # one thread started at a time


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


def _work() -> None:
    while True:
        _TASKS.get()()  # tasks catch their own exceptions (``calls.interruptible``)
        with _LOCK:
            _IDLE[0] += 1
