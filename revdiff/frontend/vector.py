"""Parse the updates of array views: vector instructions (``primitives/vector.py``) and whole-array
statements (``primitives/elementwise.py``):

    y[a:b] += A[a:b, c:d] @ x[c:d]      y -= A.T @ x      y += A.conj().T @ x  (or np.conj(A).T)
    Y[a:b, c:d] += A @ B                Y[:, :] -= A.T @ B  (a target written with two slices)
    s += np.dot(x, y)    s -= np.vdot(x, y)    s += x @ y   (s a number: an element or a scalar)
    s += np.linalg.norm(x)                                   (s a real number)
    Y[a:b, c:d] -= np.outer(u, v)                            (a rank-one update)
    y[a:b] += x[c:d] * np.sin(z)        Y[:, :] *= A * A + 1.0     y[:] /= w   (whole arrays)

Operands are whole arrays or views written with slices of step 1.
"""
from __future__ import annotations

import ast

from revdiff.ir.high import Index, Instr, Name, Slice
from revdiff.primitives.elementwise import ELEMENTWISE
from revdiff.primitives.norm import NORM
from revdiff.primitives.outer import OUTER
from revdiff.primitives.vector import DOT, MATMAT, MATVEC

_UPDATES = {"Add": "add", "Sub": "sub"}
_SCALINGS = {"Mult": "mul", "Div": "div"}


def is_view_syntax(node: ast.AST) -> bool:
    """``x[...]`` with at least one slice."""
    if not isinstance(node, ast.Subscript):
        return False
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return any(isinstance(e, ast.Slice) for e in elts)


def _slice_count(node: ast.AST) -> int:
    if not isinstance(node, ast.Subscript):
        return 0
    elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return sum(isinstance(e, ast.Slice) for e in elts)


def _scalar_ancillas(fn_node: ast.FunctionDef) -> set:
    """Names bound by ``name = zero(...)`` (numbers), to tell ``s += x @ y`` from ``y += A @ x``."""
    out = set()
    for node in ast.walk(fn_node):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                and node.value.func.id == "zero":
            out.add(node.targets[0].id)
    return out


class VectorParser:
    def __init__(self, parser):
        self.parser = parser
        self.expr = parser.expr
        self.scalars = _scalar_ancillas(parser.node)

    def error(self, node, message: str):
        return self.parser.error(node, message)

    def numpy_call(self, node: ast.AST, names: tuple) -> str | None:
        """The name of ``np.<name>(...)`` for a name in ``names``."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in names \
                and self.expr._is_math_module(node.func.value):
            return node.func.attr
        return None

    def is_norm(self, node: ast.AST) -> bool:
        """``np.linalg.norm(...)``."""
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "norm" \
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "linalg" \
            and self.expr._is_math_module(node.func.value.value)

    def view(self, node: ast.AST, role: str):
        if isinstance(node, ast.Name):
            return self.expr.convert(node)
        if isinstance(node, ast.Subscript):
            v = self.expr.convert(node, allow_slices=True)
            if isinstance(v, Index) and any(isinstance(i, Slice) and i.step is not None for i in v.indices):
                raise self.error(node, f"{role}: vector updates take slices of step 1 (a:b), not a:b:step")
            return v
        raise self.error(node, f"{role} must be an array or an array view such as A[:, :k], not "
                               f"'{ast.unparse(node)}'")

    def matrix(self, node: ast.AST) -> tuple:
        """(form, view): form "n" for A, "t" for A.T, "h" for A.conj().T or np.conj(A).T."""
        if isinstance(node, ast.Attribute) and node.attr == "T":
            inner = node.value
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and not inner.args \
                    and inner.func.attr in ("conj", "conjugate") and not self.expr._is_math_module(inner.func.value):
                return "h", self.view(inner.func.value, "the matrix of A.conj().T @ x")
            if self.numpy_call(inner, ("conj", "conjugate")) and len(inner.args) == 1:
                return "h", self.view(inner.args[0], "the matrix of np.conj(A).T @ x")
            return "t", self.view(inner, "the matrix of A.T @ x")
        return "n", self.view(node, "the matrix of A @ x")

    def is_number_target(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.scalars
        return isinstance(node, ast.Subscript) and not is_view_syntax(node)

    def update(self, s: ast.AugAssign):
        """The vector instruction or whole-array statement of ``s``, or None for a scalar update."""
        op = _UPDATES.get(type(s.op).__name__)
        target_view = is_view_syntax(s.target)
        value = s.value
        loc = self.parser.smap.loc(s)
        if op is None:
            if not target_view:
                return None
            scaling = _SCALINGS.get(type(s.op).__name__)
            if scaling is None:
                raise self.error(s, "array views are updated with +=, -=, *= and /= (y[:] += A @ x, "
                                    "y[:] *= w); other operators element by element")
            return Instr(loc, ELEMENTWISE[scaling], (self.target_view(s.target), self.expr.convert_elementwise(value)))
        dot = self.numpy_call(value, ("dot", "vdot"))
        if dot is not None:
            if len(value.args) != 2 or value.keywords:
                raise self.error(value, f"np.{dot}(x, y) takes two vectors")
            if target_view:
                raise self.error(s, f"np.{dot}(x, y) is a number: update an element or a scalar with it")
            return Instr(loc, DOT[dot][op], (self.parser.target(s.target), self.view(value.args[0], f"x of np.{dot}"),
                                             self.view(value.args[1], f"y of np.{dot}")))
        if self.numpy_call(value, ("outer",)) is not None:
            if len(value.args) != 2 or value.keywords:
                raise self.error(value, "np.outer(u, v) takes two vectors")
            if _slice_count(s.target) != 2:
                raise self.error(s, "np.outer(u, v) is a matrix: update a view written with two slices, "
                                    "Y[:, :] += np.outer(u, v)")
            return Instr(loc, OUTER[op], (self.target_view(s.target), self.view(value.args[0], "u of np.outer"),
                                          self.view(value.args[1], "v of np.outer")))
        if self.is_norm(value):
            if len(value.args) != 1 or value.keywords:
                raise self.error(value, "np.linalg.norm(x) takes one vector (the 2-norm; no ord or axis)")
            if target_view:
                raise self.error(s, "np.linalg.norm(x) is a number: update an element or a scalar with it")
            return Instr(loc, NORM[op], (self.parser.target(s.target), self.view(value.args[0], "x of np.linalg.norm")))
        if isinstance(value, ast.BinOp) and isinstance(value.op, ast.MatMult):
            form, left = self.matrix(value.left)
            if _slice_count(s.target) == 2:  # Y[:, :] += A @ B: a matrix product
                right = self.view(value.right, "the matrix B of Y[:, :] += A @ B")
                return Instr(loc, MATMAT[form][op], (self.target_view(s.target), left, right))
            right = self.view(value.right, "the vector x of A @ x")
            if form == "n" and not target_view and self.is_number_target(s.target):
                return Instr(loc, DOT["dot"][op], (self.parser.target(s.target), left, right))
            return Instr(loc, MATVEC[form][op], (self.target_view(s.target), left, right))
        if not target_view:
            return None
        return Instr(loc, ELEMENTWISE[op], (self.target_view(s.target), self.expr.convert_elementwise(value)))

    def target_view(self, node: ast.AST):
        v = self.view(node, "the target of a vector update")
        if isinstance(v, Name) and v.id in self.scalars:
            raise self.error(node, f"'{v.id}' is a number; the target of y += A @ x must be a vector")
        return v
