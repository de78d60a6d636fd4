#!/usr/bin/env bash
# One run on a machine lent with an NVIDIA GPU (this workplace's device tool; it reaches no package index):
# the CUDA tests (the emulated ones, and the same kernels and random schedules run on the GPU), the GPU
# benchmark, a short tuning on the GPU (sched autoschedule --target cuda, its answer run), and the hand GPU
# schedules under compute-sanitizer's memcheck and racecheck (SANITIZERS=0 skips them). Everything goes
# under $OUT; each step is bounded in time, and one that fails does not stop the ones after it.
#   run: bash benchmarks/gpu_device.sh        (OUT defaults to bench-results/gpu)
# The machine's python3 has CuPy, NumPy, sympy, pytest and hypothesis; the rest travels in .whl/ (made by
# benchmarks/gpu_wheels.sh: wheels, and llvmlite's wheel unpacked as llvmlite.tar.xz to fit the limit).
# Without .whl/, the cuda and dev extras are installed from the index.
set -u
OUT=${OUT:-bench-results/gpu}
mkdir -p "$OUT"
{ date -u; nvidia-smi; python3 -V; } > "$OUT/machine.txt" 2>&1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl > "$OUT/install.txt" 2>&1
  tar -xJf .whl/llvmlite.tar.xz -C /tmp/site >> "$OUT/install.txt" 2>&1
  export PYTHONPATH=/tmp/site:$PWD
else
  python3 -m venv .venv-gpu && . .venv-gpu/bin/activate
  timeout 240 pip install -q -e '.[dev,cuda]' > "$OUT/install.txt" 2>&1
fi
python3 -c "import cupy, llvmlite, islpy, optuna, numpy, ragsched
from ragsched.codegen import target
print('cupy', cupy.__version__, 'llvmlite', llvmlite.__version__, 'islpy', islpy.__version__, 'optuna',
      optuna.__version__, 'numpy', numpy.__version__, 'gpu_present', target.gpu_present())
from ragsched.codegen.cuda import nvrtc
src = 'extern \"C\" __global__ void k(float* a) { a[threadIdx.x] *= 2; }'
print('nvrtc', nvrtc.version(), nvrtc.library()._name, 'ptxas log lengths of two compiles',
      [len(nvrtc.compile_cuda(src).log) for _ in range(2)])" >> "$OUT/machine.txt" 2>&1
export PYTHONUNBUFFERED=1 RAGSCHED_EXAMPLES=${RAGSCHED_EXAMPLES:-100}
timeout 200 python3 -m pytest -q -n 8 -p no:cacheprovider -rs tests/cuda > "$OUT/pytest-cuda.txt" 2>&1
echo "pytest rc=$?" >> "$OUT/pytest-cuda.txt"
# tuning on the GPU end to end: candidates timed there, the answer written and run
timeout "${TUNE_S:-120}" python3 -m ragsched.cli autoschedule pipelines/blur.py --target cuda --trials 8 --seed 1 \
  --storage /tmp/gpu-tune.journal -o /tmp/blur.cuda.schedule.json > "$OUT/tune.txt" 2>&1
echo "autoschedule rc=$?" >> "$OUT/tune.txt"
timeout 60 python3 -m ragsched.cli run pipelines/blur.py --target cuda --schedule /tmp/blur.cuda.schedule.json \
  >> "$OUT/tune.txt" 2>&1; echo "run rc=$?" >> "$OUT/tune.txt"
timeout "${BENCH_S:-120}" python3 -m benchmarks.gpu --json "$OUT/gpu.json" > "$OUT/gpu.txt" 2>&1
echo "bench rc=$?" >> "$OUT/gpu.txt"
[ "${SANITIZERS:-1}" = 1 ] && for tool in memcheck racecheck; do
  timeout 75 compute-sanitizer --tool $tool --error-exitcode 7 python3 -m pytest -q -p no:cacheprovider -p no:xdist \
    tests/cuda/test_device.py -k "gpu and (attention or blur or harris or batched_gemm)" > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$?" >> "$OUT/$tool.txt"
done
tail -n 4 "$OUT"/machine.txt; tail -n 25 "$OUT"/pytest-cuda.txt; tail -n 30 "$OUT"/tune.txt; tail -n 30 "$OUT"/gpu.txt
tail -n 6 "$OUT"/memcheck.txt "$OUT"/racecheck.txt 2>/dev/null
