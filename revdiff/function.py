"""``@reversible``: a Python function becomes a reversible program with an inverse and an adjoint.

Decoration parses and checks the function. A call specialises it on the argument types (arrays:
dtype and rank; scalars: kind), generates forward / inverse / adjoint code from the IR, and runs
it as machine code compiled through LLVM (default) or as plain Python (``backend="python"``, for debugging).
"""
from __future__ import annotations

import functools
import numbers
from typing import Any, Callable

import numpy as np

from revdiff.calls import blas_for, validate
from revdiff.targets.cuda.programs import program_source
from revdiff.ir.signature import PLANS
from revdiff.compiler.specialization import Specialization
from revdiff.execute import execute
from revdiff.errors import ReversibilityError
from revdiff.frontend.arguments import bind
from revdiff.frontend.bindings import MISSING, lookup, scope_of, still_bound
from revdiff.frontend.check import check_function
from revdiff.frontend.parse import is_reversible_function, parse_function
from revdiff.ir.high import CallFn, Function, Index, Instr, Name, Shape, stmt_exprs, walk_expr, walk_stmts
from revdiff.ir.options import Options
from revdiff.ir.types import VarType, type_of_value
from revdiff.passes.analysis import modified_names
from revdiff.primitives import INSTRUCTIONS
from revdiff.runtime.loader import deeply_nested
from revdiff.user_names import as_written

BACKENDS = ("llvm", "python")
#: other names of the backends: "numba", the compiled backend's name while Numba compiled it
BACKEND_NAMES = {"numba": "llvm"}


