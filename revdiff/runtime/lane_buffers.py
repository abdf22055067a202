"""Runtime support for programs run in SIMD lanes (``backends/lanes/rewrite.py``): copying batch elements
into lane buffers and back, and compiling with LLVM's SLP vectoriser, which turns each unrolled
lane statement into vector instructions (Numba leaves it off by default)."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

import numba
import numpy as np

from revdiff.runtime.cache import cached_njit

_SLP_LOCK = threading.Lock()


@cached_njit(nogil=True, boundscheck=False)
def _lanes_gather(buffer: np.ndarray, batch: np.ndarray, start: int) -> None:
    """Lane l of ``buffer`` (element axes, then lanes) := element ``start + l`` of ``batch`` (the
    last element where the batch ends, so every lane holds valid data)."""
    width = buffer.shape[-1]
    n = batch.shape[0]
    lanes = buffer.reshape(-1, width)
    elements = batch.reshape(n, -1)
    for lane in range(width):
        b = min(start + lane, n - 1)
        for t in range(lanes.shape[0]):
            lanes[t, lane] = elements[b, t]


@cached_njit(nogil=True, boundscheck=False)
def _lanes_scatter(buffer: np.ndarray, batch: np.ndarray, start: int) -> None:
    """Element ``start + l`` of ``batch`` := lane l of ``buffer``, for the elements that exist."""
    width = buffer.shape[-1]
    n = batch.shape[0]
    lanes = buffer.reshape(-1, width)
    elements = batch.reshape(n, -1)
    for lane in range(min(width, n - start)):
        for t in range(lanes.shape[0]):
            elements[start + lane, t] = lanes[t, lane]


HELPERS = {"_lanes_gather": _lanes_gather, "_lanes_scatter": _lanes_scatter}


@contextmanager
def slp_vectorized() -> Iterator[None]:
    """Numba compilations started inside this context run LLVM's SLP vectoriser. It only packs
    identical scalar operations of neighbouring lanes; without fastmath nothing is reassociated, so
    results are unchanged."""
    with _SLP_LOCK:
        saved = numba.core.config.SLP_VECTORIZE
        numba.core.config.SLP_VECTORIZE = 1
        try:
            yield
        finally:
            numba.core.config.SLP_VECTORIZE = saved
