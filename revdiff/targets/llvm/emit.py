"""Print low-level IR as LLVM IR: one function per program, compiled by LLVM without a Python front end.

A program is ``void @symbol(params..., ptr err)``: an array parameter arrives as its data pointer, its
shape and its byte strides; a scalar parameter as a pointer to it, read at entry and written back at
exit (a program returns its scalar parameters, ``ir/low.py``). Data pointers are not ``noalias``: a
callee given two read-only views of one array (``g(Q[j, :], Q[k, :])`` with j = k) gets, in the
adjoint, two gradient views of one array, both written. Every variable lives in a stack slot
(LLVM's first passes turn them into registers); integers compute in i64, bools in i1, floats and
complex numbers in their own precision (``passes/infer.py``'s types: the widest float operand's).
Ancilla arrays come from the call's stack frame while their total fits (``memory.FRAME_ANCILLA_BYTES``:
the small ancillas that a batched call's lane programs allocate by the thousand), else from calloc,
and are freed at the function's one exit. A failed check writes the error record and leaves through
that exit (``ir/checks.py``).

No fast-math flags and no FMA contraction: the value an instruction adds going forward is the value
its inverse subtracts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from revdiff.targets.llvm.builder import EmitError, ident, vartype
from revdiff.targets.llvm.calls import Calls
from revdiff.targets.llvm.memory import ArraySlot, Slot
from revdiff.targets.llvm.types import BOOL, FLOAT64, INT, ITEMSIZE, MEMORY, register, scalar
from revdiff.targets.llvm.values import Array, Scalar, float_constant, int_constant
from revdiff.ir.checks import INTERRUPT, INTERRUPTED, failure_code
from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Index, Name, Select, Shape, Slice, Unary
from revdiff.ir.low import (Assign, AugAssign, Branch, Check, Comment, HostCall, Invoke, Local, Loop,
                            LowFunction, Repeat, Zero, nested_blocks)
from revdiff.ir.types import VarType, dtype_for, join
from revdiff.passes.infer import TypeEnv, expr_type
from revdiff.primitives.printer import expr_source


@dataclass(frozen=True)
class ProgramSymbol:
    """What a caller needs of a compiled program: its symbol and its parameters' types."""
    symbol: str
    types: tuple  # VarType per parameter


def parameter_types(types) -> list:
    """The LLVM parameter types of a program taking parameters of ``types`` (then the error record)."""
    out = []
    for t in types:
        out += ["ptr"] + ["i64"] * (2 * t.ndim) if t.ndim else ["ptr"]
    return out + ["ptr"]


def declaration(sig: ProgramSymbol) -> str:
    return f"declare void @{sig.symbol}({', '.join(parameter_types(sig.types))}) nounwind"


def _joined(a: VarType, b: VarType) -> VarType:
    """The type two definitions of one variable share (the wider)."""
    if a == b:
        return a
    if a.ndim != b.ndim:
        raise EmitError(f"a variable holds both {a.describe()} and {b.describe()}")
    kind = join(a.kind, b.kind)
    if kind == "int":
        wide = max((a, b), key=lambda t: ITEMSIZE[t.dtype] if t.kind == "int" else 0)
        return VarType("int", a.ndim, wide.dtype if wide.kind == "int" else "int64")
    single = all(t.dtype in ("float32", "complex64") or t.kind in ("int", "bool") for t in (a, b))
    return VarType(kind, a.ndim, dtype_for(kind, "float32" if single else "float64"))


