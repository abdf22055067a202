"""The compiler driver: one function specialised on its argument types, and the passes each of its
programs runs (forward, inverse, adjoint, fused vjp), from the high-level IR to a compiled callable.
Callees are specialised once per specialisation and linked under ``symbol``."""
from __future__ import annotations

import dataclasses
import hashlib
import inspect

from revdiff.backends.numba.emit import INTERRUPT_CHECK, emit_module, host_routines
from revdiff.compiler.graph import invoked, symbol
from revdiff.errors import ReversibilityError
from revdiff.ir.high import CallFn
from revdiff.ir.low import LowFunction
from revdiff.optimize.hoist import hoist_allocations
from revdiff.optimize.inline import inline_single_calls
from revdiff.optimize.prune import prune_checks
from revdiff.passes.adjoint import AdjointLowerer
from revdiff.passes.analysis import ancilla_names
from revdiff.passes.fuse import lower_fused_vjp
from revdiff.passes.infer import TypeEnv, expr_type, infer
from revdiff.passes.invert import invert_block
from revdiff.passes.lower import Lowerer
from revdiff.runtime import loader
from revdiff.runtime.host import routines

PROGRAMS = ("forward", "inverse", "adjoint", "inverse_adjoint", "vjp", "inverse_vjp", "vjp_forward")


class Specialization:
    """One function specialised on argument types: its programs, generated and compiled lazily."""

    def __init__(self, rf, types: tuple, blas: bool = True):
        self.rf = rf
        self.types = types
        self.options = dataclasses.replace(rf.options, blas=blas)
        self.func = rf.ir
        callees = sorted((name, obj.forward_function.__qualname__, _source_text(obj.forward_function),
                          sorted(obj.forward_function.ir.constants.items()))
                         for name, obj in rf.ir.globals_names.items())
        text = repr((rf.ir.loc.filename, rf.__qualname__, rf.ir.loc.line, _source_text(rf),
                     sorted(rf.ir.constants.items()), callees, types,
                     self.options, rf.backend, loader.compiler_fingerprint()))
        self.key = hashlib.sha256(text.encode()).hexdigest()[:16]
        self.fkey = int(self.key[:7], 16)
        self.dependencies: dict = {}
        self._callee_specs: dict = {}
        self.env = infer(self.func, dict(zip(rf.params, types)), self._callee_types)
        self._sources: dict = {}
        self._calls: dict = {}  # program -> the generated functions it calls
        self._routines: dict = {}  # program -> the host routines it calls
        self._callables: dict = {}

    def _callee_types(self, call: CallFn, arg_types: tuple) -> None:
        self.callee_spec(call, arg_types)

    def callee_spec(self, call: CallFn, arg_types: tuple) -> "Specialization":
        """The callee's specialisation, resolved once: every program of this specialisation (a
        pullback's adjoint compiled after a global changed included) calls the same callees."""
        key = (call.callee, arg_types)
        spec = self._callee_specs.get(key)
        if spec is not None:
            return spec
        callee = self.rf._callee(call.callee, call.loc)
        try:
            spec = callee.specialize(arg_types, self.options.blas)
        except ReversibilityError:
            raise
        except TypeError as exc:
            raise ReversibilityError(f"call of '{call.callee}': {exc}", call.loc) from None
        self._callee_specs[key] = spec
        return spec

    def local_name(self, program: str) -> str:
        """The name of ``program`` in its own generated module (``symbol`` where it is linked)."""
        return f"{self.rf.__name__}_{program}"

    def callee_symbol(self, env: TypeEnv):

        def resolve(call: CallFn, program: str):
            spec = self.callee_spec(call, tuple(expr_type(a, env, call.loc) for a in call.args))
            name = symbol(spec, program)
            self.dependencies[name] = (spec, program)
            return name, spec.rf.modified_positions()

        return resolve

    def low_function(self, program: str, inline: bool = False, hoist: bool = True) -> LowFunction:
        """The low IR of ``program``, its impossible checks pruned. ``inline``: with the functions it
        calls once inlined (CPU code; ``optimize/inline.py``); ``hoist``: allocations in loops hoisted."""
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
        low_fn = prune_checks(LowFunction(self.local_name(program), all_params, low, scalars, types), twins)
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
            self._routines[program] = host_routines(low)
            self._calls[program] = deps = sorted(invoked(low))
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
            deps = {name: self.dependencies[name][0].callable(self.dependencies[name][1])
                    for name in self._calls[program]}
            deps.update(routines(self._routines[program]))
            module = loader.load(src, f"{self.rf.__name__}_{program}", backend, deps)
            fn = loader.compiled(module, self.local_name(program), backend, deps)
            if INTERRUPT_CHECK in self._routines[program] or any(getattr(d, "revdiff_loops", False) for d in deps.values()):
                fn.revdiff_loops = True  # a while loop: run where Ctrl-C can stop it (``interruptible``)
            self._callables[program] = fn
        return fn


def _source_text(rf) -> str:
    try:
        return inspect.getsource(rf.py_function)
    except OSError:
        return ""
