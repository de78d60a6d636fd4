"""``make demo``: compile the bundled pipelines, check them against NumPy, and time them; then the ragged
ones (attention and a transformer encoder layer over the first 128 MNLI sentences) with their hand
schedules, beside NumPy computing one sequence at a time."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from .cli import _compare
from .pipeline_file import load
from .runtime.timing import median_time

PIPELINES = ("blur", "unsharp", "harris", "matmul", "softmax")


def main(scale: str = "full") -> int:
    root = Path(__file__).resolve().parent.parent / "pipelines"
    print(f"ragsched demo: {len(PIPELINES)} pipelines, default schedule, {scale} inputs, "
          f"{os.cpu_count()} CPU cores\n")
    head = f"{'pipeline':<10} {'result':<9} {'compile':>14} {'ragsched':>11} {'NumPy':>11} {'speed-up':>9}"
    print(head)
    print("-" * len(head))
    failures = 0
    for name in PIPELINES:
        pf = load(root / f"{name}.py")
        inputs = pf.inputs(scale)
        t0 = time.perf_counter()
        kern = pf.pipeline().compile()
        t_compile = time.perf_counter() - t0
        ok, _ = _compare(kern(**inputs), pf.reference(inputs))
        failures += not ok
        # the correctness run above was the warm-up; slow kernels get fewer repeats
        t0 = time.perf_counter()
        kern(**inputs)
        repeats = 5 if time.perf_counter() - t0 < 0.5 else 1
        t_ours = median_time(lambda k=kern, i=inputs: k(**i), repeats=repeats, warmup=0)
        t_np = median_time(lambda p=pf, i=inputs: p.reference(i), repeats=5)
        print(f"{name:<10} {'ok' if ok else 'MISMATCH':<9} {t_compile * 1e3:7.0f} ms {kern.stats.cache:>5} "
              f"{t_ours * 1e3:8.2f} ms {t_np * 1e3:8.2f} ms {t_np / t_ours:8.3g}x")
    failures += ragged(root, scale)
    print("\ncompile: wall time of .compile() (cache: miss = LLVM ran, disk = loaded from the kernel cache)")
    print("speed-up: NumPy time / ragsched time, medians of 5 runs (1 for runs over 0.5 s); > 1 means "
          "ragsched is faster")
    return 1 if failures else 0


def ragged(root: Path, scale: str) -> int:
    """The ragged pipelines with their hand schedules; NumPy is their reference (one sequence at a time,
    nothing padded). Returns the number of mismatches."""
    print(f"\nragged pipelines, hand schedules, {'the first 128 MNLI sentences' if scale == 'full' else scale} "
          "(no padded token computed); reference: the file's NumPy reference(), one sequence at a time "
          "(python -m benchmarks.ragged times faster NumPy and PyTorch ways)\n")
    head = f"{'pipeline':<10} {'result':<9} {'compile':>14} {'ragsched':>11} {'reference':>11} {'speed-up':>9}"
    print(head)
    print("-" * len(head))
    failures = 0
    for name in ("attention", "encoder"):
        pf = load(root / f"{name}.py")
        inputs = pf.inputs(scale)
        t0 = time.perf_counter()
        kern = pf.pipeline("hand").compile()
        t_compile = time.perf_counter() - t0
        ok, _ = _compare(kern(**inputs), pf.reference(inputs))
        failures += not ok
        t_ours = median_time(lambda k=kern, i=inputs: k(**i), repeats=5)
        t_np = median_time(lambda p=pf, i=inputs: p.reference(i), repeats=5)
        print(f"{name:<10} {'ok' if ok else 'MISMATCH':<9} {t_compile * 1e3:7.0f} ms {kern.stats.cache:>5} "
              f"{t_ours * 1e3:8.2f} ms {t_np * 1e3:8.2f} ms {t_np / t_ours:8.3g}x")
    return failures


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "full"))
