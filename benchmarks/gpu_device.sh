#!/usr/bin/env bash
# One run on a machine lent with an NVIDIA GPU (the session's device tool): install the cuda extra, run the
# GPU tests and the GPU benchmark, write everything under $OUT. Each step is bounded and recorded; a step
# that fails does not stop the ones after it.
#   run: bash benchmarks/gpu_device.sh        (OUT defaults to bench-results/gpu)
set -u
OUT=${OUT:-bench-results/gpu}
mkdir -p "$OUT"
{
  date -u
  nvidia-smi || echo "no nvidia-smi"
} > "$OUT/machine.txt" 2>&1
python3 -m venv .venv-gpu
. .venv-gpu/bin/activate
timeout 240 pip install -q -e '.[dev,cuda]' > "$OUT/install.txt" 2>&1; echo "install rc=$?" >> "$OUT/install.txt"
# PyTorch on CUDA is a baseline only: a CUDA build of the pinned torch, where the index has one
timeout 120 pip install -q 'torch==2.13.0' >> "$OUT/install.txt" 2>&1; echo "torch rc=$?" >> "$OUT/install.txt"
timeout 240 python -m pytest -q -n 4 tests/cuda > "$OUT/pytest-cuda.txt" 2>&1; echo "pytest rc=$?" >> "$OUT/pytest-cuda.txt"
timeout 240 python -m benchmarks.gpu --json "$OUT/gpu.json" > "$OUT/gpu.txt" 2>&1; echo "bench rc=$?" >> "$OUT/gpu.txt"
tail -n 5 "$OUT"/*.txt
