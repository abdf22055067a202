"""Types of values as the passes see them: a kind (bool < int < float < complex) and a rank.

Types come from the arguments of a call (functions are specialised per argument types), and are
propagated through expressions so that gradient code is emitted only for float and complex data.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

KINDS = ("bool", "int", "float", "complex")
DIFFERENTIABLE = ("float", "complex")


@dataclass(frozen=True)
class VarType:
    kind: str
    ndim: int = 0
    dtype: str = "float64"  # numpy name of the element type

    @property
    def differentiable(self) -> bool:
        return self.kind in DIFFERENTIABLE

    @property
    def is_array(self) -> bool:
        return self.ndim > 0

    def element(self) -> "VarType":
        return VarType(self.kind, 0, self.dtype)

    def describe(self) -> str:
        return f"{self.dtype} array of rank {self.ndim}" if self.ndim else self.dtype


#: the element types generated code computes in (no float16: no backend emits it)
SUPPORTED_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "float32", "float64", "complex64", "complex128")


def kind_of_dtype(dtype: np.dtype) -> str:
    """The kind values of ``dtype`` have; TypeError for a dtype revdiff does not compute in."""
    return _kind_of(np.dtype(dtype))


@functools.lru_cache(maxsize=None)
def _kind_of(dtype: np.dtype) -> str:  # once per dtype: a call's arguments are typed on every call
    if dtype.name not in SUPPORTED_DTYPES:
        hint = f" (convert it to float{32 if dtype.itemsize < 4 else 64})" if dtype.kind == "f" else ""
        if dtype == np.uint64:  # compiled code computes integers in int64: 2**63 and above would read negative
            hint = " (integers compute in int64, which holds no uint64 of 2**63 or more: convert it to int64)"
        raise TypeError(f"dtype {dtype} is not supported{hint}; revdiff computes in bool, integers, float32, "
                        "float64, complex64 and complex128")
    if dtype == np.bool_:
        return "bool"
    if np.issubdtype(dtype, np.integer):
        return "int"
    if np.issubdtype(dtype, np.floating):
        return "float"
    return "complex"


def type_of_value(value: object) -> VarType:
    """The VarType of a runtime argument (a GPU array's as a NumPy array's); raises TypeError for
    anything the language cannot hold."""
    if isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
        if isinstance(value, np.ma.MaskedArray):
            raise TypeError("masked arrays are not supported (the programs would read and write the masked "
                            "entries); pass np.asarray(a) or a.filled(value)")
        if value.ndim == 0:
            raise TypeError("0-d arrays are not supported; pass a Python or NumPy scalar")
        return array_type(np.dtype(value.dtype), value.ndim)
    if isinstance(value, np.generic):
        kind_of_dtype(value.dtype)  # NumPy scalars of unsupported types (float16, longdouble) refused
    if isinstance(value, (bool, np.bool_)):
        return VarType("bool", 0, "bool")
    if isinstance(value, np.integer):  # in its own dtype, as NumPy computes it and as an array element is
        return VarType("int", 0, value.dtype.name)
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 63):
            raise TypeError(f"the integer {value} does not fit in int64, which integer scalars compute in")
        return VarType("int", 0, "int64")
    if isinstance(value, (float, np.floating)):
        return VarType("float", 0, "float64" if not isinstance(value, np.float32) else "float32")
    if isinstance(value, (complex, np.complexfloating)):
        return VarType("complex", 0, "complex64" if isinstance(value, np.complex64) else "complex128")
    raise TypeError(f"unsupported argument of type {type(value).__name__}")


@functools.lru_cache(maxsize=None)
def array_type(dtype: np.dtype, ndim: int) -> VarType:
    """The VarType of arrays of ``dtype`` and rank ``ndim`` (one shared instance each)."""
    return VarType(kind_of_dtype(dtype), ndim, dtype.name)


def join(*kinds: str) -> str:
    """The kind of an arithmetic result of operands of these kinds."""
    return max(kinds, key=KINDS.index) if kinds else "int"


def is_real(kind: str) -> bool:
    return kind != "complex"


def dtype_for(kind: str, like: str | None = None) -> str:
    """A numpy dtype name for a kind, keeping the precision of ``like`` where it has one."""
    if kind == "bool":
        return "bool"
    if kind == "int":
        return "int64"
    single = like in ("float32", "complex64")
    if kind == "float":
        return "float32" if single else "float64"
    return "complex64" if single else "complex128"
