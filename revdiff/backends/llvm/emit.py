"""Print low-level IR as LLVM IR: one function per program, compiled by LLVM without a Python front end.

A program is ``void @symbol(params..., ptr err)``: an array parameter arrives as its data pointer, its
shape and its byte strides; a scalar parameter as a pointer to it, read at entry and written back at
exit (a program returns its scalar parameters, ``ir/low.py``). Every variable lives in a stack slot
(LLVM's first passes turn them into registers); integers compute in i64, bools in i1, floats and
complex numbers in their own precision (``passes/infer.py``'s types: the widest float operand's).
Ancilla arrays come from calloc and are freed at the function's one exit. A failed check writes the
error record and leaves through that exit (``ir/checks.py``).

No fast-math flags and no FMA contraction: the value an instruction adds going forward is the value
its inverse subtracts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from revdiff.backends.llvm import prelude
from revdiff.backends.llvm.types import BOOL, FLOAT64, INT, ITEMSIZE, MEMORY, UNSIGNED, precision, register, scalar
from revdiff.backends.llvm.values import Array, Scalar, float_constant, int_constant
from revdiff.ir.checks import INTERRUPT, INTERRUPTED, UNTRACKED, failure_code
from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Index, Name, Select, Shape, Slice, Unary
from revdiff.ir.low import (Assign, AugAssign, Branch, Check, Comment, HostCall, Invoke, Local, Loop,
                            LowFunction, Repeat, Zero, nested_blocks)
from revdiff.ir.types import VarType, dtype_for, join
from revdiff.primitives.functions import FUNCTIONS
from revdiff.primitives.printer import expr_source


@dataclass(frozen=True)
class ProgramSignature:
    """What a caller needs of a compiled program: its symbol and its parameters' types."""
    symbol: str
    types: tuple  # VarType per parameter


def parameter_types(types) -> list:
    """The LLVM parameter types of a program taking parameters of ``types`` (then the error record)."""
    out = []
    for t in types:
        out += ["ptr"] + ["i64"] * (2 * t.ndim) if t.ndim else ["ptr"]
    return out + ["ptr"]


def declaration(sig: ProgramSignature) -> str:
    return f"declare void @{sig.symbol}({', '.join(parameter_types(sig.types))}) nounwind"


class EmitError(NotImplementedError):
    """The low IR holds something this emitter has no translation for."""


def _kind_of_dtype(dtype: str) -> str:
    if dtype.startswith("complex"):
        return "complex"
    if dtype.startswith("float"):
        return "float"
    return "bool" if dtype == "bool" else "int"


def _vartype(dtype: str, ndim: int = 0) -> VarType:
    return VarType(_kind_of_dtype(dtype), ndim, dtype)


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


def _result_type(kind: str, operands) -> VarType:
    """The type of an operation of result ``kind`` on scalars ``operands`` (``passes/infer._result``)."""
    single = None
    for v in operands:
        d = v.t.dtype
        if d in ("float64", "complex128"):
            single = False
        elif d in ("float32", "complex64") and single is None:
            single = True
    return scalar(VarType(kind, 0, dtype_for(kind, "float32" if single else "float64")))


@dataclass
class _Slot:
    """The stack slot of a scalar variable (its dtype's memory type)."""
    ref: str
    dtype: str


@dataclass
class _ArraySlot:
    """Stack slots of an array variable's data pointer, shape and strides."""
    data: str
    shape: tuple
    strides: tuple
    dtype: str


