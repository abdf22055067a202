"""What a cold compile leaves in the process's memory, with and without the compile worker.

    python benchmarks/compile_memory.py [--shape 70x40] [--method bcgs2]

Each case runs in a fresh process: the gradient of a projection (``revdiff.vjp`` of
``project_<method>`` and its pullback) in an empty cache, compiled in the process
(``REVDIFF_COMPILE_WORKER=0``) or by the worker (``=1``), then once more from the warm cache.
It prints each process's peak resident memory and its wall time, and the peak of the worker
beside it (the case ends the worker itself, so that the operating system reports the worker's
peak among its children's; Linux, where ru_maxrss is in kilobytes).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

CASE = textwrap.dedent("""
    import json, resource, sys, time
    import numpy as np
    import revdiff
    from revdiff import programs as P
    m, n, method = {m}, {n}, {method!r}
    rng = np.random.default_rng(0)
    args = (np.zeros(m), np.zeros((n, n)), rng.standard_normal((m, n)), rng.standard_normal(m))
    start = time.perf_counter()
    outs, pullback = revdiff.vjp(getattr(P, "project_" + method), *[a.copy() for a in args])
    pullback(rng.standard_normal(m), None, None, None)
    seconds = time.perf_counter() - start
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    from revdiff.runtime import compile_worker
    compile_worker._shutdown()
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({{"seconds": seconds, "process_mb": own, "worker_mb": children}}))
""")


def run(code: str, cache: str, worker: str) -> dict:
    env = dict(os.environ, REVDIFF_CACHE_DIR=cache, REVDIFF_COMPILE_WORKER=worker)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="70x40", help="m x n of A (default 70x40)")
    parser.add_argument("--method", default="bcgs2", help="QR method of the projection (default bcgs2)")
    a = parser.parse_args()
    m, n = (int(x) for x in a.shape.split("x"))
    code = CASE.format(m=m, n=n, method=a.method)
    print(f"gradient of project_{a.method}, A {m}x{n} float64")
    print("| compiled | cache | process peak | worker peak | time |")
    print("|---|---|---|---|---|")
    for worker, where in (("0", "in the process"), ("1", "by the worker")):
        cache = tempfile.mkdtemp(prefix="revdiff-memory-")
        for state in ("cold", "warm"):
            r = run(code, cache, worker)
            print(f"| {where} | {state} | {r['process_mb']:.0f} MB | "
                  f"{r['worker_mb']:.0f} MB | {r['seconds']:.1f} s |" if r["worker_mb"] else
                  f"| {where} | {state} | {r['process_mb']:.0f} MB | - | {r['seconds']:.1f} s |")


if __name__ == "__main__":
    main()
