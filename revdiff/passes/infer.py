"""Type inference for one specialisation of a function (argument types known).

Gives every variable a VarType and every expression a kind, and reports type errors the static
checker cannot see: an update that would silently round or truncate (a complex value added to a
float, a float to an integer, values of a float64 array to a float32 one, of an int64 array to a
narrower integer, a constant that does not fit an integer target), ``^=`` on floats, wrong index
counts. Scalars (Python numbers, scalar ancillas) and constants round into narrower targets as in
NumPy's arithmetic with Python scalars; only array data must match the target's precision.
"""
from __future__ import annotations

import numpy as np

from revdiff.errors import ReversibilityError
from revdiff.ir.high import (Alloc, Bind, BinOp, BoolOp, Call, CallFn, Compare, Compute, Const, For, Function,
                             If, Index, Instr, Name, Select, Shape, Slice, Unary, Uncompute, While, children)
from revdiff.ir import views as V
from revdiff.ir.types import KINDS, VarType, dtype_for, join
from revdiff.primitives import FUNCTIONS, INSTRUCTIONS
from revdiff.primitives.elementwise import array_operands, at, view_rank
from revdiff.primitives.printer import expr_source


class TypeEnv:
    """Types of every variable of one specialised function."""

    def __init__(self, types: dict):
        self.types = dict(types)
        self.params: frozenset = frozenset()  # the function's parameters (the caller's arrays)

    def __getitem__(self, name: str) -> VarType:
        return self.types[name]

    def __contains__(self, name: str) -> bool:
        return name in self.types

    def kind(self, e, memo: dict | None = None) -> str:
        """The kind of ``e``; ``memo`` (``expr_type``) shares the types of subexpressions between calls."""
        return expr_type(e, self, None, memo).kind

    def differentiable(self, name: str) -> bool:
        return name in self.types and self.types[name].differentiable


def expr_type(e, env: TypeEnv, loc, memo: dict | None = None) -> VarType:
    """The VarType of an expression (a view for sliced indices). Each subexpression is typed once:
    typing a node reads its operands' types twice (their kinds, then their precision), which
    without the memo doubled the work at every level of a nested expression. A caller that types
    the subexpressions of one expression in turn (the adjoint of a sum of many terms) passes one
    ``memo`` to every call, so that the whole is typed in linear time, not quadratic."""
    return _typed(e, env, loc, {} if memo is None else memo)


def _typed(e, env: TypeEnv, loc, memo: dict) -> VarType:
    key = id(e)  # hashing the nodes would walk them again; the memo keeps each node, so its id stays its own
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = (e, _type_of(e, env, loc, memo))
    return hit[1]


def _type_of(e, env: TypeEnv, loc, memo: dict) -> VarType:
    if isinstance(e, Const):
        v = e.value
        kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else \
            "float" if isinstance(v, float) else "complex"
        return VarType(kind, 0, dtype_for(kind))
    if isinstance(e, Name):
        return env[e.id]
    if isinstance(e, Index):
        t = env[e.base]
        if not t.is_array:
            raise ReversibilityError(f"'{e.base}' is a scalar and cannot be indexed", loc)
        if len(e.indices) > t.ndim:
            raise ReversibilityError(f"'{e.base}' has {t.ndim} dimension(s) but is indexed with "
                                     f"{len(e.indices)}", loc)
        for i in e.indices:
            if isinstance(i, Slice):
                continue
            it = _typed(i, env, loc, memo)
            if it.kind != "int" or it.is_array:  # NumPy reads a bool (array) as a mask, an int array as a gather
                what = f"an array of {it.dtype}" if it.is_array else f"a {it.dtype}"
                raise ReversibilityError(f"an index of '{e.base}' is not an integer: '{expr_source(i)}' is {what} "
                                         "(index with integers and slices; masks and index arrays are not supported)",
                                         loc)
        ndim = sum(isinstance(i, Slice) for i in e.indices) + t.ndim - len(e.indices)  # a[i] is a row
        return VarType(t.kind, ndim, t.dtype)
    if isinstance(e, Shape):
        t = env[e.base]
        if e.axis >= max(t.ndim, 1) or not t.is_array:
            raise ReversibilityError(f"'{e.base}' has no axis {e.axis}", loc)
        return VarType("int", 0, "int64")
    if isinstance(e, (Compare, BoolOp)):
        for c in ((e.left, e.right) if isinstance(e, Compare) else e.values):
            if _typed(c, env, loc, memo).kind == "complex" and isinstance(e, Compare) and e.op not in ("==", "!="):
                raise ReversibilityError(f"'{e.op}' orders real numbers, and '{expr_source(c)}' is complex "
                                         "(compare its .real, .imag or abs())", loc)
        return VarType("bool", 0, "bool")
    if isinstance(e, Unary):
        t = _scalar(e.operand, env, loc, memo)
        return VarType("bool", 0, "bool") if e.op == "not" else t
    if isinstance(e, Select):
        _typed(e.cond, env, loc, memo)
        kind = join(_scalar(e.a, env, loc, memo).kind, _scalar(e.b, env, loc, memo).kind)
        return _result(kind, [e.a, e.b], env, loc, memo)
    if isinstance(e, BinOp):
        args = (e.left, e.right)
    elif isinstance(e, Call):
        args = e.args
    else:
        raise TypeError(e)
    kinds = tuple(_scalar(a, env, loc, memo).kind for a in args)
    fn = FUNCTIONS[e.op if isinstance(e, BinOp) else e.fn]
    if fn.real_only and "complex" in kinds:
        raise ReversibilityError(f"{fn.name} takes real arguments, not complex ones (here: "
                                 f"{expr_source(e)}); take the real or imaginary part first", loc)
    kind = fn.result_kind(kinds)
    return _result(kind, args, env, loc, memo)


