"""revdiff inside PyTorch: QR, projection, least squares and the sphere as ``torch.autograd.Function``s
whose backward runs revdiff's reversible programs backwards, and ``function(f, outputs)`` to turn any
reversible function into a differentiable torch function.

CPU tensors reach revdiff through NumPy, CUDA tensors through CuPy (``__cuda_array_interface__``),
both without copies; on the GPU the programs run as revdiff's CUDA kernels. Other devices raise.
Importing this module imports torch; importing revdiff does not.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import torch

from revdiff import programs as P
from revdiff.ad import vjp
from revdiff.function import ReversibleFunction
from revdiff.runtime.device import cupy_module

__all__ = ["qr", "project", "lstsq", "normalize", "tangent_project", "function"]


def _numpy(t: Any, name: str) -> Any:
    """A NumPy view of a CPU tensor, a CuPy view of a CUDA tensor (scalars pass through)."""
    if not isinstance(t, torch.Tensor):
        return t
    t = t.detach().resolve_conj().resolve_neg()
    if t.layout != torch.strided:
        raise TypeError(f"'{name}' is a {t.layout} tensor; revdiff takes dense (strided) tensors: pass "
                        f"{name}.to_dense()")
    if t.dtype not in _SUPPORTED:
        raise TypeError(f"'{name}' is a {t.dtype} tensor; revdiff computes in float32, float64, complex64 and "
                        "complex128 (and integers and bools, which the high-level functions turn into float64): "
                        "convert it, e.g. with .float()")
    if t.device.type == "cuda":
        array = cupy_module().asarray(t)
        return array.item() if array.ndim == 0 else array
    if t.device.type != "cpu":
        raise NotImplementedError(f"'{name}' is a {t.device.type} tensor; revdiff runs on CPU tensors "
                                  "(through NumPy) and CUDA tensors (through CuPy)")
    array = t.numpy()
    return array[()] if array.ndim == 0 else array  # a 0-d tensor is a scalar parameter


_SUPPORTED = (torch.float32, torch.float64, torch.complex64, torch.complex128, torch.bool, torch.uint8, torch.int8,
              torch.int16, torch.int32, torch.int64)


def _tensor(a: Any, like: torch.Tensor | None = None) -> Any:
    """A tensor sharing memory with a NumPy result (scalars become 0-d tensors), in like's dtype."""
    if isinstance(a, (float, complex, np.floating, np.complexfloating)):
        a = np.asarray(a)
    if hasattr(a, "__cuda_array_interface__"):  # a CuPy result: a CUDA tensor on the same memory
        out = torch.as_tensor(a, device="cuda")
        return out.to(like.dtype) if like is not None and out.dtype != like.dtype else out
    if not isinstance(a, np.ndarray):
        return a
    out = torch.from_numpy(a if a.flags.c_contiguous else np.ascontiguousarray(a))  # keeps 0-d as 0-d
    return out.to(like.dtype) if like is not None and out.dtype != like.dtype else out


class _Pullback(torch.autograd.Function):
    """Forward: ``forward_np`` on NumPy views. Backward: ``backward_np(inputs, cotangents)``."""

    @staticmethod
    def forward(ctx, rule, names, *tensors):
        arrays = [_numpy(t, n) for t, n in zip(tensors, names)]
        outputs, backward = rule(*arrays)
        ctx.backward_np = backward
        ctx.input_tensors = [t if isinstance(t, torch.Tensor) else None for t in tensors]
        return tuple(_tensor(o) for o in outputs)

    @staticmethod
    def backward(ctx, *cotangents):
        grads = ctx.backward_np(*[None if c is None else _numpy(c, "cotangent") for c in cotangents])
        out = [None, None]
        for g, t in zip(grads, ctx.input_tensors):
            out.append(None if g is None or t is None or not t.requires_grad else _tensor(g, t))
        if torch.is_grad_enabled():  # create_graph=True: a later gradient through these must raise
            joined = [t for t in ctx.input_tensors if t is not None] + [c for c in cotangents if c is not None]
            return tuple(out[:2]) + _not_differentiable(out[2:], joined)
        return tuple(out)


_TWICE = ("revdiff.torch: the gradient of a revdiff operation is not differentiable (second derivatives "
          "are not supported yet); differentiate it once, without create_graph=True through it")


