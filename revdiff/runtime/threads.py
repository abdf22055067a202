"""Threads of a batch, and BLAS threads inside it.

A batch runs its elements on ``batch_threads()`` threads (``calls.run_batch``); when each
element's program also calls BLAS (``runtime/host.py``), OpenBLAS would start threads of its own
inside every worker and the two pools would fight over the cores (a batch of 500×250 block-CGS2 gradients takes about three times
as long). So BLAS runs single-threaded for the length of a batch.
"""
from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

_CONTROLLER: list = []


def batch_threads() -> int:
    """How many threads run a batch: Numba's thread count (``numba.set_num_threads``, or the
    ``NUMBA_NUM_THREADS`` environment variable), as for Numba's own parallel loops."""
    import numba
    return numba.get_num_threads()


def blas_single_threaded() -> AbstractContextManager:
    """A context in which every loaded BLAS library (NumPy's and SciPy's) runs on one thread."""
    try:
        import scipy.linalg.cython_blas  # noqa: F401  (the BLAS the host routines call: load it first)
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - both are dependencies; without them, threads as they are
        return nullcontext()
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")
