"""Time to the first call, each in a fresh process with an empty cache, in CPU and wall seconds (the
import excluded, and given apart): the six high-level functions on one 32x16 float64 matrix, a batch
of 512 projection gradients (SIMD lanes), a batch of 3 block-CGS2 gradients of 80x70, and
``revdiff compare`` with its defaults (revdiff's default method: ``householder`` for the
projections); beside them, in the same run, JAX's first ``jit(vmap(grad(...)))`` of a CGS2
projection loss written with ``lax.fori_loop``, on one matrix and on the batch of 512. Then the same
revdiff calls in a second fresh process that finds the cache the first one wrote.

    python benchmarks/first_calls.py [--only NAME,...] [--skip-jax]

The processes import the installed revdiff: to time another checkout, run it with
``PYTHONPATH=<that checkout>`` (as ``ab.py`` does for its trees).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REVDIFF = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import numpy as np
from revdiff import programs as P
t1, c1 = time.perf_counter(), time.process_time()
name = sys.argv[1]
rng = np.random.default_rng(0)
def batch(b, m, n):
    return rng.standard_normal((b, m, n)), rng.standard_normal((b, m)), rng.standard_normal((b, m))
A, y, gz = batch(1, 32, 16)
A, y, gz = A[0], y[0], gz[0]
gQ, gR, gx = rng.standard_normal((32, 16)), np.triu(rng.standard_normal((16, 16))), rng.standard_normal(16)
calls = {
    "qr": lambda: P.qr(A),
    "qr_vjp": lambda: P.qr_vjp(A, gQ, gR),
    "project": lambda: P.project(A, y),
    "project_vjp": lambda: P.project_vjp(A, y, gz),
    "lstsq": lambda: P.lstsq(A, y),
    "lstsq_vjp": lambda: P.lstsq_vjp(A, y, gx),
    "project_vjp 512 lanes": lambda: P.project_vjp(*batch(512, 32, 16)),
    "bcgs2 project_vjp 3x80x70": lambda: P.project_vjp(*batch(3, 80, 70), method="bcgs2"),
    "project_vjp 256x128": lambda: P.project_vjp(*batch(1, 256, 128)),
}
calls[name]()
t2, c2 = time.perf_counter(), time.process_time()
print("RESULT " + json.dumps({"import": [t1 - t0, c1 - c0], "call": [t2 - t1, c2 - c1]}))
"""

JAX = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from jax import lax
t1, c1 = time.perf_counter(), time.process_time()
batch = int(sys.argv[1])

def cgs2(A):
    m, n = A.shape
    def column(k, Q):
        v = A[:, k]
        earlier = jnp.arange(n) < k
        for _ in range(2):  # classical Gram-Schmidt, twice
            v = v - Q @ jnp.where(earlier, Q.T @ v, 0.0)
        return Q.at[:, k].set(v / jnp.linalg.norm(v))
    return lax.fori_loop(0, n, column, jnp.zeros_like(A))

def loss(A, y, gz):
    Q = cgs2(A)
    return gz @ (Q @ (Q.T @ y))

rng = np.random.default_rng(0)
A, y, gz = rng.standard_normal((batch, 32, 16)), rng.standard_normal((batch, 32)), rng.standard_normal((batch, 32))
grads = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1))))(A, y, gz)
jax.block_until_ready(grads)
t2, c2 = time.perf_counter(), time.process_time()
print("RESULT " + json.dumps({"import": [t1 - t0, c1 - c0], "call": [t2 - t1, c2 - c1]}))
"""

NAMES = ["qr", "qr_vjp", "project", "project_vjp", "lstsq", "lstsq_vjp", "project_vjp 512 lanes",
         "bcgs2 project_vjp 3x80x70", "project_vjp 256x128"]


def run(code: str, arg: str, cache: str) -> dict:
    env = dict(os.environ, REVDIFF_CACHE_DIR=cache)
    done = subprocess.run([sys.executable, "-c", code, arg], env=env, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if done.returncode or line is None:
        raise SystemExit(f"{arg}: the worker failed\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def run_compare(cache: str) -> tuple:
    env = dict(os.environ, REVDIFF_CACHE_DIR=cache)
    t0 = time.perf_counter()
    before = os.times()
    subprocess.run([sys.executable, "-m", "revdiff", "compare"], env=env, capture_output=True, check=True,
                   cwd=tempfile.gettempdir())
    after = os.times()
    return time.perf_counter() - t0, (after.children_user - before.children_user) + \
        (after.children_system - before.children_system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated names of the calls to time (default all)")
    parser.add_argument("--skip-jax", action="store_true", help="leave out JAX's first calls")
    parser.add_argument("--skip-compare", action="store_true", help="leave out revdiff compare")
    a = parser.parse_args()
    names = a.only.split(",") if a.only else NAMES
    print("| first call | wall s (cold cache) | CPU s (cold cache) | wall s (cache warm) | import wall s |")
    print("|---|---|---|---|---|")
    for name in names:
        with tempfile.TemporaryDirectory() as cache:
            cold = run(REVDIFF, name, cache)
            warm = run(REVDIFF, name, cache)
        print(f"| revdiff {name} | {cold['call'][0]:.2f} | {cold['call'][1]:.2f} | {warm['call'][0]:.3f} | "
              f"{cold['import'][0]:.2f} |", flush=True)
    if not a.skip_jax:
        for batch in (1, 512):
            with tempfile.TemporaryDirectory() as cache:
                jax_first = run(JAX, str(batch), cache)
            print(f"| JAX jit(vmap(grad)) CGS2 loss, {batch} x 32x16 | {jax_first['call'][0]:.2f} | "
                  f"{jax_first['call'][1]:.2f} | - | {jax_first['import'][0]:.2f} |", flush=True)
    if not a.skip_compare:
        with tempfile.TemporaryDirectory() as cache:
            wall, cpu = run_compare(cache)
            warm_wall, _ = run_compare(cache)
        print(f"| revdiff compare (whole command, import included) | {wall:.2f} | {cpu:.2f} | {warm_wall:.2f} | - |")


if __name__ == "__main__":
    main()
