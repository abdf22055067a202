"""LLVM types of the values generated code holds: how an element of each dtype sits in memory, and
the type a value of each VarType is computed in (integers in i64, bools in i1, floats and complex
numbers in their own precision)."""
from __future__ import annotations

from revdiff.ir.types import VarType

#: a dtype's element as stored in arrays and in scalar variables
MEMORY = {"bool": "i8", "int8": "i8", "uint8": "i8", "int16": "i16", "uint16": "i16", "int32": "i32",
          "uint32": "i32", "int64": "i64", "uint64": "i64", "float32": "float", "float64": "double",
          "complex64": "{float, float}", "complex128": "{double, double}"}
ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
            "uint64": 8, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}
UNSIGNED = frozenset({"bool", "uint8", "uint16", "uint32", "uint64"})

BOOL = VarType("bool", 0, "bool")
INT = VarType("int", 0, "int64")
FLOAT64 = VarType("float", 0, "float64")


def precision(t: VarType) -> str:
    """The LLVM floating type of a float or complex VarType's parts."""
    return "float" if t.dtype in ("float32", "complex64") else "double"


def register(t: VarType) -> str:
    """The LLVM type a scalar of VarType ``t`` is computed in."""
    if t.kind == "bool":
        return "i1"
    if t.kind == "int":
        return "i64"
    if t.kind == "float":
        return precision(t)
    p = precision(t)
    return f"{{{p}, {p}}}"


def scalar(t: VarType) -> VarType:
    """The VarType values of kind ``t.kind`` are computed in (integers: int64)."""
    if t.kind == "int":
        return INT
    if t.kind == "bool":
        return BOOL
    return VarType(t.kind, 0, t.dtype)
