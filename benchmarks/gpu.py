"""GPU benchmark: revdiff's CUDA kernels (one thread per matrix) against PyTorch CUDA autograd
through torch.linalg.qr and against CuPy running the formula adjoints, in one run.

    python benchmarks/gpu.py [--batch 100000] [--repeats 5]

Needs CuPy and a CUDA GPU (PyTorch with CUDA for its column). Prints medians and ratios.
"""
import argparse
import statistics
import sys
import time

import numpy as np


def timed(fn, repeats, sync, budget_s=20.0):
    """Median seconds of up to ``repeats`` calls after one warm-up call (which also compiles), and
    the warm-up's result; fewer repeats when they would run past ``budget_s``."""
    t0 = time.perf_counter()
    result = fn()
    sync()
    progress(f"  first call {time.perf_counter() - t0:.2f} s")
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
        if sum(times) * (len(times) + 1) / len(times) > budget_s:
            break
    return statistics.median(times), result


def progress(message):
    print(message, file=sys.stderr, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=100000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    import cupy

    from revdiff import formulas
    from revdiff import programs as P
    sync = cupy.cuda.Device().synchronize
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"# revdiff GPU benchmark on {name}, B={args.batch} x 32x16, median of {args.repeats}\n")
    print("| loss | dtype | revdiff | cupy formula | torch | torch / revdiff | max abs diff vs cupy formula |")
    print("|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for loss in ("projection", "qr"):
        for dtype in (np.float32, np.float64):
            A = cupy.asarray(rng.standard_normal((args.batch, 32, 16)).astype(dtype))
            if loss == "projection":
                y = cupy.asarray(rng.standard_normal((args.batch, 32)).astype(dtype))
                gz = cupy.ones((args.batch, 32), dtype)
                mine = lambda: P.project_vjp(A, y, gz)[0]
                theirs = lambda: formulas.project_vjp(A, y, gz)[0]
            else:
                gQ = cupy.asarray(rng.standard_normal((args.batch, 32, 16)).astype(dtype))
                gR = cupy.triu(cupy.asarray(rng.standard_normal((args.batch, 16, 16)).astype(dtype)))
                mine = lambda: P.qr_vjp(A, gQ, gR)
                theirs = lambda: formulas.qr_vjp(A, gQ, gR)
            t_mine, got = timed(mine, args.repeats, sync)
            progress(f"{loss} {np.dtype(dtype).name}: revdiff {t_mine * 1e3:.2f} ms")
            t_torch = float("nan")
            if has_torch:
                At = torch.as_tensor(A, device="cuda")

                def torch_grad():
                    a = At.detach().requires_grad_(True)
                    Q, R = torch.linalg.qr(a)
                    if loss == "projection":
                        yt = torch.as_tensor(y, device="cuda").unsqueeze(-1)
                        (Q @ (Q.mT @ yt)).sum().backward()
                    else:
                        d = torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))
                        Q, R = Q * d.unsqueeze(-2), R * d.unsqueeze(-1)
                        ((torch.as_tensor(gQ, device="cuda") * Q).sum()
                         + (torch.as_tensor(gR, device="cuda") * R).sum()).backward()
                    return a.grad
                t_torch = timed(torch_grad, args.repeats, torch.cuda.synchronize)[0]
                progress(f"{loss} {np.dtype(dtype).name}: torch {t_torch * 1e3:.2f} ms")
            t_cupy, want = timed(theirs, args.repeats, sync)
            progress(f"{loss} {np.dtype(dtype).name}: cupy formula {t_cupy * 1e3:.2f} ms")
            diff = float(cupy.abs(got - want).max())
            print(f"| {loss} | {np.dtype(dtype).name} | {t_mine * 1e3:.1f} ms | {t_cupy * 1e3:.1f} ms | "
                  f"{t_torch * 1e3:.1f} ms | {t_torch / t_mine:.1f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
