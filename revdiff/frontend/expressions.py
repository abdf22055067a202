"""Python expression AST -> IR expression, accepting only pure expressions of the language."""
from __future__ import annotations

import ast
import builtins
import cmath
import math
import numbers
import types

import numpy as np

from revdiff.frontend.source import SourceMap
from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Index, Name, Select, Shape, Slice, Unary
from revdiff.ir.types import kind_of_dtype
from revdiff.user_names import as_written
from revdiff.primitives import FUNCTIONS, USER_FUNCTIONS

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
           ast.FloorDiv: "//", ast.Mod: "%"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_MATH_MODULES = {"numpy", "math", "cmath"}
_CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf, "tau": math.tau}


class ExpressionParser:
    """Converts expressions; ``local_names`` are the names the function itself defines."""

    def __init__(self, smap: SourceMap, local_names: set, fn_globals: dict):
        self.smap = smap
        self.local_names = local_names
        self.globals = fn_globals
        self.constants: dict = {}  # global or closure numbers read, by name: their values are compiled in
        self.resolved: dict = {}  # global modules and math functions read, by name (a rebinding re-parses)
        self.views_allowed = False  # inside the expression of a whole-array statement

    # -------------------------------------------------------------- helpers

    def error(self, node: ast.AST, message: str):
        return self.smap.error(node, message)

    def _global(self, name: str):
        """The global, closure or builtin the body's ``name`` (as compiled) reads, or None."""
        name = as_written(name)
        if name in self.globals:
            return self.globals[name]
        return getattr(builtins, name, None)

    def _is_math_module(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Name) or node.id in self.local_names:
            return False
        mod = self._global(node.id)
        if isinstance(mod, types.ModuleType) and mod.__name__.split(".")[0] in _MATH_MODULES:
            self.resolved[node.id] = mod
            return True
        return False

    def function_name(self, func: ast.AST) -> str | None:
        """Canonical name of a pure function call target, or None if it is not one."""
        if isinstance(func, ast.Attribute) and self._is_math_module(func.value):
            return USER_FUNCTIONS.get(func.attr) if func.attr not in _BUILTIN_ONLY else None
        if isinstance(func, ast.Name) and func.id not in self.local_names and func.id in USER_FUNCTIONS:
            obj = self._global(func.id)
            if obj is None:
                return None
            name = as_written(func.id)
            if obj in (abs, min, max, round) and obj is getattr(builtins, name, None) or \
                    any(getattr(module, name, None) is obj for module in (np, math, cmath)):
                self.resolved[func.id] = obj  # the function of that name itself (not ``cos as sin``)
                return USER_FUNCTIONS[func.id]
        return None

    # -------------------------------------------------------------- conversion

    def convert(self, node: ast.AST, allow_slices: bool = False):
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise self.error(node, f"{_describe(node)} is not allowed in an expression of a reversible "
                                   "function; expressions are arithmetic on numbers, variables, array "
                                   "elements and math functions")
        return method(node, allow_slices) if isinstance(node, ast.Subscript) else method(node)

    def _number(self, node, value, given=None) -> Const:
        """A number compiled in as a constant; TypeError-worded ReversibilityError for one the generated
        code cannot hold: an integer outside int64 (integers compute in it), a NumPy scalar of a dtype
        revdiff does not compute in (uint64)."""
        if isinstance(given, np.generic) and not isinstance(given, np.bool_):
            try:
                kind_of_dtype(given.dtype)
            except TypeError as exc:
                raise self.error(node, f"the constant {given!r}: {exc}") from None
        if isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < (1 << 63):
            raise self.error(node, f"the integer constant {value} does not fit in int64, which integers compute "
                                   f"in; write it as a float ({float(value)!r}) if that is what it stands for")
        return Const(value)

    def _Constant(self, node):
        if isinstance(node.value, (bool, int, float, complex)):
            return self._number(node, node.value)
        raise self.error(node, f"the constant {node.value!r} is not a number")

    def _Name(self, node):
        if node.id in self.local_names:
            return Name(node.id)
        value = self._global(node.id)
        if isinstance(value, numbers.Number) and not isinstance(value, bool) or isinstance(value, bool):
            self.constants[node.id] = value
            return self._number(node, value.item() if isinstance(value, np.generic) else value, value)
        if value is None:
            raise self._undefined(node)
        if getattr(value, "__revdiff_reversible__", False) is True:
            raise self.error(node, f"'{node.id}' is a reversible function, not a value: call it as a statement, "
                                   f"{node.id}(...) or ~{node.id}(...); functions cannot be passed or stored")
        if callable(value):
            raise self.error(node, f"'{node.id}' is a function, not a value: call it on numbers ({node.id}(x)); "
                                   "functions cannot be passed or stored in a reversible function")
        raise self.error(node, f"name '{node.id}' refers to a {type(value).__name__}, not a number; "
                               "only numeric globals can be read in a reversible function")

    def _Attribute(self, node):
        if self._is_math_module(node.value) and node.attr in _CONSTANTS:
            return Const(_CONSTANTS[node.attr])
        if node.attr in ("real", "imag"):
            return Call(node.attr, (self.convert(node.value),))
        if node.attr == "shape":
            raise self.error(node, "use a.shape[k] (or 'm, n = a.shape') to read a shape")
        if self._is_math_module(node.value) and node.attr in USER_FUNCTIONS:
            raise self.error(node, f"{ast.unparse(node)} is a function, not a value: call it on numbers "
                                   f"({ast.unparse(node)}(x)); functions cannot be passed or stored")
        raise self.error(node, f"attribute '.{node.attr}' is not allowed in an expression")

    def _undefined(self, node: ast.Name):
        return self.error(node, f"name '{node.id}' is not defined: not a parameter, local or global constant")

    def _local_array(self, node: ast.Name) -> None:
        """ReversibilityError for an indexed name that is not the function's own: a global array is
        state the function would read behind its parameters' back."""
        if node.id in self.local_names:
            return
        value = self._global(node.id)
        if value is None:
            raise self._undefined(node)
        raise self.error(node, f"'{node.id}' is a global {type(value).__name__}: a reversible function reads "
                               f"arrays through its parameters (its state); pass '{node.id}' as an argument")

    def _Subscript(self, node, allow_slices=False):
        value = node.value
        if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name):
            axis = node.slice
            if not (isinstance(axis, ast.Constant) and isinstance(axis.value, int)):
                raise self.error(node, "the axis in a.shape[k] must be an integer literal")
            self._local_array(value.value)
            return Shape(value.value.id, axis.value)
        if not isinstance(value, ast.Name):
            raise self.error(node, "only variables can be indexed (write a[i, j], not an expression)")
        self._local_array(value)
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        indices = []
        views, self.views_allowed = self.views_allowed, False  # an index is a number
        try:
            for elt in elts:
                if isinstance(elt, ast.Slice):
                    if not (allow_slices or views):
                        raise self.error(node, "array slices are allowed in whole-array statements (y[:] += "
                                               "x[1:] * 2.0) and as arguments of calls to reversible functions; "
                                               "index single elements here")
                    if views and elt.step is not None:
                        raise self.error(node, "whole-array statements take slices of step 1 (a:b), not a:b:step")
                    indices.append(Slice(*(None if x is None else self.convert(x)
                                           for x in (elt.lower, elt.upper, elt.step))))
                else:
                    indices.append(self.convert(elt))
        finally:
            self.views_allowed = views
        return Index(value.id, tuple(indices))

    def convert_elementwise(self, node: ast.AST):
        """The expression of a whole-array statement, where arrays and views stand for their elements."""
        self.views_allowed = True
        try:
            return self.convert(node)
        finally:
            self.views_allowed = False

    def _BinOp(self, node):
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise self.error(node, f"the operator {type(node.op).__name__} is not supported in expressions")
        return BinOp(op, self.convert(node.left), self.convert(node.right))

    def _UnaryOp(self, node):
        ops = {ast.USub: "-", ast.UAdd: "+", ast.Not: "not"}
        if type(node.op) not in ops:
            raise self.error(node, "the operator '~' is only for inverse calls and '~routine' statements")
        operand = self.convert(node.operand)
        if isinstance(operand, Const) and type(node.op) is ast.USub:
            return Const(-operand.value)
        return Unary(ops[type(node.op)], operand)

    def _Compare(self, node):
        parts, left = [], self.convert(node.left)
        for op, comp in zip(node.ops, node.comparators):
            if type(op) not in _CMPOPS:
                raise self.error(node, f"comparison {type(op).__name__} is not supported")
            right = self.convert(comp)
            parts.append(Compare(_CMPOPS[type(op)], left, right))
            left = right
        return parts[0] if len(parts) == 1 else BoolOp("and", tuple(parts))

    def _BoolOp(self, node):
        return BoolOp("and" if isinstance(node.op, ast.And) else "or",
                      tuple(self.convert(v) for v in node.values))

    def _IfExp(self, node):
        return Select(self.convert(node.test), self.convert(node.body), self.convert(node.orelse))

    def _Call(self, node):
        if node.keywords:
            raise self.error(node, "keyword arguments are not allowed in expressions")
        func = node.func
        if isinstance(func, ast.Name) and func.id == "len" and func.id not in self.local_names:
            if len(node.args) != 1 or not isinstance(node.args[0], ast.Name):
                raise self.error(node, "len() takes one array variable")
            return Shape(node.args[0].id, 0)
        if isinstance(func, ast.Attribute) and func.attr in ("conj", "conjugate") and not node.args \
                and not self._is_math_module(func.value):
            return Call("conj", (self.convert(func.value),))
        name = self.function_name(func)
        if name is None:
            shown = ast.unparse(func)
            raise self.error(node, f"'{shown}' is not a pure function revdiff knows. In expressions use "
                                   f"{', '.join(sorted(set(USER_FUNCTIONS.values())))} (from numpy or math); "
                                   "call reversible functions as statements: g(x, y)")
        arity = FUNCTIONS[name].arity
        if len(node.args) != arity:
            raise self.error(node, f"{name}() takes {arity} argument(s), got {len(node.args)}")
        return Call(name, tuple(self.convert(a) for a in node.args))


_BUILTIN_ONLY = {"round"}  # round(x) is an int; np.round(x) would be a float, so it is not accepted


def _describe(node: ast.AST) -> str:
    names = {"ListComp": "a list comprehension", "GeneratorExp": "a generator expression",
             "DictComp": "a dict comprehension", "SetComp": "a set comprehension", "Lambda": "a lambda",
             "List": "a list", "Dict": "a dict", "Set": "a set", "Tuple": "a tuple",
             "NamedExpr": "an assignment expression (:=)", "Starred": "a starred expression",
             "JoinedStr": "an f-string", "Await": "await", "Yield": "yield"}
    return names.get(type(node).__name__, f"the syntax {type(node).__name__}")
