"""revdiff inside PyTorch: QR, projection, least squares and the sphere as PyTorch custom operations
(``torch.ops.revdiff.qr``, ``…project``, …) whose gradients run revdiff's reversible programs
backwards, and ``function(f, outputs)`` to turn any reversible function into one.

Each operation is a ``torch.library.custom_op`` with a fake implementation (shapes and dtypes, for
``torch.compile`` and meta tensors), a vmap rule (the programs batch over leading axes) and an
autograd registration; its vjp is an operation too. The functions below call them through a
``torch.autograd.Function`` with ``setup_context``, because PyTorch's generated autograd for custom
operations does not compose with ``torch.func`` (pytorch/pytorch#168393): so ``torch.compile``
(``fullgraph=True``, then ``.backward()``), ``torch.func.grad``, ``vmap`` and ``vmap`` of ``grad``
work; ``torch.compile`` over ``torch.func.grad`` still fails inside PyTorch.

Every operation and ``function`` also has forward mode (``torch.func.jvp``, dual tensors: their
tangent programs) and a second derivative (``create_graph=True``, ``gradgradcheck``,
``torch.func.hessian``): the vjp's own backward runs the tangent of the fused vjp program, which
gives the Hessian-vector product and the jvp at once, still without a tape. A third derivative
raises by name.

CPU tensors reach revdiff through NumPy, CUDA tensors through CuPy (``__cuda_array_interface__``),
both without copies; on the GPU the programs run as revdiff's CUDA kernels, on the tensors' device
and PyTorch's current stream there. Importing this module
imports torch; importing revdiff does not.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from revdiff import programs as P
from revdiff.programs.methods import q_columns
from revdiff.torch.operations import (_autograd, _batch_front, _checked, _computed, _gradient_dtype, _like, _numpy,
                                      _operation, _tensor)
from revdiff.torch.reversible import function

__all__ = ["qr", "project", "lstsq", "normalize", "tangent_project", "function"]


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


def _qr_pair(pair, mode: str, like: torch.Tensor) -> tuple:
    """(Q-like, R-like) tensors of a (Q, R) pair of arrays, or of R alone for mode "r" (an empty Q)."""
    first, second = (np.zeros(0, pair.dtype), pair) if mode == "r" else pair
    return _tensor(first, _computed(like), like.device), _tensor(second, _computed(like), like.device)


def _qr_jvp_impl(A, dA, method, rank_tol, mode="reduced"):
    return _qr_pair(P.qr_jvp(_numpy(A, "A"), _numpy(dA, "dA"), method, rank_tol, mode)[1], mode, A)


def _qr_jvp_vmap(info, in_dims, A, dA, method, rank_tol, mode="reduced"):
    out = torch.ops.revdiff.qr_jvp(_batch_front(info, A, in_dims[0]), _batch_front(info, dA, in_dims[1]), method,
                                   rank_tol, mode)
    return out, (None if mode == "r" else 0, 0)


def _qr_vjp_jvp_impl(A, gQ, gR, dA, method, rank_tol, mode="reduced"):
    _, dgA, tangents = P.qr_vjp_jvp(_numpy(A, "A"), None if mode == "r" else _numpy(gQ, "gQ"), _numpy(gR, "gR"),
                                    _numpy(dA, "dA"), method, rank_tol, mode)
    return [_tensor(dgA, _gradient_dtype(A, _computed(A)), A.device), *_qr_pair(tangents, mode, A)]


def _qr_vjp_jvp_fake(A, gQ, gR, dA, method, rank_tol, mode="reduced"):
    return [_like(A, A.shape, _gradient_dtype(A, _computed(A))), *_qr_fake(A, method, rank_tol, mode)]


def _qr_vjp_jvp_vmap(info, in_dims, A, gQ, gR, dA, method, rank_tol, mode="reduced"):
    front = [_batch_front(info, a, d) for a, d in zip((A, gR, dA), (in_dims[0], in_dims[2], in_dims[3]))]
    gQ = gQ if mode == "r" else _batch_front(info, gQ, in_dims[1])
    out = torch.ops.revdiff.qr_vjp_jvp(front[0], gQ, front[1], front[2], method, rank_tol, mode)
    return out, [0, None if mode == "r" else 0, 0]


_QR = _operation("qr", '(Tensor A, str method, float? rank_tol, str mode="reduced") -> (Tensor, Tensor)',
                 _qr_impl, _qr_fake, _qr_vmap)
_QR_VJP = _operation("qr_vjp", '(Tensor A, Tensor gQ, Tensor gR, str method, float? rank_tol, str mode="reduced") '
                     "-> Tensor[]", _qr_vjp_impl, _qr_vjp_fake, _qr_vjp_vmap)
_QR_JVP = _operation("qr_jvp", '(Tensor A, Tensor dA, str method, float? rank_tol, str mode="reduced") '
                     "-> (Tensor, Tensor)", _qr_jvp_impl,
                     lambda A, dA, method, rank_tol, mode="reduced": _qr_fake(A, method, rank_tol, mode), _qr_jvp_vmap)
_QR_VJP_JVP = _operation("qr_vjp_jvp", '(Tensor A, Tensor gQ, Tensor gR, Tensor dA, str method, float? rank_tol, '
                         'str mode="reduced") -> Tensor[]', _qr_vjp_jvp_impl, _qr_vjp_jvp_fake, _qr_vjp_jvp_vmap)


def _linear_ops(name: str, forward: Callable, backward: Callable, out_shape: Callable, cotangent: str,
                names: str, options: str, tangent: Callable, backward_tangent: Callable) -> Callable:
    """The operation ``name`` of two tensors with its vjp, and its forward mode and second derivative
    from the programs' ``tangent`` (a ``*_jvp``) and ``backward_tangent`` (a ``*_vjp_jvp``)."""
    a, b = names.split(", ")
    impl, fake = _pair_impl(forward, out_shape, (a, b))
    op = _operation(name, f"(Tensor {a}, Tensor {b}{options}) -> Tensor", impl, fake)
    vjp_impl, vjp_fake = _pair_vjp_impl(backward, (a, b), cotangent)
    vjp_op = _operation(f"{name}_vjp", f"(Tensor {a}, Tensor {b}, Tensor {cotangent}{options}) -> Tensor[]",
                        vjp_impl, vjp_fake)

    def jvp_impl(x, z, dx, dz, *opts):
        return _tensor(tangent(*(_numpy(t, n) for t, n in ((x, a), (z, b), (dx, "d" + a), (dz, "d" + b))), *opts)[1],
                       _computed(x, z), x.device)

    def vjp_jvp_impl(x, z, g, dx, dz, *opts):
        _, (dgx, dgz), dout = backward_tangent(*(_numpy(t, n) for t, n in ((x, a), (z, b), (g, cotangent),
                                                                             (dx, "d" + a), (dz, "d" + b))), *opts)
        c = _computed(x, z)
        return [_tensor(dgx, _gradient_dtype(x, c), x.device), _tensor(dgz, _gradient_dtype(z, c), z.device),
                _tensor(dout, c, x.device)]

    def vjp_jvp_fake(x, z, g, dx, dz, *opts):
        return [*vjp_fake(x, z, g, *opts), fake(x, z, *opts)]

    jvp_op = _operation(f"{name}_jvp", f"(Tensor {a}, Tensor {b}, Tensor d{a}, Tensor d{b}{options}) -> Tensor",
                        jvp_impl, lambda x, z, dx, dz, *opts: fake(x, z, *opts))
    vjp_jvp_op = _operation(f"{name}_vjp_jvp", f"(Tensor {a}, Tensor {b}, Tensor {cotangent}, Tensor d{a}, "
                            f"Tensor d{b}{options}) -> Tensor[]", vjp_jvp_impl, vjp_jvp_fake)
    return _autograd(op, vjp_op, 2, jvp_op, vjp_jvp_op)


