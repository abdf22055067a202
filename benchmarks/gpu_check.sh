#!/usr/bin/env bash
# The one prepared script for a GPU machine: GPU tests, then the GPU benchmark.
#   bash benchmarks/gpu_check.sh            (logs also go to $OUT when it is set)
# GPU machines here reach no package index: revdiff is imported from this tree (PYTHONPATH), and
# numpy, numba, cupy, torch, pytest and hypothesis must already be installed there.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/revdiff_gpu}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export REVDIFF_CACHE_DIR="${REVDIFF_CACHE_DIR:-/tmp/revdiff_gpu_cache}"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    python3 -c "import sys, numpy, numba, cupy; print(sys.version.split()[0], 'numpy', numpy.__version__, 'numba', numba.__version__, 'cupy', cupy.__version__, 'cuda runtime', cupy.cuda.runtime.runtimeGetVersion())"
    python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())" || true
    nproc
} 2>&1 | tee "$out/machine.txt"
# tests and benchmark side by side: the tests' kernels are tiny, their time is Numba compiling on the CPU
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
print(f"new process: imports {t1 - t0:.2f} s, first float64 projection gradient {time.perf_counter() - t1:.2f} s")
EOF
# the PyTorch training examples on CUDA tensors
for example in torch_projection_loss torch_hypersphere; do
    timeout 120 python3 "examples/$example.py" cuda 2>&1 | tail -n 3 | tee -a "$out/examples.txt"
    echo "$example on cuda: exit ${PIPESTATUS[0]}" | tee -a "$out/examples.txt"
done
tail -n 40 "$out/tests.txt"
echo "tests exit $status, benchmark exit $bench"
exit $(( status || bench ))
