"""glibc's malloc thresholds, raised once per process before compiled programs run.

glibc serves a block at or above its mmap threshold with fresh pages of its own, and hands free
memory at the top of the heap back to the kernel once it exceeds the trim threshold; both start at
128 KiB. Its dynamic rule raises them when a block served by mmap is freed, one larger than the mmap
threshold and at most 32 MiB: the mmap threshold to that block's size, the trim threshold to twice
it. The rule alone leaves them at the largest block the process has freed, and a gradient's own
frees can leave the trim threshold below what one call frees: then every call takes its megabyte
ancillas (a 500x250 Householder gradient's W, V, K and their gradients, its products' scratch) as
fresh pages, faulted in and zeroed by the kernel, and hands them back at its end (with the raise
it took 0.84x the time at 4 x 500x250, one core, Zen 4 VM, bf35da8; README "Memory" has the
command). Freeing one block just under 32 MiB, by the same rule, raises them to 32 and 64 MiB.

Nothing is done where the C library is not glibc or the system is not 64-bit, and nothing changes
where the thresholds were set by hand (``mallopt``, ``MALLOC_*_``, ``GLIBC_TUNABLES``: glibc's rule
is then off, though the block is still freed); ``REVDIFF_MALLOC_THRESHOLDS=0`` (or false, no, off) skips it.
"""
from __future__ import annotations

import ctypes
import functools
import sys

from revdiff.runtime.switches import switched_off

#: the largest freed block that raises glibc's thresholds (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems)
GLIBC_DYNAMIC_MMAP_MAX = 32 * 1024 * 1024
#: the block allocated and freed: within the maximum with its header and page rounding
RAISING_BLOCK = GLIBC_DYNAMIC_MMAP_MAX - 2 * 4096


@functools.cache
def raise_malloc_thresholds() -> bool:
    """Raise glibc's mmap and trim thresholds to 32 and 64 MiB by its own rule, once per process;
    whether the block was freed (False: not Linux with glibc, not 64-bit, or switched off)."""
    if (switched_off("REVDIFF_MALLOC_THRESHOLDS") or not sys.platform.startswith("linux")
            or ctypes.sizeof(ctypes.c_void_p) != 8):
        return False
    try:
        libc = ctypes.CDLL(None)
        malloc, free = libc.malloc, libc.free
    except (OSError, AttributeError, TypeError):
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # musl and others have rules of their own
        return False
    malloc.restype, malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
    free.restype, free.argtypes = None, (ctypes.c_void_p,)
    block = malloc(RAISING_BLOCK)  # served by mmap; only its header's page is written
    if not block:
        return False
    free(block)
    return True


__all__ = ["raise_malloc_thresholds"]
