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
        w = np.asarray(w)
        if g.shape != w.shape:
            return False, float("inf")
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)), initial=0.0))
        scale = float(np.max(np.abs(w.astype(np.float64)), initial=0.0)) or 1.0
        worst = max(worst, err / scale)
        tol = 1e-3 if g.dtype.kind == "f" and g.dtype.itemsize <= 4 else 1e-9
        ok = ok and err <= tol * scale
    return ok, worst


def cmd_run(args) -> int:
    from .pipeline_file import load
    from .runtime.timing import median_time

    pf = load(args.file)
    inputs = pf.inputs(args.scale)
    kern = pf.pipeline().compile(threads=args.threads)
    got = kern(**inputs)
    want = pf.reference(inputs)
    ok, err = _compare(got, want)
    t_ours = median_time(lambda: kern(**inputs), repeats=args.repeats)
    t_ref = median_time(lambda: pf.reference(inputs), repeats=args.repeats)
    print(f"{pf.name}: {'matches' if ok else 'DOES NOT MATCH'} the reference (max relative error {err:.2e})")
    print(f"  compile {kern.stats.total_s * 1e3:.0f} ms (cache: {kern.stats.cache})")
    print(f"  ragsched (default schedule) {t_ours * 1e3:9.3f} ms")
    print(f"  reference (NumPy)           {t_ref * 1e3:9.3f} ms   ratio {t_ref / t_ours:.2f}x")
    return 0 if ok else 1


def cmd_show(args) -> int:
    from .pipeline_file import load

    pf = load(args.file)
    pipe = pf.pipeline()
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
    run.set_defaults(fn=cmd_run)
    show = sub.add_parser("show", help="print the loop nest and the lowered code")
    show.add_argument("file")
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