@dataclass
class FunctionEmitter(Calls):
    """Emits one LowFunction as the LLVM function ``symbol``. ``callees``: the ProgramSymbol of each
    function it invokes, by the name the IR calls it."""
    low: LowFunction
    symbol: str
    callees: dict
    #: array parameters whose last axis is contiguous (its stride the itemsize, known when compiling:
    #: LLVM then sees adjacent elements, as in lane buffers)
    unit_stride: frozenset = frozenset()
    lines: list = field(default_factory=list)
    helpers: set = field(default_factory=set)  # prelude helpers used ("name:type")
    libm: set = field(default_factory=set)  # C functions and intrinsics used ((name, type))
    blas: set = field(default_factory=set)  # dtypes of the BLAS routines called (``host.py``)
    largest: set = field(default_factory=set)  # dtypes of the largest-magnitude scans called

    # ---------------------------------------------------------------- the function

    def emit(self) -> str:
        low = self.low
        self.counter = 0
        self.types: dict = dict(low.param_types)
        self._declare(low.body)
        self.slots: dict = {}
        self.arrays: dict = {}  # array name -> Array (parameters) or ArraySlot (locals)
        self.owned: list = []  # ancilla arrays this function allocates (freed at exit)
        self.owned_names = {z.name for z in _zeros(low.body) if z.shape is not None}
        self.nonnegative: set = set()  # loop variables that never go below zero
        params, entry = [], []
        for p in low.params:
            t = self.types[p]
            if t.ndim:
                data = f"%{ident(p, '.data')}"
                shape = tuple(f"%{ident(p, f'.shape{k}')}" for k in range(t.ndim))
                strides = tuple(f"%{ident(p, f'.stride{k}')}" for k in range(t.ndim))
                params += [f"ptr {data}"] + [f"i64 {s}" for s in shape + strides]
                if p in self.unit_stride:
                    strides = strides[:-1] + (str(ITEMSIZE[t.dtype]),)
                self.arrays[p] = Array(data, shape, strides, t.dtype)
            else:
                params.append(f"ptr %{ident(p, '.ref')}")
        params.append("ptr %err")
        self.lines = []
        self.block = "entry"
        self.terminated = False
        for name, t in self.types.items():
            if name in self.arrays:
                continue
            if t.ndim:
                slot = ArraySlot(f"%{ident(name, '.data.slot')}",
                                  tuple(f"%{ident(name, f'.shape{k}.slot')}" for k in range(t.ndim)),
                                  tuple(f"%{ident(name, f'.stride{k}.slot')}" for k in range(t.ndim)), t.dtype)
                entry.append(f"  {slot.data} = alloca ptr")
                entry.append(f"  store ptr null, ptr {slot.data}")
                for s in slot.shape + slot.strides:
                    entry.append(f"  {s} = alloca i64")
                    entry.append(f"  store i64 0, ptr {s}")
                self.arrays[name] = slot
            else:
                ref = f"%{ident(name, '.slot')}"
                entry.append(f"  {ref} = alloca {MEMORY[t.dtype]}")
                self.slots[name] = Slot(ref, t.dtype)
        for p in low.params:
            if p in self.slots:
                t = self.types[p]
                v = self._tmp()
                entry.append(f"  {v} = load {MEMORY[t.dtype]}, ptr %{ident(p, '.ref')}")
                entry.append(f"  store {MEMORY[t.dtype]} {v}, ptr {self.slots[p].ref}")
        entry += self.ancilla_frame()
        self.entry_lines = entry
        self.lines.append("body:")
        self.block = "body"
        self.stmts(low.body)
        self._br("exit")
        self._label("exit")
        for p in low.returns:
            t = self.types[p]
            v = self._tmp()
            self.out(f"{v} = load {MEMORY[t.dtype]}, ptr {self.slots[p].ref}")
            self.out(f"store {MEMORY[t.dtype]} {v}, ptr %{ident(p, '.ref')}")
        for name in self.owned:
            self.out(f"call void @free(ptr {self._data_to_free(name)})")
        if self.owned:
            self.libm.add(("free", "ptr"))
        self.out("ret void")
        head = f"define void @{self.symbol}({', '.join(params)}) nounwind {{"
        self.emitted = "\n".join([head, "entry:"] + self.entry_lines + ["  br label %body"] + self.lines + ["}"])
        return self.emitted

    def _declare(self, body: list) -> None:
        """The types of every variable the body defines; a variable defined twice takes the wider."""
        def define(name: str, t: VarType) -> None:
            old = self.types.get(name)
            if name in self.low.param_types:
                return
            self.types[name] = t if old is None else _joined(old, t)

        for s in body:
            if isinstance(s, Zero):
                define(s.name, vartype(s.dtype, len(s.shape) if s.shape is not None else 0))
            elif isinstance(s, Local):
                define(s.name, self._static_type(s.expr))
            elif isinstance(s, Loop):
                define(s.var, INT)
            elif isinstance(s, Assign):
                for target, e in zip(s.targets, s.exprs):
                    if isinstance(target, Name) and target.id not in self.types:
                        define(target.id, self._static_type(e))
            elif isinstance(s, Invoke):
                sig = self.callees[s.fn]
                for r, t in zip(s.results, sig.types):
                    if isinstance(r, Name) and r.id not in self.types:
                        define(r.id, t)
            elif isinstance(s, HostCall) and s.result is not None and s.result not in self.types:
                define(s.result, FLOAT64)
            for block in nested_blocks(s):
                self._declare(block)

    def _static_type(self, e) -> VarType:
        """The type of expression ``e`` from the variables declared so far (arrays: with their rank)."""
        try:
            return expr_type(e, TypeEnv(self.types), None)
        except KeyError as exc:
            raise EmitError(f"'{expr_source(e)}' reads {exc} before it is defined") from None

    # ---------------------------------------------------------------- printing

    # ---------------------------------------------------------------- statements

    def stmts(self, body: list) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s) -> None:
        if isinstance(s, Comment):
            if not self.terminated:
                self.lines.append("  ; " + s.text.replace("\n", " "))
        elif isinstance(s, Assign):
            values = [self.expr(e) for e in s.exprs]
            for target, v in zip(s.targets, values):
                self.store(target, v)
        elif isinstance(s, AugAssign):
            self.store(s.target, self.binary(s.op, self.expr(s.target), self.expr(s.expr)))
        elif isinstance(s, Local):
            self.store(Name(s.name), self.expr(s.expr))
        elif isinstance(s, Loop):
            self.loop(s)
        elif isinstance(s, Branch):
            cond = self.truth(self.expr(s.cond))
            then, orelse, done = (self._new_label(h) for h in ("then", "else", "endif"))
            self._cond_br(cond, then, orelse if s.orelse else done)
            self._label(then)
            self.stmts(s.then)
            self._br(done)
            if s.orelse:
                self._label(orelse)
                self.stmts(s.orelse)
                self._br(done)
            self._label(done)
        elif isinstance(s, Repeat):
            head, body, done = (self._new_label(h) for h in ("while", "do", "endwhile"))
            self._br(head)
            self._label(head)
            self._cond_br(self.truth(self.expr(s.cond)), body, done)
            self._label(body)
            flag = self._op(f"getelementptr double, ptr %err, i64 {INTERRUPT}")
            value = self._op(f"load atomic double, ptr {flag} acquire, align 8")
            stop = self._op(f"fcmp une double {value}, 0.0")
            go = self._new_label("go")
            stopped = self._new_label("interrupted")
            self._cond_br(stop, stopped, go)
            self._label(stopped)
            self._record(failure_code(0, INTERRUPTED), ())
            self._br("exit")
            self._label(go)
            self.stmts(s.body)
            self._br(head)
            self._label(done)
        elif isinstance(s, Check):
            ok = self.truth(self.expr(s.ok))
            fail, cont = self._new_label("fail"), self._new_label("ok")
            self._cond_br(ok, cont, fail)
            self._label(fail)
            self._record(failure_code(s.fkey, s.idx), s.values, lane=s.lane)
            self._br("exit")
            self._label(cont)
        elif isinstance(s, Invoke):
            self.invoke(s)
        elif isinstance(s, Zero):
            self.zero(s)
        elif isinstance(s, HostCall):
            self.host_call(s)
        else:
            raise EmitError(f"cannot emit {s!r} as LLVM IR")

    def _record(self, code: int, values: tuple, lane: "int | None" = None) -> None:
        """Write failure ``code`` (and the lane and values it reports) into the error record."""
        stores = [(0, float_constant(float(code), "double"))]
        if lane:
            stores.append((1, float_constant(float(lane), "double")))
        for k, v in enumerate(values):
            if isinstance(v, Const) and v.value == 0:
                continue
            stores.append((2 + k, self.convert(self.expr(v), FLOAT64).ref))  # a complex value: its real part
        for index, value in stores:
            at = self._op(f"getelementptr double, ptr %err, i64 {index}")
            self.out(f"store double {value}, ptr {at}")

    def loop(self, s: Loop) -> None:
        start = self.convert(self.expr(s.start), INT).ref
        stop = self.convert(self.expr(s.stop), INT).ref
        slot = self.slots[s.var].ref
        head, body, done = (self._new_label(h) for h in ("for", "body", "endfor"))
        if isinstance(s.step, Const) and s.step.value != 0:
            step = int_constant(s.step.value)
            # counting up from a start >= 0, or down to a stop >= -1 (the last value is above the stop)
            if (s.step.value > 0 and self._never_negative(s.start)) or (s.step.value < 0 and (
                    self._never_negative(s.stop) or (isinstance(s.stop, Const) and s.stop.value == -1))):
                self.nonnegative.add(s.var)
            self.out(f"store i64 {start}, ptr {slot}")
            self._br(head)
            self._label(head)
            i = self._op(f"load i64, ptr {slot}")
            more = self._op(f"icmp {'slt' if s.step.value > 0 else 'sgt'} i64 {i}, {stop}")
            self._cond_br(more, body, done)
            self._label(body)
            self.stmts(s.body)
            i = self._op(f"load i64, ptr {slot}")
            self.out(f"store i64 {self._op(f'add i64 {i}, {step}')}, ptr {slot}")
            self._br(head)
            self._label(done)
            self.nonnegative.discard(s.var)
            return
        step = self.convert(self.expr(s.step), INT).ref  # any step: count the trips, as range() does
        self.helpers.add("trip_count:i64")
        trips = self._op(f"call i64 @rd_trip_count_i64(i64 {start}, i64 {stop}, i64 {step})")
        counter = f"%{ident(s.var, f'.trip{self.counter}')}"
        self.entry_lines.append(f"  {counter} = alloca i64")
        self.out(f"store i64 0, ptr {counter}")
        self._br(head)
        self._label(head)
        k = self._op(f"load i64, ptr {counter}")
        self._cond_br(self._op(f"icmp slt i64 {k}, {trips}"), body, done)
        self._label(body)
        value = self._op(f"add i64 {start}, {self._op(f'mul i64 {k}, {step}')}")
        self.out(f"store i64 {value}, ptr {slot}")
        self.out(f"store i64 {self._op(f'add i64 {k}, 1')}, ptr {counter}")
        self.stmts(s.body)
        self._br(head)
        self._label(done)

    # ---------------------------------------------------------------- expressions

    def expr(self, e):
        if isinstance(e, Const):
            return self.const(e.value)
        if isinstance(e, Name):
            if e.id in self.arrays:
                return self.array(e.id)
            slot = self.slots.get(e.id)
            if slot is None:
                raise EmitError(f"'{e.id}' is read but never defined")
            return self._load_memory(slot.ref, slot.dtype)
        if isinstance(e, Index):
            a_type = self.types[e.base]
            if any(isinstance(i, Slice) for i in e.indices) or len(e.indices) < a_type.ndim:
                return self.view(e)
            address, dtype = self.element_address(e)
            return self._load_memory(address, dtype)
        if isinstance(e, Shape):
            a = self.array(e.base)
            return Scalar(a.shape[e.axis], INT)
        if isinstance(e, BinOp):
            return self.binary(e.op, self.expr(e.left), self.expr(e.right))
        if isinstance(e, Unary):
            v = self.expr(e.operand)
            if e.op == "not":
                return Scalar(self._op(f"xor i1 {self.truth(v)}, true"), BOOL)
            if e.op == "+":
                return v
            return self.negate(v)
        if isinstance(e, Compare):
            return self.compare(e.op, self.expr(e.left), self.expr(e.right))
        if isinstance(e, BoolOp):
            return self.bool_op(e)
        if isinstance(e, Select):
            return self.select(e)
        if isinstance(e, Call):
            return self.call(e.fn, [self.expr(a) for a in e.args])
        raise EmitError(f"cannot emit {expr_source(e)} as LLVM IR")

    def bool_op(self, e: BoolOp) -> Scalar:
        """``and``/``or`` with Python's short circuit: a right operand is evaluated only when needed
        (it may index an array only where the left one allows it)."""
        done = self._new_label("bool")
        incoming = []
        for k, operand in enumerate(e.values):
            value = self.truth(self.expr(operand))
            if k == len(e.values) - 1:
                incoming.append((value, self.block))
                self._br(done)
                break
            incoming.append((value, self.block))
            nxt = self._new_label("rhs")
            if e.op == "and":
                self._cond_br(value, nxt, done)
            else:
                self._cond_br(value, done, nxt)
            self._label(nxt)
        self._label(done)
        phi = ", ".join(f"[{v}, %{b}]" for v, b in incoming)
        return Scalar(self._op(f"phi i1 {phi}"), BOOL)

    def select(self, e: Select) -> Scalar:
        """``a if c else b``, each arm evaluated only when taken (it may index or divide)."""
        t = scalar(self._static_type(e))
        cond = self.truth(self.expr(e.cond))
        yes, no, done = self._new_label("sel"), self._new_label("alt"), self._new_label("endsel")
        self._cond_br(cond, yes, no)
        incoming = []
        for label, arm in ((yes, e.a), (no, e.b)):
            self._label(label)
            value = self.convert(self.expr(arm), t)
            incoming.append((value.ref, self.block))
            self._br(done)
        self._label(done)
        phi = ", ".join(f"[{v}, %{b}]" for v, b in incoming)
        return Scalar(self._op(f"phi {register(t)} {phi}"), t)



def _zeros(body: list):
    for s in body:
        if isinstance(s, Zero):
            yield s
        for block in nested_blocks(s):
            yield from _zeros(block)
