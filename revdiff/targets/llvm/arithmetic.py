"""Arithmetic and the pure functions of the function table in LLVM IR: operators in the precision
``passes/infer.py`` gives them (integers in i64 with Python's ``//``, ``%`` and ``**``; floats in the
widest float operand's precision; complex numbers as pairs), the elementary functions through the C
library (or the prelude's complex ones, ``prelude.py``)."""
from __future__ import annotations

from revdiff.targets.llvm import prelude
from revdiff.targets.llvm.builder import Builder, EmitError, suffix
from revdiff.targets.llvm.types import BOOL, INT, precision, register, scalar
from revdiff.targets.llvm.values import Scalar, float_constant
from revdiff.ir.types import VarType, dtype_for, join
from revdiff.primitives.functions import FUNCTIONS


def result_type(kind: str, operands) -> VarType:
    """The type of an operation of result ``kind`` on scalars ``operands`` (``passes/infer._result``)."""
    single = None
    for v in operands:
        d = v.t.dtype
        if d in ("float64", "complex128"):
            single = False
        elif d in ("float32", "complex64") and single is None:
            single = True
    return scalar(VarType(kind, 0, dtype_for(kind, "float32" if single else "float64")))


class Arithmetic(Builder):
    """Operators and function calls on scalars (``values.Scalar``)."""

    def negate(self, v: Scalar) -> Scalar:
        if v.t.kind in ("bool", "int"):
            x = self.convert(v, INT)
            return Scalar(self._op(f"sub i64 0, {x.ref}"), INT)
        if v.t.kind == "float":
            return Scalar(self._op(f"fneg {register(v.t)} {v.ref}"), v.t)
        re, im = self.parts(v)
        p = precision(v.t)
        return self.pack(self._op(f"fneg {p} {re}"), self._op(f"fneg {p} {im}"), v.t)

    def binary(self, op: str, a: Scalar, b: Scalar) -> Scalar:
        if op in ("^", "&", "|"):
            name = {"^": "xor", "&": "and", "|": "or"}[op]
            if a.t.kind == "bool" and b.t.kind == "bool":
                return Scalar(self._op(f"{name} i1 {a.ref}, {b.ref}"), BOOL)
            x, y = self.convert(a, INT), self.convert(b, INT)
            return Scalar(self._op(f"{name} i64 {x.ref}, {y.ref}"), INT)
        fn = FUNCTIONS[op]
        t = result_type(fn.result_kind((a.t.kind, b.t.kind)), (a, b))
        if op == "**":
            return self.power(a, b, t)
        if t.kind == "bool":  # True + True is 2, as in Python
            t = INT
        x, y = self.convert(a, t), self.convert(b, t)
        if t.kind == "int":
            if op in ("+", "-", "*"):
                return Scalar(self._op(f"{ {'+': 'add', '-': 'sub', '*': 'mul'}[op]} i64 {x.ref}, {y.ref}"), INT)
            name = {"//": "floordiv", "%": "mod"}.get(op)
            if name is None:
                raise EmitError(f"integer operator {op}")
            self.helpers.add(f"{name}:i64")
            return Scalar(self._op(f"call i64 @rd_{name}_i64(i64 {x.ref}, i64 {y.ref})"), INT)
        if t.kind == "float":
            p = register(t)
            if op in ("+", "-", "*", "/"):
                name = {"+": "fadd", "-": "fsub", "*": "fmul", "/": "fdiv"}[op]
                return Scalar(self._op(f"{name} {p} {x.ref}, {y.ref}"), t)
            name = {"//": "floordiv", "%": "mod"}[op]
            self.helpers.add(f"{name}:{p}")
            return Scalar(self._op(f"call {p} {prelude.helper_name(name, p)}({p} {x.ref}, {p} {y.ref})"), t)
        p = precision(t)
        xr, xi = self.parts(x)
        yr, yi = self.parts(y)
        if op in ("+", "-"):
            name = "fadd" if op == "+" else "fsub"
            return self.pack(self._op(f"{name} {p} {xr}, {yr}"), self._op(f"{name} {p} {xi}, {yi}"), t)
        if op == "*":
            re = self._op(f"fsub {p} {self._op(f'fmul {p} {xr}, {yr}')}, {self._op(f'fmul {p} {xi}, {yi}')}")
            im = self._op(f"fadd {p} {self._op(f'fmul {p} {xr}, {yi}')}, {self._op(f'fmul {p} {xi}, {yr}')}")
            return self.pack(re, im, t)
        if op == "/":
            self.helpers.add(f"cdiv:{p}")
            return Scalar(self._op(f"call {register(t)} {prelude.helper_name('cdiv', p)}({p} {xr}, {p} {xi}, "
                                   f"{p} {yr}, {p} {yi})"), t)
        raise EmitError(f"complex operator {op}")

    def power(self, a: Scalar, b: Scalar, t: VarType) -> Scalar:
        if t.kind in ("int", "bool"):
            x, y = self.convert(a, INT), self.convert(b, INT)
            self.helpers.add("pow:i64")
            return Scalar(self._op(f"call i64 @rd_pow_i64(i64 {x.ref}, i64 {y.ref})"), INT)
        if t.kind == "float":
            p = register(t)
            x = self.convert(a, t)
            if b.t.kind in ("int", "bool"):  # by squaring, as LLVM's powi
                self.helpers.add(f"powi:{p}")
                n = self.convert(b, INT)
                return Scalar(self._op(f"call {p} {prelude.helper_name('powi', p)}({p} {x.ref}, i64 {n.ref})"), t)
            y = self.convert(b, t)
            self.libm.add(("pow", p))
            return Scalar(self._op(f"call {p} @{prelude.libm('pow', p)}({p} {x.ref}, {p} {y.ref})"), t)
        p = precision(t)
        x, y = self.convert(a, t), self.convert(b, t)
        xr, xi = self.parts(x)
        yr, yi = self.parts(y)
        self.helpers.add(f"cpow:{p}")
        return Scalar(self._op(f"call {register(t)} {prelude.helper_name('cpow', p)}({p} {xr}, {p} {xi}, "
                               f"{p} {yr}, {p} {yi})"), t)

    def compare(self, op: str, a: Scalar, b: Scalar) -> Scalar:
        kind = join(a.t.kind, b.t.kind)
        if kind == "bool":
            pred = {"<": "ult", "<=": "ule", ">": "ugt", ">=": "uge", "==": "eq", "!=": "ne"}[op]
            return Scalar(self._op(f"icmp {pred} i1 {a.ref}, {b.ref}"), BOOL)
        t = result_type(kind, (a, b))
        x, y = self.convert(a, t), self.convert(b, t)
        if kind == "int":
            pred = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}[op]
            return Scalar(self._op(f"icmp {pred} i64 {x.ref}, {y.ref}"), BOOL)
        if kind == "float":
            pred = {"<": "olt", "<=": "ole", ">": "ogt", ">=": "oge", "==": "oeq", "!=": "une"}[op]
            return Scalar(self._op(f"fcmp {pred} {register(t)} {x.ref}, {y.ref}"), BOOL)
        p = precision(t)
        (xr, xi), (yr, yi) = self.parts(x), self.parts(y)
        if op == "==":
            both = (self._op(f"fcmp oeq {p} {xr}, {yr}"), self._op(f"fcmp oeq {p} {xi}, {yi}"))
            return Scalar(self._op(f"and i1 {both[0]}, {both[1]}"), BOOL)
        if op == "!=":
            either = (self._op(f"fcmp une {p} {xr}, {yr}"), self._op(f"fcmp une {p} {xi}, {yi}"))
            return Scalar(self._op(f"or i1 {either[0]}, {either[1]}"), BOOL)
        raise EmitError(f"complex numbers ordered by {op}")

    def call(self, fn: str, args: list) -> Scalar:
        entry = FUNCTIONS[fn]
        kinds = tuple(a.t.kind for a in args)
        t = result_type(entry.result_kind(kinds), args)
        if fn in ("neg", "pos"):
            return self.negate(args[0]) if fn == "neg" else args[0]
        if fn in ("+", "-", "*", "/", "//", "%", "**"):
            return self.binary(fn, *args)
        if fn == "abs":
            v = args[0]
            if v.t.kind in ("int", "bool"):
                x = self.convert(v, INT).ref
                neg = self._op(f"sub i64 0, {x}")
                return Scalar(self._op(f"select i1 {self._op(f'icmp slt i64 {x}, 0')}, i64 {neg}, i64 {x}"), INT)
            if v.t.kind == "float":
                p = register(v.t)
                self.libm.add(("fabs", p))
                return Scalar(self._op(f"call {p} @llvm.fabs.{suffix(p)}({p} {v.ref})"), v.t)
            re, im = self.parts(v)
            p = precision(v.t)
            self.libm.add(("hypot", p))
            real = VarType("float", 0, "float32" if p == "float" else "float64")
            return Scalar(self._op(f"call {p} @{prelude.libm('hypot', p)}({p} {re}, {p} {im})"), real)
        if fn in ("min", "max"):  # Python's: the first of equals, b only where strictly smaller (larger)
            a, b = (self.convert(x, t) for x in args)
            pick = self.compare("<" if fn == "min" else ">", b, a)
            return Scalar(self._op(f"select i1 {pick.ref}, {register(t)} {b.ref}, {register(t)} {a.ref}"), t)
        if fn == "sign":
            v = args[0]
            if v.t.kind in ("int", "bool"):
                x = self.convert(v, INT).ref
                pos = self._op(f"zext i1 {self._op(f'icmp sgt i64 {x}, 0')} to i64")
                neg = self._op(f"zext i1 {self._op(f'icmp slt i64 {x}, 0')} to i64")
                return Scalar(self._op(f"sub i64 {pos}, {neg}"), INT)
            if v.t.kind == "complex":
                raise EmitError("sign of a complex number")
            p = register(v.t)  # NumPy's: -1, 0 or 1 of the value's sign, NaN for NaN
            one, zero = float_constant(1.0, p), float_constant(0.0, p)
            gt = self._op(f"fcmp ogt {p} {v.ref}, {zero}")
            lt = self._op(f"fcmp olt {p} {v.ref}, {zero}")
            s = self._op(f"select i1 {lt}, {p} {float_constant(-1.0, p)}, {p} {v.ref}")
            s = self._op(f"select i1 {gt}, {p} {one}, {p} {s}")
            is_zero = self._op(f"fcmp oeq {p} {v.ref}, {zero}")
            return Scalar(self._op(f"select i1 {is_zero}, {p} {zero}, {p} {s}"), v.t)
        if fn == "conj":
            v = args[0]
            if v.t.kind != "complex":
                return v
            re, im = self.parts(v)
            return self.pack(re, self._op(f"fneg {precision(v.t)} {im}"), v.t)
        if fn in ("real", "imag"):
            v = args[0]
            if v.t.kind != "complex":
                if fn == "real":
                    return v if v.t.kind != "bool" else self.convert(v, INT)
                return Scalar("0", INT) if v.t.kind in ("int", "bool") else Scalar(float_constant(0.0, register(v.t)), v.t)
            re, im = self.parts(v)
            real = VarType("float", 0, "float32" if precision(v.t) == "float" else "float64")
            return Scalar(re if fn == "real" else im, real)
        if fn == "round":  # to the nearest integer, ties to even (the domain check bounds it)
            v = self.convert(args[0], result_type("float", args))
            p = register(v.t)
            self.libm.add(("rint", p))
            r = self._op(f"call {p} @llvm.rint.{suffix(p)}({p} {v.ref})")
            return Scalar(self._op(f"fptosi {p} {r} to i64"), INT)
        if fn == "trip_count":
            x = [self.convert(a, INT).ref for a in args]
            self.helpers.add("trip_count:i64")
            return Scalar(self._op(f"call i64 @rd_trip_count_i64(i64 {x[0]}, i64 {x[1]}, i64 {x[2]})"), INT)
        # the elementary functions
        if t.kind == "complex":
            name = {"exp": "cexp", "log": "clog", "sqrt": "csqrt", "sin": "csin", "cos": "ccos", "tan": "ctan",
                    "sinh": "csinh", "cosh": "ccosh", "tanh": "ctanh", "atan": "catan"}.get(fn)
            if name is None or len(args) != 1:
                raise EmitError(f"{fn} of a complex number")
            re, im = self.parts(self.convert(args[0], t))
            p = precision(t)
            self.helpers.add(f"{name}:{p}")
            return Scalar(self._op(f"call {register(t)} {prelude.helper_name(name, p)}({p} {re}, {p} {im})"), t)
        p = register(t)
        xs = [self.convert(a, t).ref for a in args]
        if fn == "sqrt":
            self.libm.add(("sqrt", p))
            return Scalar(self._op(f"call {p} @llvm.sqrt.{suffix(p)}({p} {xs[0]})"), t)
        if fn in prelude.LIBM_UNARY and len(xs) == 1:
            self.libm.add((prelude.LIBM_UNARY[fn], p))
            return Scalar(self._op(f"call {p} @{prelude.libm(prelude.LIBM_UNARY[fn], p)}({p} {xs[0]})"), t)
        if fn in prelude.LIBM_BINARY and len(xs) == 2:
            self.libm.add((fn, p))
            return Scalar(self._op(f"call {p} @{prelude.libm(fn, p)}({p} {xs[0]}, {p} {xs[1]})"), t)
        raise EmitError(f"no LLVM translation of {fn}")
