"""Parse a reversible function's Python AST into the IR, keeping the user's source locations.

The parser recognises the statement forms of the language and reports any other syntax with what
to write instead. Rules that need the whole function (what is modified, ancilla lifetimes, ...)
belong to ``check.py``.
"""
from __future__ import annotations

import ast
from types import ModuleType

from revdiff import language
from revdiff.errors import ReversibilityError
from revdiff.frontend.arguments import bind, default_value
from revdiff.frontend.expressions import ExpressionParser
from revdiff.frontend.source import SourceMap, function_ast
from revdiff.frontend.vector import VectorParser, is_view_syntax
from revdiff.ir import high as ir
from revdiff.ir import views as V
from revdiff.ir.high import (Alloc, Bind, CallFn, Compute, Const, Dealloc, DType, For, If, Index, Instr, Name,
                             Slice, Uncompute, While)
from revdiff.ir.types import kind_of_dtype
from revdiff.primitives import AUGMENTED, INSTRUCTIONS, called
from revdiff.primitives.elementwise import ELEMENTWISE
from revdiff.user_names import as_written, escaped, remember

_UNSUPPORTED = {
    "Return": "'return' is not allowed: a reversible function returns all its parameters itself",
    "Break": "'break' is not allowed: use 'while (pre, post):' with explicit conditions",
    "Continue": "'continue' is not allowed: put the rest of the loop body under an 'if'",
    "Try": "'try' is not allowed in a reversible function",
    "Raise": "'raise' is not allowed in a reversible function",
    "Global": "'global' is not allowed: pass the value as a parameter",
    "Nonlocal": "'nonlocal' is not allowed: pass the value as a parameter",
    "Import": "imports are not allowed inside a reversible function; import at module level",
    "ImportFrom": "imports are not allowed inside a reversible function; import at module level",
    "FunctionDef": "nested functions are not allowed: define another @reversible function at module level",
    "ClassDef": "classes are not allowed inside a reversible function",
    "AnnAssign": "annotated assignments are not allowed: write 'x = zero()' for an ancilla",
    "Assert": "'assert' is not allowed: use an 'if (pre, post)' post-condition, which is checked",
    "AsyncFor": "async code is not allowed",
    "AsyncWith": "async code is not allowed",
    "AsyncFunctionDef": "async code is not allowed",
    "Match": "'match' is not allowed: use 'if' / 'else'",
}


def is_reversible_function(obj: object) -> bool:
    """Whether ``obj`` is a reversible function (or its inverse), not the class of one."""
    return getattr(obj, "__revdiff_reversible__", False) is True and not isinstance(obj, type)


