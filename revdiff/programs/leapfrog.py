"""Leapfrog (velocity Verlet) integrators written in the reversible language, whose gradients with
respect to the initial state need no tape: the adjoint runs the simulation backwards.

One step is kick (v += dt/2 a(x)), drift (x += dt v), kick. Each update reads only the other half
of the state, so it is an instruction whose inverse subtracts the very value it added: the
acceleration is recomputed from the same x, in the same order, into a fresh ancilla. What does not
undo exactly is floating-point addition itself: (x + c) - c can differ from x in the last bit, so a
long round trip drifts (measured by ``revdiff.roundtrip_error`` and ``benchmarks/memory.py``).
The fixed-point variant holds x and v as int64 multiples of 1/scale and adds rounded integer
increments, so its round trip is bit-exact for any number of steps.
"""
import numpy as np

from revdiff.function import reversible
from revdiff.language import routine, zero, zeros


@reversible
def gravity(acc, x, m, G, soft, scale):
    """acc[i] += sum_j G m_j (x_j - x_i) / (|x_j - x_i|^2 + soft^2)^(3/2), positions x / scale."""
    N, d = x.shape
    for i in range(N):
        for j in range(N):
            if i != j:
                r2 = zero(float)
                with routine:
                    r2 += soft * soft
                    for k in range(d):
                        r2 += ((x[j, k] - x[i, k]) / scale) ** 2
                for k in range(d):
                    acc[i, k] += G * m[j] * ((x[j, k] - x[i, k]) / scale) / (r2 * np.sqrt(r2))
                ~routine
                del r2


@reversible
def nbody_kick(v, x, m, G, soft, h):
    """v += h a(x)."""
    N, d = x.shape
    acc = zeros((N, d), float)
    with routine:
        gravity(acc, x, m, G, soft, 1.0)
    v[:, :] += h * acc
    ~routine
    del acc


@reversible
def nbody_leapfrog(x, v, m, G, soft, dt, steps):
    """Advance N bodies (x, v: (N, d); m: (N,)) under softened gravity by `steps` leapfrog steps."""
    h = 0.5 * dt
    for s in range(steps):
        nbody_kick(v, x, m, G, soft, h)
        x[:, :] += dt * v
        nbody_kick(v, x, m, G, soft, h)


@reversible
def nbody_energy(E, x, v, m, G, soft):
    """E += kinetic + softened potential energy."""
    N, d = x.shape
    for i in range(N):
        for k in range(d):
            E += 0.5 * m[i] * v[i, k] * v[i, k]
    for i in range(N):
        for j in range(i + 1, N):
            r2 = zero(float)
            with routine:
                r2 += soft * soft
                for k in range(d):
                    r2 += (x[j, k] - x[i, k]) ** 2
            E -= G * m[i] * m[j] / np.sqrt(r2)
            ~routine
            del r2


@reversible
def nbody_final_energy(E, x, v, m, G, soft, dt, steps):
    """E += the energy after `steps` leapfrog steps; its gradient is d E_final / d (x0, v0, m, ...)."""
    nbody_leapfrog(x, v, m, G, soft, dt, steps)
    nbody_energy(E, x, v, m, G, soft)


@reversible
def nbody_kick_fixed(v, x, m, G, soft, h, scale):
    """v += round(h a(x) scale) for x, v held as int64 multiples of 1/scale."""
    N, d = x.shape
    acc = zeros((N, d), float)
    with routine:
        gravity(acc, x, m, G, soft, scale)
    v[:, :] += round(h * acc * scale)
    ~routine
    del acc


@reversible
def nbody_leapfrog_fixed(x, v, m, G, soft, dt, steps, scale):
    """nbody_leapfrog on int64 x, v (units 1/scale): every update adds an integer, so it is exact."""
    h = 0.5 * dt
    for s in range(steps):
        nbody_kick_fixed(v, x, m, G, soft, h, scale)
        x[:, :] += round(dt * v)
        nbody_kick_fixed(v, x, m, G, soft, h, scale)


@reversible
def chain_leapfrog(x, v, k_spring, mass, dt, steps):
    """A harmonic chain of len(x) unit masses between fixed walls: a_i = k/m (x_{i-1} - 2 x_i + x_{i+1})."""
    n = len(x)
    h = 0.5 * dt * k_spring / mass
    for s in range(steps):
        for i in range(n):
            v[i] += h * ((x[i - 1] if i > 0 else 0.0) - 2.0 * x[i] + (x[i + 1] if i < n - 1 else 0.0))
        for i in range(n):
            x[i] += dt * v[i]
        for i in range(n):
            v[i] += h * ((x[i - 1] if i > 0 else 0.0) - 2.0 * x[i] + (x[i + 1] if i < n - 1 else 0.0))


@reversible
def chain_energy(E, x, v, k_spring, mass):
    """E += sum m v^2 / 2 + sum k (x_{i+1} - x_i)^2 / 2, walls at 0."""
    n = len(x)
    for i in range(n):
        E += 0.5 * mass * v[i] * v[i]
    for i in range(n + 1):
        E += 0.5 * k_spring * ((x[i] if i < n else 0.0) - (x[i - 1] if i > 0 else 0.0)) ** 2


def star_and_two_planets(dtype=np.float64) -> tuple:
    """Initial (x, v, m) of a star and two planets on near-circular orbits of radius 1 and 1.6
    (G = 1, periods about 6 and 13), with zero total momentum: a system that is not chaotic."""
    m = np.array([1.0, 1e-3, 2e-3])
    x, v = np.zeros((3, 3)), np.zeros((3, 3))
    for k, (r, phase) in enumerate([(1.0, 0.0), (1.6, 2.0)], start=1):
        speed = np.sqrt(m[0] / r)
        x[k] = [r * np.cos(phase), r * np.sin(phase), 0.01 * k]
        v[k] = [-speed * np.sin(phase), speed * np.cos(phase), 0.0]
    v[0] = -(m[1:, None] * v[1:]).sum(0) / m[0]
    return x.astype(dtype), v.astype(dtype), m.astype(dtype)
