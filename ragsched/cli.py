"""The ``sched`` command: run and inspect pipeline files."""

from __future__ import annotations

import argparse
import sys

import numpy as np


def _compare(got, want) -> tuple[bool, float]:
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    worst, ok = 0.0, len(got) == len(want)
    for g, w in zip(got, want, strict=False):
        if _lengths(g) != _lengths(w):
            return False, float("inf")
        g, w = _packed(g), _packed(w)
        w = np.asarray(w)
        if g.shape != w.shape:
            return False, float("inf")
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)), initial=0.0))
        scale = float(np.max(np.abs(w.astype(np.float64)), initial=0.0)) or 1.0
        worst = max(worst, err / scale)
        tol = 1e-3 if g.dtype.kind == "f" and g.dtype.itemsize <= 4 else 1e-9
        ok = ok and err <= tol * scale
    return ok, worst


def _lengths(x):
    from .ragged.array import RaggedArray

    return (x.template, x.lengths.tolist()) if isinstance(x, RaggedArray) else None


def _packed(x):
    """A RaggedArray's values (its padding, if any, zeroed out), or the array itself."""
    from .ragged.array import RaggedArray

    if isinstance(x, RaggedArray):
        return np.concatenate([e.reshape(-1) for e in x.to_list()] or [np.zeros(0, x.dtype)])
    return x


def cmd_run(args) -> int:
    from .pipeline_file import load
    from .runtime.timing import median_time

    pf = load(args.file)
    inputs = pf.inputs(args.scale)
    want = pf.reference(inputs)
    rows, all_ok = [], True
    labels = [("default schedule", None)]
    if args.schedule is not None:
        labels.append((f"schedule {args.schedule}", args.schedule))
    for label, sched in labels:
        kern = pf.pipeline(sched).compile(threads=args.threads)
        ok, err = _compare(kern(**inputs), want)
        all_ok &= ok
        t = median_time(lambda kern=kern: kern(**inputs), repeats=args.repeats)
        rows.append((label, t))
        print(f"{pf.name} ({label}): {'matches' if ok else 'DOES NOT MATCH'} the reference "
              f"(max relative error {err:.2e}); compile {kern.stats.total_s * 1e3:.0f} ms "
              f"(cache: {kern.stats.cache})")
    t_ref = median_time(lambda: pf.reference(inputs), repeats=args.repeats)
    for label, t in rows:
        print(f"  ragsched ({label}){' ' * max(0, 28 - len(label))}{t * 1e3:9.3f} ms   "
              f"{t_ref / t:6.2f}x the reference")
    print(f"  reference (NumPy){' ' * 19}{t_ref * 1e3:9.3f} ms")
    return 0 if all_ok else 1


def cmd_show(args) -> int:
    from .pipeline_file import load

    pf = load(args.file)
    pipe = pf.pipeline(args.schedule)
    print("# loop nest")
    pipe.print_loop_nest()
    print("\n# lowered code")
    print(pipe.lowered())
    if args.llvm or args.asm:
        kern = pipe.compile()
        print("\n# LLVM IR" if args.llvm else "\n# assembly")
        print(kern.llvm_ir if args.llvm else kern.assembly)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="sched", description="ragsched: compile and run pipeline files")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="check a pipeline against its reference() and time it")
    run.add_argument("file")
    run.add_argument("--scale", choices=("small", "full"), default="full")
    run.add_argument("--threads", type=int, default=None)
    run.add_argument("--repeats", type=int, default=5)
    run.add_argument("--schedule", default=None,
                     help="'hand' (the file's hand_schedule) or a schedule JSON file, timed beside the default")
    run.set_defaults(fn=cmd_run)
    show = sub.add_parser("show", help="print the loop nest and the lowered code")
    show.add_argument("file")
    show.add_argument("--schedule", default=None, help="'hand' or a schedule JSON file")
    show.add_argument("--llvm", action="store_true", help="also print the LLVM IR")
    show.add_argument("--asm", action="store_true", help="also print the optimised assembly")
    show.set_defaults(fn=cmd_show)
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        print(f"sched: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