class Parser:
    def __init__(self, fn, node: ast.FunctionDef, smap: SourceMap):
        self.fn = fn
        self.node = node
        self.smap = smap
        self.params = self._params(node)
        self.globals = dict(fn.__globals__)
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.globals[name] = cell.cell_contents
                except ValueError:  # cell not yet filled
                    pass
        local_names = set(self.params) | _assigned_names(node)
        _LanguageWords(self.globals, local_names).visit(node)
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | local_names
        if any(escaped(n) != n for n in names):
            remember(smap.filename, smap.function, names)
            _Hygiene().visit(node)
            self.params = [escaped(p) for p in self.params]
            local_names = {escaped(n) for n in local_names}
        self.expr = ExpressionParser(smap, local_names, self.globals)
        self.callees: dict = {}
        self._routine_counter = 0
        self.vectors = VectorParser(self)

    def error(self, node, message):
        return self.smap.error(node, message)

    def _params(self, node: ast.FunctionDef) -> list:
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.kw_defaults or a.posonlyargs:
            raise self.smap.error(node, "parameters of a reversible function must be positional names, "
                                        "with default values or not (no *args, **kwargs or keyword-only)")
        names = [p.arg for p in a.args]
        if not names:
            raise self.smap.error(node, "a reversible function needs at least one parameter: its state")
        return names

    def _defaults(self, node: ast.FunctionDef) -> dict:
        """Parameter -> its default value: numbers only (``frontend/arguments.py``)."""
        values = self.fn.__defaults__ or ()
        names = self.params[len(self.params) - len(values):]
        for name, value, expr in zip(names, values, node.args.defaults):
            if not default_value(value):
                raise self.smap.error(expr, f"the default value of '{name}' must be a number (bool, int, float, "
                                            f"complex or a NumPy scalar), not {type(value).__name__}")
        return dict(zip(names, values))

    # ---------------------------------------------------------------- blocks

    def parse(self) -> ir.Function:
        body = self.block(self.node.body)
        return ir.Function(self.node.name, self.params, body, self.smap.loc(self.node), self.callees,
                           dict(self.expr.constants), self._defaults(self.node), dict(self.expr.resolved))

    def block(self, stmts: list) -> list:
        out: list = []
        open_routines: list = []  # Compute nodes awaiting their ~routine, innermost last
        for s in stmts:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
                continue  # docstring or comment string
            if isinstance(s, ast.Pass):
                continue
            if _is_uncompute(s):
                if not open_routines:
                    raise self.error(s, "'~routine' has no matching 'with routine:' block before it "
                                        "in the same block")
                compute = open_routines.pop()
                out.append(Uncompute(self.smap.loc(s), compute.body, compute.ident))
                continue
            node = self.statement(s)
            if isinstance(node, Compute):
                open_routines.append(node)
            out.extend(node if isinstance(node, list) else [node])
        if open_routines:
            c = open_routines[-1]
            raise ReversibilityError("the 'with routine:' block here is never undone: add '~routine' "
                                          "later in the same block (compute, copy, uncompute)", c.loc)
        return out

    # ---------------------------------------------------------------- statements

    def statement(self, s: ast.stmt):
        kind = type(s).__name__
        if kind in _UNSUPPORTED:
            raise self.error(s, _UNSUPPORTED[kind])
        method = getattr(self, "_" + kind, None)
        if method is None:
            raise self.error(s, f"the statement {kind} is not part of the reversible language")
        return method(s)

    def target(self, node: ast.AST):
        lv = self.expr.convert(node)
        if not isinstance(lv, (ir.Name, ir.Index)):
            raise self.error(node, "the target must be a variable or an array element such as a[i, j]")
        if isinstance(lv, ir.Index) and not lv.is_element:
            raise self.error(node, "the target must be a single array element, not a slice")
        return lv

    def _AugAssign(self, s: ast.AugAssign):
        vector = self.vectors.update(s)
        if vector is not None:
            return vector
        op = AUGMENTED.get(type(s.op).__name__)
        if op is None:
            raise self.error(s, f"the update '{_aug_symbol(s.op)}=' is not invertible; use +=, -=, *=, /= "
                                "or ^= (integers)")
        return Instr(self.smap.loc(s), op, (self.target(s.target), self.expr.convert(s.value)))

    def _Assign(self, s: ast.Assign):
        loc = self.smap.loc(s)
        if len(s.targets) != 1:
            raise self.error(s, "chained assignment 'a = b = ...' is not allowed")
        tgt, value = s.targets[0], s.value
        if isinstance(tgt, ast.Tuple):
            return self._tuple_assign(s, tgt, value)
        # t = -t
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and \
                ast.unparse(value.operand) == ast.unparse(tgt):
            return Instr(loc, "neg", (self.target(tgt),))
        if not isinstance(tgt, ast.Name):
            raise self.error(s, "plain assignment to an array element is not reversible; write "
                                "'a[i] += e' (on a zero element) or swap values")
        name = tgt.id
        if name in self.params:
            raise self.error(s, f"plain assignment to the parameter '{name}' is not reversible; update it "
                                f"with '{name} += ...', '{name} *= ...' or a swap")
        alloc = self._allocation(s, name, value)
        if alloc is not None:
            return alloc
        return Bind(loc, name, self.expr.convert(value))

    def _tuple_assign(self, s, tgt: ast.Tuple, value: ast.AST):
        loc = self.smap.loc(s)
        elts = tgt.elts
        if isinstance(value, ast.Tuple) and len(elts) == 2 and len(value.elts) == 2 and \
                ast.unparse(elts[0]) == ast.unparse(value.elts[1]) and ast.unparse(elts[1]) == ast.unparse(value.elts[0]):
            return Instr(loc, "swap", (self.target(elts[0]), self.target(elts[1])))
        if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name) \
                and all(isinstance(e, ast.Name) for e in elts):
            return [Bind(loc, e.id, ir.Shape(value.value.id, k)) for k, e in enumerate(elts)]
        raise self.error(s, "tuple assignment is allowed only as a swap 'a, b = b, a' or as "
                            "'m, n = A.shape'; update each variable in a statement of its own (a += x, then b += y)")

    def _allocation(self, s, name: str, value: ast.AST):
        loc = self.smap.loc(s)
        if isinstance(value, ast.Constant) and isinstance(value.value, (int, float, complex, bool)) \
                and value.value == 0:
            kinds = {bool: "bool", int: "int", float: "float", complex: "complex"}
            return Alloc(loc, name, None, DType(kind=kinds[type(value.value)]))
        if self._language_call(value, "ancilla"):
            return self._valued_ancilla(s, name, value)
        if self._language_call(value, "zero") or self._language_call(value, "zeros"):
            args = list(value.args)
            kw = {k.arg: k.value for k in value.keywords}
            if value.func.id == "zero":
                if len(args) > 1 or set(kw) - {"dtype"}:
                    raise self.error(s, "zero() takes at most a dtype: zero(), zero(complex), zero(A.dtype)")
                dtype = self._dtype(args[0] if args else kw.get("dtype"), s)
                return Alloc(loc, name, None, dtype)
            if not args or len(args) > 2 or set(kw) - {"dtype"}:
                raise self.error(s, "zeros(shape, dtype) takes a shape and an optional dtype")
            shape_node = args[0]
            dims = shape_node.elts if isinstance(shape_node, ast.Tuple) else [shape_node]
            shape = tuple(self.expr.convert(d) for d in dims)
            dtype = self._dtype(args[1] if len(args) > 1 else kw.get("dtype"), s)
            return Alloc(loc, name, shape, dtype)
        return None

    def _language_call(self, node: ast.AST, name: str) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name \
            and name not in self.expr.local_names

    def _copy(self, s, name: str, node: ast.Call, what: str) -> tuple:
        """(target, copied value, the instructions by operator) of ``ancilla(e)`` / ``release(t, e)``:
        ``add`` for a number, ``elementwise_add`` for a view (one slice or index per axis)."""
        if node.keywords or len(node.args) != 1:
            raise self.error(s, f"{what} takes one value: a number or an expression, or an array view x[:]")
        value = node.args[0]
        if is_view_syntax(value):
            view = self.expr.convert_elementwise(value)
            written = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
            target = Index(name, tuple(Slice() for e in written if isinstance(e, ast.Slice)))
            return target, view, ELEMENTWISE
        return Name(name), self.expr.convert(value), {"add": "add", "sub": "sub"}

    def _valued_ancilla(self, s, name: str, call: ast.Call) -> list:
        """``t = ancilla(e)``: a zero ancilla of e's type (or view's shape), then ``t += e``."""
        loc = self.smap.loc(s)
        target, value, ops = self._copy(s, name, call, "ancilla()")
        if isinstance(target, Name):
            return [Alloc(loc, name, None, DType(kind="float"), value), Instr(loc, ops["add"], (target, value))]
        shape = tuple(V.lengths(value, len(value.indices)))  # every axis written (checked at the first call)
        return [Alloc(loc, name, shape, DType(like=V.base(value)), value), Instr(loc, ops["add"], (target, value))]

    def _release(self, s: ast.Expr, call: ast.Call) -> list:
        """``release(t, e)``: ``t -= e``, then ``t`` deallocated (checked zero): the inverse of ancilla(e)."""
        if len(call.args) != 2 or call.keywords or not isinstance(call.args[0], ast.Name):
            raise self.error(s, "release(t, e) takes the ancilla and the value it was allocated with")
        name = call.args[0].id
        loc = self.smap.loc(s)
        target, value, ops = self._copy(s, name, ast.Call(call.func, call.args[1:], []), "release(t, e)")
        return [Instr(loc, ops["sub"], (target, value)), Dealloc(loc, name, value)]

    def _dtype(self, node, s) -> DType:
        if node is None:
            return DType(kind="float")
        if isinstance(node, ast.Name) and node.id in ("float", "complex", "int", "bool"):
            return DType(kind=node.id)
        if isinstance(node, ast.Attribute) and node.attr == "dtype" and isinstance(node.value, ast.Name):
            return DType(like=node.value.id)
        if isinstance(node, ast.Attribute) and node.attr == "dtype" and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "real" and isinstance(node.value.value, ast.Name):
            return DType(like=node.value.value.id, real=True)
        if isinstance(node, ast.Attribute) and self.expr._is_math_module(node.value):
            import numpy as np
            try:
                dt = np.dtype(node.attr)
            except TypeError:
                raise self.error(s, f"unknown dtype {ast.unparse(node)}") from None
            return DType(kind=kind_of_dtype(dt), np_name=dt.name)
        raise self.error(s, f"the dtype {ast.unparse(node)} is not understood; use float, complex, int, bool, "
                            "np.float32 (and other numpy types), A.dtype or A.real.dtype")

    def _Delete(self, s: ast.Delete):
        if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
            raise self.error(s, "'del' takes one ancilla variable: del x")
        return Dealloc(self.smap.loc(s), s.targets[0].id)

    def _Expr(self, s: ast.Expr):
        value = s.value
        inverse = False
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Invert) and isinstance(value.operand, ast.Call):
            inverse, value = True, value.operand
        if not isinstance(value, ast.Call):
            raise self.error(s, "an expression on its own does nothing; statements are updates "
                                "(+=, -=, *=, /=, ^=), swaps, calls and control flow")
        func = value.func
        if self._language_call(value, "release"):
            if inverse:
                raise self.error(s, "release(t, e) has no '~': its inverse is the ancilla(e) it undoes")
            return self._release(s, value)
        entry = called(func.id) if isinstance(func, ast.Name) and func.id not in self.expr.local_names else None
        if entry is not None:
            if value.keywords:
                raise self.error(s, f"the instruction {entry.syntax} takes no keyword arguments")
            if is_reversible_function(self.expr._global(func.id)):
                raise self.error(s, f"'{func.id}' is both the instruction {entry.syntax} and a reversible "
                                    "function of this module; rename the function")
            if len(value.args) != len(entry.roles):
                raise self.error(s, f"{entry.syntax} takes {len(entry.roles)} arguments")
            op = INSTRUCTIONS[entry.inverse].name if inverse else entry.name
            operands = tuple(self.target(a) if role == "target" else self.expr.convert(a)
                             for a, role in zip(value.args, entry.roles))
            return Instr(self.smap.loc(s), op, operands)
        if not isinstance(func, ast.Name):
            raise self.error(s, f"'{ast.unparse(func)}' cannot be called here: call reversible functions by "
                                "their name, g(x) or ~g(x)")
        obj = self.expr._global(func.id)
        if obj is not None and not is_reversible_function(obj):
            raise self.error(s, f"'{func.id}' is not a reversible function: only functions decorated with "
                                "@reversible can be called as statements (pure functions belong inside "
                                "an update such as y += f(x))")
        if obj is not None:
            self.callees[func.id] = obj
            if obj.forward_function is not obj:  # a name bound to ~h: calling it runs h's inverse
                inverse = not inverse
        return CallFn(self.smap.loc(s), func.id, self._call_arguments(s, func.id, obj, value), inverse)

    def _call_arguments(self, s: ast.stmt, name: str, callee, call: ast.Call) -> tuple:
        """The arguments of a call of reversible function ``callee`` in parameter order: keywords
        bound by name and left-out parameters given their default values (``frontend/arguments.py``)."""
        if any(k.arg is None for k in call.keywords):
            raise self.error(s, f"'**' arguments cannot be passed to '{name}': name each keyword")
        if call.keywords and callee is None:
            raise self.error(s, f"keyword arguments in a call of '{name}' need '{name}' defined before this "
                                "function (its parameter names are read here)")
        if callee is None:  # defined later: positional arguments, checked against it when it is
            return tuple(self._argument(a) for a in call.args)
        defaults = callee.forward_function.ir.defaults
        try:
            nodes = bind(as_written(name), [as_written(p) for p in callee.params], {as_written(p): None for p in defaults},
                         tuple(call.args), {k.arg: k.value for k in call.keywords})
        except TypeError as exc:
            raise self.smap.error(s, str(exc), written=True) from None  # bind names them as written
        return tuple(Const(_number(defaults[p])) if a is None else self._argument(a)
                     for p, a in zip(callee.params, nodes))

    def _argument(self, a: ast.expr):
        return self.expr.convert(a, allow_slices=True) if isinstance(a, ast.Subscript) else self.expr.convert(a)

    def _For(self, s: ast.For):
        if s.orelse:
            raise self.error(s, "'for ... else' is not allowed")
        if not isinstance(s.target, ast.Name):
            raise self.error(s, "the loop variable must be a single name: loop over indices, "
                                "'for i in range(len(x)):', and read x[i]")
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                and 1 <= len(it.args) <= 3 and not it.keywords):
            raise self.error(s, "loops must run over range(stop), range(start, stop) or range(start, stop, step); "
                                "for the elements of an array x write 'for i in range(len(x)):' and read x[i]")
        args = [self.expr.convert(a) for a in it.args]
        start, stop, step = (Const(0), args[0], Const(1)) if len(args) == 1 else \
            (args[0], args[1], args[2] if len(args) == 3 else Const(1))
        if isinstance(step, Const) and step.value == 0:
            raise self.error(s, "range() step must not be zero")
        return For(self.smap.loc(s), s.target.id, start, stop, step, self.block(s.body))

    def _If(self, s: ast.If):
        test = s.test
        if isinstance(test, ast.Tuple):
            if len(test.elts) != 2:
                raise self.error(s, "a reversible 'if' takes (pre, post) conditions: if (pre, post):")
            pre, post = (self.expr.convert(e) for e in test.elts)
        else:
            pre, post = self.expr.convert(test), None
        return If(self.smap.loc(s), pre, post, self.block(s.body), self.block(s.orelse))

    def _While(self, s: ast.While):
        if s.orelse:
            raise self.error(s, "'while ... else' is not allowed")
        if not (isinstance(s.test, ast.Tuple) and len(s.test.elts) == 2):
            raise self.error(s, "a reversible 'while' needs (pre, post) conditions: 'while (pre, post):' where "
                                "pre is the loop condition and post is false on entry, true after every "
                                "iteration")
        pre, post = (self.expr.convert(e) for e in s.test.elts)
        return While(self.smap.loc(s), pre, post, self.block(s.body))

    def _With(self, s: ast.With):
        if len(s.items) != 1 or s.items[0].optional_vars is not None or \
                not (isinstance(s.items[0].context_expr, ast.Name) and s.items[0].context_expr.id == "routine"):
            raise self.error(s, "only 'with routine:' blocks are allowed (compute, later undone by '~routine')")
        self._routine_counter += 1
        return Compute(self.smap.loc(s), self.block(s.body), self._routine_counter)


