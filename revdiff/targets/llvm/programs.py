"""The CPU target of the driver: each program of a specialisation as an LLVM module compiled to
machine code (``targets/llvm``, ``targets/llvm/jit.py``), its callees compiled first and called by
symbol; and, for ``backend="python"`` and for reading (``f.source(program)``), the same low IR
printed as a Python module.

A program's symbol ends with a digest of its module's text, its callees' symbols included: two
programs that differ anywhere (a function redefined, a callee's callee edited) never share one,
and a process never loads one symbol twice.
"""
from __future__ import annotations

import builtins
import hashlib
import re
import threading

from revdiff.targets.llvm.emit import FunctionEmitter, ProgramSymbol
from revdiff.targets.llvm.module import entry_name, module_text
from revdiff.targets.python.emit import INTERRUPT_CHECK, emit_module, host_routines
from revdiff.ir.graph import ascii_name, invoked, symbol
from revdiff.runtime import loader
from revdiff.targets.llvm import jit as native
from revdiff.targets.llvm.host_routines import routines
from revdiff.errors import ReversibilityError
from revdiff.ir.low import Local, walk_statements
from revdiff.targets.llvm.entry_calls import NativeProgram

#: the name a module calls itself by until its digest, and with it its symbol, is known
_SELF = "__revdiff_self__"


def content_symbol(text: str, name: str) -> tuple:
    """(text, symbol): module ``text``, written with ``_SELF`` for its own symbol, and that symbol:
    ``name`` with a digest of the text."""
    sym = f"{name}_{hashlib.sha256(text.encode()).hexdigest()[:12]}"
    return text.replace(_SELF, sym), sym


def function_module(low, callees: dict, name: str, header: str, unit_stride: frozenset = frozenset()) -> tuple:
    """(LLVM module text, ProgramSymbol) of LowFunction ``low``, which calls the programs
    ``callees`` (their ProgramSignatures, by the name ``low`` calls them); its symbol is ``name`` and
    a digest of the text."""
    types = tuple(low.param_types[p] for p in low.params)
    emitter = FunctionEmitter(low, _SELF, callees, unit_stride)
    emitter.emit()
    text = module_text([emitter], {_SELF: ProgramSymbol(_SELF, types)}, header, list(callees.values()))
    text, sym = content_symbol(text, name)
    return text, ProgramSymbol(sym, types)


def load_program(text: str, sig: ProgramSymbol, name: str, loops: bool) -> NativeProgram:
    """The Python callable of a program's module (its callees loaded already)."""
    address = native.load(text, sig.symbol, [sig.symbol, entry_name(sig.symbol)])[entry_name(sig.symbol)]
    return NativeProgram(name, sig.types, address, loops)


def _shadowed(low, source: str) -> str | None:
    """A variable of ``low`` named as a module or builtin its Python ``source`` calls (``np.sin``,
    ``max(...)``), which would hide it; None where none does."""
    names = set(low.params) | {s.name for s in walk_statements(low.body) if isinstance(s, Local)}
    for n in sorted(names):
        if (n in ("np", "math") or hasattr(builtins, n)) and re.search(rf"(?<![\w.]){re.escape(n)}\s*[(.]", source):
            return n
    return None


def python_function(low, name: str, header: str, dependencies: dict):
    """LowFunction ``low`` as a plain Python function (``backend="python"``), calling the Python
    callables ``dependencies`` by name."""
    source = emit_module([low], header)
    shadow = _shadowed(low, source)
    if shadow is not None:
        raise ReversibilityError(f"backend='python' cannot run a function with a variable named '{shadow}': the "
                                 f"generated Python calls the {'module' if shadow in ('np', 'math') else 'builtin'} "
                                 "of that name; rename it, or use the compiled backend")
    deps = dict(dependencies)
    deps.update(routines(host_routines(low)))
    module = loader.load(source, name, deps)
    fn = loader.compiled(module, low.name, deps)
    fn.revdiff_loops = INTERRUPT_CHECK in host_routines(low) or any(getattr(d, "revdiff_loops", False)
                                                                     for d in dependencies.values())
    return fn


