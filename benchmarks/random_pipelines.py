"""Random realistic pipelines: DAGs of the stages image and array pipelines are made of, for testing the
autoscheduler on work nobody wrote its rules beside, and (``python -m benchmarks.random_pipelines``) for
measuring how often the rules' schedule is slower than the default one.

A pipeline is a ``Spec``: a seed and a list of ``Stage`` records, each reading earlier stages (or the
input image, stage -1) and living at a resolution level (0 full, 1 half, 2 quarter). Kinds:

- ``stencil``: a weighted sum of 3 to 9 taps at offsets within 2 (weights sum to 1);
- ``pointwise``: a map of one or two same-level stages, with a transcendental (exp, tanh, sqrt, log,
  pow, sin, erf) or arithmetic;
- ``reduce``: a sum over an RDom of 3 to 7 points along x or y (a box filter as a reduction);
- ``down`` / ``up``: 2x downsampling (2x2 average) and upsampling (linear, as Halide's interpolate);
- ``lookup``: a 64-entry table (a Func of its own) read at a value of the stage, linearly interpolated
  (so a last-bit difference in the index moves the result by a last-bit amount, not one table step).

The output is at level 0, a mix of the last stage and an earlier level-0 stage. Values stay in [0, 2].
``build(spec)`` makes ragsched Funcs; tests check them against ``ragsched.reference``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MAPS = ("exp", "tanh", "sqrt", "log", "pow", "sin", "erf", "mul", "mix", "max")
TABLE = 64


@dataclass(frozen=True)
class Stage:
    kind: str  # stencil, pointwise, reduce, down, up, lookup
    srcs: tuple[int, ...]  # earlier stages read (-1: the input)
    level: int  # resolution: size / 2**level
    taps: tuple[tuple[int, int, float], ...] = ()  # stencil: (dy, dx, weight)
    op: str = ""  # pointwise: one of MAPS
    axis: str = "x"  # reduce: along x or y
    extent: int = 3  # reduce: points summed


@dataclass(frozen=True)
class Spec:
    seed: int
    stages: tuple[Stage, ...] = field(default_factory=tuple)

    def describe(self) -> str:
        return " -> ".join(f"{s.kind}{'(' + s.op + ')' if s.op else ''}@{s.level}" for s in self.stages)


def random_spec(seed: int, n_stages: int | None = None) -> Spec:
    """A random pipeline of ``n_stages`` stages (4 to 10 when None)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 11)) if n_stages is None else n_stages
    stages: list[Stage] = []
    level_of = {-1: 0}

    def pick(level: int | None = None) -> int:
        cands = [k for k, lv in level_of.items() if level is None or lv == level]
        recent = cands[-3:]  # mostly the last few: chains, with some fan-out
        return int(rng.choice(recent if rng.random() < 0.8 else cands))

    for k in range(n):
        kinds = ["stencil", "pointwise", "reduce", "lookup", "down", "up"]
        weights = np.array([4, 4, 2, 1, 1.5, 1.5])
        src = pick()
        lv = level_of[src]
        if lv >= 2:
            weights[4] = 0
        if lv == 0:
            weights[5] = 0
        kind = str(rng.choice(kinds, p=weights / weights.sum()))
        if kind == "stencil":
            m = int(rng.integers(3, 10))
            offs = {(int(rng.integers(-2, 3)), int(rng.integers(-2, 3))) for _ in range(m)}
            w = rng.uniform(0.2, 1.0, len(offs))
            w = w / w.sum()
            st = Stage("stencil", (src,), lv, tuple((dy, dx, float(c)) for (dy, dx), c in zip(sorted(offs), w)))
        elif kind == "pointwise":
            op = str(rng.choice(MAPS))
            srcs = (src, pick(lv)) if op in ("mul", "mix", "max") else (src,)
            st = Stage("pointwise", srcs, lv, op=op)
        elif kind == "reduce":
            st = Stage("reduce", (src,), lv, axis=str(rng.choice(["x", "y"])), extent=int(rng.choice([3, 5, 7])))
        elif kind == "lookup":
            st = Stage("lookup", (src,), lv)
        elif kind == "down":
            st = Stage("down", (src,), lv + 1)
        else:
            st = Stage("up", (src,), lv - 1)
        stages.append(st)
        level_of[k] = st.level
    # back to full resolution, then mix with a full-resolution stage
    last = len(stages) - 1
    while level_of[last] > 0:
        stages.append(Stage("up", (last,), level_of[last] - 1))
        last = len(stages) - 1
        level_of[last] = stages[-1].level
    stages.append(Stage("pointwise", (last, pick(0)), 0, op="mix"))
    return Spec(seed, tuple(stages))


def _map(op: str, a, b, rs):
    """The pointwise maps; each takes values in [0, 2] to [0, 2]."""
    if op == "exp":
        return rs.exp(-a * a) * 2
    if op == "tanh":
        return rs.tanh(a) * 2
    if op == "sqrt":
        return rs.sqrt(a) * 1.4
    if op == "log":
        return rs.log(a + 1.0)
    if op == "pow":
        return rs.pow(a * 0.5 + 0.01, 1.7) * 2
    if op == "sin":
        return rs.sin(a * 3.0) + 1.0
    if op == "erf":
        return rs.erf(a - 1.0) + 1.0
    if op == "mul":
        return a * b * 0.5
    if op == "mix":
        return a * 0.6 + b * 0.4
    return rs.max(a, b)