_METHOD = ', str method, float? rank_tol, str rank_deficient="raise"'
_qr_call = _autograd(_QR, _QR_VJP, 1, _QR_JVP, _QR_VJP_JVP)


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
                            "A, y", _METHOD, P.project_jvp, P.project_vjp_jvp)
_lstsq_call = _linear_ops("lstsq", _value(P.lstsq), P.lstsq_vjp, _lstsq_shape, "gx", "A, y", _METHOD,
                          P.lstsq_jvp, P.lstsq_vjp_jvp)
_tangent_call = _linear_ops("tangent_project", P.tangent_project, P.tangent_project_vjp, lambda g, z: g.shape,
                            "gout", "g, z", "", P.tangent_project_jvp, P.tangent_project_vjp_jvp)
_RANK = _operation("rank", "(Tensor A, float? rank_tol) -> Tensor",
                   lambda A, rank_tol: _tensor(P.rank(_numpy(A, "A"), rank_tol), torch.int64, A.device),
                   lambda A, rank_tol: A.new_empty(tuple(A.shape[:-2]), dtype=torch.int64))


def _with_rank(value: torch.Tensor, A: torch.Tensor, y: torch.Tensor, rank_tol, rank_deficient: str):
    """(value, rank) for rank_deficient="truncate", as ``revdiff.programs``; else the value. The
    rank is that of A in the dtype the value was computed in (A's and y's promoted), as truncated."""
    return (value, _RANK(A.detach().to(_computed(A, y)), rank_tol)) if rank_deficient == "truncate" else value


