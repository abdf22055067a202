"""The compile options a reversible function carries through every pass and backend: runtime checks
and their tolerances, FMA contraction on the GPU, BLAS on the CPU, loop fusion; and, set by each
specialisation rather than by the user, whether it is lowered for SIMD lanes. Part of its cache key."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the default rtol of an ancilla check in units of the data's machine epsilon: 1024 ulps (2.3e-13
#: for 64-bit data, 1.2e-4 for 32-bit) admits the rounding of uncomputing a sum of a thousand terms
#: in another order, and refuses a mismatch of 1e-10 relative, which no rounding explains
DEFAULT_RTOL_ULPS = 1024


@dataclass
class Options:
    check: bool = True
    atol: float = 1e-12
    rtol: float | None = None  # None: DEFAULT_RTOL_ULPS machine epsilons of the ancilla's dtype
    fmad: bool = False  # CUDA only: allow fused multiply-add contraction
    blas: bool = True  # CPU: vector instructions on large views may call BLAS (False: loops only)
    fuse_loops: bool = True  # adjacent loops over one range fused (``optimize/fuse_loops.py``)
    lanes: bool = False  # lowered for SIMD lanes (set by the specialisation): walks over blocks of columns or rows

    def describe(self) -> str:
        """The options as generated code's header states them, the default rtol spelled out."""
        rtol = f"{self.rtol:g}" if self.rtol is not None else f"{DEFAULT_RTOL_ULPS} eps of the ancilla's dtype"
        return (f"check={self.check}, atol={self.atol:g}, rtol={rtol}, fmad={self.fmad}, blas={self.blas}, "
                f"fuse_loops={self.fuse_loops}, lanes={self.lanes}")

    def rtol_for(self, dtype: str) -> float:
        """The relative tolerance of ancilla checks on ``dtype`` (complex: that of its real part)."""
        if self.rtol is not None:
            return self.rtol
        if np.dtype(dtype).kind not in "fc":  # integers and booleans: exact
            return 0.0
        return DEFAULT_RTOL_ULPS * float(np.finfo(np.dtype(dtype)).eps)
