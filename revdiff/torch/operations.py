"""Tensors to revdiff's arrays and back, and the machinery every revdiff custom operation shares:
``torch.library.custom_op`` with a fake implementation and a vmap rule, and the autograd wiring
through a ``torch.autograd.Function`` (see ``revdiff.torch``)."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import numpy as np
import torch
from torch.autograd import forward_ad

try:  # PyTorch's own step before a Function's C++ apply (private: without it, every apply is PyTorch's)
    from torch._functorch.utils import unwrap_dead_wrappers
except ImportError:
    unwrap_dead_wrappers = None

from revdiff.runtime.device import cupy_module, on_device

_SUPPORTED = frozenset((torch.float32, torch.float64, torch.complex64, torch.complex128, torch.bool, torch.uint8,
                        torch.int8, torch.int16, torch.int32, torch.int64))
_FLOATING = frozenset((torch.float32, torch.float64, torch.complex64, torch.complex128))
_THRICE = ("revdiff.torch: a second derivative of a revdiff operation is not differentiable (third derivatives are "
           "not supported)")


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
    if t.is_cpu and t.layout == torch.strided and t.dtype in _SUPPORTED:  # the usual case, checked at once
        array = t.numpy(force=True)  # detached, with a conjugate or negative view resolved
        return array[()] if array.ndim == 0 else array
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
    if on_device(a):
        out = torch.as_tensor(a, device=device)
    else:
        fresh = isinstance(a, np.ndarray) and a.flags.owndata and a.flags.c_contiguous and a.flags.writeable
        out = torch.from_numpy(a if fresh else np.array(a, copy=True, order="C"))  # a result aliases no input
    return out if out.dtype == dtype else out.to(dtype)


def _computed(*tensors: torch.Tensor) -> torch.dtype:
    """The dtype the high-level programs compute in: the promoted dtype, integers and bools as float64."""
    first = tensors[0].dtype
    if first in _FLOATING and all(t.dtype is first for t in tensors):  # the usual case
        return first
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


def _cuda_device(args: tuple) -> "torch.device | None":
    """The device of the first CUDA tensor among ``args`` (and the tensor lists among them)."""
    for a in args:
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, torch.Tensor) and t.device.type == "cuda":
                return t.device
    return None


def _on_torch_stream(impl: Callable) -> Callable:
    """``impl`` run, where its tensors are on a GPU, with CuPy's current device theirs and its
    current stream PyTorch's current stream there: revdiff's kernels and copies queue behind the
    work that made the inputs and before the work that reads the results, with no device-wide
    synchronisation (the host still waits for that stream after each kernel, to read its error
    record)."""
    @functools.wraps(impl)
    def run(*args, **kwargs):
        device = _cuda_device(args)
        if device is None:
            return impl(*args, **kwargs)
        cp = cupy_module()
        index = device.index if device.index is not None else torch.cuda.current_device()
        pointer = torch.cuda.current_stream(index).cuda_stream
        with cp.cuda.Device(index), (cp.cuda.ExternalStream(pointer) if pointer else cp.cuda.Stream.null):
            return impl(*args, **kwargs)
    return run


def _operation(name: str, schema: str, impl: Callable, fake: Callable, vmap: Callable | None = None):
    """``revdiff::name``, a custom operation with its fake implementation and a vmap rule: the
    programs batch over leading axes, so by default the rule moves every batch dimension first.
    On CUDA tensors it runs on PyTorch's current device and stream (``_on_torch_stream``)."""
    op = torch.library.custom_op(f"revdiff::{name}", _on_torch_stream(impl), mutates_args=(), schema=schema)
    op.register_fake(fake)

    def batch_first(info, in_dims, *args):
        out = getattr(torch.ops.revdiff, name)(*(_batch_front(info, a, d) for a, d in zip(args, in_dims)))
        return out, (type(out)(0 for _ in out) if isinstance(out, (tuple, list)) else 0)

    op.register_vmap(vmap or batch_first)
    packet = getattr(torch.ops.revdiff, name)  # what torch.compile traces (it cannot wrap the definition)
    _IMPLEMENTATIONS[packet] = (impl, _on_torch_stream(impl))
    return packet


#: each operation's implementation, as CPU tensors and as CUDA tensors run it (``_on_torch_stream``),
#: which an eager call on plain tensors runs without PyTorch's dispatch of custom operations (tens of
#: microseconds per call, comparable to a small program's run)
_IMPLEMENTATIONS: dict = {}


