"""``make bench``: side-by-side timings in one run, printed as a table and written as JSON.

For each bundled pipeline: compile time cold (empty kernel cache, a fresh process) and from the disk
cache (a second fresh process), the median run time of ragsched with the default schedule and with the
pipeline file's hand schedule, and of the NumPy version; plus the per-call overhead of a trivial kernel.
With a schedule the autoscheduler wrote (``schedules/NAME.json``, ``make autoschedule``), its median
run time too, and its tuning time when the study's journal is there. For the pipelines that have a
Halide version (benchmarks/halide_apps.py), the median run time of Halide with the app's hand schedule
and with each autoscheduler of the wheel, in the same run and with the same thread count. The ratio of
ragsched's hand schedule to Halide's comes from the two timed alternately (``head_to_head``), because
this machine's speed drifts over the minutes between the other columns.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from benchmarks import compile_time, write_results

ROOT = Path(__file__).resolve().parent.parent
SCHEDULES = ROOT / "schedules"  # what make autoschedule wrote (schedules/<isa>/NAME.json)
PIPELINES = ("blur", "unsharp", "harris", "matmul", "softmax", "local_laplacian", "bilateral_grid", "conv_layer",
             "attention", "trimatmul", "batched_gemm", "encoder")
HALIDE_COLUMNS = {"hand": "Halide hand", "Mullapudi2016": "Mullapudi16", "Adams2019": "Adams19", "Li2018": "Li18"}
# Largest error relative to max |reference| that still matches, where the default 1e-3 is too tight:
# local_laplacian's remapping LUT is indexed by a truncated float, so a last-bit difference in the gray
# level (FMA contraction, summation order) moves a few hundred pixels by one LUT entry, about 1.4e-3 of
# the output range at the "full" size.
TOLERANCE = {"local_laplacian": 5e-3}

def compile_times(name: str) -> dict:
    """Cold and cached compile time of the default schedule, each in a fresh process (imports excluded)."""
    return compile_time.compile_times(ROOT / "pipelines" / f"{name}.py")


def run_times(name: str, scale: str, repeats: int, threads: int | None = None) -> tuple[dict, object, object]:
    """Median times of ragsched with the default schedule and with the file's hand schedule (into a
    preallocated output, as the Halide variants run) and of the NumPy reference; and the hand-scheduled
    call itself and the autoscheduled one (or None), for the head-to-heads with Halide's."""
    from ragsched.pipeline_file import load, tuned_isa, tuned_schedule
    from ragsched.runtime.compare import matches
    from ragsched.runtime.timing import median_time

    pf = load(ROOT / "pipelines" / f"{name}.py")
    inputs = pf.inputs(scale)
    want = pf.reference(inputs)
    out, hand_call, calls = {}, None, {}
    auto = tuned_schedule(SCHEDULES, name)
    for key, sched in (("ragsched", None), ("ragsched_hand", "hand"), ("ragsched_auto", auto)):
        if sched == "hand" and not pf.has_hand_schedule or key == "ragsched_auto" and auto is None:
            continue
        kern = pf.pipeline(sched).compile(threads=threads)
        got = kern(**inputs)
        ok, err = matches(got, want)
        ok = ok or err <= TOLERANCE.get(name, 0.0)
        t = median_time(lambda kern=kern, got=got: kern(**inputs, out=got), repeats=repeats)
        out.update({f"{key}_ms": t * 1e3, f"{key}_matches": ok, f"{key}_max_rel_error": err})
        if sched == "hand":
            out["hand_compile_s"] = kern.stats.total_s
            hand_call = lambda kern=kern, got=got: kern(**inputs, out=got)  # noqa: E731
        if sched == auto:
            calls["auto"] = lambda kern=kern, got=got: kern(**inputs, out=got)  # noqa: E731
    t_np = median_time(lambda: pf.reference(inputs), repeats=repeats)
    if auto is not None:
        out["tuning"] = tuning_record(auto.with_suffix(".journal"))
        out["auto_tuned_for"] = tuned_isa(auto)  # the vector instruction set it was tuned on
    out.update({"matches": all(v for k, v in out.items() if k.endswith("_matches")),
                "numpy_ms": t_np * 1e3, "numpy_over_ragsched": t_np * 1e3 / out["ragsched_ms"]})
    return out, hand_call, calls.get("auto")


