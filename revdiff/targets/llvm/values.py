"""Values while an LLVM function is emitted: a scalar is an LLVM operand with its VarType; an array
(or a view of one) its data pointer with a shape and a byte stride per axis. Constants are spelled
as LLVM reads them back exactly."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from revdiff.ir.types import VarType


@dataclass(frozen=True)
class Scalar:
    ref: str  # an LLVM operand: %name or a constant
    t: VarType  # computed type (``types.scalar``): int64, bool, or a float/complex dtype


@dataclass(frozen=True)
class Array:
    data: str  # i8* operand
    shape: tuple  # i64 operands
    strides: tuple  # i64 operands, in bytes
    dtype: str

    @property
    def ndim(self) -> int:
        return len(self.shape)


def float_constant(x: float, t: str) -> str:
    """``x`` as an LLVM constant of floating type ``t``: the bits of the double (a float's value
    rounded to float first, then widened, as LLVM writes float constants)."""
    if t == "float":
        x = struct.unpack("f", struct.pack("f", x))[0] if abs(x) <= 3.4028234663852886e38 or x != x else \
            (float("inf") if x > 0 else float("-inf"))
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]


def int_constant(v: int) -> str:
    """An i64 constant, wrapped to 64 bits as generated code computes."""
    v &= (1 << 64) - 1
    return str(v - (1 << 64) if v >= 1 << 63 else v)