class _NotDifferentiable(torch.autograd.Function):
    """The value of a gradient, joined to the graph through everything it depends on (the inputs
    and the cotangents), whose own backward raises: a later gradient through it would otherwise
    silently leave out that dependence (PyTorch's ``once_differentiable`` joins its error to fresh
    leaves, which a gradient with respect to the inputs never reaches)."""

    @staticmethod
    def forward(ctx, gradient, *joined_to):
        return gradient.clone()

    @staticmethod
    def backward(ctx, *cotangents):
        raise RuntimeError(_TWICE)


def _not_differentiable(grads: list, joined: list) -> tuple:
    """``grads`` as a backward with ``create_graph=True`` returns them (see ``_NotDifferentiable``)."""
    return tuple(None if g is None else _NotDifferentiable.apply(g.detach(), *joined) for g in grads)


def _apply(rule: Callable, names: Sequence[str], *tensors) -> tuple:
    return _Pullback.apply(rule, tuple(names), *tensors)


def _vjp_rule(forward: Callable, backward: Callable) -> Callable:
    """A rule whose backward calls a revdiff ``*_vjp`` function on the saved inputs."""

    def rule(*arrays):
        saved = tuple(a.copy() for a in arrays)
        return forward(*arrays), lambda *cts: backward(*saved, *cts)

    return rule


def qr(A: torch.Tensor, method: str = "cgs2") -> tuple:
    """Thin Q, R of A (..., m, n) with diag(R) real positive; backward runs the QR program backwards."""
    rule = _vjp_rule(lambda a: P.qr(a, method), lambda a, gQ, gR: (P.qr_vjp(a, gQ, gR, method),))
    return _apply(rule, ("A",), A)


def project(A: torch.Tensor, y: torch.Tensor, method: str = "cgs2") -> torch.Tensor:
    """Q Q^H y, the orthogonal projection of y (..., m) onto the column space of A (..., m, n)."""
    rule = _vjp_rule(lambda a, b: (P.project(a, b, method),), lambda a, b, gz: P.project_vjp(a, b, gz, method))
    return _apply(rule, ("A", "y"), A, y)[0]


def lstsq(A: torch.Tensor, y: torch.Tensor, method: str = "cgs2") -> torch.Tensor:
    """argmin_x |A x - y| for A (..., m, n) of full column rank, through the QR program."""
    rule = _vjp_rule(lambda a, b: (P.lstsq(a, b, method),), lambda a, b, gx: P.lstsq_vjp(a, b, gx, method))
    return _apply(rule, ("A", "y"), A, y)[0]


def normalize(x: torch.Tensor) -> torch.Tensor:
    """x / |x| along the last axis."""
    rule = _vjp_rule(lambda a: (P.normalize(a),), lambda a, gy: (P.normalize_vjp(a, gy),))
    return _apply(rule, ("x",), x)[0]


def tangent_project(g: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """g - (z_hat^H g) z_hat along the last axis, z_hat = z / |z|."""
    rule = _vjp_rule(lambda a, b: (P.tangent_project(a, b),), lambda a, b, gout: P.tangent_project_vjp(a, b, gout))
    return _apply(rule, ("g", "z"), g, z)[0]


def function(f: ReversibleFunction, outputs: Sequence[str]) -> Callable:
    """A torch function of all of ``f``'s parameters returning the final values of ``outputs``
    (a tensor, or a tuple when there are several); gradients flow to every tensor argument.

    The backward keeps only the final state and runs ``f`` backwards from it (no tape)."""
    outputs = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    missing = [o for o in outputs if o not in f.params]
    if missing:
        raise ValueError(f"{', '.join(map(repr, missing))} is not a parameter of {f.__qualname__} "
                         f"({', '.join(f.params)})")
    picked = [f.params.index(o) for o in outputs]

    def rule(*arrays):
        arrays = [a.copy() if isinstance(a, np.ndarray) else a for a in arrays]
        finals, pullback = vjp(f, *arrays)

        def backward(*cts):
            full = [None] * len(f.params)
            for k, c in zip(picked, cts):
                full[k] = c
            return pullback(*full)

        return [finals[k] for k in picked], backward

    def call(*args):
        if len(args) != len(f.params):
            raise TypeError(f"{f.__qualname__} takes {len(f.params)} arguments ({', '.join(f.params)}), "
                            f"got {len(args)}")
        result = _apply(rule, f.params, *args)
        return result[0] if len(result) == 1 else result

    call.__name__ = getattr(f, "__name__", "function")
    call.__doc__ = f"{f.__qualname__} as a torch function returning {', '.join(outputs)}"
    return call