def tuning_record(journal: Path) -> dict | None:
    """Trials and tuning time (first trial's start to last trial's end) of the study in ``journal``."""
    if not journal.is_file():
        return None
    import optuna

    from ragsched.autosched import open_storage

    storage = open_storage(journal)
    study = optuna.load_study(study_name=optuna.get_all_study_names(storage)[-1], storage=storage)
    trials = [t for t in study.trials if t.datetime_start is not None and t.datetime_complete is not None]
    if not trials:
        return None
    span = max(t.datetime_complete for t in trials) - min(t.datetime_start for t in trials)
    ok = sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    return {"trials": len(trials), "measured": ok, "seconds": span.total_seconds()}


def head_to_head(ours, theirs, repeats: int) -> tuple[float, float]:
    """Medians (s) of two calls timed alternately (``held_out.alternate``: each run twice in a row per
    round, the second timed): both see the same machine state, so their ratio is steadier than that of
    medians taken minutes apart."""
    from benchmarks.held_out import alternate

    t = alternate({"ours": ours, "theirs": theirs}, repeats)
    return t["ours"], t["theirs"]


def halide_times(name: str, scale: str, repeats: int, threads: int, adams_beam: int, rs_hand=None,
                 rs_auto=None) -> dict:
    """Median run time of each Halide variant, or the reason it could not be built or run; with
    ``rs_hand``, also ragsched's hand schedule and Halide's timed alternately (``head_to_head``); with
    ``rs_auto``, ragsched's autoscheduled kernel and each Halide variant timed alternately."""
    import numpy as np

    from benchmarks.halide_apps import halide_variants
    from ragsched.pipeline_file import load
    from ragsched.runtime.timing import median_time

    pf = load(ROOT / "pipelines" / f"{name}.py")
    inputs = pf.inputs(scale)
    want = np.asarray(pf.reference(inputs), np.float64)
    scale_ = float(np.abs(want).max()) or 1.0
    tol = TOLERANCE.get(name, 1e-3)
    out = {}
    variants = halide_variants(name, inputs, threads=threads,
                               autoscheduler_params={"Adams2019": {"beam_size": str(adams_beam)}})
    for v, run in variants.items():
        if isinstance(run, str):
            out[v] = {"error": run}
            continue
        err = float(np.abs(run().astype(np.float64) - want).max()) / scale_
        out[v] = {"ms": median_time(run, repeats=repeats) * 1e3, "matches": err <= tol, "max_rel_error": err,
                  "schedule_s": run.schedule_s, "compile_s": run.compile_s}
        if v == "hand" and rs_hand is not None:
            ours, theirs = head_to_head(rs_hand, run, 2 * repeats + 1)
            out["head_to_head"] = {"ragsched_hand_ms": ours * 1e3, "halide_hand_ms": theirs * 1e3}
        if rs_auto is not None:
            ours, theirs = head_to_head(rs_auto, run, 2 * repeats + 1)
            out[v]["auto_head_to_head"] = {"ragsched_auto_ms": ours * 1e3, "halide_ms": theirs * 1e3}
    return out


def _halide_cell(r: dict | None) -> str:
    if r is None:
        return ""
    if "error" in r:
        return f"{'failed':>11}"
    return f"{r['ms']:8.2f} ms" + ("" if r["matches"] else "!")


