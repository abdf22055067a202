"""``revdiff.torch.function``: any reversible function as PyTorch custom operations (its call, vjp,
jvp and vjp_jvp)."""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import numpy as np
import torch

from revdiff.ad import vjp
from revdiff.forward_mode import jvp, vjp_jvp
from revdiff.batch import BatchedFunction
from revdiff.function import ReversibleFunction
from revdiff.torch.operations import (_batch_front, _check, _differentiable, _forward_mode, _numpy, _operation,
                                      _plain_apply, _recorded, _Static, _tensor, _Vjp, _VjpWithTangent)

_FUNCTIONS: dict = {}


def _as_tensor(value: Any, name: str) -> torch.Tensor:
    """A parameter's value as the tensor the operation takes (numbers become 0-d tensors)."""
    if isinstance(value, torch.Tensor):
        _check(value, name)
        return value
    if isinstance(value, (bool, int, float, complex, np.number, np.bool_, np.ndarray)):
        return torch.from_numpy(np.array(value))  # NumPy's dtypes: a Python float is float64, as in revdiff
    raise TypeError(f"'{name}' must be a tensor or a number, got {type(value).__name__}")


class _FunctionOps:
    """The custom operations of one reversible function: its call (the final values of
    ``outputs``), its vjp (the cotangents of its floating-point parameters), its jvp (forward mode)
    and its vjp_jvp (a second backward). ``batch_dims``
    counts leading axes that vmap added: the call then runs as ``revdiff.batched`` over them."""

    def __init__(self, f: ReversibleFunction, outputs: tuple):
        self.f, self.outputs = f, outputs
        self.picked = [f.parameter_names.index(o) for o in outputs]
        self._batched: BatchedFunction | None = None
        stem = re.sub(r"\W", "_", f.__qualname__, flags=re.ASCII)  # a custom op name is ASCII
        name = f"function_{stem}_{len(_FUNCTIONS)}"
        self.call = _operation(name, "(Tensor[] args, int batch_dims) -> Tensor[]", self._call_impl,
                               self._call_fake, self._vmap(lambda: self.call))
        self.vjp_name = f"{name}_vjp"
        self.vjp = _operation(self.vjp_name, "(Tensor[] args, Tensor[] cotangents, int batch_dims) -> Tensor[]",
                              self._vjp_impl, self._vjp_fake, self._vmap(lambda: self.vjp))
        self.vjp_jvp_name = f"{name}_vjp_jvp"
        self.vjp_jvp = _operation(self.vjp_jvp_name, "(Tensor[] args, Tensor[] cotangents, Tensor[] directions, "
                                  "int batch_dims) -> Tensor[]", self._vjp_jvp_impl, self._vjp_jvp_fake,
                                  self._vmap(lambda: self.vjp_jvp))
        self.jvp_name = f"{name}_jvp"
        self.jvp = _operation(self.jvp_name, "(Tensor[] args, Tensor[] directions, int batch_dims) -> Tensor[]",
                              self._jvp_impl, self._call_fake_pair, self._vmap(lambda: self.jvp))

    def batched(self) -> BatchedFunction:
        if self._batched is None:
            self._batched = BatchedFunction(self.f, self.f.parameter_names)
        return self._batched

    @staticmethod
    def _vmap(op: Callable) -> Callable:
        def rule(info, in_dims, *args):
            *tensors, batch_dims = args
            moved = [_batch_front(info, t, d) for t, d in zip(tensors, in_dims)]
            out = op()(*moved, batch_dims + 1)
            return out, [0] * len(out)
        return rule

    @staticmethod
    def _flat(arrays: list, batch_dims: int) -> tuple:
        """Arrays with their ``batch_dims`` leading axes merged into one, and those axes."""
        lead = tuple(np.shape(arrays[0])[:batch_dims]) if arrays else ()
        size = int(np.prod(lead, dtype=np.int64))
        return [a.reshape((size,) + tuple(np.shape(a)[batch_dims:])) for a in arrays], lead

    def _call_impl(self, args, batch_dims):
        arrays = [_numpy(a.contiguous(), p) for a, p in zip(args, self.f.parameter_names)]
        if batch_dims == 0:
            finals, _ = vjp(self.f, *arrays)
        else:
            flat, lead = self._flat(arrays, batch_dims)
            finals = [np.reshape(v, lead + tuple(np.shape(v)[1:])) for v in self.batched()(*flat)]
        return [_tensor(finals[k], args[k].dtype, args[k].device) for k in self.picked]

    def _call_fake(self, args, batch_dims):
        return [torch.empty_like(args[k]) for k in self.picked]

    def _vjp_impl(self, args, cotangents, batch_dims):
        arrays = [_numpy(a.contiguous(), p) for a, p in zip(args, self.f.parameter_names)]
        full = [None] * len(arrays)
        for k, c in zip(self.picked, cotangents):
            full[k] = _numpy(c.contiguous(), "cotangent")
        if batch_dims == 0:
            grads = vjp(self.f, *arrays)[1](*full)
        else:
            flat, lead = self._flat(arrays, batch_dims)
            cts = [None if c is None else self._flat([c], batch_dims)[0][0] for c in full]
            grads = [None if g is None else np.reshape(g, lead + tuple(np.shape(g)[1:]))
                     for g in self.batched().vjp(flat, cts)[1]]
        return [_tensor(g, a.dtype, a.device) for g, a in zip(grads, args) if _differentiable(a)]

    def _vjp_fake(self, args, cotangents, batch_dims):
        return [torch.empty_like(a) for a in args if _differentiable(a)]

    def _arrays(self, args, cotangents, directions, batch_dims) -> tuple:
        """(arguments, per-parameter cotangents, per-parameter directions, leading axes) as arrays,
        the leading ``batch_dims`` axes merged."""
        arrays = [_numpy(a.contiguous(), p) for a, p in zip(args, self.f.parameter_names)]
        full = [None] * len(arrays)
        for k, c in zip(self.picked, cotangents):
            full[k] = _numpy(c.contiguous(), "cotangent")
        dirs = [_numpy(d.contiguous(), "direction") if _differentiable(a) else None for a, d in zip(args, directions)]
        if batch_dims == 0:
            return arrays, full, dirs, None
        flat, lead = self._flat(arrays, batch_dims)
        merge = lambda values: [None if v is None else self._flat([v], batch_dims)[0][0] for v in values]  # noqa: E731
        return flat, merge(full), merge(dirs), lead

    def _vjp_jvp_impl(self, args, cotangents, directions, batch_dims):
        """Per parameter the derivative of its gradient along ``directions`` (zeros where it has
        none), then per output the derivative of its final value: what a double backward reads."""
        arrays, full, dirs, lead = self._arrays(args, cotangents, directions, batch_dims)
        if lead is None:
            _, _, out_tangents, grad_tangents = vjp_jvp(self.f, arrays, full, dirs)
        else:
            _, _, out_tangents, grad_tangents = self.batched().vjp_jvp(arrays, full, dirs)
        unflat = (lambda v: v) if lead is None else (lambda v: np.reshape(v, lead + tuple(np.shape(v)[1:])))
        grads = [_tensor(unflat(g), a.dtype, a.device) if g is not None else torch.zeros_like(a)
                 for g, a in zip(grad_tangents, args)]
        return grads + [_tensor(unflat(out_tangents[k]), args[k].dtype, args[k].device) for k in self.picked]

    def _vjp_jvp_fake(self, args, cotangents, directions, batch_dims):
        return [torch.empty_like(a) for a in args] + [torch.empty_like(args[k]) for k in self.picked]

    def _jvp_impl(self, args, directions, batch_dims):
        arrays, _, dirs, lead = self._arrays(args, (), directions, batch_dims)
        if lead is None:
            _, out_tangents = jvp(self.f, arrays, dirs)
        else:
            out_tangents = [None if t is None else np.reshape(t, lead + tuple(np.shape(t)[1:]))
                            for t in self.batched().jvp(arrays, dirs)[1]]
        return [_tensor(out_tangents[k], args[k].dtype, args[k].device) for k in self.picked]

    def _call_fake_pair(self, args, directions, batch_dims):
        return [torch.empty_like(args[k]) for k in self.picked]


