"""revdiff inside PyTorch: QR, projection, least squares and the sphere as PyTorch custom operations
(``torch.ops.revdiff.qr``, ``…project``, …) whose gradients run revdiff's reversible programs
backwards, and ``function(f, outputs)`` to turn any reversible function into one.

Each operation is a ``torch.library.custom_op`` with a fake implementation (shapes and dtypes, for
``torch.compile`` and meta tensors), a vmap rule (the programs batch over leading axes) and an
autograd registration; its vjp is an operation too. The functions below call them through a
``torch.autograd.Function`` with ``setup_context``, because PyTorch's generated autograd for custom
operations does not compose with ``torch.func`` (pytorch/pytorch#168393): so ``torch.compile``
(``fullgraph=True``, then ``.backward()``), ``torch.func.grad``, ``vmap`` and ``vmap`` of ``grad``
work; ``torch.compile`` over ``torch.func.grad`` still fails inside PyTorch. A second derivative
raises (the vjp operation is not differentiable yet).

CPU tensors reach revdiff through NumPy, CUDA tensors through CuPy (``__cuda_array_interface__``),
both without copies; on the GPU the programs run as revdiff's CUDA kernels. Importing this module
imports torch; importing revdiff does not.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import numpy as np
import torch

from revdiff import programs as P
from revdiff.ad import vjp
from revdiff.batch import BatchedFunction
from revdiff.function import ReversibleFunction
from revdiff.programs.api import q_columns
from revdiff.runtime.device import cupy_module

__all__ = ["qr", "project", "lstsq", "normalize", "tangent_project", "function"]

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


def _qr_shapes(A: torch.Tensor, method: str, mode: str) -> tuple:
    """Shapes of Q and R in ``mode``; mode "r" has an empty Q, as ``torch.linalg.qr``."""
    m, n = A.shape[-2:]
    q = q_columns(method, mode, tuple(A.shape))
    batch = tuple(A.shape[:-2])
    return (0,) if mode == "r" else batch + (m, q), batch + (q, n)


def _qr_impl(A, method, rank_tol, mode="reduced"):
    out = P.qr(_numpy(A, "A"), method, rank_tol, mode)
    Q, R = (np.zeros(0, out.dtype), out) if mode == "r" else out
    return _tensor(Q, _computed(A), A.device), _tensor(R, _computed(A), A.device)


def _qr_fake(A, method, rank_tol, mode="reduced"):
    return tuple(_like(A, s, _computed(A)) for s in _qr_shapes(A, method, mode))


def _qr_vmap(info, in_dims, A, method, rank_tol, mode="reduced"):
    """The batch dimension of A first; mode "r"'s empty Q has none."""
    Q, R = torch.ops.revdiff.qr(_batch_front(info, A, in_dims[0]), method, rank_tol, mode)
    return (Q, R), (None if mode == "r" else 0, 0)


def _qr_vjp_impl(A, gQ, gR, method, rank_tol, mode="reduced"):
    gA = P.qr_vjp(_numpy(A, "A"), None if mode == "r" else _numpy(gQ, "gQ"), _numpy(gR, "gR"), method, rank_tol,
                  mode)
    return (_tensor(gA, _gradient_dtype(A, _computed(A)), A.device),)


def _qr_vjp_fake(A, gQ, gR, method, rank_tol, mode="reduced"):
    return (_like(A, A.shape, _gradient_dtype(A, _computed(A))),)


def _qr_vjp_vmap(info, in_dims, A, gQ, gR, method, rank_tol, mode="reduced"):
    """As the default rule, except that mode "r"'s cotangent of the empty Q is passed unbatched."""
    front = [_batch_front(info, a, d) for a, d in zip((A, gR), (in_dims[0], in_dims[2]))]
    gQ = gQ if mode == "r" else _batch_front(info, gQ, in_dims[1])
    return torch.ops.revdiff.qr_vjp(front[0], gQ, front[1], method, rank_tol, mode), [0]