def _normalize_impl(x):
    return _tensor(P.normalize(_numpy(x, "x")), _computed(x), x.device)


def _normalize_vjp_impl(x, gy):
    return (_tensor(P.normalize_vjp(_numpy(x, "x"), _numpy(gy, "gy")), _gradient_dtype(x, _computed(x)), x.device),)


def _normalize_jvp_impl(x, dx):
    return _tensor(P.normalize_jvp(_numpy(x, "x"), _numpy(dx, "dx"))[1], _computed(x), x.device)


def _normalize_vjp_jvp_impl(x, gy, dx):
    """[the cotangent of x, that of gy]: the Hessian of <y, gy> times dx, and dy."""
    _, dgx, dy = P.normalize_vjp_jvp(_numpy(x, "x"), _numpy(gy, "gy"), _numpy(dx, "dx"))
    return [_tensor(dgx, _gradient_dtype(x, _computed(x)), x.device), _tensor(dy, _computed(x), x.device)]


def _normalize_fake(x, *_):
    return _like(x, x.shape, _computed(x))


_NORMALIZE = _operation("normalize", "(Tensor x) -> Tensor", _normalize_impl, _normalize_fake)
_NORMALIZE_VJP = _operation("normalize_vjp", "(Tensor x, Tensor gy) -> Tensor[]", _normalize_vjp_impl,
                            lambda x, gy: (_like(x, x.shape, _gradient_dtype(x, _computed(x))),))
_NORMALIZE_JVP = _operation("normalize_jvp", "(Tensor x, Tensor dx) -> Tensor", _normalize_jvp_impl, _normalize_fake)
_NORMALIZE_VJP_JVP = _operation("normalize_vjp_jvp", "(Tensor x, Tensor gy, Tensor dx) -> Tensor[]",
                                _normalize_vjp_jvp_impl,
                                lambda x, gy, dx: [_like(x, x.shape, _gradient_dtype(x, _computed(x))),
                                                   _normalize_fake(x)])
_normalize_call = _autograd(_NORMALIZE, _NORMALIZE_VJP, 1, _NORMALIZE_JVP, _NORMALIZE_VJP_JVP)


# ----------------------------------------------------------------------------- the public functions

def qr(A: torch.Tensor, method: str = "auto", rank_tol: float | None = None, mode: str = "reduced") -> tuple:
    """Q, R of A (..., m, n) with diag(R) real nonnegative (``torch.ops.revdiff.qr``); the gradient
    runs the QR program backwards. ``mode`` as in ``torch.linalg.qr``: "reduced", "complete" (Q
    m x m; for a tall A with the default "auto", ``householder`` or ``givens``) or "r" (an empty Q
    and R, and, unlike torch, a gradient). ``method`` and ``rank_tol`` as in ``revdiff.programs.qr``."""
    _checked("A", A)
    return _qr_call(A, method, rank_tol, mode)


def project(A: torch.Tensor, y: torch.Tensor, method: str = "auto", rank_tol: float | None = None,
            rank_deficient: str = "raise"):
    """Q Q^H y, the orthogonal projection of y (..., m) onto the column space of A (..., m, n).
    ``rank_deficient="truncate"``: onto the numerical column space, returning (z, rank), as
    ``revdiff.programs.project`` (the rank is its own operation, ``torch.ops.revdiff.rank``)."""
    _checked("A y", A, y)
    return _with_rank(_project_call(A, y, method, rank_tol, rank_deficient), A, y, rank_tol, rank_deficient)


def lstsq(A: torch.Tensor, y: torch.Tensor, method: str = "auto", rank_tol: float | None = None,
          rank_deficient: str = "raise"):
    """argmin_x |A x - y| for A (..., m, n) of full column rank, through the QR program;
    ``rank_deficient="truncate"``: the basic solution and the rank, as ``revdiff.programs.lstsq``."""
    _checked("A y", A, y)
    return _with_rank(_lstsq_call(A, y, method, rank_tol, rank_deficient), A, y, rank_tol, rank_deficient)


def normalize(x: torch.Tensor) -> torch.Tensor:
    """x / |x| along the last axis."""
    _checked("x", x)
    return _normalize_call(x)


def tangent_project(g: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """g - (z_hat^H g) z_hat along the last axis, z_hat = z / |z|."""
    _checked("g z", g, z)
    return _tangent_call(g, z)
