"""Threads of a batch, and BLAS threads inside it.

A batch runs its elements on ``batch_threads()`` threads (``calls.run_batch``); when each
element's program also calls BLAS (``targets/llvm/host.py``), OpenBLAS would start threads of its own
inside every worker and the two pools would fight over the cores (a batch of 500×250 block-CGS2
gradients takes about three times as long). So BLAS runs single-threaded for the length of a batch
called from the main thread.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterator

from revdiff.runtime.held import HeldSetting

_CONTROLLER: list = []
_THREADS: list = []  # the count set_num_threads chose, if any


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says, else all)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def batch_threads() -> int:
    """How many threads run a batch: ``set_num_threads``'s count, else ``REVDIFF_NUM_THREADS`` (a
    positive whole number; anything else raises ValueError naming it), else the cores available."""
    if _THREADS:
        return _THREADS[0]
    text = os.environ.get("REVDIFF_NUM_THREADS", "").strip()
    if not text:
        return available_cores()
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"REVDIFF_NUM_THREADS must be a positive whole number, got {text!r}")
    return int(text)


def set_num_threads(n: "int | None") -> "int | None":
    """Run batches on ``n`` threads from now on (None: back to ``REVDIFF_NUM_THREADS`` or the cores);
    returns the count set before (None where none was), to restore it."""
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"the number of threads must be a positive integer or None, got {n!r}")
    previous = _THREADS[0] if _THREADS else None
    _THREADS[:] = [] if n is None else [n]
    return previous


@contextmanager
def blas_single_threaded() -> Iterator[None]:
    """A context in which every loaded BLAS library (NumPy's and SciPy's) runs on one thread, when
    entered in the main thread. BLAS's thread count belongs to the process, and OpenBLAS does not
    always take a raise of it from another thread (measured with OpenBLAS 0.3.30: batches in four
    worker threads, each lowering it to 1 and restoring it, left it at 1), so a batch called from
    another thread leaves it as it is rather than lower it for good. Nested entries share one limit,
    restored when the outermost ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _ONE_BLAS_THREAD.held():
        yield


def _one_blas_thread():
    """BLAS set to one thread now (threadpoolctl); returns what restores the count it had."""
    try:
        import scipy.linalg.cython_blas  # noqa: F401  (the BLAS the host routines call: load it first)
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - both are dependencies; without them, threads as they are
        return lambda: None
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas").restore_original_limits


_ONE_BLAS_THREAD = HeldSetting(_one_blas_thread)