LANGUAGE_WORDS = frozenset(language.__all__)


class _LanguageWords(ast.NodeTransformer):
    """``revdiff.zero()`` (any name bound to revdiff or revdiff.language) -> ``zero()``: the parser
    reads the language's words as bare names, as ``from revdiff import zero`` binds them."""

    def __init__(self, globals_: dict, local_names: set):
        self.modules = {name for name, value in globals_.items() if name not in local_names
                        and isinstance(value, ModuleType) and value.__name__ in ("revdiff", language.__name__)}

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id in self.modules and node.attr in LANGUAGE_WORDS:
            return ast.copy_location(ast.Name(id=node.attr, ctx=node.ctx), node)
        return self.generic_visit(node)


class _Hygiene(ast.NodeTransformer):
    """Every name the function's body reads or binds, as compiled (``user_names.escaped``): those
    beginning with an underscore move out of the generated names' way, and since the renaming is
    one-to-one, a local ``_t`` (compiled ``u_t``) never meets a global ``u_t`` (compiled ``uu_t``).
    Globals are looked up by the name as written (``ExpressionParser._global``)."""

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = escaped(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = escaped(node.arg)
        return node


def _is_uncompute(s: ast.stmt) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.UnaryOp) and isinstance(s.value.op, ast.Invert) \
        and isinstance(s.value.operand, ast.Name) and s.value.operand.id == "routine"


def _aug_symbol(op: ast.operator) -> str:
    return {"Pow": "**", "FloorDiv": "//", "Mod": "%", "MatMult": "@", "LShift": "<<", "RShift": ">>",
            "BitAnd": "&", "BitOr": "|"}.get(type(op).__name__, type(op).__name__)


def _assigned_names(node: ast.FunctionDef) -> set:
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name):
                        out.add(x.id)
        elif isinstance(n, ast.For) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
    return out


def parse_function(fn) -> ir.Function:
    node, smap = function_ast(fn)
    parser = Parser(fn, node, smap)
    return parser.parse()


def _number(value):
    """A default value as the constant compiled into calls (a NumPy scalar as its Python number)."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (bool, int, float, complex)) else value
