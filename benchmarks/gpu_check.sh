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
timeout "${GPU_BENCH_TIMEOUT:-360}" python3 benchmarks/gpu.py --batch "${GPU_BATCH:-100000}" --repeats 5 2>&1 \
    | tee "$out/bench.txt"
bench=$?
wait "$tests"
status=$?
tail -n 40 "$out/tests.txt"
echo "tests exit $status, benchmark exit $bench"
exit $(( status || bench ))
