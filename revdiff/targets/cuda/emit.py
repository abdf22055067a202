"""Print low-level IR as CUDA C++: one ``__device__`` function per program (forward, inverse,
adjoint, inverse_adjoint), valid for any shapes (arrays carry shape and strides), and batched
``__global__`` entries mapping one thread to one batch element.

The same LowFunctions as the Python emitter, and pure functions printed from the ``cuda`` spelling
in the function table. Arrays are ``rd_array<T, N>`` views (``revdiff_cuda.h``); ancillas come from
a per-thread scratch stack (the threads' stacks interleaved, so that a warp's accesses coalesce); a
failed check records itself in a device error record and returns.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from revdiff.ir.entries import entry_argument
from revdiff.ir.high import BinOp, BoolOp, Call, Compare, Const, Index, Name, Select, Shape, Slice, Unary
from revdiff.ir.low import (Assign, AugAssign, Branch, Check, Comment, HostCall, Invoke, Local, Loop,
                            LowFunction, Repeat, Zero, nested_blocks)
from revdiff.ir.types import VarType
from revdiff.passes.infer import TypeEnv, expr_type
from revdiff.primitives import FUNCTIONS

PRELUDE = Path(__file__).with_name("revdiff_cuda.h")

_C_TYPES = {"float64": "double", "float32": "float", "int64": "rd_int", "int32": "int", "bool": "bool",
            "complex128": "rd_complex<double>", "complex64": "rd_complex<float>"}


def c_scalar(t: VarType) -> str:
    if t.dtype not in _C_TYPES:
        raise NotImplementedError(f"the CUDA backend has no type for {t.dtype}")
    return _C_TYPES[t.dtype]


def c_type(t: VarType) -> str:
    return f"rd_array<{c_scalar(t)}, {t.ndim}>" if t.ndim else c_scalar(t)


def _const(v, t: VarType | None = None) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v}LL" if abs(v) > 2 ** 31 - 1 else str(v)
    if isinstance(v, complex):
        return f"rd_complex<double>({v.real!r}, {v.imag!r})"
    text = repr(float(v))
    if text in ("inf", "-inf", "nan"):
        return {"inf": "(1.0 / 0.0)", "-inf": "(-1.0 / 0.0)", "nan": "(0.0 / 0.0)"}[text]
    return text


@dataclass
class Signature:
    """What a caller needs to know of a device function: its name and which scalars are references."""
    name: str
    by_reference: tuple  # one bool per parameter


@dataclass
class CudaEmitter:
    """Prints one LowFunction; ``types`` holds every parameter's VarType, ``callees`` the
    Signature of each function it invokes, ``by_reference`` which scalar parameters it modifies."""
    types: dict
    callees: dict
    lines: list = field(default_factory=list)
    ancilla_itemsize: int = 1  # the largest element of an ancilla it allocates (``ancilla_slot``)

    # ---------------------------------------------------------------- expressions

    def env(self) -> TypeEnv:
        return TypeEnv(self.types)

    def type_of(self, e) -> VarType:
        return expr_type(e, self.env(), None)

    def expr(self, e) -> str:
        if isinstance(e, Const):
            return _const(e.value)
        if isinstance(e, Name):
            return e.id
        if isinstance(e, Index):
            if any(isinstance(i, Slice) for i in e.indices):
                return self.view(e)
            return f"{e.base}({', '.join(self.expr(i) for i in e.indices)})"
        if isinstance(e, Shape):
            return f"{e.base}.shape[{e.axis}]"
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, Unary):
            return f"(!{self.expr(e.operand)})" if e.op == "not" else f"({e.op}{self.expr(e.operand)})"
        if isinstance(e, Compare):
            return f"({self.expr(e.left)} {e.op} {self.expr(e.right)})"
        if isinstance(e, BoolOp):
            op = " && " if e.op == "and" else " || "
            return "(" + op.join(self.expr(v) for v in e.values) + ")"
        if isinstance(e, Select):
            t = c_scalar(self.type_of(e))
            return f"({self.expr(e.cond)} ? {t}({self.expr(e.a)}) : {t}({self.expr(e.b)}))"
        if isinstance(e, Call):
            fn = FUNCTIONS[e.fn]
            return fn.cuda.format(*(self.expr(a) for a in e.args))
        raise TypeError(f"cannot print {e!r} as CUDA")

    def binop(self, e: BinOp) -> str:
        left, right = self.expr(e.left), self.expr(e.right)
        if e.op == "/":
            kinds = (self.type_of(e.left).kind, self.type_of(e.right).kind)
            if all(k in ("int", "bool") for k in kinds):  # Python's true division of integers
                return f"((double){left} / (double){right})"
        return f"({FUNCTIONS[e.op].cuda.format(left, right)})"

    def view(self, e: Index) -> str:
        t = self.types[e.base]
        parts = []
        for i in e.indices:
            if isinstance(i, Slice):
                step = self.expr(i.step) if i.step is not None else "1"
                lo = ("true", self.expr(i.lower)) if i.lower is not None else ("false", "0")
                hi = ("true", self.expr(i.upper)) if i.upper is not None else ("false", "0")
                parts.append(f"rd_slice({lo[0]}, {lo[1]}, {hi[0]}, {hi[1]}, {step})")
            else:
                parts.append(f"rd_at({self.expr(i)})")
        parts += ["rd_slice(false, 0, false, 0, 1)"] * (t.ndim - len(e.indices))
        ndim = self.type_of(e).ndim
        return f"rd_view<{ndim}>({e.base}, {{{', '.join(parts)}}})"

    # ---------------------------------------------------------------- statements

    def out(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)
        self.origins.append(self.origin)

    def declare(self, body: list, declared: dict) -> None:
        """Types of every local the body defines (C++ declares them once, at the top)."""
        for s in body:
            if isinstance(s, Local) and s.name not in self.types:
                self.types[s.name] = self.type_of(s.expr)
                declared[s.name] = self.types[s.name]
            elif isinstance(s, Zero) and s.name not in self.types:
                t = VarType(_kind(s.dtype), len(s.shape) if s.shape is not None else 0, s.dtype)
                self.types[s.name] = t
                declared[s.name] = t
            elif isinstance(s, Loop) and s.var not in self.types:
                self.types[s.var] = VarType("int", 0, "int64")
                declared[s.var] = self.types[s.var]
            for block in nested_blocks(s):
                self.declare(block, declared)

    def function(self, f: LowFunction, by_reference: tuple) -> str:
        params = []
        for p, ref in zip(f.params, by_reference):
            t = self.types[p]
            params.append(f"{c_type(t)}{'&' if ref and not t.ndim else ''} {p}")
        self.lines = [f"__device__ __noinline__ void {f.name}({', '.join(params + ['rd_status* st'])}) {{",
                      "    const rd_int _mark = st->used;"]
        self.origins = [None, None]  # per line: the user's SourceLocation it was generated from
        self.origin = None
        declared: dict = {}
        self.declare(f.body, declared)
        for name, t in declared.items():
            self.out(1, f"{c_type(t)} {name}{' = {}' if t.ndim else ''};")
        self.block(f.body, 1)
        self.origin = None
        self.out(1, "st->used = _mark;  // release this call's ancillas")
        self.out(0, "}")
        return "\n".join(self.lines) + "\n"

    def block(self, body: list, d: int) -> None:
        for s in body:
            self.stmt(s, d)

    def stmt(self, s, d: int) -> None:
        if isinstance(s, Comment):
            if s.loc is not None:
                self.origin = s.loc
            self.out(d, f"// {s.text}")
        elif isinstance(s, Assign):
            temps = [f"_t{k}" for k in range(len(s.targets))]
            self.out(d, "{")
            for tmp, target, e in zip(temps, s.targets, s.exprs):
                self.out(d + 1, f"{c_scalar(self.type_of(target))} {tmp} = {self.expr(e)};")
            for tmp, target in zip(temps, s.targets):
                self.out(d + 1, f"{self.expr(target)} = {tmp};")
            self.out(d, "}")
        elif isinstance(s, AugAssign):
            target = self.expr(s.target)
            # a C operator has its compound assignment, as has the xor instruction's ^ (no function entry:
            # it is no expression users write), which C spells as Python does on integers and bools
            spelled = FUNCTIONS[s.op].cuda if s.op in FUNCTIONS else f"{{0}} {s.op} {{1}}"
            if spelled == f"{{0}} {s.op} {{1}}":
                self.out(d, f"{target} {s.op}= {self.expr(s.expr)};")
            else:
                self.out(d, f"{target} = {spelled.format(target, self.expr(s.expr))};")
        elif isinstance(s, Local):
            self.out(d, f"{s.name} = {self.expr(s.expr)};")
        elif isinstance(s, Loop):
            step = self.expr(s.step)
            if isinstance(s.step, Const):
                cond = f"{s.var} {'<' if s.step.value > 0 else '>'} {self.expr(s.stop)}"
            else:
                cond = f"({step} > 0 ? {s.var} < {self.expr(s.stop)} : {s.var} > {self.expr(s.stop)})"
            self.out(d, f"for ({s.var} = {self.expr(s.start)}; {cond}; {s.var} += {step}) {{")
            self.block(s.body, d + 1)
            self.out(d, "}")
        elif isinstance(s, Branch):
            self.out(d, f"if ({self.expr(s.cond)}) {{")
            self.block(s.then, d + 1)
            if s.orelse:
                self.out(d, "} else {")
                self.block(s.orelse, d + 1)
            self.out(d, "}")
        elif isinstance(s, HostCall):  # no host library on the device: its loops
            self.block(s.fallback, d)
        elif isinstance(s, Repeat):
            self.out(d, f"while ({self.expr(s.cond)}) {{")
            self.block(s.body, d + 1)
            self.out(d, "}")
        elif isinstance(s, Check):
            vals = [f"(double)rd_real({self.expr(v)})" for v in s.values] + ["0.0"] * (2 - len(s.values))
            self.out(d, f"if (!{self.expr(s.ok)}) {{ rd_fail(st, RD_CHECK_FAILED, {s.fkey}, {s.idx}, {vals[0]}, {vals[1]}); "
                        "return; }")
        elif isinstance(s, Invoke):
            args = [self.expr(a) for a in s.args]
            self.out(d, f"{self.callees[s.fn].name}({', '.join(args + ['st'])});")
            self.out(d, "if (st->failed) return;")
        elif isinstance(s, Zero):
            self.zero(s, d)
        else:
            raise TypeError(f"cannot emit {s!r} as CUDA")

    def zero(self, s: Zero, d: int) -> None:
        t = self.types[s.name]
        if s.shape is None:
            self.out(d, f"{s.name} = {c_scalar(t)}(0);")
            return
        self.ancilla_itemsize = max(self.ancilla_itemsize, np.dtype(t.dtype).itemsize)  # as the C type's
        dims = "{" + ", ".join(f"(rd_int){self.expr(x)}" for x in s.shape) + "}"
        alloc = f"{s.name} = rd_alloc<{c_scalar(t)}, {len(s.shape)}>(st, {dims}); if (st->failed) return;"
        if s.reuse:
            self.out(d, f"if ({s.name}.data && rd_same_shape({s.name}, {dims})) rd_fill0({s.name});")
            self.out(d, f"else {{ {alloc} }}")
        else:
            self.out(d, alloc)


def _kind(dtype: str) -> str:
    if dtype.startswith("complex"):
        return "complex"
    if dtype.startswith("float"):
        return "float"
    return "bool" if dtype == "bool" else "int"


def kernel_source(entry: str, program: str, params: list, grads: list, types: dict, saved: tuple = (),
                  host: bool = False, tangents: list = (), tangent_saved: tuple = ()) -> str:
    """A ``__global__`` entry running device function ``program`` for batch element
    ``blockIdx.x * blockDim.x + threadIdx.x``: a call takes ``params``; a fused vjp takes
    ``params + grads`` and the ``saved`` outputs (one-element views for scalars); a tangent program
    then ``tangents`` and the ``tangent_saved`` outputs' tangents (``dout_<name>``), as the CPU's
    entries (``targets/batch_entries.py``). Array (and batched scalar) arguments arrive as a pointer
    and a meta array (shape..., strides... in elements, batch axis first when batched: stored batch
    innermost, its stride is 1 and a warp's loads coalesce, ``launch.interleave``); shared scalars by
    value. ``interleaved`` (an argument): the ancilla stacks interleaved too (``rd_alloc``).
    ``host``: also a C launcher looping over the batch (emulation)."""
    args, setup, writeback = [], [], []
    _arguments(list(params) + list(grads), types, args, setup, writeback)
    _outputs("saved", saved, types, args, setup)
    _arguments(list(tangents), types, args, setup, writeback)
    _outputs("d_saved", tangent_saved, types, args, setup)
    args += ["rd_int batch", "rd_error* err", "char* scratch", "rd_int scratch_per_thread", "rd_int interleaved"]
    lines = [f'extern "C" __global__ void {entry}({", ".join(args)}) {{',
             "    const rd_int _b = (rd_int)blockIdx.x * blockDim.x + threadIdx.x;",
             "    if (_b >= batch) return;",
             "    rd_status st_ = {err, _b, interleaved ? scratch : scratch + _b * scratch_per_thread, 0,",
             "                     scratch_per_thread, 0, interleaved ? batch : 1};",
             "    rd_status* st = &st_;"]
    lines += ["    " + s for s in setup]
    names = ([p.name for p in params + grads] + [entry_argument("saved", name) for name in saved]
             + [p.name for p in tangents] + [entry_argument("d_saved", name) for name in tangent_saved])
    lines.append(f"    {program}({', '.join(names + ['st'])});")
    lines.append("    if (st->failed) return;")
    lines += ["    " + s for s in writeback]
    lines.append("}")
    if host:
        call_args = [a.rsplit(" ", 1)[1].lstrip("*") for a in args]
        lines += ["", f'extern "C" void {entry}_host({", ".join(args)}) {{',
                  "    for (rd_int b = 0; b < batch; ++b) {",
                  "        blockIdx.x = (unsigned)b;",
                  f"        {entry}({', '.join(call_args)});",
                  "    }", "}"]
    return "\n".join(lines) + "\n"


def _arguments(params: list, types: dict, args: list, setup: list, writeback: list) -> None:
    """A kernel's parameters for ``params`` (BatchParams) and the element views they become."""
    for p in params:
        t = types[p.name]
        scalar = c_scalar(t)
        if t.ndim:
            args += [f"{scalar}* p_{p.name}", f"const rd_int* m_{p.name}"]
            setup.append(f"rd_array<{scalar}, {t.ndim}> {p.name} = rd_element<{scalar}, {t.ndim}>("
                         f"p_{p.name}, m_{p.name}, _b, {'true' if p.batched else 'false'}, st);")
        elif p.batched:
            args += [f"{scalar}* p_{p.name}", f"const rd_int* m_{p.name}"]
            setup.append(f"{scalar} {p.name} = p_{p.name}[_b * m_{p.name}[1]];")
            writeback.append(f"p_{p.name}[_b * m_{p.name}[1]] = {p.name};")
        else:
            args.append(f"{scalar} {p.name}")


def _outputs(role: str, saved: tuple, types: dict, args: list, setup: list) -> None:
    """A kernel's parameters for the saved outputs (``role`` "saved") or their tangents ("d_saved") of
    the parameters ``saved`` (batched, one-element views of scalars)."""
    for name in saved:
        t = types[name]
        scalar = c_scalar(t)
        out = entry_argument(role, name)
        args += [f"{scalar}* p_{out}", f"const rd_int* m_{out}"]
        if t.ndim:
            setup.append(f"rd_array<{scalar}, {t.ndim}> {out} = rd_element<{scalar}, {t.ndim}>("
                         f"p_{out}, m_{out}, _b, true, st);")
        else:
            setup.append(f"rd_array<{scalar}, 1> {out} = {{p_{out} + _b * m_{out}[1], {{1}}, {{1}}, st}};")


def with_line_directives(lines: list, name: str) -> list:
    """Lines of a module, each given as (text, the user's SourceLocation or None), with ``#line``
    directives so that compiler messages name the user's file and line for the code generated from
    it, and ``name`` with the real line number for everything else."""
    out: list = []
    now = None  # (file, line) the preprocessor gives the next line
    for text, origin in lines:
        want = (origin.filename, origin.lineno) if origin is not None else (name, len(out) + 1)
        if now != want:
            if origin is None:
                want = (name, len(out) + 2)  # the line after the directive itself
            quoted = want[0].replace("\\", "\\\\").replace('"', '\\"')
            out.append(f'#line {want[1]} "{quoted}"')
        out.append(text)
        now = (want[0], want[1] + 1)
    return out
