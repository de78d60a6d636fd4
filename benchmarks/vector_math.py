"""Vector math speed: nanoseconds per element of each math function in generated code (one thread, the
host's natural vector width, 256K elements a call), float32 and float64, accurate and fast math, beside
NumPy's (libm or its SIMD loops), and each function's cost relative to exp's. Medians of alternate rounds.

``python -m benchmarks.vector_math [--n N] [--rounds R]``
"""

from __future__ import annotations

import argparse
import json
from functools import partial
from pathlib import Path

import numpy as np

import ragsched as rs
from benchmarks.held_out import alternate

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("exp", "exp2", "log", "log2", "pow", "tanh", "erf", "sin", "cos", "sqrt", "rsqrt")
_NUMPY = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "pow": np.power, "tanh": np.tanh,
          "sin": np.sin, "cos": np.cos, "sqrt": np.sqrt, "rsqrt": lambda a: 1 / np.sqrt(a)}


def _inputs(name: str, n: int, dtype) -> list[np.ndarray]:
    """Typical arguments: positive for log and sqrt, pow's base in (0, 4] and exponent in [-3, 3]."""
    rng = np.random.default_rng(1)
    if name in ("log", "log2", "sqrt", "rsqrt"):
        return [rng.uniform(1e-3, 1e3, n).astype(dtype)]
    if name == "pow":
        return [rng.uniform(1e-3, 4, n).astype(dtype), rng.uniform(-3, 3, n).astype(dtype)]
    if name in ("sin", "cos"):
        return [rng.uniform(-100, 100, n).astype(dtype)]
    return [rng.uniform(-10, 10, n).astype(dtype)]


def _kernel(name: str, dtype, fast: bool):
    N = rs.Size("N")
    x = rs.Var("x")
    ins = [rs.Input(a, dtype, [N]) for a in "ab"[: 2 if name == "pow" else 1]]
    f = rs.Func("f", shape=[N])
    f[x] = getattr(rs, name)(*(a[x] for a in ins))
    f.vectorize(x, rs.natural_vector_size(dtype))
    return f.compile(fast_math=fast, threads=1)


REPS = 20  # calls per timed sample


def _repeated(fn):
    def run():
        for _ in range(REPS):
            fn()  # each result dropped at once: 20 of NumPy's kept alive would page-fault
    return run


def measure(n: int, rounds: int) -> dict:
    rows = {}
    for dname, dtype, np_t in (("float32", rs.float32, np.float32), ("float64", rs.float64, np.float64)):
        for name in NAMES:
            args = _inputs(name, n, np_t)
            named = dict(zip("ab", args))
            out = np.empty(n, np_t)
            variants = {"rs": _kernel(name, dtype, False)}
            if dname == "float32":
                variants["rs fast"] = _kernel(name, dtype, True)
            calls = {k: partial(kern, **named, out=out) for k, kern in variants.items()}
            if name in _NUMPY:
                calls["numpy"] = partial(_NUMPY[name], *args)
            seconds = alternate({k: _repeated(c) for k, c in calls.items()}, rounds)
            rows[f"{name} {dname}"] = {k: s / REPS / n * 1e9 for k, s in seconds.items()}
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.vector_math", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1 << 18,
                    help="elements per call (default: 262144: enough that the per-call overhead is noise)")
    ap.add_argument("--rounds", type=int, default=7, help="alternate rounds (default: 7)")
    ap.add_argument("-o", "--output", default=str(ROOT / "bench-results" / "vector_math.json"))
    args = ap.parse_args(argv)
    from ragsched.codegen.target import machine_line, machine_summary

    print(f"vector math, ns per element (1 thread, median of {args.rounds} rounds); {machine_line()}")
    rows = measure(args.n, args.rounds)
    cols = ("rs", "rs fast", "numpy")
    print(f"{'function':<16}" + "".join(f"{c:>10}" for c in cols) + f"{'rs / exp':>10}{'fast / exp':>12}")
    for key, r in rows.items():
        name, dname = key.split()
        exp = rows[f"exp {dname}"]
        cells = "".join(f"{r[c]:10.3f}" if c in r else f"{'-':>10}" for c in cols)
        ratio = f"{r['rs'] / exp['rs']:10.2f}"
        fratio = f"{r['rs fast'] / exp['rs fast']:12.2f}" if "rs fast" in r else f"{'-':>12}"
        print(f"{key:<16}{cells}{ratio}{fratio}")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"host": machine_summary(), "n": args.n, "rounds": args.rounds, "ns": rows},
                              indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
