"""``make bench``: side-by-side timings in one run, printed as a table and written as JSON.

For each bundled pipeline: compile time cold (empty kernel cache, a fresh process) and from the disk
cache (a second fresh process), the median run time of ragsched (default schedule) and of the NumPy
version, and their ratio; plus the per-call overhead of a trivial kernel.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = ("blur", "unsharp", "harris", "matmul", "softmax")

_COMPILE = """
import time, sys
t0 = time.perf_counter()
import ragsched
from ragsched.pipeline_file import load
t1 = time.perf_counter()
k = load(sys.argv[1]).pipeline().compile()
t2 = time.perf_counter()
print(f"{t2 - t1} {k.stats.cache} {k.stats.lower_s} {k.stats.llvm_s}")
"""


def compile_times(name: str) -> dict:
    """Cold and cached compile time, each measured in a fresh process (imports excluded)."""
    out = {}
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, RAGSCHED_CACHE_DIR=cache_dir)
        for label in ("cold", "cached"):
            res = subprocess.run([sys.executable, "-c", _COMPILE, str(ROOT / "pipelines" / f"{name}.py")],
                                 env=env, capture_output=True, text=True, check=True)
            total, cache, lower_s, llvm_s = res.stdout.split()
            out[label] = {"seconds": float(total), "cache": cache, "lower_s": float(lower_s),
                          "llvm_s": float(llvm_s)}
    return out


def run_times(name: str, scale: str, repeats: int) -> dict:
    from ragsched.cli import _compare
    from ragsched.pipeline_file import load
    from ragsched.runtime.timing import median_time

    pf = load(ROOT / "pipelines" / f"{name}.py")
    inputs = pf.inputs(scale)
    kern = pf.pipeline().compile()
    ok, err = _compare(kern(**inputs), pf.reference(inputs))
    t_rs = median_time(lambda: kern(**inputs), repeats=repeats)
    t_np = median_time(lambda: pf.reference(inputs), repeats=repeats)
    return {"matches": ok, "max_rel_error": err, "ragsched_ms": t_rs * 1e3, "numpy_ms": t_np * 1e3,
            "numpy_over_ragsched": t_np / t_rs}


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
    return {"alloc_out_us": median_time(lambda: k(a=arr), repeats=9, min_time=0.05) * 1e6,
            "given_out_us": median_time(lambda: k(a=arr, out=out), repeats=9, min_time=0.05) * 1e6}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks")
    ap.add_argument("--scale", default="full", choices=("small", "full"))
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--only", nargs="*", default=list(PIPELINES))
    ap.add_argument("-o", "--output", default=str(ROOT / "bench-results" / "latest.json"))
    args = ap.parse_args(argv)

    results = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": platform.machine(),
               "cpus": os.cpu_count(), "python": platform.python_version(), "scale": args.scale,
               "pipelines": {}}
    head = (f"{'pipeline':<10} {'cold compile':>13} {'cached':>9} {'ragsched':>11} {'NumPy':>11} "
            f"{'NumPy/ragsched':>15}")
    print(head)
    print("-" * len(head))
    for name in args.only:
        ct = compile_times(name)
        rt = run_times(name, args.scale, args.repeats)
        results["pipelines"][name] = {"compile": ct, **rt}
        print(f"{name:<10} {ct['cold']['seconds'] * 1e3:10.0f} ms {ct['cached']['seconds'] * 1e3:6.0f} ms "
              f"{rt['ragsched_ms']:8.2f} ms {rt['numpy_ms']:8.2f} ms {rt['numpy_over_ragsched']:14.3g}x"
              + ("" if rt["matches"] else "  MISMATCH"))
    results["call_overhead"] = call_overhead()
    co = results["call_overhead"]
    print(f"\nper-call overhead of a trivial kernel: {co['alloc_out_us']:.1f} us (output allocated), "
          f"{co['given_out_us']:.1f} us (out= given)")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
