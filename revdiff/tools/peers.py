"""Gradients of the same losses through PyTorch and JAX autograd (their closed-form QR adjoints),
for ``revdiff compare`` and the benchmarks. Each maker returns None when the framework is missing.

Losses, for batched NumPy inputs:
  projection: Re<gz, Q Q^H y>            -> gradient of A
  qr:         Re<gQ, Q> + Re<gR, R>       -> gradient of A, with diag(R) made real positive (as revdiff)
Gradients follow PyTorch's convention for complex inputs (JAX's are conjugated to match).
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np


def torch_module():
    try:
        import torch
    except ImportError:
        return None
    return torch


def jax_modules():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    return jax, jnp


def _torch_positive_qr(torch, A):
    Q, R = torch.linalg.qr(A)
    d = torch.diagonal(R, dim1=-2, dim2=-1)
    phase = d / d.abs()
    return Q * phase.unsqueeze(-2), R * phase.conj().unsqueeze(-1)


def torch_projection() -> Optional[Callable]:
    torch = torch_module()
    if torch is None:
        return None

    def grad(A, y, gz):
        At = torch.from_numpy(np.ascontiguousarray(A)).requires_grad_(True)
        Q, _ = torch.linalg.qr(At)
        z = Q @ (Q.mH @ torch.from_numpy(y).unsqueeze(-1))
        loss = torch.real(torch.sum(torch.from_numpy(gz).unsqueeze(-1).conj() * z))
        loss.backward()
        return At.grad.numpy()

    return grad


def torch_qr() -> Optional[Callable]:
    torch = torch_module()
    if torch is None:
        return None

    def grad(A, gQ, gR):
        At = torch.from_numpy(np.ascontiguousarray(A)).requires_grad_(True)
        Q, R = _torch_positive_qr(torch, At)
        loss = torch.real(torch.sum(torch.from_numpy(gQ).conj() * Q) + torch.sum(torch.from_numpy(gR).conj() * R))
        loss.backward()
        return At.grad.numpy()

    return grad


def _jax_grad(loss) -> Callable:
    jax, _ = jax_modules()
    g = jax.jit(jax.grad(loss))

    def grad(A, *rest):
        out = np.asarray(g(A, *rest))
        return out.conj() if np.iscomplexobj(A) else out

    return grad


def jax_projection() -> Optional[Callable]:
    mods = jax_modules()
    if mods is None:
        return None
    _, jnp = mods

    def loss(A, y, gz):
        Q, _ = jnp.linalg.qr(A)
        z = Q @ (jnp.conj(jnp.swapaxes(Q, -1, -2)) @ y[..., None])
        return jnp.real(jnp.sum(jnp.conj(gz[..., None]) * z))

    return _jax_grad(loss)


def jax_qr() -> Optional[Callable]:
    mods = jax_modules()
    if mods is None:
        return None
    _, jnp = mods

    def loss(A, gQ, gR):
        Q, R = jnp.linalg.qr(A)
        d = jnp.diagonal(R, axis1=-2, axis2=-1)
        phase = d / jnp.abs(d)
        Q, R = Q * phase[..., None, :], R * jnp.conj(phase)[..., :, None]
        return jnp.real(jnp.sum(jnp.conj(gQ) * Q) + jnp.sum(jnp.conj(gR) * R))

    return _jax_grad(loss)


# ----------------------------------------------------------------------------- N-body leapfrog
# The same softened-gravity leapfrog as revdiff.programs.leapfrog, and the gradient of its final
# energy with respect to the initial positions and velocities, taped by the framework.


def _nbody_energy(lib, x, v, m, G, soft):
    d = x[None, :, :] - x[:, None, :]
    r = lib.sqrt((d ** 2).sum(-1) + soft ** 2)
    pairs = lib.triu(lib.ones_like(r), 1)
    return 0.5 * (m[:, None] * v ** 2).sum() - G * (pairs * m[:, None] * m[None, :] / r).sum()


def _nbody_acceleration(x, m, G, soft):
    d = x[None, :, :] - x[:, None, :]  # d[i, j] = x_j - x_i; the i == j term is 0
    r2 = (d ** 2).sum(-1) + soft ** 2
    return G * (d * (m[None, :] / (r2 * r2 ** 0.5))[:, :, None]).sum(1)


def torch_nbody_gradient() -> Optional[Callable]:
    """(x, v, m, G, soft, dt, steps) -> (dE/dx0, dE/dv0), through a Python loop of torch ops."""
    torch = torch_module()
    if torch is None:
        return None

    def grad(x, v, m, G, soft, dt, steps):
        x0, v0, energy = _torch_final_energy(torch, x, v, m, G, soft, dt, steps)
        energy.backward()
        return x0.grad.numpy(), v0.grad.numpy()

    return grad


def _torch_final_energy(torch, x, v, m, G, soft, dt, steps) -> tuple:
    """(x0, v0, E): the initial state as leaf tensors and the final energy, taped."""
    x0 = torch.tensor(x, requires_grad=True)
    v0 = torch.tensor(v, requires_grad=True)
    mt = torch.tensor(m, dtype=x0.dtype)
    xs, vs = x0, v0
    for _ in range(steps):
        vs = vs + 0.5 * dt * _nbody_acceleration(xs, mt, G, soft)
        xs = xs + dt * vs
        vs = vs + 0.5 * dt * _nbody_acceleration(xs, mt, G, soft)
    return x0, v0, _nbody_energy(torch, xs, vs, mt, G, soft)


def torch_nbody_hvp() -> Optional[Callable]:
    """(x, v, m, G, soft, dt, steps, dx, dv) -> the Hessian of the final energy times (dx, dv), by
    double backward through the same loop (the first backward's graph is kept for the second)."""
    torch = torch_module()
    if torch is None:
        return None

    def hvp(x, v, m, G, soft, dt, steps, dx, dv):
        x0, v0, energy = _torch_final_energy(torch, x, v, m, G, soft, dt, steps)
        gx, gv = torch.autograd.grad(energy, (x0, v0), create_graph=True)
        hx, hv = torch.autograd.grad((gx * torch.tensor(dx)).sum() + (gv * torch.tensor(dv)).sum(), (x0, v0))
        return hx.numpy(), hv.numpy()

    return hvp


def jax_nbody_gradient(checkpoint: bool = False) -> Optional[Callable]:
    """The same through ``jax.lax.scan`` (optionally with ``jax.checkpoint`` on the step), jitted."""
    mods = jax_modules()
    if mods is None:
        return None
    jax, jnp = mods

    def final_energy(x, v, m, G, soft, dt, steps):
        def step(state, _):
            x, v = state
            v = v + 0.5 * dt * _nbody_acceleration(x, m, G, soft)
            x = x + dt * v
            v = v + 0.5 * dt * _nbody_acceleration(x, m, G, soft)
            return (x, v), None
        (x, v), _ = jax.lax.scan(jax.checkpoint(step) if checkpoint else step, (x, v), None, length=steps)
        return _nbody_energy(jnp, x, v, m, G, soft)

    g = jax.jit(jax.grad(final_energy, (0, 1)), static_argnums=(6,))

    def arguments(x, v, m, G, soft, dt, steps):
        return jnp.asarray(x), jnp.asarray(v), jnp.asarray(m, dtype=x.dtype), G, soft, dt, steps

    def grad(*args):
        gx, gv = g(*arguments(*args))
        return np.asarray(gx), np.asarray(gv)

    def working_memory(*args) -> int:
        """Bytes XLA allocates for the compiled gradient's temporaries (its tape of residuals)."""
        return g.lower(*arguments(*args)).compile().memory_analysis().temp_size_in_bytes

    grad.working_memory = working_memory
    return grad
