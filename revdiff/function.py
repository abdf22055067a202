"""``@reversible``: a Python function becomes a reversible program with an inverse and an adjoint.

Decoration parses and checks the function. A call specialises it on the argument types (arrays:
dtype and rank; scalars: kind), generates forward / inverse / adjoint code from the IR, and runs
it with Numba (default) or as plain Python (``backend="python"``, for debugging).
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Callable, Iterable

import numpy as np

from .analysis import modified_names
from .emit.python import emit_module
from .errors import ReversibilityError
from .frontend.check import check_function
from .frontend.parse import is_reversible_function, parse_function
from .ir import CallFn, Function
from .lowir import LowFunction
from .primitives.vector import BLAS_MIN_ELEMENTS
from .runtime import checks, loader
from .transforms.fuse import lower_fused_vjp
from .transforms.hoist import hoist_allocations
from .transforms.prune import prune_checks
from .runtime.support import CheckFailed
from .transforms.infer import TypeEnv, infer
from .transforms.inline import inline_single_calls
from .transforms.invert import invert_block
from .transforms.lower import Lowerer, Options, ancilla_names
from .types import VarType, type_of_value

PROGRAMS = ("forward", "inverse", "adjoint", "inverse_adjoint", "vjp", "inverse_vjp", "vjp_forward")
BACKENDS = ("numba", "python")


class ReversibleFunction:
    """A reversible function: ``f(*args)`` runs forward, ``(~f)(*args)`` runs the inverse."""

    __revdiff_reversible__ = True

    def __init__(self, fn: Callable, *, check: bool = True, backend: str = "numba",
                 atol: float = 1e-12, rtol: float | None = None, fmad: bool = False):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.py_function = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.backend = backend
        self.options = Options(check=check, atol=atol, rtol=rtol, fmad=fmad)
        self.ir: Function = parse_function(fn)
        self.params: list = list(self.ir.params)
        self._specs: dict = {}
        self._checked = False
        self._modified: set | None = None
        self._inverse = InverseFunction(self)
        self._try_check()

    # ---------------------------------------------------------------- static analysis

    def _callee(self, name: str, loc=None) -> "ReversibleFunction":
        obj = self.ir.globals_names.get(name)
        if obj is None:
            obj = self.py_function.__globals__.get(name)
            if obj is None or not is_reversible_function(obj):
                what = "not defined" if obj is None else "not a reversible function"
                raise ReversibilityError(f"'{name}' is {what}: only functions decorated with @reversible can be "
                                         "called as statements", loc)
            self.ir.globals_names[name] = obj
        options = {"backend": self.backend}
        if not self.options.check:  # an unchecked caller runs unchecked callees
            options["check"] = False
        return obj.forward_function.with_options(**options)

    def with_options(self, **options: Any) -> "ReversibleFunction":
        """The same function with other options (backend, check, atol, rtol, fmad); variants are cached."""
        current = {"backend": self.backend, "check": self.options.check, "atol": self.options.atol,
                   "rtol": self.options.rtol, "fmad": self.options.fmad}
        merged = {**current, **options}
        key = tuple(sorted(merged.items()))
        variants = self.__dict__.setdefault("_variants", {})
        if key not in variants:
            same = merged == current
            variants[key] = self if same else ReversibleFunction(self.py_function, **merged)
        return variants[key]

    def _try_check(self) -> None:
        from .ir import walk_stmts
        calls = [s for s in walk_stmts(self.ir.body) if isinstance(s, CallFn)]
        if all(c.callee in self.ir.globals_names for c in calls):
            self._check()

    def _check(self) -> None:
        if self._checked:
            return
        from .ir import walk_stmts
        for s in walk_stmts(self.ir.body):
            if isinstance(s, CallFn):
                self._callee(s.callee, s.loc)
        check_function(self.ir, self._callee_modifies, lambda n: len(self._callee(n).params))
        self._checked = True

    def _callee_modifies(self, name: str) -> set:
        return self._callee(name).modified_positions()

    def modified_positions(self) -> set:
        """Positions of the parameters this function modifies (directly or through calls)."""
        if self._modified is None:
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
        return f"<reversible function {self.__qualname__}({', '.join(self.params)})>"

    # ---------------------------------------------------------------- calling

    def argument_types(self, args: tuple) -> tuple:
        if len(args) != len(self.params):
            raise TypeError(f"{self.__qualname__}() takes {len(self.params)} arguments "
                            f"({', '.join(self.params)}), got {len(args)}")
        types = []
        for name, value in zip(self.params, args):
            try:
                types.append(type_of_value(value))
            except TypeError as exc:
                raise TypeError(f"argument '{name}' of {self.__qualname__}(): {exc}") from None
        return tuple(types)

    def validate(self, args: tuple) -> None:
        modified = self.forward_function.modified_positions()
        arrays = [(k, a) for k, a in enumerate(args) if isinstance(a, np.ndarray)]
        for k, a in arrays:
            if k in modified and not a.flags.writeable:
                raise ValueError(f"argument '{self.params[k]}' of {self.__qualname__}() is read-only, "
                                 "but the function modifies it")
        for i, (k, a) in enumerate(arrays):
            for j, b in arrays[i + 1:]:
                if (k in modified or j in modified) and np.may_share_memory(a, b) and np.shares_memory(a, b):
                    raise ReversibilityError(f"arguments '{self.params[k]}' and '{self.params[j]}' of "
                                             f"{self.__qualname__}() share memory; pass separate arrays")

    def __call__(self, *args: Any) -> tuple:
        if any(hasattr(a, "__cuda_array_interface__") for a in args):
            from .batch import device_call
            return device_call(self, args)
        types = self.argument_types(args)
        self.validate(args)
        spec = self.forward_function.specialize(types, blas_for(args))
        return run(spec.callable(self.programs[0]), args)

    def specialize(self, types: tuple, blas: bool = True) -> "Specialization":
        """The programs for argument ``types``; ``blas``: whether vector instructions on large views
        may call BLAS (``blas_for``), else they compile to loops only."""
        spec = self._specs.get((types, blas))
        if spec is None:
            self._check()
            spec = Specialization(self, types, blas)
            self._specs[(types, blas)] = spec
        return spec

    def source(self, program: str = "forward", *example_args: Any, backend: str = "numba") -> str:
        """Generated source of ``program`` ("forward", "inverse", "adjoint", "inverse_adjoint", "vjp",
        "inverse_vjp": forward and adjoint fused; "vjp_forward": the forward program as a fused vjp's
        forward half runs it, without the uncomputes its adjoint half repeats),
        specialised on the types of ``example_args`` (default: every parameter a float64 array or
        float) and, for Numba, on their sizes (``blas_for``: without example arguments, the version
        with BLAS branches); or with ``backend="cuda"`` CUDA C device functions for any shapes."""
        if program not in PROGRAMS:
            raise ValueError(f"program must be one of {PROGRAMS}, got {program!r}")
        f = self.forward_function
        types = f.argument_types(example_args) if example_args else f.default_types()
        if backend == "cuda":
            from .gpu import program_source
            return program_source(f, program, types)
        if backend not in ("numba", "python"):
            raise ValueError(f"backend must be 'numba', 'python' or 'cuda', got {backend!r}")
        return f.specialize(types, blas_for(example_args) if example_args else True).source(program)

    def default_types(self) -> tuple:
        """float64 for every parameter, arrays where the body indexes them (for ``source()``)."""
        from .ir import Index, Instr, Name, Shape, stmt_exprs, walk_expr, walk_stmts
        from .primitives import INSTRUCTIONS
        ranks: dict = {}
        for s in walk_stmts(self.ir.body):
            if isinstance(s, CallFn):
                callee_types = self._callee(s.callee, s.loc).default_types()
                for a, t in zip(s.args, callee_types):
                    if isinstance(a, Name):
                        ranks[a.id] = max(ranks.get(a.id, 0), t.ndim)
            if isinstance(s, Instr) and INSTRUCTIONS[s.op].is_vector:  # whole arrays as vector operands
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


class InverseFunction(ReversibleFunction):
    """``~f``: the same function run backwards; ``~~f`` is ``f`` again."""

    programs = ("inverse", "inverse_adjoint")
    fused_vjp = "inverse_vjp"

    def __init__(self, forward: ReversibleFunction):  # shares everything with ``forward``
        self._forward = forward
        self.__name__ = forward.__name__
        self.__qualname__ = "~" + forward.__qualname__
        self.params = forward.params
        self.backend = forward.backend

    @property
    def forward_function(self) -> ReversibleFunction:
        return self._forward

    def __invert__(self) -> ReversibleFunction:
        return self._forward

    @property
    def inverse(self) -> ReversibleFunction:
        return self._forward

    def __repr__(self) -> str:
        return f"<reversible function ~{self._forward.__qualname__}({', '.join(self.params)})>"


def blas_for(args: Iterable, element_sizes: Iterable[int] = ()) -> bool:
    """Whether calls on ``args`` (or on arrays of ``element_sizes`` entries) run the programs with
    BLAS branches: only when an array has more than BLAS_MIN_ELEMENTS entries. Views of smaller
    arrays never reach BLAS's threshold, so their programs compile to loops only: a third less code
    to compile, the same results. Forward, inverse and adjoint see the same shapes, hence the same
    choice; an ancilla larger than every argument then runs loops too."""
    sizes = [a.size for a in args if isinstance(a, np.ndarray)] + list(element_sizes)
    return any(size > BLAS_MIN_ELEMENTS for size in sizes)


def run(fn, args: tuple, batch_errors: np.ndarray | None = None) -> tuple:
    """Call a generated function and turn its error record (one per batch element when
    ``batch_errors`` is given) into the user-facing exception. Returns the final value of every
    argument: a program returns its scalar parameters (arrays change in place), a batched entry
    all of them."""
    try:
        if batch_errors is not None:
            result = fn(*args, batch_errors)
            failed = np.flatnonzero(batch_errors[:, 0])
            if failed.size:
                raise_failure(batch_errors[failed[0]], batch_element=int(failed[0]))
            return result
        record = np.zeros(ERROR_RECORD)
        result = fn(*args, record)
        if record[0]:
            raise_failure(record)
        scalars = iter(result or ())
        return tuple(a if isinstance(a, np.ndarray) else next(scalars) for a in args)
    except IndexError as exc:
        shapes = ", ".join(str(getattr(a, "shape", type(a).__name__)) for a in args)
        raise IndexError(f"{exc} in {getattr(fn, '__name__', fn)}: an argument is smaller than the program "
                         f"indexes (argument shapes: {shapes})") from None


ERROR_RECORD = checks.RECORD_SIZE


def raise_failure(record: np.ndarray, batch_element: int | None = None) -> None:
    raise checks.to_error(CheckFailed(*checks.decode(record[0]), float(record[2]), float(record[3])),
                          batch_element) from None


class Specialization:
    """One function specialised on argument types: its programs, generated and compiled lazily."""

    def __init__(self, rf: ReversibleFunction, types: tuple, blas: bool = True):
        self.rf = rf
        self.types = types
        self.options = dataclasses.replace(rf.options, blas=blas)
        self.func = rf.ir
        callees = sorted((name, obj.forward_function.__qualname__, _source_text(obj.forward_function))
                         for name, obj in rf.ir.globals_names.items())
        text = repr((rf.ir.loc.filename, rf.__qualname__, rf.ir.loc.line, _source_text(rf), callees, types,
                     self.options, rf.backend, loader.compiler_fingerprint()))
        self.key = hashlib.sha256(text.encode()).hexdigest()[:16]
        self.fkey = int(self.key[:7], 16)
        self.dependencies: dict = {}
        self.env = infer(self.func, dict(zip(rf.params, types)), self._callee_types)
        self._sources: dict = {}
        self._callables: dict = {}

    def _callee_types(self, call: CallFn, arg_types: tuple) -> None:
        self.callee_spec(call, arg_types)

    def callee_spec(self, call: CallFn, arg_types: tuple) -> "Specialization":
        callee = self.rf._callee(call.callee, call.loc)
        try:
            return callee.specialize(arg_types, self.options.blas)
        except ReversibilityError:
            raise
        except TypeError as exc:
            raise ReversibilityError(f"call of '{call.callee}': {exc}", call.loc) from None

    def symbol(self, program: str) -> str:
        return f"{self.rf.__name__}_{program}"

    def callee_symbol(self, env: TypeEnv):
        from .transforms.infer import expr_type

        def resolve(call: CallFn, program: str):
            spec = self.callee_spec(call, tuple(expr_type(a, env, call.loc) for a in call.args))
            name = f"{call.callee}_{spec.key[:8]}_{program}"
            self.dependencies[name] = (spec, program)
            return name, spec.rf.modified_positions()

        return resolve

    def low_function(self, program: str, inline: bool = False, hoist: bool = True) -> LowFunction:
        """The low IR of ``program``, its impossible checks pruned. ``inline``: with the functions it
        calls once inlined (CPU code; ``transforms/inline.py``); ``hoist``: allocations in loops hoisted."""
        from .transforms.adjoint import AdjointLowerer
        env = TypeEnv(self.env.types)
        body = self.func.body if program in ("forward", "adjoint", "vjp", "vjp_forward") else invert_block(self.func.body)
        params = list(self.rf.params)
        args = (env, self.options, self.fkey * 8 + PROGRAMS.index(program), self.callee_symbol(env),
                ancilla_names(self.func.body), params)
        twins = {}  # gradient parameter -> its primal (same shape)
        if program in ("forward", "inverse", "vjp_forward"):
            lowerer = Lowerer(*args, callee_modifies=self.rf._callee_modifies, vjp_forward=program == "vjp_forward")
            low, all_params = lowerer.lower_block(body), params
        else:
            lowerer = AdjointLowerer(*args, callee_modifies=self.rf._callee_modifies)
            if program in ("vjp", "inverse_vjp"):
                modified = [p for k, p in enumerate(params) if k in self.rf.modified_positions()]
                low, all_params = lower_fused_vjp(lowerer, body, modified)
            else:
                low = lowerer.adjoint_body(body)
                all_params = params + lowerer.gradient_params()
            twins = {lowerer.gname(p): p for p in params if lowerer.gname(p) in all_params}
            if program in ("vjp", "inverse_vjp"):  # saved_<p>: p's forward result, p's shape
                twins.update({s: p for s, p in zip(all_params[len(all_params) - len(modified):], modified)
                              if env[p].is_array})
        types = {p: env[p] for p in all_params}
        scalars = [p for p in all_params if not types[p].is_array]  # arrays change in place
        low_fn = prune_checks(LowFunction(self.symbol(program), all_params, low, scalars, types), twins)
        if inline:
            low_fn = prune_checks(inline_single_calls(low_fn, self._inlinable), twins)
        return hoist_allocations(low_fn) if hoist else low_fn

    def _inlinable(self, name: str) -> LowFunction:
        """The low IR of callee ``name``, to inline; what it calls becomes this function's dependency."""
        spec, program = self.dependencies[name]
        low = spec.low_function(program, hoist=False)
        self.dependencies.update(spec.dependencies)
        return low

    def source(self, program: str) -> str:
        src = self._sources.get(program)
        if src is None:  # a fused vjp runs its callees' programs once each: they are inlined
            low = self.low_function(program, inline=program in ("vjp", "inverse_vjp"))
            loc = self.rf.ir.loc
            types = ", ".join(f"{p}: {t.describe()}" for p, t in zip(self.rf.params, self.types))
            header = (f"# Generated by revdiff: the {program} program of {self.rf.__qualname__}\n"
                      f"# from {loc.filename}:{loc.lineno}, specialised for ({types}).\n"
                      f"# Options: {self.options}; Numba: fastmath off; index checks "
                      f"{'on' if self.rf.options.check else 'off'}.  Do not edit: regenerated from the source.")
            body = emit_module([low], "")
            deps = sorted(d for d in self.dependencies if d + "(" in body)
            if deps:
                header += "\n# Calls: " + ", ".join(deps)
            src = emit_module([low], header)
            self._sources[program] = src
        return src

    def callable(self, program: str):
        fn = self._callables.get(program)
        if fn is None:
            src = self.source(program)
            backend = self.rf.backend
            deps = {name: spec.callable(prog) for name, (spec, prog) in self.dependencies.items()
                    if name + "(" in src}
            if "_host_" in src:  # BLAS routines (imported only when used: they load Numba)
                from .runtime.host import routines_called
                deps.update(routines_called(src))
            module = loader.load(src, f"{self.rf.__name__}_{program}", backend, deps)
            fn = loader.compiled(module, self.symbol(program), backend, deps)
            self._callables[program] = fn
        return fn


def _source_text(rf: ReversibleFunction) -> str:
    import inspect
    try:
        return inspect.getsource(rf.py_function)
    except OSError:
        return ""


def reversible(fn: Callable | None = None, *, check: bool = True, backend: str = "numba",
               atol: float = 1e-12, rtol: float | None = None, fmad: bool = False):
    """Decorate a function written in the reversible language. ``check=False`` drops runtime checks;
    ``atol``/``rtol`` set the tolerance of ancilla deallocation checks; ``backend="python"`` runs
    the generated code without Numba; ``fmad=True`` lets the CUDA compiler contract a*b+c into
    FMAs (off by default, so that GPU results agree with the CPU's)."""
    def wrap(f: Callable) -> ReversibleFunction:
        try:
            return ReversibleFunction(f, check=check, backend=backend, atol=atol, rtol=rtol, fmad=fmad)
        except ReversibilityError as exc:
            raise exc.with_traceback(None) from None  # the message already points at the user's line

    return wrap(fn) if fn is not None else wrap
