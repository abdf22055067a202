"""The compiler driver: one function specialised on its argument types, and how each of its programs
is made (``PROGRAMS``: which body, which lowering) from the high-level IR to the low-level IR, pruned,
inlined, loop-fused and hoisted. The targets take the low IR from here: LLVM (``targets/llvm/programs.py``,
which also prints it as Python for ``backend="python"``), lanes (``targets/lanes/modules.py``), CUDA
(``targets/cuda/programs.py``). Callees are specialised once per specialisation and linked under ``symbol``."""
from __future__ import annotations

import dataclasses
import hashlib
import inspect
from revdiff.ir.graph import symbol
from revdiff.targets.llvm.programs import NativePrograms
from revdiff.ir.signature import PLANS, PROGRAMS, TANGENTS, Plan, program_signature
from revdiff.errors import ReversibilityError
from revdiff.ir.high import CallFn
from revdiff.ir.low import LowFunction
from revdiff.optimize.fuse_loops import fuse_loops
from revdiff.optimize.hoist import hoist_allocations
from revdiff.optimize.inline import inline_single_calls
from revdiff.optimize.prune import implied, prune_checks
from revdiff.passes.adjoint import AdjointLowerer
from revdiff.passes.analysis import ancilla_names
from revdiff.passes.fuse import lower_fused_vjp
from revdiff.passes.infer import TypeEnv, expr_type, infer
from revdiff.passes.invert import invert_block
from revdiff.passes.lower import Lowerer
from revdiff.passes.tangent import tangent_function
from revdiff.runtime import loader


class Specialization:
    """One function specialised on argument types: its programs, generated and compiled lazily."""

    def __init__(self, rf, types: tuple, blas: bool = True, lanes: bool = False):
        self.rf = rf
        self.types = types
        self.options = dataclasses.replace(rf.options, blas=blas, lanes=lanes)
        self.func = rf.ir
        callees = sorted((name, obj.forward_function.__qualname__, _source_text(obj.forward_function),
                          sorted(obj.forward_function.ir.constants.items()),
                          sorted(obj.forward_function.ir.defaults.items()))  # compiled into the calls
                         for name, obj in rf.ir.globals_names.items())
        text = repr((rf.ir.loc.filename, rf.__qualname__, rf.ir.loc.line, _source_text(rf),
                     sorted(rf.ir.constants.items()), callees, types,
                     self.options, rf.backend, loader.compiler_fingerprint()))
        self.key = hashlib.sha256(text.encode()).hexdigest()[:16]
        self.fkey = int(self.key[:7], 16)
        self.version = None  # the function's version this was made for (``ReversibleFunction.specialize``)
        self.dependencies: dict = {}
        self._callee_specs: dict = {}
        self.env = infer(self.func, dict(zip(rf.params, types)), self._callee_types)
        self.native = NativePrograms(self)

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
            spec = callee.specialize(arg_types, self.options.blas, self.options.lanes)
        except ReversibilityError:
            raise
        except TypeError as exc:
            raise ReversibilityError(f"call of '{call.callee}': {exc}", call.loc) from None
        self._callee_specs[key] = spec
        return spec

    @staticmethod
    def plan(program: str) -> Plan:
        return PLANS[program]

    def inlines(self, program: str) -> bool:
        """Whether CPU code of ``program`` inlines the functions it calls once: a fused vjp (which
        runs each callee's programs once) and its tangent."""
        plan = self.plan(program)
        return (plan.lowering == "fused" or
                plan.lowering == "tangent" and self.plan(plan.tangent_of).lowering == "fused")

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

    def low_function(self, program: str, inline: bool = False, hoist: bool = True, fuse: bool = True) -> LowFunction:
        """The low IR of ``program``, its impossible checks pruned. ``inline``: with the functions it
        calls once inlined (CPU code; ``optimize/inline.py``); ``fuse``: adjacent loops fused where the
        options allow (``optimize/fuse_loops.py``); ``hoist``: allocations in loops hoisted."""
        low_fn = self._unfused_low_function(program, inline)
        if fuse and self.options.fuse_loops:
            low_fn = fuse_loops(low_fn)
        return hoist_allocations(low_fn) if hoist else low_fn

    def _unfused_low_function(self, program: str, inline: bool) -> LowFunction:
        plan = self.plan(program)
        if plan.lowering == "tangent":
            base = self.low_function(plan.tangent_of, inline=inline, hoist=False, fuse=False)
            return tangent_function(base, self.local_name(program), self._tangent_symbol,
                                    self.fkey * 8 + list(PROGRAMS).index(plan.tangent_of), implied,
                                    self.options.check)
        env = TypeEnv(self.env.types)
        body = invert_block(self.func.body) if plan.inverted else self.func.body
        params = list(self.rf.params)
        args = (env, self.options, self.fkey * 8 + list(PROGRAMS).index(program), self.callee_symbol(env),
                ancilla_names(self.func.body), params)
        if plan.lowering == "forward":
            lowerer = Lowerer(*args, callee_modifies=self.rf._callee_modifies, vjp_forward=plan.vjp_forward)
            low, all_params = lowerer.lower_block(body), params
        else:
            lowerer = AdjointLowerer(*args, callee_modifies=self.rf._callee_modifies)
            if plan.lowering == "fused":
                modified = [p for k, p in enumerate(params) if k in self.rf.modified_positions()]
                low, all_params = lower_fused_vjp(lowerer, body, modified)
            else:
                low = lowerer.adjoint_body(body)
                all_params = params + lowerer.gradient_params()
        signature = program_signature(program, self.types, self.rf.modified_positions())
        if [env[p] for p in all_params] != [slot.type for slot in signature.slots]:
            raise RuntimeError(f"revdiff: the {program} program of {self.rf.__qualname__} lowered to parameters "
                               f"{all_params} that its signature does not describe (a bug: please report it)")
        # a gradient, and an array's saved forward result, has its primal's shape
        twins = {name: params[slot.position] for name, slot in zip(all_params, signature.slots)
                 if slot.role == "gradient" or slot.role == "saved" and env[params[slot.position]].is_array}
        types = {p: env[p] for p in all_params}
        scalars = [p for p in all_params if not types[p].is_array]  # arrays change in place
        low_fn = prune_checks(LowFunction(self.local_name(program), all_params, low, scalars, types), twins)
        if inline:
            low_fn = prune_checks(inline_single_calls(low_fn, self._inlinable), twins)
        return low_fn

    def _tangent_symbol(self, name: str) -> str:
        """The tangent program of called program ``name``, a dependency from now on."""
        spec, program = self.dependencies[name]
        tangent = symbol(spec, TANGENTS[program])
        self.dependencies[tangent] = (spec, TANGENTS[program])
        return tangent

    def _inlinable(self, name: str) -> LowFunction:
        """The low IR of callee ``name``, to inline; what it calls becomes this function's dependency."""
        spec, program = self.dependencies[name]
        low = spec.low_function(program, hoist=False, fuse=False)
        self.dependencies.update(spec.dependencies)
        return low

    def source(self, program: str, backend: str = "python") -> str:
        """The generated source of ``program`` (``f.source(program)``): the Python module (the low IR
        as Python: what ``backend="python"`` runs), or ``backend="llvm"`` the LLVM module compiled."""
        if backend == "llvm":
            return self.native.module(program)[0]
        return self.native.source(program)

    def callable(self, program: str):
        """``program`` compiled to machine code (or plain Python), its callees loaded first."""
        return self.native.callable(program)


def _source_text(rf) -> str:
    try:
        return inspect.getsource(rf.py_function)
    except OSError:
        return ""
