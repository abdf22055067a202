"""Forward mode and second derivatives: ``jvp``, ``hvp`` and ``hessian`` of reversible functions.

``jvp`` runs the tangent of the forward program (``passes/tangent.py``); ``hvp`` the tangent of the
fused vjp program, forward over reverse: no tape, so its memory does not grow with the number of
executed instructions. Complex values follow the gradients' convention (PyTorch's, README
"Differentiation"): a tangent is a complex direction dz = dx + i dy, and ``hvp`` is the derivative of the
gradient dL/dx + i dL/dy along it, a real-linear map of dz. On GPU arrays each call runs as a batch of one through the batched CUDA
kernels (``execute.py``); ``hessian`` launches one kernel per column.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from revdiff.ad import _loss_index, _real_loss
from revdiff.calls import check_count, zero_like
from revdiff.execute import execute
from revdiff.function import ReversibleFunction
from revdiff.runtime.device import any_on_device, cupy_module


def _function(f: Any, what: str) -> ReversibleFunction:
    if not isinstance(f, ReversibleFunction):
        raise TypeError(f"{what} differentiates reversible functions (decorated with @revdiff.reversible), got {f!r}")
    return f


def _arguments(f: ReversibleFunction, primals: Sequence, what: str) -> tuple:
    if not isinstance(primals, (tuple, list)):
        raise TypeError(f"{what}: primals must be a tuple of the arguments of {f.__qualname__}, "
                        f"got {type(primals).__name__}")
    return f.bind(tuple(primals))


def jvp(f: ReversibleFunction, primals: Sequence, tangents: Sequence) -> tuple:
    """``(outs, out_tangents)``: the final values of all parameters of ``f`` run on ``primals`` (as
    ``f(*primals)`` returns them, to rounding: the tangent program runs loops where ``f`` may call
    BLAS) and the directional derivatives of those final values along
    ``tangents`` (one per parameter: an array or number shaped like it, or None for zero; None for
    integer and bool parameters, whose entries of ``out_tangents`` are None too), in one run of the
    tangent program (``f.source("jvp")``). The shape of ``jax.jvp``."""
    f = _function(f, "jvp")
    return execute(f, "jvp", _arguments(f, primals, "jvp"), tangents=tangents)


def vjp_jvp(f: ReversibleFunction, args: Sequence, cotangents: Sequence, tangents: Sequence) -> tuple:
    """``(outs, grads, out_tangents, grad_tangents)``: ``vjp(f, *args)`` pulled back from
    ``cotangents`` (one per parameter, None: zero), and the derivatives along ``tangents`` (the
    cotangents held fixed) of the final values and of the gradients: with a loss's cotangent, its
    Hessian times the tangents. One run of the tangent of the fused vjp (``f.source("hvp")``)."""
    f = _function(f, "vjp_jvp")
    args = _arguments(f, args, "vjp_jvp")
    check_count(f, "vjp_jvp", cotangents)
    return execute(f, "vjp_jvp", args, cotangents, tangents)


def hvp(f: ReversibleFunction, loss: str | int, primals: Sequence, v: Sequence) -> tuple:
    """The Hessian of the final value of the real scalar parameter ``loss`` with respect to the
    initial values of all parameters, times ``v`` (one direction per parameter, None for zero or for
    an integer parameter): one entry per parameter, None for integer and bool ones. One run of the
    tangent of the fused vjp program (``f.source("hvp")``)."""
    f = _function(f, "hvp")
    k = _loss_index(f, loss)
    args = _arguments(f, primals, "hvp")
    _real_loss(f, args, k)
    seeds = [type(args[k])(1) if j == k else None for j in range(len(args))]
    return vjp_jvp(f, args, seeds, v)[3]


def hessian(f: ReversibleFunction, loss: str | int, *args: Any) -> tuple:
    """The Hessian of the final value of the real scalar parameter ``loss`` with respect to the
    initial values of the float parameters, as ``H[i][j]`` of shape ``shape_i + shape_j`` (None
    where parameter i or j is an integer), one ``hvp`` per input entry: for small inputs. Complex
    parameters are refused: the Hessian of a real loss of z is real-linear in dz, not a complex matrix
    (use ``hvp``)."""
    f = _function(f, "hessian")
    if len(args) == 1 and isinstance(args[0], (tuple, list)) and len(f.params) > 1:
        raise TypeError(f"hessian takes the arguments of {f.__qualname__} spread, hessian(f, loss, *args) "
                        "(jvp and hvp take a tuple of primals), got one tuple")
    args = f.bind(args)
    types = f.argument_types(args)
    for name, t in zip(f.parameter_names, types):
        if t.kind == "complex":
            raise TypeError(f"hessian: '{name}' is complex; the Hessian of a real loss of a complex variable "
                            "is real-linear, not a complex matrix: use revdiff.hvp with directions")
    xp = cupy_module() if any_on_device(args) else np  # on the GPU: one batched kernel per column
    shapes = [tuple(np.shape(a)) if t.differentiable else None for a, t in zip(args, types)]
    columns: list = [[] for _ in args]  # per input i, the hvps of its unit directions
    for i, shape in enumerate(shapes):
        if shape is None:
            continue
        for flat in range(int(np.prod(shape, dtype=np.int64))):
            direction = [(xp.zeros(s, a.dtype) if s else zero_like(a)) if s is not None else None
                         for a, s in zip(args, shapes)]
            if shape:
                direction[i].reshape(-1)[flat] = 1
            else:
                direction[i] = type(args[i])(1)
            columns[i].append(hvp(f, loss, args, direction))
    rows = []
    for j, sj in enumerate(shapes):
        row = []
        for i, si in enumerate(shapes):
            if sj is None or si is None:
                row.append(None)
                continue
            # H[j][i][a, b] = d^2 L / dx_j[a] dx_i[b] = (hvp along e_i[b])[j][a]
            block = xp.stack([xp.asarray(c[j]) for c in columns[i]], axis=-1) if columns[i] else \
                xp.zeros(sj + (0,), types[j].dtype)
            row.append(block.reshape(sj + si))
        rows.append(tuple(row))
    return tuple(rows)