def _eager(args: tuple) -> "str | None":
    """Where ``args`` reach an operation in plain eager mode, "cpu" or "cuda" (where any tensor is a
    CUDA tensor): no compiler tracing, no ``torch.func`` transform, only plain CPU or CUDA tensors (no
    fake, meta or subclassed ones); then its implementation may run directly, as the dispatcher would
    run it. None otherwise."""
    if torch.compiler.is_compiling() or torch._C._functorch.maybe_current_level() is not None:
        return None
    where = "cpu"
    for a in args:
        for t in ((a,) if isinstance(a, torch.Tensor) else a if isinstance(a, (list, tuple)) else ()):
            if type(t) is not torch.Tensor and isinstance(t, torch.Tensor):
                return None
            if isinstance(t, torch.Tensor) and not t.is_cpu:
                if not t.is_cuda:
                    return None
                where = "cuda"
    return where


def _direct(op):
    """``op``, called through its implementation where the call is plain eager (``_eager``)."""
    on_host, on_stream = _IMPLEMENTATIONS[op]

    def call(*args):
        where = _eager(args)
        return op(*args) if where is None else on_host(*args) if where == "cpu" else on_stream(*args)
    return call


class _Static:
    """What a recorded vjp needs besides its tensors (a leaf for ``torch.func``'s pytrees):
    ``vjp(*tensors)``, the gradients, one per floating-point primal; ``vjp_jvp(*tensors,
    *directions)``, per tensor (primals, then cotangents) the cotangent a double backward gives it; ``primals``, how many of the tensors are primals."""

    def __init__(self, vjp: Callable, vjp_jvp: Callable, primals: int):
        self.vjp, self.vjp_jvp, self.primals = vjp, vjp_jvp, primals


class _Vjp(torch.autograd.Function):
    """A vjp operation as a function of the inputs and cotangents, so that a gradient depends on
    both. Differentiating it again runs ``vjp_jvp``, the operation's ``*_vjp_jvp`` (the tangent of
    the fused vjp program: ``revdiff.programs``' ``*_vjp_jvp``), which gives the cotangents of the
    inputs (the Hessian of <output, cotangent> times the incoming cotangent) and of the cotangents
    (the output's derivative along it) at once; its forward mode (``torch.func.hessian``) reads the
    same and the vjp. A third derivative raises.
    ``torch.compile`` cannot trace it in a plain backward (it passes a context to a ``forward`` with
    ``*args``), so it is used only where the gradient is itself recorded (``create_graph=True``,
    ``torch.func``)."""
    generate_vmap_rule = True

    @staticmethod
    def forward(static, *tensors):
        return tuple(static.vjp(*tensors))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.static = inputs[0]
        ctx.save_for_backward(*inputs[1:])
        ctx.save_for_forward(*inputs[1:])

    @staticmethod
    def backward(ctx, *cotangents):
        static, tensors = ctx.static, ctx.saved_tensors
        given = iter(cotangents)  # one per floating-point primal
        directions = tuple(_filled(next(given) if _differentiable(t) else None, t) for t in tensors[:static.primals])
        args = tuple(tensors) + directions
        out = _Third.apply(static.vjp_jvp, *args) if _recorded(args) else static.vjp_jvp(*args)
        return (None,) + tuple(g if _differentiable(t) else None for g, t in zip(out, tensors))


class _VjpWithTangent(_Vjp):
    """``_Vjp`` with forward mode, for ``torch.func`` (Dynamo traces no ``autograd.Function`` with a
    ``jvp``, so compiled code gets ``_Vjp``)."""

    @staticmethod
    def jvp(ctx, _, *tangents):
        """The gradients' derivative along the primals' tangents (the Hessian part) and along the
        cotangents' (the vjp of those)."""
        static, tensors = ctx.static, ctx.saved_tensors
        n = static.primals
        primals, cotangents = tensors[:n], tensors[n:]
        directions = tuple(_filled(d, t) for d, t in zip(tangents[:n], primals))
        dgrads = list(static.vjp_jvp(*tensors, *directions)[:n])
        if any(d is not None for d in tangents[n:]):
            along = static.vjp(*primals, *(_filled(d, t) for d, t in zip(tangents[n:], cotangents)))
            grads = iter(along)
            dgrads = [g + next(grads) if _differentiable(t) else g for g, t in zip(dgrads, primals)]
        return tuple(g for g, t in zip(dgrads, primals) if _differentiable(t))


def _filled(d, like: torch.Tensor) -> torch.Tensor:
    return d if d is not None else torch.zeros_like(like)


class _Third(torch.autograd.Function):
    """A second derivative's operation, recorded: differentiating it (a third derivative) raises."""

    @staticmethod
    def forward(call, *tensors):
        return tuple(call(*tensors))

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, *cotangents):
        raise RuntimeError(_THRICE)


