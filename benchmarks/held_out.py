"""``python -m benchmarks.held_out`` (part of ``make bench``): the held-out suite, pipelines written from
Halide's apps that no rule, search space or default of the autoscheduler was written beside
(``pipelines/held_out/``), reported apart from the bundled ones.

Per app, in one process and with the same thread count: ragsched's default schedule, the autoscheduler's
rules alone (``trials=0``: nothing measured), its tuned schedule (``schedules/held_out/<isa>/NAME.json``, from
``make autoschedule-held-out``: the one for this host's vector instruction set, else one tuned on another) where
there is one, and that schedule compiled with ``fast_math=True``
(float32 exp, log and pow to looser bounds, as loose as Halide's own or less: docs/language.md), Halide's
hand schedule and its three autoschedulers.
All of them are timed alternately, one run of each per round, so that the machine's drift over minutes
does not enter their ratios; each figure is a median over rounds. Cold and cached compile times are each
measured in a fresh process (imports excluded).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import write_results
from benchmarks.compile_time import compile_times

ROOT = Path(__file__).resolve().parent.parent
HELD_OUT = ROOT / "pipelines" / "held_out"
TUNED = ROOT / "schedules" / "held_out"  # what make autoschedule-held-out wrote (TUNED/<isa>/NAME.json)
HALIDE = {"hand": "Halide hand", "Mullapudi2016": "Mullapudi16", "Adams2019": "Adams19", "Li2018": "Li18"}

#: runs of a call in a row per round, the last one timed. A run's time depended on what ran just before
#: it: Halide's Adams2019 resize took 15.9 ms right after a ragsched kernel, 13.4 after Halide's
#: Mullapudi2016 schedule, and 12.2-13.1 on its second run in a row, which moved the ratio of ragsched's
#: resize to it from 0.76x to 1.00x in one hour (znver4, 2 threads). Mostly libgomp's: its threads spin a
#: while after a parallel region and take the second core from what runs next (Halide's hand hist_eq
#: right after ragsched's kernel: 7.21 ms, 3.80 with OMP_WAIT_POLICY=passive). Two in a row times each
#: call as it runs called again, while the rounds still share the machine's drift.
IN_A_ROW = 2


def alternate(calls: dict, rounds: int) -> dict:
    """Median seconds of each call, timed in turns: per round, ``IN_A_ROW`` runs of each, the last timed,
    after one warm-up run."""
    samples = {k: [] for k in calls}
    for call in calls.values():
        call()
    for _ in range(rounds):
        for k, call in calls.items():
            for _ in range(IN_A_ROW - 1):
                call()
            t0 = time.perf_counter()
            call()
            samples[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


def run_app(name: str, scale: str, threads: int, rounds: int, adams_beam: int, halide: bool) -> dict:
    import numpy as np

    import ragsched as rs
    from ragsched.pipeline_file import load, tuned_isa, tuned_schedule

    path = HELD_OUT / f"{name}.py"
    pf = load(path)
    inputs = pf.inputs(scale)
    want = pf.reference(inputs)
    rtol, atol = pf.module.TOLERANCE
    atol *= float(np.abs(want).max())
    result: dict = {"compile": {}, "ms": {}, "matches": {}, "errors": {}}
    calls = {}
    with tempfile.TemporaryDirectory() as tmp:
        rules = rs.autoschedule(list(pf.outputs()), trials=0, inputs=inputs, threads=threads)
        rules_file = Path(tmp) / f"{name}.rules.json"
        rules_file.write_text(rules.to_json())
        schedules = {"default": "default", "rules": str(rules_file)}
        tuned = tuned_schedule(TUNED, name)
        if tuned is not None:
            schedules["tuned"] = str(tuned)
            result["tuned_for"] = tuned_isa(tuned)  # the vector instruction set it was tuned on
        if pf.has_hand_schedule:
            schedules["rs_hand"] = "hand"
        for label, sched in schedules.items():
            result["compile"][label] = {k: v["seconds"] for k, v in compile_times(path, sched, threads).items()}
            kern = pf.pipeline(None if sched == "default" else sched).compile(threads=threads)
            out = kern(**inputs)
            result["matches"][label] = bool(np.allclose(out, want, rtol=rtol, atol=atol))
            calls[label] = lambda kern=kern, out=out: kern(**inputs, out=out)
        if "tuned" in schedules:  # the same schedule with fast math (Halide's own math is that loose)
            kern = pf.pipeline(schedules["tuned"]).compile(threads=threads, fast_math=True)
            out = kern(**inputs)
            result["matches"]["tuned_fast"] = bool(np.allclose(out, want, rtol=rtol, atol=atol))
            calls["tuned_fast"] = lambda kern=kern, out=out: kern(**inputs, out=out)
    if halide:
        from benchmarks.halide_apps import halide_variants

        variants = halide_variants(name, inputs, threads=threads,
                                   autoscheduler_params={"Adams2019": {"beam_size": str(adams_beam)}})
        for v, run in variants.items():
            if isinstance(run, str):
                result["errors"][v] = run
                continue
            result["matches"][v] = bool(np.allclose(run(), want, rtol=rtol, atol=atol))
            calls[v] = run
    result["ms"] = {k: s * 1e3 for k, s in alternate(calls, rounds).items()}
    return result


def run_app_apart(*args) -> dict:
    """``run_app`` in a fresh process: what one app's variants keep (Halide's autoschedulers keep most of
    what they allocate: Adams2019 on nl_means held 14 GB) is given back before the next app starts,
    instead of adding up until the machine runs out (the whole suite in one process was killed at 24 GB)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(run_app, *args).result()


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main(argv=None) -> int:
    from pipelines.held_out import NAMES

    ap = argparse.ArgumentParser(prog="python -m benchmarks.held_out", description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", default="full", choices=("small", "full"), help="input sizes (default: full)")
    ap.add_argument("--rounds", type=int, default=9, help="rounds of alternate timing (default: 9)")
    ap.add_argument("--threads", type=int, default=2, help="threads of ragsched and Halide (default: 2)")
    ap.add_argument("--only", nargs="*", default=list(NAMES), help="apps to run (default: all)")
    ap.add_argument("--no-halide", action="store_true", help="skip the Halide baselines")
    ap.add_argument("--adams-beam", type=int, default=32, help="Adams2019's beam size (default: 32, its own)")
    ap.add_argument("-o", "--output", default=str(ROOT / "bench-results" / "held_out.json"))
    args = ap.parse_args(argv)
    from benchmarks import halide_apps
    from ragsched.codegen.target import machine_line, machine_summary

    halide = not args.no_halide and halide_apps.available()
    results = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "host": machine_summary(), "scale": args.scale,
               "threads": args.threads, "rounds": args.rounds, "apps": {}}
    print(f"held-out suite (pipelines/held_out: no rule, search space or default names them); {machine_line()}")
    cols = ["default", "rules", "tuned", "tuned_fast", "rs_hand"] + (list(HALIDE) if halide else [])
    labels = {"default": "rs default", "rules": "rs rules", "tuned": "rs tuned", "tuned_fast": "tuned+fast",
              "rs_hand": "rs hand", **HALIDE}
    head = f"{'app':<15} {'compile cold/cached (default, rules, tuned, hand)':>52}"
    head += "".join(f" {labels[c]:>11}" for c in cols)
    print(head)
    print("-" * len(head))
    for name in args.only:
        r = run_app_apart(name, args.scale, args.threads, args.rounds, args.adams_beam, halide)
        results["apps"][name] = r
        comp = ", ".join(f"{c['cold'] * 1e3:.0f}/{c['cached'] * 1e3:.0f}" for c in r["compile"].values())
        cells = []
        for c in cols:
            ms = r["ms"].get(c)
            cells.append(f"{'-' if c not in r['errors'] else 'failed':>11}" if ms is None else
                         f"{ms:8.2f} ms" + ("" if r["matches"].get(c, True) else "!"))
        print(f"{name:<15} {comp + ' ms':>52}" + "".join(f" {x:>11}" for x in cells), flush=True)
        if r.get("tuned_for", results["host"]["isa"]) != results["host"]["isa"]:
            print(f"{'':<15} (rs tuned: tuned on {r['tuned_for']}, not this host's {results['host']['isa']})")
    ratios = {}
    for num, den in (("rules", "default"), ("rules", "Adams2019"), ("tuned", "Adams2019"), ("tuned", "hand"),
                     ("tuned_fast", "Adams2019"), ("tuned_fast", "hand"), ("default", "Adams2019"),
                     ("rs_hand", "hand")):
        xs = {n: a["ms"][num] / a["ms"][den] for n, a in results["apps"].items() if num in a["ms"] and den in a["ms"]}
        if xs:
            ratios[f"{num}/{den}"] = {"per_app": xs, "geomean": _geomean(list(xs.values())), "max": max(xs.values())}
    results["ratios"] = ratios
    print("\nratios of medians timed alternately (below 1: ragsched faster):")
    for k, v in ratios.items():
        worst = max(v["per_app"], key=v["per_app"].get)
        print(f"  {k:<18} geomean {v['geomean']:.2f}x, worst {v['max']:.2f}x ({worst})")
    for n, a in results["apps"].items():
        for v, e in a["errors"].items():
            print(f"  {n} {v}: {e.splitlines()[0][:160]}")
    write_results(args.output, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
