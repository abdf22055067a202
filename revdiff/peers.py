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