def _scalar(e, env, loc, memo: dict) -> VarType:
    t = _typed(e, env, loc, memo)
    if t.is_array:
        raise ReversibilityError("an array is used where a number is expected (index its elements)", loc)
    return t


def _result(kind: str, args, env, loc, memo: dict) -> VarType:
    """Result type: the kind, in the precision of the widest floating argument."""
    precision = None
    for a in args:
        d = _typed(a, env, loc, memo).dtype
        if d in ("float64", "complex128"):
            precision = "float64"
        elif d in ("float32", "complex64") and precision is None:
            precision = "float32"
    return VarType(kind, 0, dtype_for(kind, precision))


def infer(func: Function, param_types: dict, callee_types) -> TypeEnv:
    """Types of all variables; ``callee_types(callee, arg_types)`` specialises called functions."""
    env = TypeEnv(param_types)
    env.params = frozenset(func.params)
    _block(func.body, env, callee_types)
    return env


def _define(env: TypeEnv, name: str, t: VarType, loc) -> None:
    old = env.types.get(name)
    if old is not None and old != t:
        raise ReversibilityError(f"'{name}' is defined again with type {t.describe()} (it was "
                                 f"{old.describe()}); use another name", loc)
    env.types[name] = t


def _block(body: list, env: TypeEnv, callee_types) -> None:
    for s in body:
        if isinstance(s, Instr):
            _instr(s, env)
        elif isinstance(s, Bind):
            _define(env, s.name, expr_type(s.expr, env, s.loc), s.loc)
        elif isinstance(s, Alloc):
            _define(env, s.name, alloc_type(s, env), s.loc)
            for d in s.shape or ():
                if expr_type(d, env, s.loc).kind not in ("int", "bool"):
                    raise ReversibilityError(f"the shape of ancilla '{s.name}' must be integers", s.loc)
        elif isinstance(s, For):
            for e in (s.start, s.stop, s.step):
                if expr_type(e, env, s.loc).kind not in ("int", "bool"):
                    raise ReversibilityError("range() bounds must be integers", s.loc)
            _define(env, s.var, VarType("int", 0, "int64"), s.loc)
            _block(s.body, env, callee_types)
        elif isinstance(s, If):
            expr_type(s.pre, env, s.loc)
            _block(s.then, env, callee_types)
            _block(s.orelse, env, callee_types)
            if s.post is not None:
                expr_type(s.post, env, s.loc)
        elif isinstance(s, While):
            expr_type(s.pre, env, s.loc)
            _block(s.body, env, callee_types)
            expr_type(s.post, env, s.loc)
        elif isinstance(s, (Compute, Uncompute)):
            _block(s.body, env, callee_types)
        elif isinstance(s, CallFn):
            callee_types(s, tuple(expr_type(a, env, s.loc) for a in s.args))


