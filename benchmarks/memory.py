"""Constant-memory gradients of a long simulation, and the floating-point drift they cost.

Part 1, memory and time: the gradient of the final energy of a 3-body leapfrog simulation with
respect to the initial positions and velocities, for 10^3 ... 10^6 steps, by revdiff (running the
program backwards), PyTorch autograd (a tape over a Python loop) and JAX (jax.grad through
lax.scan, with and without jax.checkpoint on the step). Each measurement runs in a fresh process:
the process is warmed up (compiled) on a short run, then revdiff.peak_memory_growth resets the
peak-RSS mark (/proc/self/clear_refs) and reports the peak growth during the measured gradient. For JAX,
whose allocator keeps the warm-up's buffers, XLA's memory analysis of the compiled gradient
(temporary bytes) is reported instead.

Part 2, drift: revdiff.roundtrip_error of the initial state after forward + inverse runs, in
float64, float32 and the int64 fixed-point variant, and the forward error of float64 and float32
against an mpmath trajectory of the same scheme (40 digits) where that is affordable.

    python benchmarks/memory.py            # full: up to 10^6 steps (PyTorch up to 10^5)
    python benchmarks/memory.py --quick    # up to 10^4 steps, a few seconds
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

from revdiff.diagnostics import peak_memory_growth
from revdiff.programs.leapfrog import star_and_two_planets

G, SOFT, DT = 1.0, 0.01, 1e-3
X0, V0, MASSES = star_and_two_planets()


def initial_state(dtype=np.float64) -> tuple:
    return X0.astype(dtype), V0.astype(dtype)


# ----------------------------------------------------------------------------- memory worker


def _hvp_function(method: str):
    """(x, v, m, G, soft, dt, steps) -> the Hessian of the final energy times a fixed direction."""
    from revdiff.tools import peers
    rng = np.random.default_rng(0)
    dx, dv = rng.standard_normal(X0.shape), rng.standard_normal(V0.shape)
    if method == "revdiff hvp":
        import revdiff
        from revdiff.programs.leapfrog import nbody_final_energy

        def hvp(x, v, m, G, soft, dt, steps):
            out = revdiff.hvp(nbody_final_energy, "E", (0.0, x, v, m, G, soft, dt, steps),
                              (None, dx, dv, None, None, None, None, None))
            return out[1], out[2]
        return hvp
    if method == "torch double backward":
        torch_hvp = peers.torch_nbody_hvp()
        return None if torch_hvp is None else lambda x, v, m, G, soft, dt, steps: torch_hvp(
            x, v, m, G, soft, dt, steps, dx, dv)
    raise ValueError(method)


HVP_METHODS = ["revdiff hvp", "torch double backward"]


def _gradient_function(method: str):
    from revdiff.tools import peers
    if method in HVP_METHODS:
        return _hvp_function(method)
    if method == "revdiff":
        import revdiff
        from revdiff.programs.leapfrog import nbody_final_energy
        g = revdiff.grad(nbody_final_energy, "E")

        def grad(x, v, m, G, soft, dt, steps):
            out = g(0.0, x, v, m, G, soft, dt, steps)
            return out[1], out[2]
        return grad
    if method == "torch":
        return peers.torch_nbody_gradient()
    if method == "jax scan":
        return peers.jax_nbody_gradient(checkpoint=False)
    if method == "jax scan+checkpoint":
        return peers.jax_nbody_gradient(checkpoint=True)
    raise ValueError(method)


def worker(method: str, steps: int) -> dict:
    grad = _gradient_function(method)
    if grad is None:
        return {"method": method, "steps": steps, "skipped": "not installed"}
    x, v = initial_state()
    warm = steps if method.startswith("jax") else 10  # jax compiles per number of steps
    grad(x, v, MASSES, G, SOFT, DT, warm)
    t0 = time.perf_counter()
    (gx, gv), peak = peak_memory_growth(grad, x, v, MASSES, G, SOFT, DT, steps)
    seconds = time.perf_counter() - t0
    if method.startswith("jax"):
        # XLA keeps the buffers of the warm-up run mapped, so RSS shows no growth on the second run;
        # its own account of the compiled program's temporaries is the honest figure
        peak = grad.working_memory(x, v, MASSES, G, SOFT, DT, steps)
    return {"method": method, "steps": steps, "seconds": seconds, "peak_bytes": peak,
            "grad": [np.asarray(gx).tolist(), np.asarray(gv).tolist()]}


def measure(method: str, steps: int, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", method, str(steps)]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout
    except subprocess.TimeoutExpired:
        return {"method": method, "steps": steps, "skipped": f"over {timeout:.0f} s"}
    except subprocess.CalledProcessError as exc:
        return {"method": method, "steps": steps, "skipped": f"failed: {exc.stderr.strip().splitlines()[-1]}"}
    return json.loads(out.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- drift


def reference_trajectory(x, v, steps: int, dps: int = 40) -> tuple:
    """The same leapfrog in mpmath: what the scheme gives without rounding."""
    import mpmath
    with mpmath.workdps(dps):
        X = [[mpmath.mpf(float(c)) for c in row] for row in x]
        V = [[mpmath.mpf(float(c)) for c in row] for row in v]
        m = [mpmath.mpf(float(c)) for c in MASSES]
        h, dt, soft2 = mpmath.mpf(DT) / 2, mpmath.mpf(DT), mpmath.mpf(SOFT) ** 2

        def kick():
            for i in range(3):
                for j in range(3):
                    if i != j:
                        d = [X[j][k] - X[i][k] for k in range(3)]
                        r2 = soft2 + sum(c * c for c in d)
                        f = G * m[j] / (r2 * mpmath.sqrt(r2))
                        for k in range(3):
                            V[i][k] += h * f * d[k]

        for _ in range(steps):
            kick()
            for i in range(3):
                for k in range(3):
                    X[i][k] += dt * V[i][k]
            kick()
        return np.array(X, dtype=float), np.array(V, dtype=float)


def drift_rows(step_counts: list, reference_limit: int) -> list:
    import revdiff
    from revdiff.programs.leapfrog import nbody_leapfrog, nbody_leapfrog_fixed
    rows = []
    scale = float(2 ** 40)
    for steps in step_counts:
        row = {"steps": steps}
        ref = reference_trajectory(*initial_state(), steps) if steps <= reference_limit else None
        for dtype in (np.float64, np.float32):
            x, v = initial_state(dtype)
            report = revdiff.roundtrip_error(nbody_leapfrog, x, v, MASSES.astype(dtype), G, SOFT, DT, steps)
            row[np.dtype(dtype).name] = max(report["x"].rel, report["v"].rel)
            if ref is not None:
                xf, _, *_ = nbody_leapfrog(x.copy(), v.copy(), MASSES.astype(dtype), G, SOFT, DT, steps)
                row[f"{np.dtype(dtype).name} forward"] = float(np.abs(xf - ref[0]).max() / np.abs(ref[0]).max())
        x, v = initial_state()
        xi, vi = np.round(x * scale).astype(np.int64), np.round(v * scale).astype(np.int64)
        report = revdiff.roundtrip_error(nbody_leapfrog_fixed, xi, vi, MASSES, G, SOFT, DT, steps, scale)
        row["fixed-point int64"] = max(report["x"].abs, report["v"].abs)
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- report


def _mb(n: float) -> str:
    return f"{n / 2 ** 20:.1f} MB" if n >= 2 ** 20 else f"{n / 2 ** 10:.0f} KB"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="10^3 and 10^4 steps only")
    p.add_argument("--hvp", action="store_true", help="Hessian-vector products of the final energy (revdiff's "
                   "tangent of the vjp, PyTorch's double backward) instead of gradients; no drift part")
    p.add_argument("--max-torch-steps", type=float, default=1e5,
                   help="PyTorch's tape grows with the steps; skip it beyond this (default 1e5)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per measurement")
    p.add_argument("--worker", nargs=2, metavar=("METHOD", "STEPS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker[0], int(args.worker[1]))))
        return
    step_counts = [10 ** 3, 10 ** 4] if args.quick else [10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6]
    methods = HVP_METHODS if args.hvp else ["revdiff", "torch", "jax scan", "jax scan+checkpoint"]
    print(f"# revdiff memory benchmark: {platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}")
    flags = (" --quick" if args.quick else "") + (" --hvp" if args.hvp else "")
    print(f"# command: python benchmarks/memory.py{flags}\n")
    results = {}
    for method in methods:
        for steps in step_counts:
            if method.startswith("torch") and steps > args.max_torch_steps:
                results[method, steps] = {"skipped": f"> --max-torch-steps {args.max_torch_steps:.0e}"}
                continue
            results[method, steps] = measure(method, steps, args.timeout)
            sys.stderr.write(f"\r{method:22s} {steps:>8d} steps done")
    sys.stderr.write("\n")

    what = "Hessian-vector product" if args.hvp else "Gradient"
    print(f"{what} of the final energy w.r.t. the initial state (3 bodies): peak memory growth "
          "(JAX: XLA temporaries), time\n")
    print("| steps | " + " | ".join(methods) + " |")
    print("|---" * (len(methods) + 1) + "|")
    for steps in step_counts:
        cells = []
        for method in methods:
            r = results[method, steps]
            cells.append(r.get("skipped") or f"{_mb(r['peak_bytes'])}, {r['seconds']:.2f} s")
        print(f"| {steps:.0e} | " + " | ".join(cells) + " |")
    lo = step_counts[0]
    print("\nGrowth of the peak from the fewest to the most steps each method ran:")
    for method in methods:
        ran = [s for s in step_counts if "peak_bytes" in results[method, s]]
        if len(ran) < 2:
            continue
        a, b = results[method, ran[0]]["peak_bytes"], results[method, ran[-1]]["peak_bytes"]
        ratio = f"x{b / a:.0f}" if a > 0 else ("no growth" if b == 0 else "from nothing")
        print(f"  {method}: {_mb(a)} at {ran[0]:.0e} steps -> {_mb(b)} at {ran[-1]:.0e} steps "
              f"({ratio} for x{ran[-1] // ran[0]} steps)")
    ref = results[methods[0], lo]
    for method in methods[1:]:
        r = results[method, lo]
        if "grad" in r and "grad" in ref:
            diff = max(np.abs(np.array(r["grad"][k]) - np.array(ref["grad"][k])).max() for k in range(2))
            print(f"max |{methods[0]} - {method}| difference at {lo:.0e} steps: {diff:.1e}")
    if args.hvp:
        return

    rows = drift_rows(step_counts, reference_limit=10 ** 3 if args.quick else 10 ** 4)
    print("\nRound-trip drift of the initial state (forward then inverse), max relative over x and v;\n"
          "forward error = final positions against an mpmath run of the same scheme (40 digits)\n")
    cols = ["float64", "float32", "fixed-point int64", "float64 forward", "float32 forward"]
    print("| steps | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for row in rows:
        cells = []
        for c in cols:
            value = row.get(c)
            cells.append("-" if value is None else (f"{value:.0f} (exact)" if c.startswith("fixed") and value == 0
                                                    else f"{value:.1e}"))
        print(f"| {row['steps']:.0e} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