def _function_call(ops: _FunctionOps) -> Callable:
    """The differentiable call of a reversible function's operations (see ``_autograd``), and the
    operation's own autograd registration. It names the operations, which ``torch.compile``
    traces, not ``ops``, which it cannot."""
    call_op, vjp_op, jvp_op, vjp_jvp_op = ops.call, ops.vjp, ops.jvp, ops.vjp_jvp

    def gradients(saved: tuple, cotangents: tuple, batch_dims: int) -> list:
        """One per parameter: None where it is not floating point."""
        tensors = saved + tuple(cotangents)
        n, count = len(saved), len(tensors)
        if _recorded(tensors) or _forward_mode(tensors):
            static = _Static(lambda *t: vjp_op(list(t[:n]), list(t[n:]), batch_dims),
                             lambda *t: vjp_jvp_op(list(t[:n]), list(t[n:count]), list(t[count:]), batch_dims), n)
            grads = iter((_VjpWithTangent if _forward_mode(tensors) else _Vjp).apply(static, *tensors))
        else:
            grads = iter(vjp_op(list(saved), list(cotangents), batch_dims))
        return [next(grads) if _differentiable(t) else None for t in saved]

    def tangents(saved: tuple, directions: tuple, batch_dims: int) -> tuple:
        directions = [d if d is not None else torch.zeros_like(t) for d, t in zip(directions, saved)]
        return tuple(jvp_op(list(saved), directions, batch_dims))

    def save(ctx, inputs, output):
        args, ctx.batch_dims = inputs
        ctx.save_for_backward(*args)

    def pull_back(ctx, cotangents):
        return gradients(ctx.saved_tensors, tuple(cotangents), ctx.batch_dims), None

    torch.library.register_autograd(call_op.default, pull_back, setup_context=save)

    class Call(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(*args):
            return tuple(call_op(list(args), 0))

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)
            ctx.save_for_forward(*inputs)

        @staticmethod
        def backward(ctx, *cotangents):
            return tuple(gradients(ctx.saved_tensors, cotangents, 0))

    class CallWithTangent(Call):
        @staticmethod
        def jvp(ctx, *directions):
            return tangents(ctx.saved_tensors, directions, 0)

    apply = _plain_apply(Call)

    def call(*args):
        """As ``_autograd``'s call: ``CallWithTangent`` or ``Call`` where autograd records, else the operation."""
        if _forward_mode(args):
            return CallWithTangent.apply(*args)
        return apply(*args) if _recorded(args) else tuple(call_op(list(args), 0))

    return call