def alloc_type(s: Alloc, env: TypeEnv) -> VarType:
    d = s.dtype
    if s.value is not None:
        t = expr_type(s.value, env, s.loc)
        if s.shape is None and t.is_array:
            whole = f"{expr_source(s.value)}[{', '.join([':'] * t.ndim)}]"
            raise ReversibilityError(f"ancilla({expr_source(s.value)}) copies a number; copy an array as a view "
                                     f"with a slice or index per axis, ancilla({whole})", s.loc)
        if s.shape is None:
            return VarType(t.kind, 0, t.dtype)
        base = env[s.value.base]
        if len(s.value.indices) != base.ndim:
            raise ReversibilityError(f"ancilla({expr_source(s.value)}): '{s.value.base}' has {base.ndim} axes; copy it "
                                     "with a slice or index for each (e.g. A[:, :], A[k, :])", s.loc)
    if d.like is not None:
        t = env[d.like]
        kind, dtype = t.kind, t.dtype
        if d.real and kind == "complex":
            kind, dtype = "float", dtype_for("float", dtype)
    else:
        kind, dtype = d.kind, d.np_name or dtype_for(d.kind)
    return VarType(kind, len(s.shape) if s.shape is not None else 0, dtype)


def _instr(s: Instr, env: TypeEnv) -> None:
    entry = INSTRUCTIONS[s.op]
    if entry.elementwise is not None:
        _elementwise_instr(s, entry, env)
        return
    types = [expr_type(o, env, s.loc) for o in s.operands]
    if entry.is_vector:
        _vector_instr(s, entry, types, env)
        return
    for i in entry.targets:
        t = types[i]
        if t.is_array:
            name = _name(s.operands[i])
            raise ReversibilityError(f"'{name}' is an array; update its elements, or all of them through a view "
                                     f"('{name}[:] {entry.syntax.split()[1]} ...')", s.loc)
        if t.kind not in entry.target_kinds:
            raise ReversibilityError(f"'{entry.syntax}' does not apply to {t.kind} values "
                                     f"('{_name(s.operands[i])}' is {t.dtype}); it takes "
                                     f"{', '.join(entry.target_kinds)}"
                                     f"{' (bools update with ^=)' if t.kind == 'bool' else ''}", s.loc)
    for i in entry.reads:
        t, target = types[i], types[entry.targets[0]]
        if t.is_array:
            raise ReversibilityError("an array is used where a number is expected (index its elements)", s.loc)
        if KINDS.index(t.kind) > KINDS.index(target.kind) and not (target.kind == "int" and t.kind == "bool"):
            raise ReversibilityError(
                f"the {t.kind} value of the right-hand side would be silently converted to "
                f"{target.kind} when stored in '{_name(s.operands[entry.targets[0]])}' ({target.dtype}); "
                "the result would not be exactly invertible", s.loc)
    for i, what in entry.real_operands:
        if types[i].kind == "complex":
            raise ReversibilityError(f"{what} must be real", s.loc)
    _no_narrowing(s, entry, types, env)


_RANK_WORDS = {0: "a number", 1: "a vector (1-D view)", 2: "a matrix (2-D view)"}


def _elementwise_instr(s: Instr, entry, env: TypeEnv) -> None:
    """A whole-array statement: operands of the target's rank (or numbers), and the scalar
    instruction's rules on one element of each."""
    target, e = s.operands

    def rank_of(name: str) -> int:
        return env[name].ndim

    expr_type(target, env, s.loc)
    rank = view_rank(target, rank_of)
    for x in array_operands(e, rank_of):
        expr_type(x, env, s.loc)
        if view_rank(x, rank_of) != rank:
            raise ReversibilityError(
                f"'{entry.syntax}': '{_name(x)}' has {view_rank(x, rank_of)} axes and the target "
                f"'{_name(target)}' {rank}; operands are arrays of the target's shape or numbers (NumPy's "
                "broadcasting of other shapes is not supported: index the axis to repeat)", s.loc)
    first = (Const(0),) * rank
    element = V.element(target, rank_of(V.base(target)), first)
    _instr(Instr(s.loc, entry.elementwise, (element, at(e, first, rank_of))), env)


