"""Where a warm gradient's time goes, on one core: the call runs under Linux ``perf record`` and each
sample is charged to the compiled program it fell in (their addresses are read from the JIT's
symbol table, ``revdiff.targets.llvm.jit``) or to the library it fell in (Python, NumPy, libc,
BLAS, the kernel: ``clear_page`` there is fresh memory being zeroed). Only samples taken while the
timed calls run are counted; the set-up and the first (compiling) call are not.

    python benchmarks/profile.py [--shape 10000x32x16] [--loss projection|qr] [--method cgs2]
                                 [--dtype float64] [--repeats 10] [--top 12] [--functions 0]

Needs ``perf`` (linux-tools) and permission to sample the process (``perf_event_paranoid`` <= 2).
"""
from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def child(a, out: str) -> None:
    """Run the calls: warm up (compile), then the timed repeats, writing the symbol table and the
    monotonic-clock window of the repeats to ``out``."""
    import time

    import numpy as np

    import revdiff
    from revdiff import programs as P
    from revdiff.targets.llvm import jit

    revdiff.set_num_threads(1)
    b, m, n = (int(v) for v in a.shape.split("x"))
    rng = np.random.default_rng(0)
    A = rng.standard_normal((b, m, n)).astype(a.dtype)
    if a.loss == "projection":
        y, gz = rng.standard_normal((b, m)).astype(a.dtype), rng.standard_normal((b, m)).astype(a.dtype)
        call = lambda: P.project_vjp(A, y, gz, method=a.method)  # noqa: E731
    else:
        p = min(m, n)
        gQ, gR = rng.standard_normal((b, m, p)).astype(a.dtype), rng.standard_normal((b, p, n)).astype(a.dtype)
        call = lambda: P.qr_vjp(A, gQ, gR, method=a.method)  # noqa: E731
    call()
    start = time.monotonic()
    for _ in range(a.repeats):
        call()
    end = time.monotonic()
    symbols = {name: address for name, (_, address) in jit._LOADED.items()}
    with open(out, "w") as f:
        json.dump({"symbols": symbols, "start": start, "end": end, "seconds": (end - start) / a.repeats}, f)


def program_name(symbol: str) -> str:
    """A compiled program's symbol without its content hashes: ``classical_pass adjoint (lanes)``."""
    lanes = " (lanes)" if "_lanes" in symbol else ""
    entry = " entry" if symbol.endswith(".entry") else ""
    stem = re.sub(r"_lanes[01]*", "", symbol.removesuffix(".entry"))
    stem = re.sub(r"_[0-9a-f]{12,}", "", stem)
    return stem.replace("_vjp_forward", " vjp_forward").replace("_adjoint", " adjoint").replace(
        "_forward", " forward").replace("_inverse", " inverse") + lanes + entry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="10000x32x16", help="B x m x n")
    parser.add_argument("--loss", default="projection", choices=("projection", "qr"))
    parser.add_argument("--method", default="cgs2")
    parser.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--top", type=int, default=12, help="rows of compiled programs to list")
    parser.add_argument("--functions", type=int, default=0,
                        help="also list this many functions of the libraries (BLAS's kernels, libc's memset)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.child:
        child(a, a.child)
        return
    if shutil.which("perf") is None:
        sys.exit("profile.py needs Linux perf (linux-tools) on the PATH")
    with tempfile.TemporaryDirectory() as tmp:
        window, data = os.path.join(tmp, "window.json"), os.path.join(tmp, "perf.data")
        arguments = [sys.argv[0], "--shape", a.shape, "--loss", a.loss, "--method", a.method, "--dtype", a.dtype,
                     "--repeats", str(a.repeats), "--child", window]
        recorded = subprocess.run(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "-o", data, sys.executable,
                                   *arguments])
        if recorded.returncode or not os.path.exists(window):
            sys.exit("perf record failed (is perf_event_paranoid above 2? see its message above)")
        samples = subprocess.run(["perf", "script", "-i", data, "-F", "time,ip,sym,dso"], check=True,
                                 capture_output=True, text=True).stdout.splitlines()
        with open(window) as f:
            run = json.load(f)
    table = sorted((address, name) for name, address in run["symbols"].items())
    addresses = [address for address, _ in table]
    places: collections.Counter = collections.Counter()
    programs: collections.Counter = collections.Counter()
    functions: collections.Counter = collections.Counter()
    for line in samples:
        fields = line.split()
        if len(fields) < 3:
            continue
        stamp, ip, dso = float(fields[0].rstrip(":")), int(fields[1], 16), fields[-1]
        symbol = " ".join(fields[2:-1])
        if not run["start"] <= stamp <= run["end"]:
            continue
        if "perf-" in dso and dso.endswith(".map)"):  # the JIT's code: no file behind it
            k = bisect.bisect_right(addresses, ip) - 1
            places["compiled programs"] += 1
            programs[program_name(table[k][1]) if k >= 0 else "(unknown)"] += 1
        else:
            library = re.sub(r"(\.cpython.*|-[0-9a-f]{8}.*|\.so.*)$", "", os.path.basename(dso.strip("()")))
            places[library] += 1
            functions[f"{library}: {re.sub(r'[+]0x[0-9a-f]+$', '', symbol)}"] += 1
    total = sum(places.values()) or 1
    print(f"{a.loss} gradient, {a.dtype} {a.shape}, method {a.method}, one core: {1e3 * run['seconds']:.1f} ms a "
          f"call, {total} samples in the timed calls")
    print("\n| where | share |\n|---|---|")
    for place, count in places.most_common(8):
        print(f"| {place} | {100 * count / total:.1f} % |")
    print("\n| compiled program | share of all samples |\n|---|---|")
    for name, count in programs.most_common(a.top):
        print(f"| {name} | {100 * count / total:.1f} % |")
    if a.functions:
        print("\n| library function | share of all samples |\n|---|---|")
        for name, count in functions.most_common(a.functions):
            print(f"| {name} | {100 * count / total:.1f} % |")


if __name__ == "__main__":
    main()