def build(spec: Spec, shape: tuple[int, int] | None = None):
    """The spec as ragsched Funcs: returns the output Func (over [H, W], the input's shape)."""
    import ragsched as rs

    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    edge = rs.clamp_edge(img)
    funcs: dict[int, object] = {-1: edge}
    for k, st in enumerate(spec.stages):
        f = rs.Func(f"s{k}_{st.kind}")
        a = funcs[st.srcs[0]]
        if st.kind == "stencil":
            e = None
            for dy, dx, w in st.taps:
                term = a[y + dy, x + dx] * w
                e = term if e is None else e + term
            f[y, x] = e
        elif st.kind == "pointwise":
            b = funcs[st.srcs[1]][y, x] if len(st.srcs) > 1 else None
            f[y, x] = _map(st.op, a[y, x], b, rs)
        elif st.kind == "reduce":
            r = rs.RDom(-(st.extent // 2), st.extent, name=f"r{k}")
            f[y, x] = rs.sum(a[y, x + r] if st.axis == "x" else a[y + r, x]) * (1.0 / st.extent)
        elif st.kind == "lookup":
            i = rs.Var("i")
            table = rs.Func(f"s{k}_table")
            ti = rs.cast(rs.float32, i) * (2.0 / (TABLE - 1))
            table[i] = ti * ti * 0.5 + rs.sin(ti) * 0.25 + 0.2
            pos = rs.clamp(a[y, x], 0.0, 2.0) * ((TABLE - 1) / 2.0)
            lo = rs.clamp(rs.cast(rs.int32, pos), 0, TABLE - 2)
            frac = pos - rs.cast(rs.float32, lo)
            f[y, x] = table[lo] + (table[lo + 1] - table[lo]) * frac
        elif st.kind == "down":
            f[y, x] = (a[2 * y, 2 * x] + a[2 * y + 1, 2 * x] + a[2 * y, 2 * x + 1] + a[2 * y + 1, 2 * x + 1]) * 0.25
        else:  # up: linear, as Halide's interpolate app
            f[y, x] = (a[y // 2, x // 2] * 0.5625 + a[(y + 1) // 2, x // 2] * 0.1875
                       + a[y // 2, (x + 1) // 2] * 0.1875 + a[(y + 1) // 2, (x + 1) // 2] * 0.0625)
        funcs[k] = f
    out = rs.Func("out", shape=[H, W])
    out[y, x] = funcs[len(spec.stages) - 1][y, x]
    return out


def inputs(spec: Spec, shape: tuple[int, int]) -> dict:
    rng = np.random.default_rng(spec.seed)
    return {"img": rng.uniform(0.0, 2.0, shape).astype(np.float32)}


# ------------------------------------------------------------------------------------- the benchmark
def main(argv=None) -> int:
    import ragsched as rs
    from benchmarks.held_out import alternate
    from ragsched.codegen.target import machine_line
    from ragsched.lang import Pipeline
    from ragsched.runtime.compare import matches

    ap = argparse.ArgumentParser(prog="python -m benchmarks.random_pipelines",
                                 description="How often the rules' schedule is slower than the default one, "
                                             "on random pipelines.")
    ap.add_argument("--count", type=int, default=20, help="random pipelines (default: 20)")
    ap.add_argument("--first-seed", type=int, default=1000, help="seed of the first (default: 1000)")
    ap.add_argument("--size", type=int, nargs=2, default=(768, 1024), help="image H W (default: 768 1024)")
    ap.add_argument("--threads", type=int, default=2, help="threads (default: 2)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds of alternate timing (default: 7)")
    ap.add_argument("-o", "--output", default=str(ROOT / "bench-results" / "random_pipelines.json"))
    args = ap.parse_args(argv)
    print(f"random pipelines, rules (trials=0) against the default schedule; {machine_line()}")
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.count):
        spec = random_spec(seed)
        ins = inputs(spec, tuple(args.size))
        want = None
        times, ok = {}, True
        kernels = {}
        rules = rs.autoschedule(Pipeline([build(spec)]), trials=0, inputs=ins, threads=args.threads)
        for label in ("default", "rules"):
            pipe = Pipeline([build(spec)])
            if label == "rules":
                rules.apply(pipe.outputs)
            t0 = time.perf_counter()
            k = pipe.compile(threads=args.threads)
            times[f"{label}_compile_s"] = time.perf_counter() - t0
            got = k(**ins)
            if want is None:
                want = got
            else:
                ok = matches(got, want)[0]
            kernels[label] = (k, got)
        medians = alternate({label: (lambda k=k, out=out, ins=ins: k(**ins, out=out))
                             for label, (k, out) in kernels.items()}, args.rounds)
        d, r = medians["default"], medians["rules"]
        row = {"seed": seed, "pipeline": spec.describe(), "default_ms": d * 1e3, "rules_ms": r * 1e3,
               "rules_over_default": r / d, "match": ok, **times}
        rows.append(row)
        print(f"seed {seed}: default {d * 1e3:8.2f} ms, rules {r * 1e3:8.2f} ms, {r / d:5.2f}x"
              f"{'' if ok else '  MISMATCH'}  ({spec.describe()})", flush=True)
    ratios = [r["rules_over_default"] for r in rows]
    slower = [x for x in ratios if x > 1.0]
    summary = {"count": len(rows), "rules_slower": len(slower), "rules_slower_than_1.1x": sum(x > 1.1 for x in ratios),
               "worst": max(ratios), "geomean": math.exp(sum(map(math.log, ratios)) / len(ratios))}
    print(f"\nrules slower than default on {len(slower)} of {len(rows)} (by more than 1.1x on "
          f"{summary['rules_slower_than_1.1x']}); worst {summary['worst']:.2f}x, geomean {summary['geomean']:.2f}x")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "summary": summary, "size": args.size, "threads": args.threads}, indent=2))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
