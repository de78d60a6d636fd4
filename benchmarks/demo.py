"""``make demo``: the autoscheduler on ragged attention over 128 MNLI sentences (under a minute of tuning),
its schedule checked against the NumPy reference and timed beside the hand schedule, NumPy and PyTorch;
then the bundled dense pipelines (the default schedule, the autoscheduler's rules and the tuned schedule)
and the ragged encoder layer (hand schedule) against NumPy; then the CUDA path (compiled by NVRTC,
checked in the GPU emulator, or run on a GPU)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ragsched.pipeline_file import load
from ragsched.runtime.compare import matches
from ragsched.runtime.timing import median_time

PIPELINES = ("blur", "unsharp", "harris", "matmul", "softmax")


def autoscheduled_attention(root: Path, budget_s: float = 45.0, batch: int = 128, repeats: int = 5) -> int:
    """Tune attention for ``budget_s`` seconds on an MNLI batch, then time the best schedule beside the
    hand schedule and the NumPy and PyTorch ways (benchmarks.ragged). Returns the number of mismatches."""
    import numpy as np

    from benchmarks.ragged import DIM, HEADS, lengths, measure_row, print_row, score_multiple, workloads
    from ragsched.autosched import tune

    pf, work = load(root / "attention.py"), workloads()["attention"]
    lens = lengths("mnli", batch)
    inputs = work.make_inputs(lens, np.random.default_rng(1))
    print(f"autoschedule: ragged attention ({HEADS} heads x {DIM}) over {batch} MNLI sentences (mean length "
          f"{lens.mean():.0f}, max {lens.max()}), at most {budget_s:.0f} s of tuning; every candidate is checked "
          "against the NumPy reference in a worker process")
    result = tune(pf.pipeline(), trials=200, timeout=budget_s, inputs=inputs, reference=pf.reference(inputs), seed=0,
                  repeats=min(repeats, 3))
    failed = ", ".join(f"{n} {k}" for k, n in sorted(result.failures.items())) or "none"
    print(f"{result.trials} trials in {result.tuning_s:.0f} s (failed: {failed}); the schedule found:\n")
    print(result.schedule.to_python())
    pipes = {"ragsched autoscheduled": pf.pipeline(result.schedule), "ragsched hand": pf.pipeline("hand")}
    row = measure_row(work, {k: p.compile() for k, p in pipes.items()}, pf, "mnli", batch, np.random.default_rng(0),
                      repeats=repeats, multiples={k: score_multiple(p) for k, p in pipes.items()})
    print_row(row)
    return sum(not r.get("matches", True) for name, r in row["variants"].items() if name.startswith("ragsched"))


def main(scale: str = "full") -> int:
    from ragsched.codegen.target import default, machine_line

    print(machine_line())
    root = Path(__file__).resolve().parent.parent / "pipelines"
    failures = autoscheduled_attention(root) if scale == "full" else 0
    isa = default().isa
    print(f"\nragsched demo: {len(PIPELINES)} dense pipelines, {scale} inputs, {os.cpu_count()} CPU cores, three "
          f"schedules each: the default (every Func at root, loops serial, in order), the autoscheduler's rules "
          f"(rs.autoschedule(trials=0): nothing measured) and the one tuned for {isa} (schedules/{isa}/, where "
          "there is one)\n")
    head = (f"{'pipeline':<10} {'result':<9} {'default':>11} {'rules':>11} {'tuned':>11} {'NumPy':>11} "
            f"{'rules vs NumPy':>15}  compile ms (default, rules, tuned)")
    print(head)
    print("-" * len(head))
    for name in PIPELINES:
        failures += _dense_row(root, name, scale, isa)
    failures += ragged(root, scale)
    failures += cuda()
    print("\ncompile: wall time of .compile(), LLVM run unless marked cached (the same code compiled before: from "
          "the kernel cache); times: medians of 5 runs (1 for runs over 0.5 s)")
    print("rules vs NumPy: NumPy time / ragsched time with the rules' schedule; > 1 means ragsched is faster")
    return 1 if failures else 0


def _dense_row(root: Path, name: str, scale: str, isa: str) -> int:
    """One pipeline under the default schedule, the rules' and the tuned one, each checked against the
    NumPy reference and timed beside it; prints a row and returns the number of mismatches."""
    import ragsched as rs
    from ragsched.pipeline_file import tuned_isa, tuned_schedule

    pf = load(root / f"{name}.py")
    inputs = pf.inputs(scale)
    # a tuned file is tuned for the full inputs (its tiles may need outputs that large)
    tuned = tuned_schedule(root.parent / "schedules", name) if scale == "full" else None
    schedules = {"default": None, "rules": rs.autoschedule(list(pf.outputs()), trials=0, inputs=inputs),
                 "tuned": str(tuned) if tuned is not None else None}
    want = pf.reference(inputs)
    times, compiles, ok = {}, {}, True
    for label, sched in schedules.items():
        if label == "tuned" and sched is None:
            continue
        t0 = time.perf_counter()
        kern = pf.pipeline(sched).compile()
        compiles[label] = f"{(time.perf_counter() - t0) * 1e3:.0f}" + ("" if kern.stats.cache == "miss" else " cached")
        ok &= matches(kern(**inputs), want)[0]
        t0 = time.perf_counter()  # the correctness run above was the warm-up; slow kernels get fewer repeats
        kern(**inputs)
        repeats = 5 if time.perf_counter() - t0 < 0.5 else 1
        times[label] = median_time(lambda k=kern, i=inputs: k(**i), repeats=repeats, warmup=0)
    t_np = median_time(lambda p=pf, i=inputs: p.reference(i), repeats=5)

    def cell(label):
        return f"{times[label] * 1e3:8.2f} ms" if label in times else f"{'-':>11}"

    other = f" ({tuned_isa(tuned)}'s)" if tuned is not None and tuned_isa(tuned) != isa else ""
    print(f"{name:<10} {'ok' if ok else 'MISMATCH':<9} {cell('default')} {cell('rules')} {cell('tuned')} "
          f"{t_np * 1e3:8.2f} ms {t_np / times['rules']:14.3g}x  "
          + ", ".join(compiles.values()) + other)
    return 0 if ok else 1


def cuda() -> int:
    """The CUDA path: two pipelines' GPU kernels compiled for sm_90 by NVRTC (ptxas's figures) and checked in
    the GPU emulator; run on the device where there is one (``python -m benchmarks.gpu`` times them)."""
    from benchmarks.gpu import compile_report
    from ragsched.codegen import target as targets

    gpu = targets.gpu_present()
    print("\nCUDA: hand GPU schedules compiled for sm_90 (NVRTC, no GPU needed) and run in the GPU emulator on the "
          "small inputs (every access checked for bounds and races)" + ("; a GPU is present: "
          "python -m benchmarks.gpu times them on it" if gpu else "; no GPU here") + "\n")
    failures = 0
    for name in ("blur", "attention"):
        row = compile_report(name)
        ok = row.get("emulator_ok", False)
        failures += not ok
        print(f"{name:<10} {'ok' if ok else 'MISMATCH':<9} {row['kernels']:>3} kernels, NVRTC {row['nvrtc_s']:.2f} s, "
              f"at most {row['max_registers']} registers, {row['spill_bytes']} B spilled, "
              f"{row['max_shared_bytes']} B shared; emulator {row['emulator_s']:.1f} s")
    return failures


def ragged(root: Path, scale: str) -> int:
    """The encoder layer with its hand schedule; NumPy is its reference (one sequence at a time, nothing
    padded). Returns the number of mismatches."""
    print(f"\nragged encoder layer, hand schedule, {'the first 128 MNLI sentences' if scale == 'full' else scale} "
          "(no padded token computed); reference: the file's NumPy reference(), one sequence at a time "
          "(python -m benchmarks.ragged times faster NumPy and PyTorch ways)\n")
    head = f"{'pipeline':<10} {'result':<9} {'compile':>14} {'ragsched':>11} {'reference':>11} {'speed-up':>9}"
    print(head)
    print("-" * len(head))
    failures = 0
    for name in ("encoder",):
        pf = load(root / f"{name}.py")
        inputs = pf.inputs(scale)
        t0 = time.perf_counter()
        kern = pf.pipeline("hand").compile()
        t_compile = time.perf_counter() - t0
        ok, _ = matches(kern(**inputs), pf.reference(inputs))
        failures += not ok
        t_ours = median_time(lambda k=kern, i=inputs: k(**i), repeats=5)
        t_np = median_time(lambda p=pf, i=inputs: p.reference(i), repeats=5)
        print(f"{name:<10} {'ok' if ok else 'MISMATCH':<9} {t_compile * 1e3:7.0f} ms {kern.stats.cache:>5} "
              f"{t_ours * 1e3:8.2f} ms {t_np * 1e3:8.2f} ms {t_np / t_ours:8.3g}x")
    return failures


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "full"))