def _vector_instr(s: Instr, entry, types: list, env: TypeEnv) -> None:
    """Operand ranks of a vector instruction, and no silent conversion into the target."""
    target = types[entry.targets[0]]
    for k, (o, t, want) in enumerate(zip(s.operands, types, entry.operand_ranks)):
        if t.ndim != want:
            hint = entry.rank_hints.get((k, t.ndim), "")
            hint = f"; {hint}" if hint else ""
            raise ReversibilityError(f"'{entry.syntax}': '{_name(o)}' must be {_RANK_WORDS[want]}, but it is "
                                     f"{_RANK_WORDS.get(t.ndim, f'of rank {t.ndim}')}{hint}", s.loc)
    if target.kind not in entry.target_kinds:
        raise ReversibilityError(f"'{entry.syntax}' does not apply to {target.kind} values "
                                 f"('{_name(s.operands[0])}' is {target.dtype})", s.loc)
    for i in entry.reads:
        if KINDS.index(types[i].kind) > KINDS.index(target.kind) and not entry.real_result:
            raise ReversibilityError(
                f"the {types[i].kind} values of '{_name(s.operands[i])}' would be silently converted to "
                f"{target.kind} when added to '{_name(s.operands[0])}' ({target.dtype}); the result would "
                "not be exactly invertible", s.loc)
    _no_narrowing(s, entry, types, env)


def _no_narrowing(s: Instr, entry, types: list, env: TypeEnv) -> None:
    """Refuse an update of a narrower target by the data of an array argument of a wider dtype of
    its kind (float64 values stored in float32 round, int64 values stored in int8 wrap): arrays of
    two precisions passed together are most likely a mistake. Ancillas declared in another dtype
    are the function's own choice (float64 accumulators of float32 data) and are not refused. An
    integer constant that does not fit an integer target is refused too (NumPy 2 does)."""
    for t in entry.targets:
        target = types[t]
        for i in entry.reads:
            for node in _values(s.operands[i]):
                if isinstance(node, (Name, Index)) and _base(node) in env.params:
                    source = env[_base(node)]
                    if source.is_array and _narrows(source, target):
                        raise ReversibilityError(
                            f"the {source.dtype} values of '{_base(node)}' would be silently "
                            f"{'rounded' if target.kind in ('float', 'complex') else 'truncated'} to "
                            f"{target.dtype} when stored in '{_name(s.operands[t])}'; pass arrays of one "
                            f"dtype (convert before the call, e.g. {_base(node)}.astype(np.{target.dtype}))",
                            s.loc)
            value = _constant_integer(s.operands[i])
            if target.kind == "int" and value is not None:
                info = np.iinfo(np.dtype(target.dtype))
                if not info.min <= value <= info.max:
                    raise ReversibilityError(
                        f"the constant {value} does not fit in '{_name(s.operands[t])}' ({target.dtype}, "
                        f"{info.min} to {info.max}): the update would wrap around", s.loc)


def _values(e):
    """The nodes of ``e`` whose values flow into its result: not indices, conditions or comparisons."""
    if isinstance(e, Index):
        yield e
        return
    if isinstance(e, Select):
        yield from _values(e.a)
        yield from _values(e.b)
        return
    if isinstance(e, (Compare, BoolOp)):
        return
    yield e
    for c in children(e):
        yield from _values(c)


_INTEGER_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def _constant_integer(e):
    """The value of an integer expression of constants alone (``200 + 200``), else None."""
    if isinstance(e, Const):
        return e.value if isinstance(e.value, int) and not isinstance(e.value, bool) else None
    if isinstance(e, Unary) and e.op == "-":
        v = _constant_integer(e.operand)
        return None if v is None else -v
    if isinstance(e, BinOp) and e.op in _INTEGER_OPS:
        a, b = _constant_integer(e.left), _constant_integer(e.right)
        return None if a is None or b is None else _INTEGER_OPS[e.op](a, b)
    return None


def _narrows(source: VarType, target: VarType) -> bool:
    """Whether values of ``source`` stored in ``target`` lose what they are: floats (and complex
    numbers) of more precision, integers outside the target's range (wider, or of the other
    signedness: uint32 in int32, int8 in uint8)."""
    family, size = _precision(source)
    if family != _precision(target)[0]:
        return False
    if family == "int":
        return not np.can_cast(np.dtype(source.dtype), np.dtype(target.dtype), "safe")
    return size > _precision(target)[1]


def _precision(t: VarType) -> tuple:
    """(family, bytes per real number): floats and complex numbers compare among themselves, as do
    integers; bools never narrow."""
    if t.kind == "bool":
        return ("bool", 0)
    size = np.dtype(t.dtype).itemsize
    return ("int", size) if t.kind == "int" else ("float", size // 2 if t.kind == "complex" else size)


def _base(node) -> str:
    return node.id if isinstance(node, Name) else node.base


def _name(lv) -> str:
    return expr_source(lv)
