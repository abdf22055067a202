"""Tensors to revdiff's arrays and back, and the machinery every revdiff custom operation shares:
``torch.library.custom_op`` with a fake implementation and a vmap rule, and the autograd wiring
through a ``torch.autograd.Function`` (see ``revdiff.torch``)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from revdiff.runtime.device import cupy_module

_SUPPORTED = (torch.float32, torch.float64, torch.complex64, torch.complex128, torch.bool, torch.uint8, torch.int8,
              torch.int16, torch.int32, torch.int64)
_TWICE = ("revdiff.torch: the gradient of a revdiff operation is not differentiable (second derivatives "
          "are not supported yet); differentiate it once, without create_graph=True through it")


# ----------------------------------------------------------------------------- tensors and arrays

def _check(t: Any, name: str) -> None:
    """Refuse, by name, what no operation takes: other layouts, dtypes and devices."""
    if not isinstance(t, torch.Tensor):
        return
    if t.layout != torch.strided:
        raise TypeError(f"'{name}' is a {t.layout} tensor; revdiff takes dense (strided) tensors: pass "
                        f"{name}.to_dense()")
    if t.dtype not in _SUPPORTED:
        raise TypeError(f"'{name}' is a {t.dtype} tensor; revdiff computes in float32, float64, complex64 and "
                        "complex128 (and integers and bools, which the high-level functions turn into float64): "
                        "convert it, e.g. with .float()")
    if t.device.type not in ("cpu", "cuda", "meta"):
        raise NotImplementedError(f"'{name}' is a {t.device.type} tensor; revdiff runs on CPU tensors "
                                  "(through NumPy) and CUDA tensors (through CuPy)")


def _numpy(t: Any, name: str) -> Any:
    """A NumPy view of a CPU tensor, a CuPy view of a CUDA tensor (0-d tensors become scalars)."""
    if not isinstance(t, torch.Tensor):
        return t
    _check(t, name)
    t = t.detach().resolve_conj().resolve_neg()
    if t.device.type == "cuda":
        array = cupy_module().asarray(t)
        return array.item() if array.ndim == 0 else array
    if t.device.type != "cpu":
        raise NotImplementedError(f"'{name}' is a {t.device.type} tensor; revdiff runs on CPU tensors "
                                  "(through NumPy) and CUDA tensors (through CuPy)")
    array = t.numpy()
    return array[()] if array.ndim == 0 else array  # a 0-d tensor is a scalar parameter


def _tensor(a: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A fresh tensor of a NumPy or CuPy result (scalars become 0-d tensors), in ``dtype``."""
    if hasattr(a, "__cuda_array_interface__"):
        out = torch.as_tensor(a, device=device)
    else:
        out = torch.from_numpy(np.array(a, copy=True, order="C"))  # an operation's result aliases nothing
    return out.to(dtype)


def _computed(*tensors: torch.Tensor) -> torch.dtype:
    """The dtype the high-level programs compute in: the promoted dtype, integers and bools as float64."""
    dtypes = [t.dtype if _differentiable(t) else torch.float64 for t in tensors]
    out = dtypes[0]
    for d in dtypes[1:]:
        out = torch.promote_types(out, d)
    return out


def _differentiable(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _gradient_dtype(t: torch.Tensor, computed: torch.dtype) -> torch.dtype:
    return t.dtype if _differentiable(t) else computed


# ----------------------------------------------------------------------------- operations

def _batch_front(info: Any, value: Any, dim: Any) -> Any:
    """``value`` with its vmap batch dimension first (expanded where it has none); lists elementwise."""
    if isinstance(value, (list, tuple)):
        return [_batch_front(info, v, d) for v, d in zip(value, dim)]
    if not isinstance(value, torch.Tensor):
        return value
    return value.movedim(dim, 0) if dim is not None else value.expand(info.batch_size, *value.shape)


def _operation(name: str, schema: str, impl: Callable, fake: Callable, vmap: Callable | None = None):
    """``revdiff::name``, a custom operation with its fake implementation and a vmap rule: the
    programs batch over leading axes, so by default the rule moves every batch dimension first."""
    op = torch.library.custom_op(f"revdiff::{name}", impl, mutates_args=(), schema=schema)
    op.register_fake(fake)

    def batch_first(info, in_dims, *args):
        out = getattr(torch.ops.revdiff, name)(*(_batch_front(info, a, d) for a, d in zip(args, in_dims)))
        return out, (type(out)(0 for _ in out) if isinstance(out, (tuple, list)) else 0)

    op.register_vmap(vmap or batch_first)
    return getattr(torch.ops.revdiff, name)  # what torch.compile traces (it cannot wrap the definition)


class _Vjp(torch.autograd.Function):
    """The vjp operation ``torch.ops.revdiff.<name>(*tensors, *options)`` as a function of the inputs
    and cotangents, so that a gradient depends on both; differentiating it again raises (a second
    derivative would otherwise silently miss that dependence). Used only where the gradient is
    itself recorded (``create_graph=True``, ``torch.func``): ``torch.compile`` cannot trace it in
    a plain backward (it passes a context to a ``forward`` with ``*args``)."""
    generate_vmap_rule = True

    @staticmethod
    def forward(name, options, *tensors):
        return tuple(getattr(torch.ops.revdiff, name)(*tensors, *options))

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, *cotangents):
        raise RuntimeError(_TWICE)


def _recorded(tensors: tuple) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


class _FunctionVjp(_Vjp):
    """``_Vjp`` of a reversible function's vjp operation, which takes lists: (the ``parameters``
    first tensors, the cotangents of the outputs), and ``batch_dims``."""

    @staticmethod
    def forward(name, layout, *tensors):
        parameters, batch_dims = layout
        return tuple(getattr(torch.ops.revdiff, name)(list(tensors[:parameters]), list(tensors[parameters:]),
                                                      batch_dims))


def _autograd(forward_op, vjp_op, tensors: int) -> Callable:
    """A differentiable call of ``forward_op(*tensors, *options)``: the backward calls
    ``vjp_op(*tensors, *cotangents, *options)``, one gradient per tensor argument. Registered on the
    operation too, for eager and compiled calls of ``torch.ops.revdiff.*``."""

    vjp_name = vjp_op._qualified_op_name.split("::")[1]

    def save(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:tensors])
        ctx.options = tuple(inputs[tensors:])

    def pull_back(ctx, *cotangents):
        saved = ctx.saved_tensors
        tensors = saved + cotangents
        grads = _Vjp.apply(vjp_name, ctx.options, *tensors) if _recorded(tensors) else vjp_op(*tensors, *ctx.options)
        return tuple(g if _differentiable(t) else None for g, t in zip(grads, saved)) + \
            (None,) * len(ctx.options)

    torch.library.register_autograd(forward_op.default, pull_back, setup_context=save)

    class Call(torch.autograd.Function):
        generate_vmap_rule = True
        forward = staticmethod(lambda *inputs: forward_op(*inputs))
        setup_context = staticmethod(save)
        backward = staticmethod(pull_back)

    def call(*inputs):
        """Through ``Call`` where autograd records, else the operation itself: ``torch.compile``
        cannot trace ``Call`` where nothing requires a gradient (its ``forward`` takes ``*args``)."""
        return Call.apply(*inputs) if _recorded(inputs) else forward_op(*inputs)

    return call


def _like(t: torch.Tensor, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    return t.new_empty(tuple(shape), dtype=dtype)


def _checked(names: str, *tensors) -> None:
    for name, t in zip(names.split(), tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"'{name}' must be a torch.Tensor, got {type(t).__name__}")
        _check(t, name)
