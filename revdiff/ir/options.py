"""The compile options a reversible function carries through every pass and backend: runtime checks
and their tolerances, FMA contraction on the GPU, BLAS on the CPU, loop fusion. Part of its cache key."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Options:
    check: bool = True
    atol: float = 1e-12
    rtol: float | None = None  # None: 1e-9 for 64-bit data, 1e-4 for 32-bit
    fmad: bool = False  # CUDA only: allow fused multiply-add contraction
    blas: bool = True  # CPU: vector instructions on large views may call BLAS (False: loops only)
    fuse_loops: bool = True  # adjacent loops over one range fused (``optimize/fuse_loops.py``)

    def rtol_for(self, dtype: str) -> float:
        if self.rtol is not None:
            return self.rtol
        return 1e-4 if dtype in ("float32", "complex64") else 1e-9
