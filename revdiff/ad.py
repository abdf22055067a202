"""Differentiation by running programs backwards: ``vjp``, ``grad`` and ``check_grad``."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from revdiff.calls import copy_value, loss_index
from revdiff.execute import execute
from revdiff.function import ReversibleFunction


def vjp(f: ReversibleFunction, /, *args: Any, **kwargs: Any) -> tuple:
    """Run ``f`` forward on copies of ``args`` (keywords and defaults bound as a call binds them);
    return ``(outs, pullback)``.

    ``outs`` are the final values of all parameters. ``pullback(*cotangents)`` returns the
    cotangents of the initial values, one per parameter (None for integer and bool parameters).
    It keeps only the final state and recovers the inputs by running the program backwards.
    Complex values follow PyTorch's convention: the gradient of z = x + iy is dL/dx + i dL/dy.
    """
    if not isinstance(f, ReversibleFunction):
        raise TypeError(f"vjp differentiates reversible functions (decorated with @revdiff.reversible), got {f!r}")
    return execute(f, "vjp", f.bind(args, kwargs))


def _loss_index(f: ReversibleFunction, loss: str | int) -> int:
    if not isinstance(f, ReversibleFunction):
        raise TypeError(f"grad differentiates reversible functions (decorated with @revdiff.reversible), got {f!r}")
    return loss_index(f, loss)


def _real_loss(f: ReversibleFunction, args: tuple, k: int) -> None:
    """TypeError unless argument ``k``, the loss, is a real scalar."""
    loss_value = args[k]
    if isinstance(loss_value, (np.ndarray, bool, np.bool_, complex, np.complexfloating)) or \
            not isinstance(loss_value, (float, np.floating)):
        raise TypeError(f"the loss '{f.parameter_names[k]}' must be a real scalar parameter, a float (pass 0.0, not "
                        f"{loss_value!r}): gradients are of a real number")


def grad(f: ReversibleFunction, loss: str | int = 0) -> Callable[..., tuple]:
    """``grad(f, loss="y")(*args)``: gradients of the final value of the scalar parameter ``loss``
    with respect to the initial value of every parameter (None for integer parameters)."""
    k = _loss_index(f, loss)

    def gradient(*args: Any, **kwargs: Any) -> tuple:
        args = f.bind(args, kwargs)
        _real_loss(f, args, k)
        outs, pullback = vjp(f, *args)
        cotangents = [None] * len(outs)
        cotangents[k] = 1.0
        return pullback(*cotangents)

    gradient.__name__ = f"grad_{f.__name__}"
    return gradient


def _random_like(value: Any, rng: np.random.Generator) -> Any:
    if isinstance(value, np.ndarray):
        if np.iscomplexobj(value):
            return (rng.standard_normal(value.shape) + 1j * rng.standard_normal(value.shape)).astype(value.dtype)
        return rng.standard_normal(value.shape).astype(value.dtype)
    if isinstance(value, (complex, np.complexfloating)):
        return complex(rng.standard_normal(), rng.standard_normal())
    return float(rng.standard_normal())


def _inner(a: Sequence, b: Sequence) -> float:
    """Real inner product Re sum conj(a) b over matching differentiable values."""
    return float(sum(np.real(np.vdot(np.asarray(x), np.asarray(y))) for x, y in zip(a, b)))


def _shifted(args: tuple, direction: tuple, step: float, mask: list) -> tuple:
    return tuple(copy_value(a) + step * d if m else copy_value(a) for a, d, m in zip(args, direction, mask))


def check_grad(f: ReversibleFunction, /, *args: Any, eps: float = 1e-6, trials: int = 3,
               seed: int = 0, **kwargs: Any) -> float:
    """Worst relative error of the pullback of ``f`` against central finite differences,
    compared as inner products <u, J v> vs <J^T u, v> along random directions u and v."""
    rng = np.random.default_rng(seed)
    args = f.bind(args, kwargs)
    types = f.argument_types(args)
    mask = [t.differentiable for t in types]
    worst = 0.0
    _, pullback = vjp(f, *args)
    for _ in range(trials):
        v = tuple(_random_like(a, rng) if m else None for a, m in zip(args, mask))
        u = tuple(_random_like(a, rng) if m else None for a, m in zip(args, mask))
        minus = f(*_shifted(args, v, -eps, mask))
        plus = f(*_shifted(args, v, eps, mask))
        jv = [(np.asarray(p) - np.asarray(q)) / (2 * eps) for p, q, m in zip(plus, minus, mask) if m]
        lhs = _inner([x for x, m in zip(u, mask) if m], jv)
        g = pullback(*[x for x in u])
        rhs = _inner([x for x, m in zip(g, mask) if m], [x for x, m in zip(v, mask) if m])
        scale = max(abs(lhs), abs(rhs), 1e-300)
        worst = max(worst, abs(lhs - rhs) / scale)
    return worst
