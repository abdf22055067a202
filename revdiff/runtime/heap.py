"""glibc's malloc thresholds, raised once per process before compiled programs run.

glibc serves a block above its mmap threshold (128 KiB at start) with fresh pages from the kernel and
returns free memory at the top of the heap to the kernel once it exceeds the trim threshold (twice the
mmap threshold). Both rise only when a block served by mmap is freed, to that block's size (up to
32 MiB). Until that happens, a gradient whose ancillas are megabytes (a 500x250 Householder
gradient: W, V, K and their gradients, about 1 MiB each) takes fresh pages, faulted in and zeroed by
the kernel, for every ancilla of every call, and gives them back at its end: 15-20 % of its time.
Freeing one block just under 32 MiB moves the thresholds where a process that once freed such an
array would have them anyway (glibc's own rule, not a fixed setting: it stays dynamic). No page of
the block is touched. Elsewhere than glibc nothing is done; ``REVDIFF_MALLOC_THRESHOLDS=0`` skips it.
"""
from __future__ import annotations

import ctypes
import os
import threading

#: the largest block whose free raises glibc's thresholds (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems)
GLIBC_DYNAMIC_MMAP_MAX = 32 * 1024 * 1024
#: the block allocated and freed: under the maximum with its header and page rounding
RAISING_BLOCK = GLIBC_DYNAMIC_MMAP_MAX - 2 * 4096

_DONE: list = []
_LOCK = threading.Lock()


def raise_malloc_thresholds() -> bool:
    """Raise glibc's mmap and trim thresholds to their dynamic maximum (32 and 64 MiB), once per
    process; whether it was done (False: not glibc, a 32-bit system, or switched off)."""
    with _LOCK:
        if not _DONE:
            _DONE.append(_raise())
        return _DONE[0]


def _raise() -> bool:
    if os.environ.get("REVDIFF_MALLOC_THRESHOLDS", "1") == "0" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return False
    try:
        libc = ctypes.CDLL(None)
        malloc, free = libc.malloc, libc.free
    except (OSError, AttributeError):
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # not glibc, whose thresholds these are
        return False
    malloc.restype, malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
    free.restype, free.argtypes = None, (ctypes.c_void_p,)
    block = malloc(RAISING_BLOCK)
    if not block:
        return False
    free(block)
    return True


__all__ = ["raise_malloc_thresholds"]
