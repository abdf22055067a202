#!/usr/bin/env bash
# The one prepared script for a GPU machine: the GPU tests beside the GPU benchmark, then a new
# process's first call (CuPy's on-disk kernel cache) and the two PyTorch examples on CUDA tensors.
#   bash benchmarks/gpu_check.sh
# It installs nothing: revdiff is imported from this tree (PYTHONPATH); numpy, llvmlite, scipy, cupy, torch,
# pytest and hypothesis must be installed. Environment: OUT (where the logs go, default
# /tmp/revdiff_gpu), GPU_CASES (benchmark batches, default 100000x32x16,10000x64x32),
# GPU_TEST_WORKERS (pytest-xdist workers, default 6), GPU_TEST_TIMEOUT and GPU_BENCH_TIMEOUT
# (seconds, default 360 each). The caches start where REVDIFF_CACHE_DIR and CUPY_CACHE_DIR say
# (default /tmp/revdiff_gpu_cache and /tmp/revdiff_gpu_cupy_cache; machine.txt says whether empty).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/revdiff_gpu}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export REVDIFF_CACHE_DIR="${REVDIFF_CACHE_DIR:-/tmp/revdiff_gpu_cache}"
export CUPY_CACHE_DIR="${CUPY_CACHE_DIR:-/tmp/revdiff_gpu_cupy_cache}"
{
    for cache in "$REVDIFF_CACHE_DIR" "$CUPY_CACHE_DIR"; do
        if [ -n "$(ls -A "$cache" 2>/dev/null)" ]; then echo "cache $cache: not empty"; else echo "cache $cache: empty"; fi
    done
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    python3 -c "import sys, numpy, llvmlite, cupy; print(sys.version.split()[0], 'numpy', numpy.__version__, 'llvmlite', llvmlite.__version__, 'cupy', cupy.__version__, 'cuda runtime', cupy.cuda.runtime.runtimeGetVersion())"
    python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())" || true
    nproc
} 2>&1 | tee "$out/machine.txt"
# tests and benchmark side by side: the tests' kernels are tiny, their time is compiling on the CPU
workers=()
python3 -c "import xdist" 2>/dev/null && workers=(-n "${GPU_TEST_WORKERS:-6}")
timeout "${GPU_TEST_TIMEOUT:-360}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_cuda.py \
    "${workers[@]}" >"$out/tests.txt" 2>&1 &
tests=$!
timeout "${GPU_BENCH_TIMEOUT:-360}" python3 benchmarks/gpu.py --cases "${GPU_CASES:-100000x32x16,10000x64x32}" \
    --repeats 5 2>&1 | tee "$out/bench.txt"
bench=${PIPESTATUS[0]}
wait "$tests"
status=$?
# a new process's first call, once the benchmark has compiled its kernels (CuPy's on-disk cache)
timeout 120 python3 - <<'EOF' 2>&1 | tee "$out/second_process.txt"
import time
t0 = time.perf_counter()
import cupy
import numpy as np
from revdiff import programs as P
rng = np.random.default_rng(1)
A, y = cupy.asarray(rng.standard_normal((1000, 32, 16))), cupy.asarray(rng.standard_normal((1000, 32)))
t1 = time.perf_counter()
P.project_vjp(A, y, y)
cupy.cuda.Device().synchronize()
print(f"new process: imports and data {t1 - t0:.2f} s, first float64 projection gradient {time.perf_counter() - t1:.2f} s")
EOF
second=${PIPESTATUS[0]}
# the PyTorch training examples on CUDA tensors
examples=0
for example in torch_projection_loss torch_hypersphere; do
    timeout 120 python3 "examples/$example.py" cuda >"$out/$example.txt" 2>&1
    code=$?
    tail -n 3 "$out/$example.txt"
    echo "$example on cuda: exit $code"
    examples=$(( examples || code ))
done
tail -n 40 "$out/tests.txt"
echo "tests exit $status, benchmark exit $bench, new process exit $second, examples exit $examples"
exit $(( status || bench || second || examples ))
