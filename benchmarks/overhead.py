"""The cost of one warm call, in one process: a single 32x16 float64 projection gradient
(``revdiff.programs.project_vjp``) against NumPy's closed-form Golub-Pereyra gradient
(``revdiff.formulas.project_vjp``); a call, and a vjp with its pullback, of a small function of
one's own (``y[i] += a * x[i]`` on 16 entries) against NumPy's ``y += a * x``; and, with PyTorch, a
training step (forward and backward of ||P_A y||²) through ``revdiff.torch.project`` against the
same step through ``torch.linalg.qr``.
Medians of ``--rounds`` alternating rounds of ``--calls`` calls each, so that the machine's noise
falls on both sides alike.

    python benchmarks/overhead.py [--shape 32x16] [--rounds 7] [--calls 500] [--no-torch] [--parts]

``--parts`` also splits the projection gradient's time: the compiled fused vjp alone, the same
through ``revdiff.batched(...).vjp`` on a batch of one (the call driver around it), and the whole
warm ``project_vjp`` (its plan, ``revdiff/programs/plans.py``: the input scan, the program, the rank
scan and the results' check, without the driver).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import revdiff


@revdiff.reversible
def axpy(y, x, a):
    for i in range(y.shape[0]):
        y[i] += a * x[i]


def per_call(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def compare(cases: dict, rounds: int, calls: int) -> dict:
    """{name: median seconds per call}, the cases run one after another in each round."""
    for fn in cases.values():  # compiled and warm before timing
        fn()
    times: dict = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            times[name].append(per_call(fn, calls))
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="32x16")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--parts", action="store_true", help="split project_vjp's time")
    a = parser.parse_args()
    m, n = map(int, a.shape.split("x"))

    from revdiff import formulas
    from revdiff import programs as P

    rng = np.random.default_rng(0)
    A, y, gz = rng.standard_normal((m, n)), rng.standard_normal(m), rng.standard_normal(m)
    got, want = P.project_vjp(A, y, gz), formulas.project_vjp(A, y, gz)
    difference = max(float(np.abs(g - w).max() / np.abs(w).max()) for g, w in zip(got, want))
    rows = [("project_vjp, one matrix", compare({"revdiff": lambda: P.project_vjp(A, y, gz),
                                                 "numpy formula": lambda: formulas.project_vjp(A, y, gz)},
                                                a.rounds, a.calls), "numpy formula")]
    u, v = np.zeros(16), np.ones(16)
    small = {"revdiff": lambda: axpy(u, v, 0.5), "numpy y += a * x": lambda: np.add(u, 0.5 * v, out=u)}
    rows.append(("a call of a small function", compare(small, a.rounds, 10 * a.calls), "numpy y += a * x"))
    small = {"revdiff": lambda: revdiff.vjp(axpy, u, v, 0.5)[1](v, None, None),
             "numpy y += a * x": lambda: np.add(u, 0.5 * v, out=u)}
    rows.append(("its vjp and pullback", compare(small, a.rounds, 10 * a.calls), "numpy y += a * x"))
    if not a.no_torch:
        import torch

        import revdiff.torch as rt

        At = torch.tensor(A, requires_grad=True)
        yt = torch.tensor(y)

        def step_revdiff():
            At.grad = None
            (rt.project(At, yt) ** 2).sum().backward()

        def step_torch():
            At.grad = None
            Q = torch.linalg.qr(At)[0]
            ((Q @ (Q.T @ yt)) ** 2).sum().backward()

        torch.set_num_threads(1)
        rows.append(("torch training step, one matrix",
                     compare({"revdiff": step_revdiff, "torch.linalg.qr": step_torch}, a.rounds, a.calls),
                     "torch.linalg.qr"))
    if a.parts:
        rows.append(("project_vjp's parts", parts(A, y, gz, a.rounds, a.calls), "whole project_vjp"))
    print(f"{m}x{n} float64, warm, medians of {a.rounds} alternating rounds of {a.calls} calls; "
          f"revdiff's gradient against the formula's: {difference:.1e} relative")
    print("| call | revdiff | peer | peer time | revdiff / peer |")
    print("|---|---|---|---|---|")
    for what, t, peer in rows:
        if what.endswith("parts"):
            continue
        print(f"| {what} | {1e6 * t['revdiff']:.1f} µs | {peer} | {1e6 * t[peer]:.1f} µs | "
              f"{t['revdiff'] / t[peer]:.2f} |")
    for what, t, _ in rows:
        if what.endswith("parts"):
            print("\n" + what + ": " + ", ".join(f"{name} {1e6 * v:.1f} µs" for name, v in t.items()))


def parts(A, y, gz, rounds: int, calls: int) -> dict:
    """Medians of the compiled CGS2 fused vjp alone (found as a batch of one finds it), of the same
    batch of one through ``BatchedFunction.vjp``, and of the whole ``project_vjp``."""
    from revdiff import programs as P
    from revdiff.calls import ERROR_RECORD

    m, n = A.shape
    bf = revdiff.batched(P.project_cgs2, ("z", "R", "A", "y"))
    args = lambda: (np.zeros((1, m)), np.zeros((1, n, n)), A[None], y[None])  # noqa: E731
    program = bf.one_element("vjp", args()).program.program
    record = np.zeros(ERROR_RECORD)

    def alone():
        program(np.zeros(m), np.zeros((n, n)), A, y, gz.copy(), np.zeros((n, n)), np.zeros((m, n)), np.zeros(m),
                np.zeros(m), np.zeros((n, n)), record)

    return compare({"compiled fused vjp": alone,
                    "batch of one": lambda: bf.vjp(args(), (gz[None], None, None, None), donate=True),
                    "whole project_vjp": lambda: P.project_vjp(A, y, gz)}, rounds, calls)


if __name__ == "__main__":
    main()