def _pair_impl(forward: Callable, out_shape: Callable, names: tuple):
    """impl and fake of an operation of two tensors (A, y) or (g, z) returning one."""

    def impl(a, b, *options):
        out = forward(_numpy(a, names[0]), _numpy(b, names[1]), *options)
        return _tensor(out, _computed(a, b), a.device)

    def fake(a, b, *options):
        return _like(a, out_shape(a, b, *options), _computed(a, b))

    return impl, fake


def _pair_vjp_impl(backward: Callable, names: tuple, cotangent: str):
    """impl and fake of the vjp of a two-tensor operation: (ga, gb) from (a, b, g)."""

    def impl(a, b, g, *options):
        ga, gb = backward(_numpy(a, names[0]), _numpy(b, names[1]), _numpy(g, cotangent), *options)
        c = _computed(a, b)
        return _tensor(ga, _gradient_dtype(a, c), a.device), _tensor(gb, _gradient_dtype(b, c), b.device)

    def fake(a, b, g, *options):
        c = _computed(a, b)
        return _like(a, a.shape, _gradient_dtype(a, c)), _like(b, b.shape, _gradient_dtype(b, c))

    return impl, fake


_QR = _operation("qr", '(Tensor A, str method, float? rank_tol, str mode="reduced") -> (Tensor, Tensor)',
                 _qr_impl, _qr_fake, _qr_vmap)
_QR_VJP = _operation("qr_vjp", '(Tensor A, Tensor gQ, Tensor gR, str method, float? rank_tol, str mode="reduced") '
                     "-> Tensor[]", _qr_vjp_impl, _qr_vjp_fake, _qr_vjp_vmap)


def _linear_ops(name: str, forward: Callable, backward: Callable, out_shape: Callable, cotangent: str,
                names: str, options: str) -> Callable:
    a, b = names.split(", ")
    impl, fake = _pair_impl(forward, out_shape, (a, b))
    op = _operation(name, f"(Tensor {a}, Tensor {b}{options}) -> Tensor", impl, fake)
    vjp_impl, vjp_fake = _pair_vjp_impl(backward, (a, b), cotangent)
    vjp_op = _operation(f"{name}_vjp", f"(Tensor {a}, Tensor {b}, Tensor {cotangent}{options}) -> Tensor[]",
                        vjp_impl, vjp_fake)
    return _autograd(op, vjp_op, 2)


_METHOD = ', str method, float? rank_tol, str rank_deficient="raise"'
_qr_call = _autograd(_QR, _QR_VJP, 1)


def _value(forward: Callable) -> Callable:
    """``forward`` without the rank it returns beside its value for rank_deficient="truncate"."""
    def value(*args):
        out = forward(*args)
        return out[0] if isinstance(out, tuple) else out
    return value


def _lstsq_shape(A, y, method=None, rank_tol=None, rank_deficient="raise") -> tuple:
    if A.shape[-2] < A.shape[-1] and rank_deficient != "truncate":  # as revdiff.programs.lstsq refuses it, also
        raise ValueError(f"lstsq needs a tall or square A (m >= n) of full column rank; A has shape "  # traced
                         f"{tuple(A.shape)} (rank_deficient='truncate' gives the basic solution)")
    return A.shape[:-2] + A.shape[-1:]


_project_call = _linear_ops("project", _value(P.project), P.project_vjp, lambda A, y, *options: A.shape[:-1], "gz",
                            "A, y", _METHOD)
_lstsq_call = _linear_ops("lstsq", _value(P.lstsq), P.lstsq_vjp, _lstsq_shape, "gx", "A, y", _METHOD)
_tangent_call = _linear_ops("tangent_project", P.tangent_project, P.tangent_project_vjp, lambda g, z: g.shape,
                            "gout", "g, z", "")
_RANK = _operation("rank", "(Tensor A, float? rank_tol) -> Tensor",
                   lambda A, rank_tol: torch.from_numpy(np.asarray(P.rank(_numpy(A, "A"), rank_tol))).to(A.device),
                   lambda A, rank_tol: A.new_empty(tuple(A.shape[:-2]), dtype=torch.int64))


def _with_rank(value: torch.Tensor, A: torch.Tensor, rank_tol, rank_deficient: str):
    """(value, rank) for rank_deficient="truncate", as ``revdiff.programs``; else the value."""
    return (value, _RANK(A.detach(), rank_tol)) if rank_deficient == "truncate" else value


