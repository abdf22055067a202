"""Where the time of batched projection gradients in SIMD lanes goes, per generated function: runs
4096 × 32×16 float64 projection gradients in lanes in a loop for ``--seconds``, after writing a perf
map (``/tmp/perf-<pid>.map``) that names the machine code Numba compiled, so that ``perf`` can
attribute samples to the generated programs. Use an empty cache directory (code loaded from
Numba's cache has no symbols to name) and one thread:

    REVDIFF_CACHE_DIR=$(mktemp -d) NUMBA_NUM_THREADS=1 python benchmarks/lane_profile.py &
    # once it prints "ready": perf record -F 1999 -g -p <pid> -- sleep 15
    perf report --no-children --sort symbol

It prints the time per matrix at the end.
"""
import argparse
import gc
import os
import time

import numpy as np
from numba.core.dispatcher import Dispatcher

import revdiff
from revdiff import programs as P


def write_perf_map() -> int:
    """``/tmp/perf-<pid>.map``: the address, size and name of every function Numba compiled so far."""
    symbols = {}
    for obj in gc.get_objects():
        if isinstance(obj, Dispatcher):
            for compiled in obj.overloads.values():
                library = compiled.library
                module = getattr(library, "_final_module", None)
                if module is None:
                    continue
                for fn in module.functions:
                    if not fn.is_declaration:
                        address = library.get_pointer_to_function(fn.name)
                        if address:
                            symbols[address] = fn.name
    starts = sorted(symbols)
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as out:
        for start, end in zip(starts, starts[1:] + [starts[-1] + 4096] if starts else []):
            out.write(f"{start:x} {min(end - start, 1 << 20):x} {symbols[start][:120]}\n")
    return len(symbols)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--seconds", type=float, default=25.0)
    args = parser.parse_args()
    m, n, B = 32, 16, args.batch
    rng = np.random.default_rng(0)
    A, y, gz = rng.standard_normal((m, n)), rng.standard_normal(m), rng.standard_normal(m)
    batched = revdiff.batched(P.project_cgs2, ("z", "R", "A", "y"), layout="lanes")
    inputs = (np.zeros((B, m)), np.zeros((B, n, n)), np.repeat(A[None], B, 0), np.repeat(y[None], B, 0))
    cotangents = (np.repeat(gz[None], B, 0), None, None, None)
    batched.vjp(inputs, cotangents)
    print("ready", write_perf_map(), "functions; pid", os.getpid(), flush=True)
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < args.seconds:
        batched.vjp(inputs, cotangents)
        calls += 1
    print(f"{(time.perf_counter() - start) / calls / B * 1e6:.1f} us per matrix", flush=True)


if __name__ == "__main__":
    main()
