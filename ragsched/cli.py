"""The ``sched`` command: run, inspect and autoschedule pipeline files."""

from __future__ import annotations

import argparse
import os
import sys


def _use_target(text: str):
    """The CPU the command compiles for; a pinned one becomes this process's default (``RAGSCHED_CPU``), so
    a pipeline file's hand schedule and the tuner's workers see its vector width too."""
    import os

    from .codegen import target as targets

    if text.startswith("cuda"):  # without a GPU the kernels run in the GPU emulator
        return targets.parse(text, None if targets.gpu_present() else "emulate")
    t = targets.runnable(text)
    if text != "cpu":
        os.environ[targets.ENV] = t.name
    return t


def cmd_run(args) -> int:
    from .codegen.target import machine_line
    from .pipeline_file import load
    from .runtime.compare import matches
    from .runtime.timing import median_time

    cpu = _use_target(args.target)
    print(machine_line())
    pf = load(args.file)
    inputs = pf.inputs(args.scale)
    want = pf.reference(inputs)
    rows, all_ok = [], True
    labels = [("default schedule", None)]
    if args.schedule is not None:
        labels.append((f"schedule {args.schedule}", args.schedule))
    for label, sched in labels:
        kern = pf.pipeline(sched).compile(target=cpu, threads=args.threads)
        ok, err = matches(kern(**inputs), want)
        all_ok &= ok
        t = median_time(lambda kern=kern: kern(**inputs), repeats=args.repeats)
        rows.append((label, t))
        ran, which = kern, ""
        if hasattr(kern, "kernel_for"):  # schedules by length class: the class these inputs ran
            ran = kern.kernel_for(**inputs)
            c = kern.schedules.classes[kern.kernels.index(ran)]
            which = f"; ran the length class made for mean length {c.mean_length:g}"
        print(f"{pf.name} ({label}): {'matches' if ok else 'DOES NOT MATCH'} the reference "
              f"(max relative error {err:.2e}); compile {ran.stats.total_s * 1e3:.0f} ms "
              f"(cache: {ran.stats.cache}){which}")
    t_ref = median_time(lambda: pf.reference(inputs), repeats=args.repeats)
    work = _work(pf.pipeline().program(), inputs)
    for label, t in rows:
        rate = "" if work is None else f"   {work / t / 1e9:7.2f} Gop/s"
        print(f"  ragsched ({label}){' ' * max(0, 28 - len(label))}{t * 1e3:9.3f} ms   "
              f"{_speedup(t_ref, t)} than the NumPy reference{rate}")
    if work is not None:
        print(f"  work: {work:.4g} operations (the algorithm's arithmetic: sched show --cost)")
    print(f"  reference (NumPy){' ' * 19}{t_ref * 1e3:9.3f} ms")
    return 0 if all_ok else 1


def _speedup(reference_s: float, ours_s: float) -> str:
    """'3.10x faster' or '1.50x slower': the ratio always at least 1, with its direction in words."""
    if ours_s <= reference_s:
        return f"{reference_s / ours_s:6.2f}x faster"
    return f"{ours_s / reference_s:6.2f}x slower"


def cmd_show(args) -> int:
    from .pipeline_file import load

    cpu = _use_target(args.target)
    pf = load(args.file)
    pipe = pf.pipeline(args.schedule)
    if args.cost:
        _print_cost(pipe.program())
    shown = [("", pipe)]
    if pipe.by_length is not None:  # each length class's schedule on a fresh build
        shown = [(f" (length class {k}: mean length {c.mean_length:g})", pf.pipeline(c.schedule))
                 for k, c in enumerate(pipe.by_length.classes)]
    for which, one in shown:
        print(f"# loop nest{which}")
        one.print_loop_nest()
        print(f"\n# lowered code{which}")
        print(one.lowered())
        if args.llvm or args.asm:
            kern = one.compile(target=cpu)
            if args.llvm:
                print(f"\n# LLVM IR{which}")
                print(kern.llvm_ir)
            if args.asm:
                print(f"\n# assembly{which}")
                print(kern.assembly)
    return 0


