"""GPU benchmark of revdiff's CUDA kernels in both memory layouts, against PyTorch and CuPy.

    python benchmarks/gpu.py [--cases 100000x32x16,10000x64x32] [--repeats 5]

One thread per matrix, projection and QR gradients, float32 and float64, in one run. Columns: the
time of revdiff's gradient in the batch-interleaved layout (the default) and in the element layout
(``REVDIFF_CUDA_LAYOUT=element``), and whether the two gave the same bits; the time of the layout's
copies alone (the inputs into the interleaved layout, and a gradient-sized result back); from the
interleaved time: the effective GB/s (the least bytes a gradient moves, its inputs read and its
gradient written once, over the time) against a device-to-device copy of as many bytes timed in the
same run, and GFLOP/s (``revdiff.tools.bench.reversible_flops`` per matrix, as the CPU tables
count); the CuPy formula adjoints' and PyTorch CUDA autograd's times and their ratios to revdiff's.
Times are medians of up to ``--repeats`` calls after a first call (which compiles), fewer where they
would pass 20 s. Needs CuPy and a CUDA GPU (PyTorch with CUDA for its column).
"""
import argparse
import os
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


def in_layout(layout, fn):
    """``fn`` run with ``REVDIFF_CUDA_LAYOUT`` set to ``layout``."""
    def run():
        before = os.environ.get("REVDIFF_CUDA_LAYOUT")
        os.environ["REVDIFF_CUDA_LAYOUT"] = layout
        try:
            return fn()
        finally:
            if before is None:
                del os.environ["REVDIFF_CUDA_LAYOUT"]
            else:
                os.environ["REVDIFF_CUDA_LAYOUT"] = before
    return run


def moved_bytes(inputs, gradient):
    """Bytes a gradient must move at least: its inputs read and its gradient written once."""
    return sum(a.nbytes for a in inputs) + gradient.nbytes


def layout_copies(inputs, gradient, xp):
    """What the interleaved layout adds: the inputs copied into it, a gradient-sized result back."""
    from revdiff.targets.cuda.launch import interleave

    def run():
        for a in inputs:
            interleave(a, xp)
        gradient[...] = interleave(gradient, xp)
    return run


def torch_gradient(torch, loss, A, y, gQ, gR):
    """PyTorch CUDA autograd's gradient of the loss with respect to A, through torch.linalg.qr."""
    At = torch.as_tensor(A, device="cuda")

    def grad():
        a = At.detach().requires_grad_(True)
        Q, R = torch.linalg.qr(a)
        if loss == "projection":
            yt = torch.as_tensor(y, device="cuda").unsqueeze(-1)
            (Q @ (Q.mT @ yt)).sum().backward()
        else:
            d = torch.sign(torch.diagonal(R, dim1=-2, dim2=-1))
            Q, R = Q * d.unsqueeze(-2), R * d.unsqueeze(-1)
            ((torch.as_tensor(gQ, device="cuda") * Q).sum() + (torch.as_tensor(gR, device="cuda") * R).sum()).backward()
        return a.grad
    return grad


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", default="100000x32x16,10000x64x32", help="B x m x n batches, comma-separated")
    p.add_argument("--repeats", type=int, default=5,
                   help="timed calls after the first (their median is reported; fewer past 20 s)")
    args = p.parse_args()
    import cupy

    from revdiff import formulas
    from revdiff import programs as P
    from revdiff.tools.bench import reversible_flops
    sync = cupy.cuda.Device().synchronize
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"# revdiff GPU benchmark on {name}, medians of up to {args.repeats} calls\n")
    print("| loss | dtype | B x m x n | revdiff interleaved | revdiff element | layouts equal | layout copies "
          "| GB/s (copy GB/s) | GFLOP/s | cupy formula | torch | cupy / revdiff | torch / revdiff "
          "| max abs diff vs cupy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for case in args.cases.split(","):
        batch, m, n = (int(x) for x in case.split("x"))
        for loss in ("projection", "qr"):
            for dtype in (np.float32, np.float64):
                label = f"{loss} {np.dtype(dtype).name} {case}"
                A = cupy.asarray(rng.standard_normal((batch, m, n)).astype(dtype))
                y = gz = gQ = gR = None
                if loss == "projection":
                    y = cupy.asarray(rng.standard_normal((batch, m)).astype(dtype))
                    gz = cupy.ones((batch, m), dtype)
                    mine = lambda: P.project_vjp(A, y, gz)[0]
                    theirs = lambda: formulas.project_vjp(A, y, gz)[0]
                    inputs = (A, y, gz)
                else:
                    gQ = cupy.asarray(rng.standard_normal((batch, m, n)).astype(dtype))
                    gR = cupy.triu(cupy.asarray(rng.standard_normal((batch, n, n)).astype(dtype)))
                    mine = lambda: P.qr_vjp(A, gQ, gR)
                    theirs = lambda: formulas.qr_vjp(A, gQ, gR)
                    inputs = (A, gQ, gR)
                t_inter, got = timed(in_layout("interleaved", mine), args.repeats, sync)
                progress(f"{label}: revdiff interleaved {t_inter * 1e3:.2f} ms")
                t_elem, got_elem = timed(in_layout("element", mine), args.repeats, sync)
                progress(f"{label}: revdiff element {t_elem * 1e3:.2f} ms")
                # the same arithmetic at other addresses: the same bits, or the largest difference
                same = "yes" if bool(cupy.all(got == got_elem)) else f"{float(cupy.abs(got - got_elem).max()):.1e}"
                nbytes = moved_bytes(inputs, got)
                src = cupy.zeros(nbytes // 2, np.uint8)  # a copy reads half the bytes and writes half
                dst = cupy.empty_like(src)
                t_copy = timed(lambda: dst.__setitem__(Ellipsis, src), args.repeats, sync)[0]
                t_layout = timed(layout_copies(inputs, cupy.empty_like(got), cupy), args.repeats, sync)[0]
                t_torch = float("nan")
                if has_torch:
                    t_torch = timed(torch_gradient(torch, loss, A, y, gQ, gR), args.repeats, torch.cuda.synchronize)[0]
                    progress(f"{label}: torch {t_torch * 1e3:.2f} ms")
                t_cupy, want = timed(theirs, args.repeats, sync)
                progress(f"{label}: cupy formula {t_cupy * 1e3:.2f} ms")
                diff = float(cupy.abs(got - want).max())
                flops = batch * reversible_flops(loss, m, n)
                print(f"| {loss} | {np.dtype(dtype).name} | {case} | {t_inter * 1e3:.2f} ms | {t_elem * 1e3:.2f} ms | "
                      f"{same} | {t_layout * 1e3:.2f} ms | {nbytes / t_inter / 1e9:.1f} ({nbytes / t_copy / 1e9:.0f}) | "
                      f"{flops / t_inter / 1e9:.0f} | {t_cupy * 1e3:.2f} ms | {t_torch * 1e3:.2f} ms | "
                      f"{t_cupy / t_inter:.1f} | {t_torch / t_inter:.1f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
