"""The printing half of the LLVM emitter: fresh SSA names and labels, blocks and branches, constants,
and the conversions between the types values are computed in (as Python and NumPy convert numbers).
``arithmetic.py``, ``memory.py`` and ``emit.py`` build on it."""
from __future__ import annotations

from revdiff.targets.llvm.types import BOOL, FLOAT64, INT, precision, register, scalar
from revdiff.targets.llvm.values import Scalar, float_constant, int_constant
from revdiff.ir.types import VarType


class EmitError(NotImplementedError):
    """The low IR holds something the LLVM emitter has no translation for."""


def kind_of_dtype(dtype: str) -> str:
    if dtype.startswith("complex"):
        return "complex"
    if dtype.startswith("float"):
        return "float"
    return "bool" if dtype == "bool" else "int"


def vartype(dtype: str, ndim: int = 0) -> VarType:
    return VarType(kind_of_dtype(dtype), ndim, dtype)


def suffix(p: str) -> str:
    """The LLVM intrinsic suffix of floating type ``p``."""
    return "f64" if p == "double" else "f32"


def ident(name: str, suffix: str = "") -> str:
    """A variable's name, and ``suffix`` (``.ref``, ``.shape0``: the values derived from it), as an
    LLVM local name: quoted, the suffix inside the quotes, where the name holds other characters
    than ASCII letters, digits, ``_`` and ``.`` (``α``)."""
    name += suffix
    if name.replace("_", "a").replace(".", "a").isalnum() and name.isascii():
        return name
    return '"' + name.replace("\\", "\\5C").replace('"', "\\22") + '"'


class Builder:
    """Lines of one LLVM function being printed. Subclasses set ``lines``, ``entry_lines`` (allocas,
    printed in the entry block), ``counter``, ``block`` (the current block's label) and
    ``terminated`` (whether it has its branch)."""

    def _tmp(self) -> str:
        self.counter += 1
        return f"%t{self.counter}"

    def _new_label(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}{self.counter}"

    def out(self, text: str) -> None:
        if self.terminated:  # code after a branch: give it a block of its own (unreachable)
            self._label(self._new_label("dead"))
        self.lines.append("  " + text)

    def _label(self, name: str) -> None:
        if not self.terminated:
            self.lines.append(f"  br label %{name}")
        self.lines.append(f"{name}:")
        self.block = name
        self.terminated = False

    def _br(self, target: str) -> None:
        if not self.terminated:
            self.lines.append(f"  br label %{target}")
            self.terminated = True

    def _cond_br(self, cond: str, yes: str, no: str) -> None:
        self.out(f"br i1 {cond}, label %{yes}, label %{no}")
        self.terminated = True

    def _op(self, text: str) -> str:
        v = self._tmp()
        self.out(f"{v} = {text}")
        return v

    # ---------------------------------------------------------------- constants and conversions

    def const(self, v) -> Scalar:
        if isinstance(v, bool):
            return Scalar("true" if v else "false", BOOL)
        if isinstance(v, int):
            return Scalar(int_constant(v), INT)
        if isinstance(v, float):
            return Scalar(float_constant(v, "double"), FLOAT64)
        if isinstance(v, complex):
            t = VarType("complex", 0, "complex128")
            return Scalar(f"{{ double {float_constant(v.real, 'double')}, double {float_constant(v.imag, 'double')} }}", t)
        raise EmitError(f"cannot emit the constant {v!r}")

    def truth(self, v: Scalar) -> str:
        return self.convert(v, BOOL).ref

    def convert(self, v: Scalar, to: VarType) -> Scalar:
        """``v`` as a value of (computed) type ``to``, as Python and NumPy convert numbers."""
        to = scalar(to)
        src = v.t
        if src == to:
            return v
        if to.kind == "bool":
            if src.kind == "int":
                return Scalar(self._op(f"icmp ne i64 {v.ref}, 0"), BOOL)
            if src.kind == "float":
                return Scalar(self._op(f"fcmp une {register(src)} {v.ref}, {float_constant(0.0, register(src))}"), BOOL)
            re, im = self.parts(v)
            p = precision(src)
            a = self._op(f"fcmp une {p} {re}, {float_constant(0.0, p)}")
            b = self._op(f"fcmp une {p} {im}, {float_constant(0.0, p)}")
            return Scalar(self._op(f"or i1 {a}, {b}"), BOOL)
        if to.kind == "int":
            if src.kind == "bool":
                return Scalar(self._op(f"zext i1 {v.ref} to i64"), INT)
            if src.kind == "float":
                return Scalar(self._op(f"fptosi {register(src)} {v.ref} to i64"), INT)
            raise EmitError("a complex number converted to an integer")
        if to.kind == "float":
            p = register(to)
            if src.kind == "bool":
                return Scalar(self._op(f"uitofp i1 {v.ref} to {p}"), to)
            if src.kind == "int":
                return Scalar(self._op(f"sitofp i64 {v.ref} to {p}"), to)
            if src.kind == "complex":  # its real part (error reports)
                re, _ = self.parts(v)
                return self.convert(Scalar(re, VarType("float", 0, "float32" if precision(src) == "float" else "float64")), to)
            return Scalar(self._resize(v.ref, register(src), p), to)
        # to complex
        p = precision(to)
        if src.kind == "complex":
            re, im = self.parts(v)
            q = precision(src)
            return self.pack(self._resize(re, q, p), self._resize(im, q, p), to)
        re = self.convert(v, VarType("float", 0, "float32" if p == "float" else "float64")).ref
        return self.pack(re, float_constant(0.0, p), to)

    def _resize(self, x: str, src: str, to: str) -> str:
        if src == to:
            return x
        return self._op(f"{'fpext' if to == 'double' else 'fptrunc'} {src} {x} to {to}")

    def parts(self, v: Scalar) -> tuple:
        c = register(v.t)
        return self._op(f"extractvalue {c} {v.ref}, 0"), self._op(f"extractvalue {c} {v.ref}, 1")

    def pack(self, re: str, im: str, t: VarType) -> Scalar:
        c = register(t)
        first = self._op(f"insertvalue {c} undef, {precision(t)} {re}, 0")
        return Scalar(self._op(f"insertvalue {c} {first}, {precision(t)} {im}, 1"), t)
