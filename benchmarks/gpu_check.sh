#!/usr/bin/env bash
# The one prepared script for a GPU machine: GPU tests, then the GPU benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet ".[test,cuda]"
python -m pytest -q -m gpu tests/test_cuda.py
python benchmarks/gpu.py --batch 100000 --repeats 5