@dataclass
class FunctionEmitter:
    """Emits one LowFunction as the LLVM function ``symbol``. ``callees``: the ProgramSignature of each
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

    # ---------------------------------------------------------------- the function

    def emit(self) -> str:
        low = self.low
        self.counter = 0
        self.types: dict = dict(low.param_types)
        self._declare(low.body)
        self.slots: dict = {}
        self.arrays: dict = {}  # array name -> Array (parameters) or _ArraySlot (locals)
        self.owned: list = []  # ancilla arrays this function allocates (freed at exit)
        self.owned_names = {z.name for z in _zeros(low.body) if z.shape is not None}
        self.nonnegative: set = set()  # loop variables that never go below zero
        params, entry = [], []
        for p in low.params:
            t = self.types[p]
            if t.ndim:
                data = f"%{_ident(p)}.data"
                shape = tuple(f"%{_ident(p)}.shape{k}" for k in range(t.ndim))
                strides = tuple(f"%{_ident(p)}.stride{k}" for k in range(t.ndim))
                params += [f"ptr {data}"] + [f"i64 {s}" for s in shape + strides]
                if p in self.unit_stride:
                    strides = strides[:-1] + (str(ITEMSIZE[t.dtype]),)
                self.arrays[p] = Array(data, shape, strides, t.dtype)
            else:
                params.append(f"ptr %{_ident(p)}.ref")
        params.append("ptr %err")
        self.lines = []
        self.block = "entry"
        self.terminated = False
        for name, t in self.types.items():
            if name in self.arrays:
                continue
            if t.ndim:
                slot = _ArraySlot(f"%{_ident(name)}.data.slot",
                                  tuple(f"%{_ident(name)}.shape{k}.slot" for k in range(t.ndim)),
                                  tuple(f"%{_ident(name)}.stride{k}.slot" for k in range(t.ndim)), t.dtype)
                entry.append(f"  {slot.data} = alloca ptr")
                entry.append(f"  store ptr null, ptr {slot.data}")
                for s in slot.shape + slot.strides:
                    entry.append(f"  {s} = alloca i64")
                    entry.append(f"  store i64 0, ptr {s}")
                self.arrays[name] = slot
            else:
                ref = f"%{_ident(name)}.slot"
                entry.append(f"  {ref} = alloca {MEMORY[t.dtype]}")
                self.slots[name] = _Slot(ref, t.dtype)
        for p in low.params:
            if p in self.slots:
                t = self.types[p]
                v = self._tmp()
                entry.append(f"  {v} = load {MEMORY[t.dtype]}, ptr %{_ident(p)}.ref")
                entry.append(f"  store {MEMORY[t.dtype]} {v}, ptr {self.slots[p].ref}")
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
            self.out(f"store {MEMORY[t.dtype]} {v}, ptr %{_ident(p)}.ref")
        for name in self.owned:
            data = self._tmp()
            self.out(f"{data} = load ptr, ptr {self.arrays[name].data}")
            self.out(f"call void @free(ptr {data})")
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
                define(s.name, _vartype(s.dtype, len(s.shape) if s.shape is not None else 0))
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
        from revdiff.passes.infer import TypeEnv, expr_type
        try:
            return expr_type(e, TypeEnv(self.types), None)
        except KeyError as exc:
            raise EmitError(f"'{expr_source(e)}' reads {exc} before it is defined") from None

    # ---------------------------------------------------------------- printing

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
        elif isinstance(s, HostCall):  # the loops computing what the host routine would
            self.stmts(s.fallback)
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
            if s.step.value > 0 and isinstance(s.start, Const) and s.start.value >= 0:
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
        counter = f"%{_ident(s.var)}.trip{self.counter}"
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

    def invoke(self, s: Invoke) -> None:
        sig = self.callees[s.fn]
        args, temps = [], {}
        for k, (a, t) in enumerate(zip(s.args, sig.types)):
            v = self.expr(a)
            if t.ndim:
                if not isinstance(v, Array) or v.ndim != t.ndim:
                    raise EmitError(f"argument {expr_source(a)} of {s.fn} is not an array of rank {t.ndim}")
                args += [f"ptr {v.data}"] + [f"i64 {x}" for x in v.shape + v.strides]
            else:
                temp = f"%arg{self.counter}.{k}"
                self.counter += 1
                self.entry_lines.append(f"  {temp} = alloca {MEMORY[t.dtype]}")
                self._store_memory(v, temp, t.dtype)
                temps[k] = (temp, t)
                args.append(f"ptr {temp}")
        if s.record is None:
            record = "%err"
        else:
            target = self.expr(s.record)
            if not isinstance(target, Array) or target.dtype != "float64":
                raise EmitError(f"the error record {expr_source(s.record)} is not a float64 array")
            record = target.data
        self.out(f"call void @{sig.symbol}({', '.join(args + [f'ptr {record}'])})")
        if s.record is None:
            self._leave_on_failure()
        for k, r in enumerate(s.results):
            if r is None or k not in temps:
                continue
            temp, t = temps[k]
            self.store(r, self._load_memory(temp, t.dtype))

    def _leave_on_failure(self) -> None:
        code = self._op("load double, ptr %err")
        failed = self._op(f"fcmp une double {code}, 0.0")
        cont = self._new_label("called")
        self._cond_br(failed, "exit", cont)
        self._label(cont)

    def zero(self, s: Zero) -> None:
        if s.shape is None:
            t = _vartype(s.dtype)
            self.store(Name(s.name), self.convert(Scalar("0", INT), scalar(t)))
            return
        slot = self.arrays[s.name]
        if s.name not in self.owned:
            self.owned.append(s.name)
        dims = [self.convert(self.expr(x), INT).ref for x in s.shape]
        item = ITEMSIZE[s.dtype]
        allocate, done = self._new_label("alloc"), self._new_label("allocated")
        if s.reuse:  # the array it holds has this shape: clear it
            old = self._op(f"load ptr, ptr {slot.data}")
            same = self._op(f"icmp ne ptr {old}, null")
            for d, ref in zip(dims, slot.shape):
                have = self._op(f"load i64, ptr {ref}")
                same = self._op(f"and i1 {same}, {self._op(f'icmp eq i64 {have}, {d}')}")
            clear = self._new_label("clear")
            self._cond_br(same, clear, allocate)
            self._label(clear)
            size = self._product(dims)
            nbytes = self._op(f"mul i64 {size}, {item}")
            self.libm.add(("memset", "ptr"))
            self.out(f"call void @llvm.memset.p0.i64(ptr {old}, i8 0, i64 {nbytes}, i1 false)")
            self._br(done)
        self._br(allocate)
        self._label(allocate)
        # entries in float64 (no wrap-around) for the size check and the failure's report
        entries = "1.0"
        negative = "false"
        for d in dims:
            entries = self._op(f"fmul double {entries}, {self._op(f'sitofp i64 {d} to double')}")
            negative = self._op(f"or i1 {negative}, {self._op(f'icmp slt i64 {d}, 0')}")
        too_big = self._op(f"fcmp ogt double {entries}, {float_constant(2.0 ** 62 / item, 'double')}")
        refuse = self._op(f"or i1 {negative}, {too_big}")
        fail, go = self._new_label("nomem"), self._new_label("calloc")
        self._cond_br(refuse, fail, go)
        self._label(go)
        old = self._op(f"load ptr, ptr {slot.data}")
        self.out(f"call void @free(ptr {old})")
        self.out(f"store ptr null, ptr {slot.data}")
        size = self._product(dims)
        count = self._op(f"select i1 {self._op(f'icmp eq i64 {size}, 0')}, i64 1, i64 {size}")
        data = self._op(f"call ptr @calloc(i64 {count}, i64 {item})")
        self.libm |= {("calloc", "ptr"), ("free", "ptr")}
        got = self._new_label("got")
        self._cond_br(self._op(f"icmp eq ptr {data}, null"), fail, got)
        self._label(fail)
        code = s.alloc if s.alloc is not None else failure_code(0, UNTRACKED)
        at = self._op("getelementptr double, ptr %err, i64 0")
        self.out(f"store double {float_constant(float(code), 'double')}, ptr {at}")
        at = self._op("getelementptr double, ptr %err, i64 2")
        self.out(f"store double {entries}, ptr {at}")
        self._br("exit")
        self._label(got)
        self.out(f"store ptr {data}, ptr {slot.data}")
        stride = str(item)
        strides = []
        for d in reversed(dims):
            strides.insert(0, stride)
            stride = self._op(f"mul i64 {stride}, {d}")
        for d, ref in zip(dims, slot.shape):
            self.out(f"store i64 {d}, ptr {ref}")
        for st, ref in zip(strides, slot.strides):
            self.out(f"store i64 {st}, ptr {ref}")
        self._br(done)
        self._label(done)

    def _product(self, dims: list) -> str:
        size = "1"
        for d in dims:
            size = self._op(f"mul i64 {size}, {d}")
        return size

    # ---------------------------------------------------------------- stores

    def store(self, target, v) -> None:
        if isinstance(target, Name) and target.id in self.arrays:
            slot = self.arrays[target.id]
            if not isinstance(v, Array) or not isinstance(slot, _ArraySlot):
                raise EmitError(f"cannot assign {v} to the array {target.id}")
            self.out(f"store ptr {v.data}, ptr {slot.data}")
            for x, ref in zip(v.shape + v.strides, slot.shape + slot.strides):
                self.out(f"store i64 {x}, ptr {ref}")
            return
        if isinstance(v, Array):
            raise EmitError(f"an array assigned to the number {expr_source(target)}")
        if isinstance(target, Name):
            slot = self.slots[target.id]
            self._store_memory(v, slot.ref, slot.dtype)
            return
        address, dtype = self.element_address(target)
        self._store_memory(v, address, dtype)

    def _store_memory(self, v: Scalar, pointer: str, dtype: str) -> None:
        t = scalar(_vartype(dtype))
        x = self.convert(v, t).ref
        memory = MEMORY[dtype]
        if dtype == "bool":
            x = self._op(f"zext i1 {x} to i8")
        elif t.kind == "int" and memory != "i64":
            x = self._op(f"trunc i64 {x} to {memory}")
        self.out(f"store {memory} {x}, ptr {pointer}, align 1")

    def _load_memory(self, pointer: str, dtype: str) -> Scalar:
        memory = MEMORY[dtype]
        x = self._op(f"load {memory}, ptr {pointer}, align 1")
        t = scalar(_vartype(dtype))
        if dtype == "bool":
            x = self._op(f"icmp ne i8 {x}, 0")
        elif t.kind == "int" and memory != "i64":
            x = self._op(f"{'zext' if dtype in UNSIGNED else 'sext'} {memory} {x} to i64")
        return Scalar(x, t)

    # ---------------------------------------------------------------- arrays

    def array(self, name: str) -> Array:
        a = self.arrays[name]
        if isinstance(a, Array):
            return a
        data = self._op(f"load ptr, ptr {a.data}")
        shape = tuple(self._op(f"load i64, ptr {s}") for s in a.shape)
        strides = tuple(self._op(f"load i64, ptr {s}") for s in a.strides)
        if name in self.owned_names:  # an ancilla: C order, its last stride the itemsize
            strides = strides[:-1] + (str(ITEMSIZE[a.dtype]),)
        return Array(data, shape, strides, a.dtype)

    def _index(self, e, extent: str) -> str:
        """An integer index as an offset from 0: a negative one counts from the end, as in Python."""
        i = self.convert(self.expr(e), INT).ref
        if self._never_negative(e):
            return i
        wrapped = self._op(f"add i64 {i}, {extent}")
        return self._op(f"select i1 {self._op(f'icmp slt i64 {i}, 0')}, i64 {wrapped}, i64 {i}")

    def _never_negative(self, e) -> bool:
        if isinstance(e, Const):
            return not isinstance(e.value, bool) and isinstance(e.value, int) and e.value >= 0
        if isinstance(e, Name):
            return e.id in self.nonnegative
        if isinstance(e, Shape):
            return True
        if isinstance(e, BinOp) and e.op in ("+", "*"):
            return self._never_negative(e.left) and self._never_negative(e.right)
        return False

    def element_address(self, e: Index) -> tuple:
        a = self.array(e.base)
        if len(e.indices) != a.ndim or any(isinstance(i, Slice) for i in e.indices):
            raise EmitError(f"{expr_source(e)} is not an element")
        offset = None
        for i, extent, stride in zip(e.indices, a.shape, a.strides):
            term = self._op(f"mul i64 {self._index(i, extent)}, {stride}")
            offset = term if offset is None else self._op(f"add i64 {offset}, {term}")
        return self._op(f"getelementptr i8, ptr {a.data}, i64 {offset}"), a.dtype

    def view(self, e: Index) -> Array:
        """The view ``e`` (integers fix axes, slices keep them), as NumPy's basic indexing makes it."""
        a = self.array(e.base)
        if len(e.indices) > a.ndim:
            raise EmitError(f"{expr_source(e)} has more indices than {e.base} has axes")
        data, shape, strides = a.data, [], []
        offset = None
        indices = tuple(e.indices) + (Slice(),) * (a.ndim - len(e.indices))
        for i, extent, stride in zip(indices, a.shape, a.strides):
            if not isinstance(i, Slice):
                term = self._op(f"mul i64 {self._index(i, extent)}, {stride}")
            else:
                start, length, step = self._slice(i, extent)
                term = self._op(f"mul i64 {start}, {stride}") if start != "0" else None
                shape.append(length)
                strides.append(stride if step == 1 else self._op(f"mul i64 {stride}, {step}"))
            if term is not None:
                offset = term if offset is None else self._op(f"add i64 {offset}, {term}")
        if offset is not None:
            data = self._op(f"getelementptr i8, ptr {data}, i64 {offset}")
        return Array(data, tuple(shape), tuple(strides), a.dtype)

    def _slice(self, s: Slice, n: str) -> tuple:
        """(start, length, step) of slice ``s`` of an axis of length ``n``, clamped as Python's
        slice.indices does, for a constant step."""
        step = 1 if s.step is None else s.step.value if isinstance(s.step, Const) else None
        if step is None or step == 0:
            raise EmitError(f"a slice step must be a nonzero constant, not {expr_source(s.step)}")

        def bound(b, default: str, low: str, high: str) -> str:
            if b is None:
                return default
            x = self.convert(self.expr(b), INT).ref
            if isinstance(b, Const) and b.value >= 0:
                return self._op(f"select i1 {self._op(f'icmp sgt i64 {x}, {high}')}, i64 {high}, i64 {x}")
            wrapped = self._op(f"add i64 {x}, {n}")
            x = self._op(f"select i1 {self._op(f'icmp slt i64 {x}, 0')}, i64 {wrapped}, i64 {x}")
            x = self._op(f"select i1 {self._op(f'icmp slt i64 {x}, {low}')}, i64 {low}, i64 {x}")
            return self._op(f"select i1 {self._op(f'icmp sgt i64 {x}, {high}')}, i64 {high}, i64 {x}")

        if step > 0:
            start = bound(s.lower, "0", "0", n)
            stop = bound(s.upper, n, "0", n)
            span = self._op(f"sub i64 {stop}, {start}")
            if step != 1:
                span = self._op(f"sdiv i64 {self._op(f'add i64 {span}, {step - 1}')}, {step}")
        else:
            last = self._op(f"sub i64 {n}, 1")
            start = bound(s.lower, last, "-1", last)
            stop = bound(s.upper, "-1", "-1", last)
            distance = self._op(f"sub i64 {start}, {stop}")
            span = self._op(f"sdiv i64 {self._op(f'add i64 {distance}, {-step - 1}')}, {-step}")
        length = self._op(f"select i1 {self._op(f'icmp slt i64 {span}, 0')}, i64 0, i64 {span}")
        return start, length, step

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
        t = _result_type(fn.result_kind((a.t.kind, b.t.kind)), (a, b))
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
            if b.t.kind in ("int", "bool"):  # by squaring, as Numba and LLVM's powi
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
        t = _result_type(kind, (a, b))
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

    def call(self, fn: str, args: list) -> Scalar:
        entry = FUNCTIONS[fn]
        kinds = tuple(a.t.kind for a in args)
        t = _result_type(entry.result_kind(kinds), args)
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
                return Scalar(self._op(f"call {p} @llvm.fabs.{_suffix(p)}({p} {v.ref})"), v.t)
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
            v = self.convert(args[0], _result_type("float", args))
            p = register(v.t)
            self.libm.add(("rint", p))
            r = self._op(f"call {p} @llvm.rint.{_suffix(p)}({p} {v.ref})")
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
            return Scalar(self._op(f"call {p} @llvm.sqrt.{_suffix(p)}({p} {xs[0]})"), t)
        if fn in prelude.LIBM_UNARY and len(xs) == 1:
            self.libm.add((prelude.LIBM_UNARY[fn], p))
            return Scalar(self._op(f"call {p} @{prelude.libm(prelude.LIBM_UNARY[fn], p)}({p} {xs[0]})"), t)
        if fn in prelude.LIBM_BINARY and len(xs) == 2:
            self.libm.add((fn, p))
            return Scalar(self._op(f"call {p} @{prelude.libm(fn, p)}({p} {xs[0]}, {p} {xs[1]})"), t)
        raise EmitError(f"no LLVM translation of {fn}")


def _zeros(body: list):
    for s in body:
        if isinstance(s, Zero):
            yield s
        for block in nested_blocks(s):
            yield from _zeros(block)


def _suffix(p: str) -> str:
    return "f64" if p == "double" else "f32"


def _ident(name: str) -> str:
    """A variable's name as an LLVM local name (quoted where it holds other characters)."""
    if name.replace("_", "a").replace(".", "a").isalnum() and name.isascii():
        return name
    return '"' + name.replace("\\", "\\5C").replace('"', "\\22") + '"'