def _normalize_impl(x):
    return _tensor(P.normalize(_numpy(x, "x")), _computed(x), x.device)


def _normalize_vjp_impl(x, gy):
    return (_tensor(P.normalize_vjp(_numpy(x, "x"), _numpy(gy, "gy")), _gradient_dtype(x, _computed(x)), x.device),)


_NORMALIZE = _operation("normalize", "(Tensor x) -> Tensor", _normalize_impl, lambda x: _like(x, x.shape, _computed(x)))
_NORMALIZE_VJP = _operation("normalize_vjp", "(Tensor x, Tensor gy) -> Tensor[]", _normalize_vjp_impl,
                            lambda x, gy: (_like(x, x.shape, _gradient_dtype(x, _computed(x))),))
_normalize_call = _autograd(_NORMALIZE, _NORMALIZE_VJP, 1)


def _checked(names: str, *tensors) -> None:
    for name, t in zip(names.split(), tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"'{name}' must be a torch.Tensor, got {type(t).__name__}")
        _check(t, name)


# ----------------------------------------------------------------------------- the public functions

def qr(A: torch.Tensor, method: str = "cgs2", rank_tol: float | None = None, mode: str = "reduced") -> tuple:
    """Q, R of A (..., m, n) with diag(R) real nonnegative (``torch.ops.revdiff.qr``); the gradient
    runs the QR program backwards. ``mode`` as in ``torch.linalg.qr``: "reduced", "complete" (Q
    m x m; for a tall A with ``householder`` or ``givens``) or "r" (an empty Q and R, and, unlike
    torch, a gradient). ``rank_tol`` as in ``revdiff.programs.qr``."""
    _checked("A", A)
    return _qr_call(A, method, rank_tol, mode)


def project(A: torch.Tensor, y: torch.Tensor, method: str = "cgs2", rank_tol: float | None = None,
            rank_deficient: str = "raise"):
    """Q Q^H y, the orthogonal projection of y (..., m) onto the column space of A (..., m, n).
    ``rank_deficient="truncate"``: onto the numerical column space, returning (z, rank), as
    ``revdiff.programs.project`` (the rank is its own operation, ``torch.ops.revdiff.rank``)."""
    _checked("A y", A, y)
    return _with_rank(_project_call(A, y, method, rank_tol, rank_deficient), A, rank_tol, rank_deficient)


def lstsq(A: torch.Tensor, y: torch.Tensor, method: str = "cgs2", rank_tol: float | None = None,
          rank_deficient: str = "raise"):
    """argmin_x |A x - y| for A (..., m, n) of full column rank, through the QR program;
    ``rank_deficient="truncate"``: the basic solution and the rank, as ``revdiff.programs.lstsq``."""
    _checked("A y", A, y)
    return _with_rank(_lstsq_call(A, y, method, rank_tol, rank_deficient), A, rank_tol, rank_deficient)


def normalize(x: torch.Tensor) -> torch.Tensor:
    """x / |x| along the last axis."""
    _checked("x", x)
    return _normalize_call(x)


