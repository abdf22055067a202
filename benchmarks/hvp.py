"""Hessian-vector products of a batched projection loss: revdiff's tangent of the fused vjp program
against PyTorch's double backward and JAX's forward-over-reverse, in one process, alternating.

The loss is L(A, y) = sum_b <z_b, w_b> with z = Q Q^T y, the projection of y onto the columns of A
(a batch of B matrices m x n); each call returns the Hessian of L times a direction (dA, dy) for
both arguments. revdiff: ``programs.project_vjp_jvp`` (which also returns the gradient and dz);
PyTorch: ``torch.autograd.grad`` twice, the first with ``create_graph=True``, through
``torch.linalg.qr``; JAX: ``jax.jit(jax.jvp(jax.grad(L)))`` through ``jnp.linalg.qr``. Every
framework uses all the cores it finds. Times are medians of alternating rounds (revdiff and
PyTorch in this process; JAX in a child process with a time limit, because its compiled
forward-over-reverse QR stops making progress on large batches: see RESULTS.md); the table gives
each peer's time over revdiff's.

    python benchmarks/hvp.py [--cases 10000x32x16,1000x64x32] [--rounds 7] [--jax-timeout 300]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from revdiff import programs as P


def _revdiff(A, y, w, dA, dy):
    return lambda: P.project_vjp_jvp(A, y, w, dA, dy, "cgs2")[1]


def _torch(A, y, w, dA, dy):
    try:
        import torch
    except ImportError:
        return None
    At, yt, wt, dAt, dyt = (torch.from_numpy(a) for a in (A, y, w, dA, dy))

    def hvp():
        a, b = At.clone().requires_grad_(True), yt.clone().requires_grad_(True)
        Q = torch.linalg.qr(a)[0]
        z = (Q @ (Q.transpose(-1, -2) @ b[..., None]))[..., 0]
        ga, gb = torch.autograd.grad((z * wt).sum(), (a, b), create_graph=True)
        return torch.autograd.grad((ga * dAt).sum() + (gb * dyt).sum(), (a, b))
    return hvp


def _jax(A, y, w, dA, dy):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def loss(a, b):
        Q = jnp.linalg.qr(a)[0]
        return jnp.sum((Q @ (jnp.swapaxes(Q, -1, -2) @ b[..., None]))[..., 0] * w)

    f = jax.jit(lambda a, b, da, db: jax.jvp(jax.grad(loss, (0, 1)), (a, b), (da, db))[1])
    args = tuple(jnp.asarray(x) for x in (A, y, dA, dy))
    return lambda: jax.block_until_ready(f(*args))


def _inputs(case: str) -> tuple:
    b, m, n = (int(x) for x in case.split("x"))
    rng = np.random.default_rng(b + m + n)
    A, dA = rng.standard_normal((b, m, n)), rng.standard_normal((b, m, n))
    y, w, dy = rng.standard_normal((b, m)), rng.standard_normal((b, m)), rng.standard_normal((b, m))
    return A, y, w, dA, dy


def _jax_worker(case: str, rounds: int, out: str) -> None:
    call = _jax(*_inputs(case))
    if call is None:
        print(json.dumps({"skipped": "not installed"}))
        return
    seconds = _median_times({"jax": call}, rounds)["jax"]
    np.savez(out, *[np.asarray(x) for x in call()])
    print(json.dumps({"seconds": seconds}))


def _jax_in_child(case: str, rounds: int, timeout: float) -> tuple:
    """(seconds or a reason, the result arrays or None) of JAX's hvp, measured in a child process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "jax.npz")
        try:
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--jax-worker", case, str(rounds), out],
                                  capture_output=True, text=True, timeout=timeout, check=True)
        except subprocess.TimeoutExpired:
            return f"no result in {timeout:.0f} s", None
        except subprocess.CalledProcessError as exc:
            return f"failed: {exc.stderr.strip().splitlines()[-1]}", None
        record = json.loads(done.stdout.strip().splitlines()[-1])
        if "skipped" in record:
            return record["skipped"], None
        with np.load(out) as f:
            return record["seconds"], [f[k] for k in f.files]


def _median_times(calls: dict, rounds: int) -> dict:
    for call in calls.values():
        call()  # compile, warm up
    times: dict = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def _agreement(ref: list, results: dict) -> str:
    out = []
    for name, got in results.items():
        if got is not None:
            err = max(float(np.abs(np.asarray(g) - r).max() / max(np.abs(r).max(), 1e-300)) for g, r in zip(got, ref))
            out.append(f"{name} {err:.1e}")
    return ", ".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="10000x32x16,1000x64x32", help="BxMxN, comma-separated")
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds; medians reported (default 7)")
    parser.add_argument("--jax-timeout", type=float, default=300, help="seconds JAX's child process may take")
    parser.add_argument("--jax-worker", nargs=3, help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.jax_worker:
        _jax_worker(a.jax_worker[0], int(a.jax_worker[1]), a.jax_worker[2])
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    print(f"# {platform.node()}, {os.cpu_count()} CPUs, commit {commit}, {time.strftime('%Y-%m-%d')}; "
          f"python benchmarks/hvp.py --cases {a.cases}\n")
    print("| case | revdiff | torch double backward | jax jvp(grad) | torch / revdiff | jax / revdiff | "
          "max rel. difference to revdiff |\n|---|---|---|---|---|---|---|")
    for case in a.cases.split(","):
        inputs = _inputs(case)
        calls = {"revdiff": _revdiff(*inputs)}
        torch_call = _torch(*inputs)
        if torch_call is not None:
            calls["torch"] = torch_call
        t = _median_times(calls, a.rounds)
        jax_time, jax_result = _jax_in_child(case, a.rounds, a.jax_timeout)
        cell = {k: f"{t[k] * 1e3:.1f} ms" if k in t else "-" for k in ("revdiff", "torch")}
        cell["jax"] = f"{jax_time * 1e3:.1f} ms" if isinstance(jax_time, float) else jax_time
        ratio = {"torch": f"{t['torch'] / t['revdiff']:.2f}" if "torch" in t else "-",
                 "jax": f"{jax_time / t['revdiff']:.2f}" if isinstance(jax_time, float) else "-"}
        ref = [np.asarray(x) for x in calls["revdiff"]()]
        agreement = _agreement(ref, {"torch": torch_call() if torch_call else None, "jax": jax_result})
        print(f"| {case} | {cell['revdiff']} | {cell['torch']} | {cell['jax']} | {ratio['torch']} | {ratio['jax']} | "
              f"{agreement} |", flush=True)


if __name__ == "__main__":
    main()