def check_options(*, check, backend, atol, rtol, fmad, fuse_loops) -> None:
    """ValueError or TypeError for an option ``@reversible`` cannot take."""
    if BACKEND_NAMES.get(backend, backend) not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    for name, value, optional in (("atol", atol, False), ("rtol", rtol, True)):
        if not (optional and value is None) and (isinstance(value, bool) or not isinstance(value, numbers.Real)
                                                 or not 0 <= float(value) < float("inf")):
            raise ValueError(f"{name} must be a finite number >= 0{' or None' if optional else ''}, got {value!r}")
    for name, value in (("check", check), ("fmad", fmad), ("fuse_loops", fuse_loops)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {value!r}")


class _Undefined(ReversibilityError):
    """A called name that is not (yet) defined; ``function``: the function whose body calls it."""

    def __init__(self, message: str, loc, function=None):
        super().__init__(message, loc)
        self.function = function


class ReversibleFunction:
    """A reversible function: ``f(*args)`` runs forward, ``(~f)(*args)`` runs the inverse."""

    __revdiff_reversible__ = True

    def __init__(self, fn: Callable, *, check: bool = True, backend: str = "llvm",
                 atol: float = 1e-12, rtol: float | None = None, fmad: bool = False, fuse_loops: bool = True):
        check_options(check=check, backend=backend, atol=atol, rtol=rtol, fmad=fmad, fuse_loops=fuse_loops)
        self.py_function = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.backend = BACKEND_NAMES.get(backend, backend)
        self.options = Options(check=check, atol=atol, rtol=rtol, fmad=fmad, fuse_loops=fuse_loops)
        with deeply_nested(fn):
            self.ir: Function = parse_function(fn)
            self.params: list = list(self.ir.params)
            self._specs: dict = {}
            self._checked = False
            self._modified: set | None = None
            self._callees: dict = {}  # name -> (the global bound to it, the callee with this function's options)
            self._version: tuple | None = None
            self._watch: list | None = None  # what ``unchanged`` compares (``version``)
            self.compiled_calls: dict = {}  # (program, argument kinds) -> what a call runs (``execute``)
            self._inverse = InverseFunction(self)
            self._try_check()

    # ---------------------------------------------------------------- globals read at parse time

    def _lookup(self, name: str) -> Any:
        """The current value of global (or closure) ``name`` (as compiled) as the function body would read it."""
        return lookup(self.py_function, as_written(name))

    def _stale(self) -> bool:
        """Whether a number the body reads from a global or closure variable (compiled in as a
        constant) or a reversible function it calls has been rebound since it was parsed."""
        for name, value in list(self.ir.constants.items()):
            now = self._lookup(name)
            if now is not value and not (type(now) is type(value) and repr(now) == repr(value)):
                return True  # repr: -0.0 is not 0.0 (atan2, copysign tell them apart); nan is nan
            self.ir.constants[name] = now  # the same number in another object: what ``unchanged`` compares now
        return any(self._lookup(name) is not obj for name, obj in self.ir.globals_names.items()) or \
            any(self._lookup(name) is not obj for name, obj in self.ir.resolved.items())

    def version(self) -> tuple:
        """The constants and callees this function and everything it calls compile in, as they are
        now (each callee by its Python function, so that a name rebound to another function with the
        same constants differs); a function whose globals changed is parsed again first (a later
        call sees the new values, as Python would). Specialisations are keyed by it. Nothing is
        recomputed while every name it read is bound to the same object (``unchanged``)."""
        if self._version is not None and self._checked and self.unchanged():
            return self._version
        if self._stale():
            self.ir = parse_function(self.py_function)
            self._specs, self._checked, self._modified, self._callees = {}, False, None, {}
            self.compiled_calls = {}
        self._check()  # a rebound callee may have closed a cycle of calls: refused there
        callees = tuple((name, callee.py_function, callee.version())
                        for name, callee in ((n, self._callee(n)) for n in sorted(self.ir.globals_names)))
        version = (tuple(sorted((name, repr(value)) for name, value in self.ir.constants.items())), callees,
                   tuple(sorted(self.ir.resolved.items(), key=lambda item: item[0])))
        if version != self._version:  # a callee rebound further down: what this one modifies may change
            self._version, self._modified = version, None
        self._watch = self._watched({})
        return self._version

    def _watched(self, seen: dict) -> list:
        """(scope, name as read, object compiled in) for every global and closure variable this function
        and those it calls read (``version``): the objects the parse read, not the names' bindings now,
        so that a name rebound by another thread while this one compiled is seen on the next call;
        ``seen``: functions already listed."""
        if self.py_function in seen:
            return []
        seen[self.py_function] = True
        compiled_in = {**self.ir.constants, **self.ir.globals_names, **self.ir.resolved}
        watch = [(scope_of(self.py_function, as_written(name)), as_written(name), value)
                 for name, value in compiled_in.items()]
        for name in sorted(self.ir.globals_names):
            watch += self._callee(name).forward_function._watched(seen)
        return watch

    def unchanged(self) -> bool:
        """Whether every global and closure variable ``version()`` read is still bound to the same
        object: then the version stands without being computed again (a call's fast path)."""
        return self._watch is not None and still_bound(self._watch)

    # ---------------------------------------------------------------- static analysis

    def _callee(self, name: str, loc=None) -> "ReversibleFunction":
        obj = self.ir.globals_names.get(name)
        known = self._callees.get(name)
        if known is not None and known[0] is obj:
            return known[1]
        if obj is None:
            obj = self._lookup(name)
            if obj is MISSING or not is_reversible_function(obj):
                what = "not defined" if obj is MISSING else "not a reversible function"
                error = _Undefined if obj is MISSING else ReversibilityError
                raise error(f"'{name}' is {what}: only functions decorated with @reversible can be "
                            "called as statements", loc, *((self,) if error is _Undefined else ()))
            if obj.forward_function is not obj:  # the parse could not turn the call around
                raise ReversibilityError(f"'{name}' is bound to {obj.__qualname__}, an inverse, defined after this "
                                         "function: a call's direction, like its default values and keywords, is "
                                         f"bound where '{name}' is defined before its caller", loc)
            if obj.forward_function.py_function is self.py_function:
                raise ReversibilityError(f"'{name}' calls itself: recursion is not supported in reversible "
                                         "functions; write it as a loop", loc)
            self.ir.globals_names[name] = obj
        options = {"backend": self.backend}
        if not self.options.check:  # an unchecked caller runs unchecked callees
            options["check"] = False
        if not self.options.fuse_loops:  # and one compiled as written, callees compiled as written
            options["fuse_loops"] = False
        callee = obj.forward_function.with_options(**options)
        self._callees[name] = (obj, callee)
        return callee

    def with_options(self, **options: Any) -> "ReversibleFunction":
        """The same function with other options (backend, check, atol, rtol, fmad, fuse_loops); variants
        are cached."""
        current = {"backend": self.backend, "check": self.options.check, "atol": self.options.atol,
                   "rtol": self.options.rtol, "fmad": self.options.fmad, "fuse_loops": self.options.fuse_loops}
        merged = {**current, **options}
        merged["backend"] = BACKEND_NAMES.get(merged["backend"], merged["backend"])
        key = tuple(sorted(merged.items()))
        variants = self.__dict__.setdefault("_variants", {})
        if key not in variants:
            same = merged == current
            variants[key] = self if same else ReversibleFunction(self.py_function, **merged)
        return variants[key]

    def _try_check(self) -> None:
        """Check at decoration when every function called is already defined; a function called
        further down that is not yet (defined later in the module) defers the check to the first call."""
        calls = [s for s in walk_stmts(self.ir.body) if isinstance(s, CallFn)]
        if all(c.callee in self.ir.globals_names for c in calls):
            try:
                self._check()
            except _Undefined as exc:
                if exc.function is self:
                    raise

    def _check(self) -> None:
        if self._checked:
            return
        for s in walk_stmts(self.ir.body):
            if isinstance(s, CallFn):
                self._callee(s.callee, s.loc)
        cycle = self._call_cycle(())
        if cycle:
            names, loc = cycle
            raise ReversibilityError(f"recursion is not supported in reversible functions: {' -> '.join(names)} "
                                     "calls back into itself; write it as a loop", loc, written=True)
        check_function(self.ir, self._callee_modifies, lambda n: len(self._callee(n).params))
        modified = modified_names(self.ir.body, self._callee_modifies)
        defaulted = [p for p in self.params if p in self.ir.defaults and p in modified]
        if defaulted:
            raise ReversibilityError(f"parameter '{defaulted[0]}' has a default value, so {self.__qualname__} may not "
                                     "modify it (the default is the same for every call); remove the default or "
                                     "modify a copy in an ancilla", self.ir.loc)
        self._checked = True

    def _call_cycle(self, path: tuple, acyclic: set | None = None):
        """(names along the chain, location of its first call) of a chain of calls from this function
        back to one on ``path`` (the callers above it), or None. The functions as they are bound
        now: a name rebound after decoration can close a cycle. ``acyclic``: functions already
        walked without finding one (each is walked once)."""
        acyclic = set() if acyclic is None else acyclic
        for s in walk_stmts(self.ir.body):
            if not isinstance(s, CallFn):
                continue
            try:
                callee = self._callee(s.callee, s.loc).forward_function
            except ReversibilityError:  # reported when that function is checked itself
                continue
            chain = path + (self,)
            if any(f.py_function is callee.py_function for f in chain):
                start = next(k for k, f in enumerate(chain) if f.py_function is callee.py_function)
                return [f.__qualname__ for f in chain[start:]] + [callee.__qualname__], s.loc
            if callee.py_function in acyclic:
                continue
            found = callee._call_cycle(chain, acyclic)
            if found:  # located at this function's call when it is the top of the chain
                return (found[0], found[1] if path else s.loc)
            acyclic.add(callee.py_function)
        return None

    def _callee_modifies(self, name: str) -> set:
        return self._callee(name).modified_positions()

    def modified_positions(self) -> set:
        """Positions of the parameters this function modifies (directly or through calls)."""
        if self._modified is None:
            self._check()  # every callee resolved, with the line of its call for errors
            self._modified = set()  # recursion guard
            names = modified_names(self.ir.body, self._callee_modifies)
            self._modified = {k for k, p in enumerate(self.params) if p in names}
        return self._modified

    # ---------------------------------------------------------------- direction

    #: the programs a call and a vjp of this object run (an InverseFunction swaps them)
    programs = ("forward", "adjoint")
    #: forward and adjoint fused in one program, for a vjp whose cotangents are known up front
    fused_vjp = "vjp"

    @property
    def forward_function(self) -> "ReversibleFunction":
        return self

    @property
    def inverse(self) -> "InverseFunction":
        return self._inverse

    def __invert__(self) -> "InverseFunction":
        return self._inverse

    def __repr__(self) -> str:
        return f"<reversible function {self.__qualname__}({', '.join(self.parameter_names)})>"

    @functools.cached_property
    def parameter_names(self) -> tuple:
        """The parameters' names as the user wrote them (``params``: as compiled, ``user_names``);
        read on every call, so computed once (a re-parse keeps the parameters)."""
        return tuple(as_written(p) for p in self.params)

    # ---------------------------------------------------------------- calling

    def argument_types(self, args: tuple) -> tuple:
        if len(args) != len(self.params):
            raise TypeError(f"{self.__qualname__}() takes {len(self.params)} arguments "
                            f"({', '.join(self.parameter_names)}), got {len(args)}")
        types = []
        for name, value in zip(self.parameter_names, args):
            try:
                types.append(type_of_value(value))
            except TypeError as exc:
                raise TypeError(f"argument '{name}' of {self.__qualname__}(): {exc}") from None
        return tuple(types)

    def validate(self, args: tuple) -> None:
        """Refuse a modified argument that is read-only, whose entries share memory, or that shares
        memory with another argument (``calls.validate``)."""
        validate(self, args)

    def bind(self, args: tuple, kwargs: dict | None = None) -> tuple:
        """Every parameter's argument, in order: keywords by name, defaults for those left out."""
        if not kwargs and len(args) == len(self.params):  # all given, in order: nothing to bind
            return tuple(args)
        defaults = {as_written(p): v for p, v in self.forward_function.ir.defaults.items()}
        return bind(self.__qualname__, list(self.parameter_names), defaults, tuple(args), kwargs or {})

    def __call__(self, *args: Any, **kwargs: Any) -> tuple:
        return execute(self, "call", self.bind(args, kwargs))

    def partial_note(self, args: tuple) -> str:
        """What a failed call leaves behind: the arrays it updates in place stop half-updated."""
        modified = self.forward_function.modified_positions()
        names = [f"'{p}'" for k, (p, a) in enumerate(zip(self.parameter_names, args)) if k in modified
                 and isinstance(a, np.ndarray)]
        if not names:
            return ""
        return (f"The call stopped there: {', '.join(names)}, which it updates in place, may hold partial "
                "results (pass copies to keep the inputs)")

    def specialize(self, types: tuple, blas: bool = True, lanes: bool = False) -> "Specialization":
        """The programs for argument ``types``; ``blas``: whether vector instructions on large views
        may call BLAS (``blas_for``), else they compile to loops only; ``lanes``: lowered for SIMD
        lanes (``targets/lanes``), whose small matrices are walked in blocks of columns or rows (the
        same bits, more code to compile: worth it only where a batch runs them by the thousand)."""
        found = self._specs.get((types, blas, lanes))
        if found is not None and self._checked and found.version is self._version and self.unchanged():
            return found
        with deeply_nested(self.py_function):
            self._check()
            version = self.version()  # parses the function anew (dropping its specialisations) if a global changed
            found = self._specs.get((types, blas, lanes))
            if found is None or found.version != version:
                self._check()  # again, if version() parsed the function anew
                found = self._specs[(types, blas, lanes)] = Specialization(self, types, blas, lanes)
                found.version = version  # what it and the calls compiled from it are valid for (``calls.compiled``)
        return found

    def source(self, program: str = "forward", *example_args: Any, backend: str = "python") -> str:
        """Generated source of ``program`` ("forward", "inverse", "adjoint", "inverse_adjoint", "vjp",
        "inverse_vjp": forward and adjoint fused; "vjp_forward": the forward program as a fused vjp's
        forward half runs it, without the uncomputes its adjoint half repeats; "jvp", "hvp" and the
        other tangent programs of ``ir.signature.TANGENTS``: forward mode),
        specialised on the types of ``example_args`` (default: float64 arrays where the body indexes a
        parameter or passes it to a vector instruction, floats otherwise: pass example arguments for the
        whole arrays a whole-array statement reads) and, for the CPU backends, on their sizes
        (``blas_for``: without example arguments, the version with BLAS branches); or with
        ``backend="cuda"`` CUDA C device functions for any shapes."""
        if program not in PLANS:
            raise ValueError(f"program must be one of {tuple(PLANS)}, got {program!r}")
        f = self.forward_function
        types = f.argument_types(example_args) if example_args else f.default_types()
        if backend == "cuda":
            return program_source(f, program, types)
        backend = BACKEND_NAMES.get(backend, backend)
        if backend not in ("python", "llvm"):
            raise ValueError(f"backend must be 'python', 'llvm' or 'cuda', got {backend!r}")
        spec = f.specialize(types, blas_for(example_args) if example_args else True)
        return spec.source(program, backend)

    def default_types(self) -> tuple:
        """float64 for every parameter, arrays where the body indexes them or passes them to a vector
        instruction (for ``source()``; an operand of a whole-array statement is taken for a number)."""
        ranks: dict = {}
        for s in walk_stmts(self.ir.body):
            if isinstance(s, CallFn):
                callee_types = self._callee(s.callee, s.loc).default_types()
                for a, t in zip(s.args, callee_types):
                    if isinstance(a, Name):
                        ranks[a.id] = max(ranks.get(a.id, 0), t.ndim)
            if isinstance(s, Instr) and INSTRUCTIONS[s.op].operand_ranks:  # whole arrays as vector operands
                for o, rank in zip(s.operands, INSTRUCTIONS[s.op].operand_ranks):
                    if isinstance(o, Name):
                        ranks[o.id] = max(ranks.get(o.id, 0), rank)
            for e in stmt_exprs(s):
                for node in walk_expr(e):
                    if isinstance(node, Index):
                        ranks[node.base] = max(ranks.get(node.base, 0), len(node.indices))
                    elif isinstance(node, Shape):
                        ranks[node.base] = max(ranks.get(node.base, 0), node.axis + 1)
        return tuple(VarType("float", ranks.get(p, 0), "float64") for p in self.params)


#: a program of ``~f`` named as ``~f`` sees it: its forward program is ``f``'s inverse, and so on
_INVERSE_PROGRAMS = {"forward": "inverse", "inverse": "forward", "adjoint": "inverse_adjoint",
                     "inverse_adjoint": "adjoint", "vjp": "inverse_vjp", "inverse_vjp": "vjp",
                     "jvp": "inverse_jvp", "inverse_jvp": "jvp", "adjoint_jvp": "inverse_adjoint_jvp",
                     "inverse_adjoint_jvp": "adjoint_jvp", "hvp": "inverse_hvp", "inverse_hvp": "hvp"}


class InverseFunction(ReversibleFunction):
    """``~f``: the same function run backwards; ``~~f`` is ``f`` again. A reversible function like
    any other: calls, gradients, batches, options, ``source()`` (its programs named as ``~f`` sees
    them: its "forward" is ``f``'s inverse); what it compiles and caches is ``f``'s."""

    programs = ("inverse", "inverse_adjoint")
    fused_vjp = "inverse_vjp"

    def __init__(self, forward: ReversibleFunction):  # shares everything with ``forward``
        self._forward = forward
        self.__name__ = forward.__name__
        self.__qualname__ = "~" + forward.__qualname__
        self.__doc__ = forward.__doc__
        self.__module__ = forward.__module__
        self.params = forward.params
        self.backend = forward.backend

    def __getattr__(self, name: str) -> Any:
        """What ``~f`` does not hold itself (the IR, options, the Python function) is ``f``'s."""
        if name.startswith("__") or name == "_forward":
            raise AttributeError(name)
        return getattr(self._forward, name)

    @property
    def options(self) -> Options:
        return self._forward.options

    def version(self) -> tuple:
        return self._forward.version()

    def _check(self) -> None:
        self._forward._check()

    def modified_positions(self) -> set:
        return self._forward.modified_positions()

    def specialize(self, types: tuple, blas: bool = True, lanes: bool = False) -> "Specialization":
        return self._forward.specialize(types, blas, lanes)

    def with_options(self, **options: Any) -> "InverseFunction":
        return ~self._forward.with_options(**options)

    def source(self, program: str = "forward", *example_args: Any, backend: str = "python") -> str:
        if program not in _INVERSE_PROGRAMS:
            raise ValueError(f"program of {self.__qualname__} must be one of {tuple(_INVERSE_PROGRAMS)}, "
                             f"got {program!r}")
        return self._forward.source(_INVERSE_PROGRAMS[program], *example_args, backend=backend)

    def default_types(self) -> tuple:
        return self._forward.default_types()

    @property
    def forward_function(self) -> ReversibleFunction:
        return self._forward

    def __invert__(self) -> ReversibleFunction:
        return self._forward

    @property
    def inverse(self) -> ReversibleFunction:
        return self._forward

    def __repr__(self) -> str:
        return f"<reversible function ~{self._forward.__qualname__}({', '.join(self.parameter_names)})>"


def reversible(fn: Callable | None = None, *, check: bool = True, backend: str = "llvm",
               atol: float = 1e-12, rtol: float | None = None, fmad: bool = False, fuse_loops: bool = True):
    """Decorate a function written in the reversible language. ``check=False`` drops runtime checks;
    ``atol``/``rtol`` set the tolerance of ancilla checks at ``del`` and ``release``, ``atol + rtol``
    times the ancilla's scale (``rtol=None``: 1024 machine epsilons of its dtype; integers exact);
    ``backend="python"`` runs
    the generated code as plain Python, uncompiled; ``fmad=True`` lets the CUDA compiler contract
    a*b+c into FMAs (off by default, so that GPU results agree with the CPU's); ``fuse_loops=False``
    compiles every loop as written instead of fusing adjacent ones (``optimize/fuse_loops.py``; the
    results are bit-for-bit the same)."""
    check_options(check=check, backend=backend, atol=atol, rtol=rtol, fmad=fmad, fuse_loops=fuse_loops)

    def wrap(f: Callable) -> ReversibleFunction:
        try:
            return ReversibleFunction(f, check=check, backend=backend, atol=atol, rtol=rtol, fmad=fmad,
                                      fuse_loops=fuse_loops)
        except ReversibilityError as exc:
            raise exc.with_traceback(None) from None  # the message already points at the user's line

    return wrap(fn) if fn is not None else wrap