def call_overhead() -> dict:
    import numpy as np

    import ragsched as rs
    from ragsched.runtime.timing import median_time

    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [n])
    f = rs.Func("trivial", shape=[n])
    f[x] = a[x] + 1
    k = f.compile()
    arr, out = np.ones(16, np.float32), np.empty(16, np.float32)
    calls = {"alloc_out_us": lambda: k(a=arr), "given_out_us": lambda: k(a=arr, out=out),
             "numpy_us": lambda: np.add(arr, 1.0), "numpy_out_us": lambda: np.add(arr, 1.0, out=out)}
    try:
        import torch

        t, tout = torch.from_numpy(arr), torch.from_numpy(out)
        calls.update({"torch_us": lambda: torch.add(t, 1.0), "torch_out_us": lambda: torch.add(t, 1.0, out=tout),
                      "torch_in_us": lambda: k(a=t)})
    except ImportError:
        pass
    # in turns, so that the machine's drift hits them alike
    samples: dict = {name: [] for name in calls}
    for _ in range(5):
        for name, call in calls.items():
            samples[name].append(median_time(call, repeats=3, min_time=0.02) * 1e6)
    return {name: sorted(v)[len(v) // 2] for name, v in samples.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks")
    ap.add_argument("--scale", default="full", choices=("small", "full"))
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--only", nargs="*", default=list(PIPELINES))
    ap.add_argument("-o", "--output", default=str(ROOT / "bench-results" / "latest.json"))
    ap.add_argument("--threads", type=int, default=2, help="worker threads of ragsched and Halide")
    ap.add_argument("--no-halide", action="store_true", help="skip the Halide baselines")
    ap.add_argument("--adams-beam", type=int, default=32,
                    help="Adams2019's beam size (32, its default, searches for minutes on large pipelines; "
                         "1 is a fast greedy pass)")
    args = ap.parse_args(argv)
    from benchmarks import halide_apps

    halide = not args.no_halide and halide_apps.available()

    from ragsched.codegen.target import machine_line, machine_summary

    results = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": platform.machine(),
               "cpus": os.cpu_count(), "host": machine_summary(), "python": platform.python_version(),
               "scale": args.scale, "threads": args.threads, "pipelines": {}}
    print(machine_line())
    if halide:
        import importlib.metadata

        results["halide"] = {"version": importlib.metadata.version("halide"), "threads": args.threads,
                             "adams2019": {"beam_size": args.adams_beam}}
    head = (f"{'pipeline':<15} {'cold compile':>13} {'cached':>9} {'ragsched':>11} {'NumPy':>11} "
            f"{'NumPy/ragsched':>15} {'rs hand':>11} {'rs auto':>11}")
    if halide:
        head += "".join(f" {label:>11}" for label in HALIDE_COLUMNS.values()) + f" {'rs/Halide hand':>15}"
    print(head)
    print("-" * len(head))
    errors = []
    for name in args.only:
        ct = compile_times(name)
        rt, rs_hand, rs_auto = run_times(name, args.scale, args.repeats, args.threads)
        results["pipelines"][name] = {"compile": ct, **rt}
        line = (f"{name:<15} {ct['cold']['seconds'] * 1e3:10.0f} ms {ct['cached']['seconds'] * 1e3:6.0f} ms "
                f"{rt['ragsched_ms']:8.2f} ms {rt['numpy_ms']:8.2f} ms {rt['numpy_over_ragsched']:14.3g}x")
        hand_ms = rt.get("ragsched_hand_ms")
        line += f" {hand_ms:8.2f} ms" if hand_ms is not None else f" {'-':>11}"
        auto_ms = rt.get("ragsched_auto_ms")
        line += f" {auto_ms:8.2f} ms" if auto_ms is not None else f" {'-':>11}"
        if halide and name in halide_apps.APPS:
            ht = halide_times(name, args.scale, args.repeats, args.threads, args.adams_beam, rs_hand, rs_auto)
            results["pipelines"][name]["halide"] = ht
            line += "".join(f" {_halide_cell(ht.get(v)):>11}" for v in HALIDE_COLUMNS)
            h2h = ht.get("head_to_head")
            if h2h:
                ratio = h2h["ragsched_hand_ms"] / h2h["halide_hand_ms"]
                results["pipelines"][name]["hand_over_halide_hand"] = ratio
                line += f" {ratio:14.2f}x"
            errors += [f"{name} {v}: {r['error']}" for v, r in ht.items() if "error" in r]
        elif halide:
            line += "".join(f" {'-':>11}" for _ in HALIDE_COLUMNS) + f" {'-':>15}"
        print(line + ("" if rt["matches"] else "  MISMATCH"), flush=True)
        if halide and name in halide_apps.APPS:
            pairs = [(label, ht[v]["auto_head_to_head"]) for v, label in HALIDE_COLUMNS.items()
                     if "auto_head_to_head" in ht.get(v, {})]
            if pairs:
                print(f"{'':<15} rs auto / Halide, timed alternately: " + ", ".join(
                    f"{label} {h['ragsched_auto_ms'] / h['halide_ms']:.2f}x" for label, h in pairs), flush=True)
    if halide:
        print(f"\nHalide {results['halide']['version']}, {args.threads} threads, Adams2019 beam_size "
              f"{args.adams_beam}; '!' marks a result that does not match the reference; rs/Halide hand is the "
              "ratio of the medians of the two hand schedules timed alternately")
        for e in errors:
            print("  " + e.splitlines()[0][:200])
    elif not args.no_halide:
        print("\n(the halide package is not installed: no Halide columns)")
    results["call_overhead"] = call_overhead()
    co = results["call_overhead"]
    torch_part = (f"; torch {co['torch_us']:.2f} / {co['torch_out_us']:.2f} us; ragsched called with a torch "
                  f"tensor {co['torch_in_us']:.2f} us") if "torch_us" in co else ""
    print(f"\nper-call overhead of a trivial kernel (16 floats, a + 1), repeated calls: {co['alloc_out_us']:.2f} us "
          f"(output allocated), {co['given_out_us']:.2f} us (out= given); NumPy {co['numpy_us']:.2f} / "
          f"{co['numpy_out_us']:.2f} us" + torch_part)
    write_results(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
