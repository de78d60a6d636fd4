"""Compile time of one pipeline file's schedule, cold (an empty kernel cache) and cached (the disk cache
filled by the cold run), each in a fresh process. Imports are one-time costs of a process, not of a
kernel: the modules compiling loads lazily (lowering, the LLVM backend, the runtime) are imported before
the clock starts, and their import time is reported apart. So is the time the pipeline file takes to
define the algorithm and apply the schedule (``define_s``: the user's Python, building the expressions;
80 ms of stencil_chain's 3200 operators): "seconds" is ``compile()`` alone."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SCRIPT = """
import sys, time
t0 = time.perf_counter()
import ragsched.codegen.backends, ragsched.codegen.lower, ragsched.codegen.llvm, ragsched.runtime.kernel
from ragsched.pipeline_file import load
pf = load(sys.argv[1])
sched = None if sys.argv[2] == "default" else sys.argv[2]
threads = None if sys.argv[3] == "all" else int(sys.argv[3])
t1 = time.perf_counter()
p = pf.pipeline(sched)
t2 = time.perf_counter()
k = p.compile(threads=threads)
t3 = time.perf_counter()
print(t3 - t2, k.stats.cache, k.stats.lower_s, k.stats.llvm_s, t1 - t0, t2 - t1)
"""


def compile_times(path: Path, schedule: str = "default", threads: int | None = None) -> dict:
    """{"cold": ..., "cached": ...}, each {"seconds", "cache", "lower_s", "llvm_s", "imports_s"}, for
    ``schedule`` ("default", "hand" or a schedule file)."""
    out = {}
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, RAGSCHED_CACHE_DIR=cache_dir)
        for label in ("cold", "cached"):
            res = subprocess.run([sys.executable, "-c", _SCRIPT, str(path), schedule, str(threads or "all")],
                                 env=env, capture_output=True, text=True, check=True, cwd=ROOT)
            total, cache, lower_s, llvm_s, imports_s, define_s = res.stdout.split()
            out[label] = {"seconds": float(total), "cache": cache, "lower_s": float(lower_s),
                          "llvm_s": float(llvm_s), "imports_s": float(imports_s), "define_s": float(define_s)}
    return out
