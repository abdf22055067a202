"""Print low-level IR as Python source: what the python backend runs as it is, and the readable form
of a compiled program (``f.source(program)``)."""
from __future__ import annotations

from revdiff.ir.checks import ALLOCATION, INTERRUPTED, failure_code
from revdiff.ir.high import Const
from revdiff.ir.low import (Assign, AugAssign, Branch, Check, Comment, HostCall, Invoke, Local, Loop,
                            LowFunction, Repeat, Zero, host_symbol, nested_blocks)
from revdiff.primitives.printer import expr_source

#: the host routine every iteration of a while loop calls (a caller of a program calling it runs the
#: call where Ctrl-C can reach it: ``revdiff.calls.interruptible``)
INTERRUPT_CHECK = "interrupt_requested"


def host_routines(low: LowFunction) -> set:
    """Names of the host routines (``targets/llvm/host_routines.py``) the Python source of ``low`` calls: the BLAS
    routine of every host call, and the interrupt check of every while loop."""
    names: set = set()

    def visit(body: list) -> None:
        for s in body:
            if isinstance(s, HostCall):
                names.add(s.routine)
            elif isinstance(s, Repeat):
                names.add(INTERRUPT_CHECK)
            for block in nested_blocks(s):
                visit(block)

    visit(low.body)
    return names

_NUMPY_ZERO = {"float64": "0.0", "complex128": "0j", "int64": "0", "bool": "False"}


def zero_source(dtype: str) -> str:
    return _NUMPY_ZERO.get(dtype, f"np.{dtype}(0)")


class PythonEmitter:
    def __init__(self):
        self.lines: list = []

    def function(self, f: LowFunction) -> str:
        """``def name(params..., _err)``: a failed check writes (failure code, lane, value, value)
        into the float64 record ``_err`` (``ir.checks``) and returns at once; callers test it after
        every call. No exceptions: a batch entry records each element's failure and goes on (and in a
        parallel loop an exception is lost)."""
        self.lines = [f"def {f.name}({', '.join(list(f.params) + ['_err'])}):"]
        rets = ", ".join(f.returns)
        self.ret = f"return ({rets}{',' if len(f.returns) == 1 else ''})" if f.returns else "return"
        self.block(f.body, 1)
        if f.returns:
            self.lines.append("    " + self.ret)
        return "\n".join(self.lines) + "\n"

    def out(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def block(self, body: list, depth: int) -> None:
        start = len(self.lines)
        for s in body:
            self.stmt(s, depth)
        if all(line.strip().startswith("#") for line in self.lines[start:]):
            self.out(depth, "pass")

    def stmt(self, s, d: int) -> None:
        if isinstance(s, Comment):
            self.out(d, f"# {s.text}")
        elif isinstance(s, Assign):
            self.out(d, f"{', '.join(expr_source(t) for t in s.targets)} = "
                        f"{', '.join(expr_source(e) for e in s.exprs)}")
        elif isinstance(s, AugAssign):
            self.out(d, f"{expr_source(s.target)} {s.op}= {expr_source(s.expr)}")
        elif isinstance(s, Local):
            self.out(d, f"{s.name} = {expr_source(s.expr)}")
        elif isinstance(s, Loop):
            step = "" if isinstance(s.step, Const) and s.step.value == 1 else f", {expr_source(s.step)}"
            self.out(d, f"for {s.var} in range({expr_source(s.start)}, {expr_source(s.stop)}{step}):")
            self.block(s.body, d + 1)
        elif isinstance(s, Branch):
            self.out(d, f"if {expr_source(s.cond)}:")
            self.block(s.then, d + 1)
            if s.orelse:
                self.out(d, "else:")
                self.block(s.orelse, d + 1)
        elif isinstance(s, HostCall):  # the routine returns False when it declines: run the loops
            call = f"{host_symbol(s.routine)}({', '.join(expr_source(a) for a in s.args)})"
            if s.result is not None:
                self.out(d, f"{s.result} = {call}")
                return
            self.out(d, f"if not ({expr_source(s.when)} and {call}):" if s.when is not None else f"if not {call}:")
            self.block(s.fallback, d + 1)
        elif isinstance(s, Repeat):  # an endless loop must still stop on Ctrl-C (ir/checks.py)
            self.out(d, f"while {expr_source(s.cond)}:")
            self.out(d + 1, f"if {host_symbol(INTERRUPT_CHECK)}(_err):")
            self.out(d + 2, f"_err[0] = {failure_code(0, INTERRUPTED)}.0")
            self.out(d + 2, self.ret)
            self.block(s.body, d + 1)
        elif isinstance(s, Check):  # the record starts zeroed: only nonzero fields are written
            stores = [f"_err[0] = {failure_code(s.fkey, s.idx)}.0"]
            if s.lane:
                stores.append(f"_err[1] = {s.lane}")
            stores += [f"_err[{2 + k}] = {expr_source(v)}" for k, v in enumerate(s.values)
                       if not (isinstance(v, Const) and v.value == 0)]
            self.out(d, f"if not ({expr_source(s.ok)}):")
            self.out(d + 1, "; ".join(stores))
            self.out(d + 1, self.ret)
        elif isinstance(s, Invoke):
            record = "_err" if s.record is None else expr_source(s.record)
            call = f"{s.fn}({', '.join([expr_source(a) for a in s.args] + [record])})"
            targets = [expr_source(r) for r in s.results if r is not None]
            self.out(d, f"{', '.join(targets)}{',' if len(targets) == 1 else ''} = {call}" if targets else call)
            if s.record is None:
                self.out(d, "if _err[0] != 0.0:")
                self.out(d + 1, self.ret)
        elif isinstance(s, Zero):
            if s.shape is None:
                self.out(d, f"{s.name} = {zero_source(s.dtype)}")
            else:
                dims = ", ".join(expr_source(x) for x in s.shape)
                shape = f"({dims}{',' if len(s.shape) == 1 else ''})"
                if s.reuse:
                    self.out(d, f"if {s.name}.shape == {shape}:")
                    self.out(d + 1, f"{s.name}.fill(0)")
                    self.out(d, "else:")
                    d += 1
                if s.alloc is not None:  # recorded while an allocation that may fail runs (checks.py)
                    entries = " * ".join(["1.0"] + [f"({expr_source(x)})" for x in s.shape])  # no wrap-around
                    self.out(d, f"_err[{ALLOCATION}] = {s.alloc}.0; _err[{ALLOCATION + 1}] = {entries}")
                self.out(d, f"{s.name} = np.zeros({shape}, np.{s.dtype})")
                if s.alloc is not None:
                    self.out(d, f"_err[{ALLOCATION}] = 0.0")
        else:
            raise TypeError(f"cannot emit {s!r}")


def emit_module(functions: list, header: str) -> str:
    """A whole generated module: imports, then every function."""
    parts = [header, "import math", "import numpy as np", ""]
    for f in functions:
        parts.append("")
        parts.append(PythonEmitter().function(f))
    return "\n".join(parts)