def _recorded(tensors: tuple) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _forward_mode(tensors: tuple) -> bool:
    """Whether forward-mode AD (``torch.func``, dual tensors) may see these tensors, outside code
    Dynamo compiles (which traces no ``autograd.Function`` with a ``jvp``)."""
    if torch.compiler.is_compiling():
        return False
    if torch._C._functorch.maybe_current_level() is not None:
        return True
    if getattr(forward_ad, "_current_level", 0) < 0:  # outside every ``dual_level``: no tensor carries a tangent
        return False
    return any(isinstance(t, torch.Tensor) and forward_ad.unpack_dual(t).tangent is not None for t in tensors)


#: the signature of a ``forward(*inputs)``
_ANY_INPUTS = inspect.Signature([inspect.Parameter("inputs", inspect.Parameter.VAR_POSITIONAL)])


def _autograd(forward_op, vjp_op, tensors: int, jvp_op, vjp_jvp_op) -> Callable:
    """A differentiable call of ``forward_op(*tensors, *options)``: the backward calls
    ``vjp_op(*tensors, *cotangents, *options)``, one gradient per tensor argument, and is
    differentiable once more through ``vjp_jvp_op(*tensors, *cotangents, *directions, *options)``;
    forward mode calls ``jvp_op(*tensors, *tangents, *options)``.
    Registered on the operation too, for eager and compiled calls of ``torch.ops.revdiff.*``."""

    direct_forward, direct_vjp = _direct(forward_op), _direct(vjp_op)

    def save(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:tensors])
        ctx.save_for_forward(*inputs[:tensors])
        ctx.options = tuple(inputs[tensors:])

    def pull_back(ctx, *cotangents):
        saved = ctx.saved_tensors
        args = saved + cotangents
        options = ctx.options
        if _recorded(args) or _forward_mode(args):
            def floating(*t):  # the gradients of the floating-point primals
                return [g for g, x in zip(vjp_op(*t, *options), t[:tensors]) if _differentiable(x)]
            def vjp_jvp(*t):
                return vjp_jvp_op(*t, *options)
            kind = _VjpWithTangent if _forward_mode(args) else _Vjp
            given = iter(kind.apply(_Static(floating, vjp_jvp, tensors), *args))
            grads = [next(given) if _differentiable(t) else None for t in saved]
        else:
            grads = direct_vjp(*args, *options)
        return tuple(g if _differentiable(t) else None for g, t in zip(grads, saved)) + (None,) * len(options)

    def push_forward(ctx, *tangents):
        saved = ctx.saved_tensors
        directions = tuple(d if d is not None else torch.zeros_like(t) for d, t in zip(tangents[:tensors], saved))
        return jvp_op(*saved, *directions, *ctx.options)

    torch.library.register_autograd(forward_op.default, pull_back, setup_context=save)

    def run_forward(*inputs):
        return direct_forward(*inputs)

    run_forward.__signature__ = _ANY_INPUTS  # what Function.apply reads on every call, without inspecting it

    class Call(torch.autograd.Function):
        generate_vmap_rule = True
        forward = staticmethod(run_forward)
        setup_context = staticmethod(save)
        backward = staticmethod(pull_back)

    class CallWithTangent(Call):
        jvp = staticmethod(push_forward)

    apply = _plain_apply(Call)

    def call(*inputs):
        """Through ``Call`` where autograd records (``CallWithTangent`` where forward mode may),
        else the operation itself: ``torch.compile`` cannot trace ``Call`` where nothing requires a
        gradient (its ``forward`` takes ``*args``), nor any ``jvp``."""
        if _forward_mode(inputs):
            return CallWithTangent.apply(*inputs)
        return apply(*inputs) if _recorded(inputs) else direct_forward(*inputs)

    return call


def _plain_apply(function: type) -> Callable:
    """``function.apply`` (an ``autograd.Function`` whose ``forward`` takes ``*inputs``) without its
    Python wrapper in plain eager mode (no ``torch.func`` transform, no compiler tracing): the wrapper
    binds the arguments to ``forward``'s signature (nothing to bind here) and unwraps dead
    ``torch.func`` wrappers, as this does, before PyTorch's own ``apply`` (half of its time)."""
    apply = getattr(super(torch.autograd.Function, function), "apply", None)
    if apply is None or unwrap_dead_wrappers is None:
        return function.apply

    def call(*inputs):
        if torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active():
            return function.apply(*inputs)  # what Dynamo traces, and torch.func's path
        return apply(*unwrap_dead_wrappers(inputs))
    return call


def _like(t: torch.Tensor, shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    return t.new_empty(tuple(shape), dtype=dtype)


def _checked(names: str, *tensors) -> None:
    for name, t in zip(names.split(), tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"'{name}' must be a torch.Tensor, got {type(t).__name__}")
        _check(t, name)
