"""GPU benchmark: revdiff's CUDA kernels (one thread per matrix) in both memory layouts, against
PyTorch CUDA autograd through torch.linalg.qr and CuPy running the formula adjoints, in one run.

    python benchmarks/gpu.py [--cases 100000x32x16,10000x64x32] [--repeats 5]

For each case, dtype and loss (projection and QR gradients) it prints revdiff's time with the
batch-interleaved layout (the default) and with each element's arrays contiguous
(``REVDIFF_CUDA_LAYOUT=element``), the achieved GB/s against a device-to-device copy of the same
bytes timed in the same run, GFLOP/s (24 m n^2 flops per matrix, as the CPU tables count), the
time of the layout's transposing copies alone, and the ratios to PyTorch and the CuPy formulas.
Needs CuPy and a CUDA GPU (PyTorch with CUDA for its column).
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


def moved_bytes(arrays):
    """Bytes a gradient must move at least: its inputs read and its gradient written once."""
    return sum(a.nbytes for a in arrays)


def flops(batch, m, n):
    """24 m n^2 per matrix: a reversible CGS2 vjp's count, as ``benchmarks/speed.py`` counts."""
    return 24.0 * batch * m * n * n


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
    p.add_argument("--cases", default="100000x32x16,10000x64x32", help="BxMxN batches, comma-separated")
    p.add_argument("--repeats", type=int, default=5, help="timed calls after the first (median reported)")
    args = p.parse_args()
    import cupy

    from revdiff import formulas
    from revdiff import programs as P
    from revdiff.backends.cuda.launch import interleave
    sync = cupy.cuda.Device().synchronize
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"# revdiff GPU benchmark on {name}, median of {args.repeats}\n")
    print("| loss | dtype | B x m x n | revdiff interleaved | revdiff element | layout copies | GB/s (copy GB/s) "
          "| GFLOP/s | cupy formula | torch | cupy / revdiff | torch / revdiff | max abs diff vs cupy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
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
                if not bool(cupy.all(got == got_elem)):  # the same arithmetic at other addresses
                    progress(f"{label}: the two layouts differ by {float(cupy.abs(got - got_elem).max()):.1e}")
                nbytes = moved_bytes(inputs) + A.nbytes
                src = cupy.zeros(nbytes // 2, np.uint8)
                dst = cupy.empty_like(src)
                t_copy = timed(lambda: dst.__setitem__(Ellipsis, src), args.repeats, sync)[0]
                # the interleaving copies of the arrays the kernel reads and writes (A and its gradient)
                t_layout = timed(lambda: [interleave(a, cupy) for a in inputs + (A,)], args.repeats, sync)[0]
                t_torch = float("nan")
                if has_torch:
                    t_torch = timed(torch_gradient(torch, loss, A, y, gQ, gR), args.repeats, torch.cuda.synchronize)[0]
                    progress(f"{label}: torch {t_torch * 1e3:.2f} ms")
                t_cupy, want = timed(theirs, args.repeats, sync)
                progress(f"{label}: cupy formula {t_cupy * 1e3:.2f} ms")
                diff = float(cupy.abs(got - want).max())
                print(f"| {loss} | {np.dtype(dtype).name} | {case} | {t_inter * 1e3:.2f} ms | {t_elem * 1e3:.2f} ms | "
                      f"{t_layout * 1e3:.2f} ms | {nbytes / t_inter / 1e9:.0f} ({nbytes / t_copy / 1e9:.0f}) | "
                      f"{flops(batch, m, n) / t_inter / 1e9:.0f} | {t_cupy * 1e3:.2f} ms | {t_torch * 1e3:.2f} ms | "
                      f"{t_cupy / t_inter:.1f} | {t_torch / t_inter:.1f} | {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