def _work(program, inputs) -> float | None:
    """The algorithm's operations for these inputs, or None where some region is not expressible."""
    from .autosched.cost import pipeline_cost, sizes_from

    cost = pipeline_cost(program)
    return cost.evaluate(cost.total_work, inputs, sizes_from(program, inputs))


def _print_cost(program) -> None:
    """Each stage's points and operations as expressions of the Sizes and the ragged lengths' moments."""
    from .autosched.cost import pipeline_cost

    cost = pipeline_cost(program)
    print("# work (points x operations a point; ? where the region is not expressible)")
    for st in cost.stages:
        what = "pure" if st.stage == 0 else f"update {st.stage - 1}"
        print(f"{st.func:>20} {what:<9} {'?' if st.points is None else st.points} x {st.ops}")
    print(f"{'total':>20} {'':<9} {'?' if cost.total_work is None else cost.total_work}\n")


def _storage(args) -> str:
    return args.storage or str(_out(args).with_suffix(".journal"))


def _out(args):
    from pathlib import Path

    return Path(args.o or f"{Path(args.file).stem}.schedule.json")


def _tune(args, trials: int, pf=None, **options):
    """One tuning process's run of ``sched autoschedule`` with ``trials`` trials (``pf``: the pipeline file,
    where the caller has loaded it already)."""
    from .autosched import tune
    from .pipeline_file import load

    cpu = _use_target(args.target)
    pf = pf or load(args.file)
    scales = args.scale  # (--scale takes one or more)
    sets = [pf.inputs(s) for s in scales]  # several: a candidate's time is the geometric mean of its times
    check = pf.inputs(args.check_scale) if args.check_scale and [args.check_scale] != scales else None
    inputs = sets if len(sets) > 1 else sets[0]
    reference = None if check else [pf.reference(i) for i in sets] if len(sets) > 1 else pf.reference(inputs)
    return tune(pf.pipeline(), target=cpu, trials=trials, inputs=inputs, reference=reference, storage=_storage(args),
                check_inputs=check, check_reference=pf.reference(check) if check else None, study=args.study,
                timeout=args.timeout, threads=args.threads, repeats=args.repeats, time_limit=args.time_limit,
                seed=args.seed, tolerance=pf.tolerance, **options)