def tangent_project(g: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """g - (z_hat^H g) z_hat along the last axis, z_hat = z / |z|."""
    _checked("g z", g, z)
    return _tangent_call(g, z)


# ----------------------------------------------------------------------------- any reversible function

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
    ``outputs``) and its vjp (the cotangents of its floating-point parameters). ``batch_dims``
    counts leading axes that vmap added: the call then runs as ``revdiff.batched`` over them."""

    def __init__(self, f: ReversibleFunction, outputs: tuple):
        self.f, self.outputs = f, outputs
        self.picked = [f.params.index(o) for o in outputs]
        self._batched: BatchedFunction | None = None
        stem = re.sub(r"\W", "_", f.__qualname__)
        name = f"function_{stem}_{len(_FUNCTIONS)}"
        self.call = _operation(name, "(Tensor[] args, int batch_dims) -> Tensor[]", self._call_impl,
                               self._call_fake, self._vmap(lambda: self.call))
        self.vjp_name = f"{name}_vjp"
        self.vjp = _operation(self.vjp_name, "(Tensor[] args, Tensor[] cotangents, int batch_dims) -> Tensor[]",
                              self._vjp_impl, self._vjp_fake, self._vmap(lambda: self.vjp))

    def batched(self) -> BatchedFunction:
        if self._batched is None:
            self._batched = BatchedFunction(self.f, self.f.params)
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
        arrays = [_numpy(a.contiguous(), p) for a, p in zip(args, self.f.params)]
        if batch_dims == 0:
            finals, _ = vjp(self.f, *arrays)
        else:
            flat, lead = self._flat(arrays, batch_dims)
            finals = [np.reshape(v, lead + tuple(np.shape(v)[1:])) for v in self.batched()(*flat)]
        return [_tensor(finals[k], args[k].dtype, args[k].device) for k in self.picked]

    def _call_fake(self, args, batch_dims):
        return [torch.empty_like(args[k]) for k in self.picked]

    def _vjp_impl(self, args, cotangents, batch_dims):
        arrays = [_numpy(a.contiguous(), p) for a, p in zip(args, self.f.params)]
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


def _function_call(ops: _FunctionOps) -> Callable:
    """The differentiable call of a reversible function's operations (see ``_autograd``), and the
    operation's own autograd registration. It names the operations, which ``torch.compile``
    traces, not ``ops``, which it cannot."""
    call_op, vjp_op, vjp_name = ops.call, ops.vjp, ops.vjp_name

    def gradients(saved: tuple, cotangents: tuple, batch_dims: int) -> list:
        """One per parameter: None where it is not floating point."""
        tensors = saved + tuple(cotangents)
        grads = iter(_FunctionVjp.apply(vjp_name, (len(saved), batch_dims), *tensors) if _recorded(tensors)
                     else vjp_op(list(saved), list(cotangents), batch_dims))
        return [next(grads) if _differentiable(t) else None for t in saved]

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

        @staticmethod
        def backward(ctx, *cotangents):
            return tuple(gradients(ctx.saved_tensors, cotangents, 0))

    def call(*args):
        """As ``_autograd``'s call: ``Call`` where autograd records, else the operation."""
        return Call.apply(*args) if _recorded(args) else tuple(call_op(list(args), 0))

    return call


def function(f: ReversibleFunction, outputs: Sequence[str] | str) -> Callable:
    """A torch function of all of ``f``'s parameters returning the final values of ``outputs``
    (a tensor, or a tuple when there are several); gradients flow to every floating-point tensor
    argument, numbers become 0-d tensors (in NumPy's dtypes: a Python float is float64). It is a pair of custom operations
    (``torch.ops.revdiff.function_<name>_<k>`` and its vjp), so it works as the module's functions
    do under ``torch.compile``, ``torch.func.grad`` and ``vmap`` (which runs ``f`` as
    ``revdiff.batched`` over the mapped axis).

    The backward runs ``f`` forward on the saved inputs and then backwards (no tape)."""
    if not isinstance(f, ReversibleFunction):
        raise TypeError(f"function takes a reversible function (decorated with @revdiff.reversible), got {f!r}")
    outputs = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    if not outputs or len(set(outputs)) != len(outputs):
        raise ValueError(f"outputs must name one or more distinct parameters of {f.__qualname__} "
                         f"({', '.join(f.params)}), got {outputs!r}")
    missing = [o for o in outputs if o not in f.params]
    if missing:
        raise ValueError(f"{', '.join(map(repr, missing))} is not a parameter of {f.__qualname__} "
                         f"({', '.join(f.params)})")
    key = (f, outputs)
    if key not in _FUNCTIONS:
        _FUNCTIONS[key] = _function_call(_FunctionOps(f, outputs))
    apply = _FUNCTIONS[key]

    def call(*args):
        if len(args) != len(f.params):
            raise TypeError(f"{f.__qualname__} takes {len(f.params)} arguments ({', '.join(f.params)}), "
                            f"got {len(args)}")
        result = apply(*(_as_tensor(a, p) for a, p in zip(args, f.params)))
        return result[0] if len(result) == 1 else result

    call.__name__ = getattr(f, "__name__", "function")
    call.__doc__ = f"{f.__qualname__} as a torch function returning {', '.join(outputs)}"
    return call
