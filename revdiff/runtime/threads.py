"""Threads of a batch, and BLAS threads inside it.

A batch runs its elements on ``batch_threads()`` threads (``calls.run_batch``); when each
element's program also calls BLAS (``runtime/host.py``), OpenBLAS would start threads of its own
inside every worker and the two pools would fight over the cores (a batch of 500×250 block-CGS2
gradients takes about three times as long). So BLAS runs single-threaded for the length of a batch
called from the main thread.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from revdiff.runtime.held import HeldSetting

_CONTROLLER: list = []


def batch_threads() -> int:
    """How many threads run a batch: Numba's thread count (``numba.set_num_threads``, or the
    ``NUMBA_NUM_THREADS`` environment variable), as for Numba's own parallel loops."""
    import numba
    return numba.get_num_threads()


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