def _worker_share(args, trials: int, seed: int | None) -> int:
    """A worker process of ``--workers``: its share of the trials, no final timing (the parent does it,
    once the study is complete); returns how many trials the study had when it stopped."""
    args.seed = seed
    jobs = max(1, (args.compile_jobs or min(4, os.cpu_count() or 1)) // args.workers)
    return _tune(args, trials, progress=False, finalists=0, compile_jobs=jobs).trials


def _run_workers(args) -> None:
    """``--workers N``: N tuning processes started together on the one storage, each with its share of the
    trials (they take turns to time candidates: ``autosched.hostlock``)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    n = args.workers
    shares = [args.trials // n + (k < args.trials % n) for k in range(n)]
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = [pool.submit(_worker_share, args, share, None if args.seed is None else args.seed + k)
                for k, share in enumerate(shares)]
        for k, run in enumerate(runs):
            print(f"worker {k}: {shares[k]} trial(s); the study had {run.result()} when it stopped")


def _tuned_for(t) -> dict:
    """What a tuned schedule file records about the machine it was measured on, and the version of the
    search space it was found in (a later space may offer what it could not)."""
    from .autosched.space import VERSION
    from .codegen import target as targets

    if not isinstance(t, targets.CpuTarget):
        return {"target": t.text, "space": VERSION}
    return {"target": t.text, "cpu": t.cpu, "isa": t.isa, "vector_bits": t.vector_bits,
            "model": targets.machine_summary()["cpu_model"], "space": VERSION}


def cmd_autoschedule(args) -> int:
    from .pipeline_file import load

    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    cpu = _use_target(args.target)
    pf = load(args.file)
    out = _out(args)
    if args.by_length:
        schedule, results = _tune_by_length(args, pf, cpu)
    else:
        results = [(None, _tune_one(args, pf))]
        schedule = results[0][1].schedule
    scales = args.scale
    out.write_text(schedule.to_json(tuned_for={**_tuned_for(cpu), "scales": scales}) + "\n")
    out.with_suffix(".py").write_text(f"# sched autoschedule {pf.name}.py: the best schedule found"
                                      f"{' per length class' if args.by_length else ''}\n" + schedule.to_python())
    for scale, result in results:
        _report(args, pf, cpu, result, [scale] if scale else scales)
    for scale, result in results if args.plot else ():
        if result.study is not None:
            from pathlib import Path

            from .autosched.plot import plot_history

            plot = Path(args.plot)
            plot = plot.with_name(f"{plot.stem}.{scale}{plot.suffix}") if scale else plot  # one per length class
            plot_history(result.study, plot, title=f"autoschedule {pf.name}" + (f" ({scale})" if scale else ""))
            print(f"wrote {plot}")
    print(f"wrote {out} and {out.with_suffix('.py')}")
    return 0


def _tune_one(args, pf):
    """``sched autoschedule``'s tuning on ``args.scale`` (in ``--workers`` processes where asked)."""
    if args.workers > 1:  # the workers tune; then this process times the study's best few side by side
        _run_workers(args)
        return _tune(args, 0, pf, progress=not args.quiet, compile_jobs=args.compile_jobs)
    return _tune(args, args.trials, pf, progress=not args.quiet, compile_jobs=args.compile_jobs)


def _tune_by_length(args, pf, cpu):
    """``--by-length``: each scale tuned alone (its own study, ``<study>@<scale>``, in the one storage) as
    a length class with its inputs' mean length."""
    import copy

    from .autosched.driver import study_name
    from .codegen.ragged_domains import class_lengths
    from .schedule import LengthClass, SchedulesByLength
    from .schedule.by_length import mean_length

    if len(args.scale) < 2:
        raise ValueError("--by-length tunes one length class per --scale: name two or more scales")
    program = pf.pipeline().program()
    lengths = class_lengths(program, f"--by-length ({pf.path.name})")
    base = args.study or study_name(program, cpu, args.threads)
    classes, results = [], []
    for scale in args.scale:
        one = copy.copy(args)
        one.scale, one.study, one.storage = [scale], f"{base}@{scale}", _storage(args)
        result = _tune_one(one, pf)
        classes.append(LengthClass(mean_length(lengths, pf.inputs(scale)), result.schedule, scale))
        results.append((scale, result))
    return SchedulesByLength(tuple(classes)), results


def _report(args, pf, cpu, result, scales) -> None:
    failed = ", ".join(f"{n} {k}" for k, n in sorted(result.failures.items())) or "none"
    best = f"{result.seconds * 1e3:.3f} ms" if result.seconds is not None else "not measured (the heuristic's schedule)"
    if result.seconds is not None and len(scales) > 1:
        best += f" (the geometric mean over the inputs {', '.join(scales)})"
    elif result.seconds is not None and args.by_length:
        best += f" on the inputs {scales[0]}"
    if result.seconds is not None and getattr(cpu, "device", None) == "emulate":
        best += " (the GPU cost model's estimate: no GPU here)"
    repeats = f" ({result.repeated} of this run's repeating a schedule already timed)" if result.repeated else ""
    print(f"{pf.name}: best {best}; {result.trials} trial(s) in the study{repeats}, this run's failures: {failed}; "
          f"tuning took {result.tuning_s:.1f} s (study {result.study.study_name if result.study else '-'}, "
          f"storage {_storage(args) if result.study else '-'})")


def cmd_study(args) -> int:
    """Print the studies a storage holds, or one study's trials (fastest first) and its best."""
    import optuna

    from .autosched import open_storage
    from .autosched.driver import recorded_answer

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if "://" not in args.storage and not os.path.isfile(args.storage):
        raise FileNotFoundError(f"no storage {args.storage} (a journal file or a database URL)")
    storage = open_storage(args.storage)
    summaries = optuna.study.get_all_study_summaries(storage)
    if args.study is None:
        if not summaries:
            print(f"{args.storage}: no studies")
        for sm in summaries:
            found = recorded_answer(optuna.load_study(study_name=sm.study_name, storage=storage))
            best = f"best {found[1] * 1e3:.3f} ms (trial {found[0].number})" if found else "no trial timed"
            print(f"{sm.study_name}: {sm.n_trials} trial(s), {best}")
        return 0
    if args.study not in {sm.study_name for sm in summaries}:
        raise ValueError(f"no study {args.study!r} in {args.storage}; it holds: "
                         f"{', '.join(sm.study_name for sm in summaries) or 'none'}")
    st = optuna.load_study(study_name=args.study, storage=storage)
    timed = sorted((t for t in st.trials if t.value is not None), key=lambda t: t.value)
    others = [t for t in st.trials if t.value is None]
    print(f"study {args.study}: {len(st.trials)} trial(s), {len(timed)} timed")
    print(f"{'trial':>6} {'ms':>10} {'compile s':>10}  status")
    for t in timed[:args.top] + others[:max(0, args.top - len(timed))]:
        status = t.user_attrs.get("status", t.state.name.lower())
        if "same_as" in t.user_attrs:
            status += f" (the schedule of trial {t.user_attrs['same_as']})"
        ms = f"{t.value * 1e3:10.3f}" if t.value is not None else f"{'-':>10}"
        cs = t.user_attrs.get("compile_s")
        print(f"{t.number:>6} {ms} {'-' if cs is None else f'{cs:.2f}':>10}  {status}")
    final = st.user_attrs.get("final_times")
    if final:
        print("timed again side by side at the end: " + ", ".join(
            f"trial {n} {v * 1e3:.3f} ms" if v is not None else f"trial {n} failed" for n, v in final.items()))
    found = recorded_answer(st)
    if found:
        trial, seconds = found
        how = "timed side by side with the other finalists" if final else "as first timed"
        print(f"best: trial {trial.number}, {seconds * 1e3:.3f} ms {how} (sched autoschedule FILE --trials 0 "
              f"--storage ... --study {args.study} writes it, or the fastest of the finalists timed again)")
    return 0


class _Defaults(argparse.HelpFormatter):
    """Help that shows each option's default, unless the text already says it or there is none."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def main(argv=None) -> int:
    from importlib.metadata import PackageNotFoundError, version

    try:
        here = version("ragsched")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree that is not installed
        here = "unknown (not installed)"
    parser = argparse.ArgumentParser(prog="sched", description="ragsched: compile and run pipeline files")
    parser.add_argument("--version", action="version", version=f"sched (ragsched) {here}")
    sub = parser.add_subparsers(dest="command", required=True)
    fmt = {"formatter_class": _Defaults}
    run = sub.add_parser("run", help="check a pipeline against its reference() and time it", **fmt)
    run.add_argument("file", help="a pipeline file (build(), example_inputs(scale), reference(**inputs))")
    run.add_argument("--scale", default="full", help="which example inputs to run on (small, full, or another of "
                     "the file's SCALES)")
    run.add_argument("--threads", type=int, default=None,
                     help="threads of the parallel loops (default: every core)")
    run.add_argument("--repeats", type=int, default=5, help="timed runs of each variant (the median counts)")
    run.add_argument("--schedule", default=None,
                     help="'hand' (the file's hand_schedule) or a schedule file (.json, or .py as "
                     "autoschedule writes it), timed beside the default")
    run.set_defaults(fn=cmd_run)
    show = sub.add_parser("show", help="print the loop nest and the lowered code", **fmt)
    show.add_argument("file", help="a pipeline file")
    show.add_argument("--schedule", default=None, help="'hand' or a schedule file (.json or .py)")
    show.add_argument("--llvm", action="store_true", help="also print the LLVM IR")
    show.add_argument("--asm", action="store_true", help="also print the optimised assembly")
    show.add_argument("--cost", action="store_true", help="also print each stage's work as expressions of the "
                      "Sizes and ragged lengths (sympy)")
    show.set_defaults(fn=cmd_show)
    auto = sub.add_parser("autoschedule", help="search for a fast schedule and write it (JSON and Python)", **fmt)
    auto.add_argument("file", help="a pipeline file")
    auto.add_argument("--trials", type=int, default=100,
                      help="schedules to try, all workers together; 0: the stored study's best (re-timed), or "
                           "the rules' schedule without measuring")
    auto.add_argument("-o", default=None, help="the schedule JSON to write (default FILE.schedule.json); the "
                      "same schedule as Python goes beside it (.py)")
    auto.add_argument("--storage", default=None, help="Optuna storage: a journal file (default: beside -o, "
                      "with suffix .journal) or a database URL (sqlite:///..., postgresql://...) that "
                      "several workers share")
    auto.add_argument("--study", default=None, help="study name (default: the outputs and a digest of the "
                      "algorithm, so a rerun resumes)")
    auto.add_argument("--timeout", type=float, default=None,
                      help="stop asking for trials after S seconds (default: no limit)")
    auto.add_argument("--plot", default=None, help="draw the tuning history into this PNG")
    auto.add_argument("--scale", nargs="+", default=["full"], help="the example inputs timed (small, full, or "
                      "another of the file's SCALES); several: a candidate's time is the geometric mean of its "
                      "times on each")
    auto.add_argument("--by-length", action="store_true",
                      help="tune each --scale alone, as a length class of a ragged pipeline: the file holds one "
                           "schedule per class, and a call runs the one made for the mean length nearest its own "
                           "(each class gets --trials and --timeout)")
    auto.add_argument("--check-scale", default=None,
                      help="the example inputs candidates are checked on against the reference (default: "
                      "the timed ones)")
    auto.add_argument("--threads", type=int, default=None,
                      help="threads of the parallel loops the candidates are timed with (default: every core)")
    auto.add_argument("--repeats", type=int, default=5, help="timed runs per candidate (the median counts)")
    auto.add_argument("--time-limit", type=float, default=60.0, help="seconds a candidate may take")
    auto.add_argument("--seed", type=int, default=None,
                      help="seed of the sampler, for a search that repeats (default: a fresh one)")
    auto.add_argument("--compile-jobs", type=int, default=None,
                      help="candidates compiled side by side, each timed alone as soon as it is compiled "
                           "(default: one per core, at most 4)")
    auto.add_argument("--workers", type=int, default=1,
                      help="tuning processes started together on this host, sharing the storage: each takes "
                           "its share of --trials, and they take turns to time candidates; then the study's best "
                           "few are timed side by side (docs/distributed.md)")
    auto.add_argument("--quiet", action="store_true", help="no progress bar")
    auto.set_defaults(fn=cmd_autoschedule)
    study = sub.add_parser("study", help="print the studies of a storage, or one study's trials and best", **fmt)
    study.add_argument("storage", help="a journal file or a database URL, as given to autoschedule --storage")
    study.add_argument("--study", default=None, help="the study to print (default: list the storage's studies)")
    study.add_argument("--top", type=int, default=20, help="trials to print, fastest first")
    study.set_defaults(fn=cmd_study)
    for p in (run, show, auto):
        p.add_argument("--target", default="cpu", help="what to compile for: cpu (this host, or the level "
                       "RAGSCHED_CPU names), cpu:host, an x86-64 level such as cpu:x86-64-v3 (AVX2), any of these with "
                       "+fast_math (float32 exp, log, pow... to looser bounds: docs/language.md), or cuda (a GPU; "
                       "without one, the GPU emulator and, for autoschedule, a cost model)")
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        print(f"sched: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