class NativePrograms:
    """The generated modules and compiled programs of one specialisation, made on first use."""

    def __init__(self, spec):
        self.spec = spec
        self._lows: dict = {}
        self._sources: dict = {}
        self._modules: dict = {}  # program -> (LLVM text, ProgramSymbol)
        self._calls: dict = {}  # program -> the generated functions it calls
        self._callables: dict = {}
        self._lock = threading.RLock()

    def low(self, program: str):
        """The low IR CPU code of ``program`` is printed from (a fused vjp runs its callees' programs
        once each: they are inlined)."""
        low = self._lows.get(program)
        if low is None:
            spec = self.spec
            low = spec.low_function(program, inline=spec.inlines(program))
            self._calls[program] = sorted(invoked(low))  # before the low IR: another thread reads both once it is
            self._lows[program] = low
        return low

    def header(self, program: str) -> str:
        spec = self.spec
        loc = spec.rf.ir.loc
        types = ", ".join(f"{p}: {t.describe()}" for p, t in zip(spec.rf.params, spec.types))
        return (f"Generated by revdiff: the {program} program of {spec.rf.__qualname__}\n"
                f"from {loc.filename}:{loc.lineno}, specialised for ({types}).\n"
                f"Options: {spec.options.describe()}; index checks {'on' if spec.rf.options.check else 'off'}. "
                "Do not edit: regenerated from the source.")

    def source(self, program: str) -> str:
        """The low IR of ``program`` printed as a Python module: what ``backend="python"`` runs, and
        the readable form of what the LLVM module computes."""
        src = self._sources.get(program)
        if src is None:
            low = self.low(program)
            header = "\n".join("# " + line for line in self.header(program).splitlines())
            if self._calls[program]:
                header += "\n# Calls: " + ", ".join(self._calls[program])
            src = emit_module([low], header)
            self._sources[program] = src
        return src

    def signature(self, program: str) -> ProgramSymbol:
        return self.module(program)[1]

    def module(self, program: str) -> tuple:
        """(LLVM module text, ProgramSymbol) of ``program``; its callees' modules made first."""
        made = self._modules.get(program)
        if made is None:
            low = self.low(program)
            callees = {name: callee.native.signature(callee_program)
                       for name in self._calls[program] for callee, callee_program in [self.spec.dependencies[name]]}
            made = function_module(low, callees, symbol(self.spec, program), self.header(program))
            self._modules[program] = made
        return made

    def load(self, program: str) -> ProgramSymbol:
        """Compile (or load from the cache) ``program`` and everything it calls; its signature."""
        text, sig = self.module(program)
        for name in self._calls[program]:
            callee, callee_program = self.spec.dependencies[name]
            callee.native.load(callee_program)
        native.load(text, sig.symbol, [sig.symbol, entry_name(sig.symbol)])
        return sig

    def loops(self, program: str) -> bool:
        """Whether ``program``, or a program it calls, has a while loop (which Ctrl-C must reach)."""
        if INTERRUPT_CHECK in host_routines(self.low(program)):
            return True
        return any(callee.native.loops(callee_program) for name in self._calls[program]
                   for callee, callee_program in [self.spec.dependencies[name]])

    def batch_entry(self, program: str, low, header: str):
        """A batched entry, LowFunction ``low`` (``targets/batch_entries.py``), that calls ``program``
        of this specialisation per element: compiled, or plain Python for ``backend="python"``."""
        python = self.spec.rf.backend == "python"
        callee = (None if python else self.signature(program), self.callable(program))
        if not python:
            self.load(program)
        return entry_callable(low, {symbol(self.spec, program): callee}, self.spec.rf.backend, header,
                              self.loops(program))

    def batch_entry_module(self, program: str, low, header: str) -> str:
        """The LLVM module of the batched entry ``low`` that calls ``program``."""
        callee = self.signature(program)
        return function_module(low, {symbol(self.spec, program): callee}, ascii_name(low.name), header)[0]

    def callable(self, program: str):
        """``program`` compiled to machine code (``backend="python"``: the Python module as it is),
        called as ``fn(*args, error_record)``."""
        fn = self._callables.get(program)
        if fn is None:  # one thread makes it (callees lock their own, below: no cycle of locks)
            with self._lock, loader.deeply_nested(self.spec.rf.py_function):  # a long chain of calls, callee by callee
                fn = self._callables.get(program)
                if fn is None:
                    fn = self._callables[program] = self._make_callable(program)
        return fn

    def _make_callable(self, program: str):
        spec = self.spec
        if spec.rf.backend == "python":
            self.low(program)
            deps = {name: callee.native.callable(callee_program)
                    for name in self._calls[program] for callee, callee_program in [spec.dependencies[name]]}
            header = "\n".join("# " + line for line in self.header(program).splitlines())
            return python_function(self.low(program), f"{spec.rf.__name__}_{program}", header, deps)
        sig = self.load(program)
        return load_program(self.module(program)[0], sig, spec.local_name(program), self.loops(program))


def entry_callable(low, callees: dict, backend: str, header: str, loops: bool, unit_stride: frozenset = frozenset()):
    """A batched entry (``targets/batch_entries.py``) or a lane program, LowFunction ``low``, calling
    the programs ``callees`` (name -> (ProgramSymbol, Python callable) of each, loaded): compiled,
    or as plain Python for ``backend="python"``."""
    if backend == "python":
        return python_function(low, low.name, "\n".join("# " + line for line in header.splitlines()),
                               {name: fn for name, (_, fn) in callees.items()})
    text, sig = function_module(low, {name: s for name, (s, _) in callees.items()}, ascii_name(low.name), header,
                                unit_stride)
    return load_program(text, sig, low.name, loops)