def function(f: ReversibleFunction, outputs: Sequence[str] | str) -> Callable:
    """A torch function of all of ``f``'s parameters returning the final values of ``outputs``
    (a tensor, or a tuple when there are several); gradients flow to every floating-point tensor
    argument, numbers become 0-d tensors (in NumPy's dtypes: a Python float is float64). It is a set
    of custom operations (``torch.ops.revdiff.function_<name>_<k>``, its vjp, jvp and vjp_jvp), so it
    works as the module's functions do under ``torch.compile``, ``torch.func.grad``, ``vmap`` (which
    runs ``f`` as ``revdiff.batched`` over the mapped axis), ``torch.func.jvp`` and double backward
    (``gradgradcheck``, ``torch.func.hessian``); a third derivative raises by name.

    The backward runs ``f`` forward on the saved inputs and then backwards (no tape); a second
    backward runs the tangent of that fused vjp (``f.source("hvp")``)."""
    if not isinstance(f, ReversibleFunction):
        raise TypeError(f"function takes a reversible function (decorated with @revdiff.reversible), got {f!r}")
    outputs = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    if not outputs or len(set(outputs)) != len(outputs):
        raise ValueError(f"outputs must name one or more distinct parameters of {f.__qualname__} "
                         f"({', '.join(f.parameter_names)}), got {outputs!r}")
    missing = [o for o in outputs if o not in f.parameter_names]
    if missing:
        raise ValueError(f"{', '.join(map(repr, missing))} is not a parameter of {f.__qualname__} "
                         f"({', '.join(f.parameter_names)})")
    key = (f, outputs)
    if key not in _FUNCTIONS:
        _FUNCTIONS[key] = _function_call(_FunctionOps(f, outputs))
    apply = _FUNCTIONS[key]

    def call(*args):
        if len(args) != len(f.parameter_names):
            raise TypeError(f"{f.__qualname__} takes {len(f.parameter_names)} arguments ({', '.join(f.parameter_names)}), "
                            f"got {len(args)}")
        result = apply(*(_as_tensor(a, p) for a, p in zip(args, f.parameter_names)))
        return result[0] if len(result) == 1 else result

    call.__name__ = getattr(f, "__name__", "function")
    call.__doc__ = f"{f.__qualname__} as a torch function returning {', '.join(outputs)}"
    return call
