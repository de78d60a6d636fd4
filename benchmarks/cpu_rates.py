"""What this CPU can do, measured, for the ragged benchmarks' fractions: the fp32 peak (independent chains
of vector fmas, the host's natural width) and OpenBLAS's SGEMM rate (NumPy's matmul) on given shapes.

The peak is measured, not computed from a data sheet: a JIT-compiled loop of 12 independent fma chains
(enough to cover the fma latency on two pipes), one copy per thread, best of several runs. It is what
generated code could reach on this host at the width ragsched vectorizes to.
"""

from __future__ import annotations

import ctypes
import statistics
import threading
import time

import numpy as np

CHAINS = 12  # independent accumulators: fma latency 4 cycles x 2 pipes needs 8, 12 leaves room
STEPS = 4  # fmas of each chain per loop iteration (the loop's own instructions are then noise)


def _peak_kernel(lanes: int):
    """A C-callable ``void f(int64 n, float *out)``: n iterations of STEPS x CHAINS vector fmas of
    ``lanes`` floats each, the sums stored to ``out`` (so nothing is optimised away)."""
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    vec = f"<{lanes} x float>"
    ones = f"<{', '.join(['float 1.0'] * lanes)}>"
    phis = "\n".join(f"  %a{c}_0 = phi {vec} [ {ones}, %entry ], [ %a{c}_{STEPS}, %loop ]" for c in range(CHAINS))
    fmas = "\n".join(f"  %a{c}_{s + 1} = call {vec} @llvm.fma.v{lanes}f32({vec} %a{c}_{s}, {vec} %mm, {vec} %p)"
                     for s in range(STEPS) for c in range(CHAINS))
    sums = "\n".join(f"  %s{c} = fadd {vec} %s{c - 1}, %a{c}_{STEPS}" if c
                     else f"  %s0 = fadd {vec} %a0_{STEPS}, %a0_{STEPS}" for c in range(CHAINS))
    module = f"""
declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})
define void @peak(i64 %count, ptr %out) {{
entry:
  %m = insertelement {vec} undef, float 0.5, i32 0
  %mm = shufflevector {vec} %m, {vec} undef, <{lanes} x i32> zeroinitializer
  %p0 = insertelement {vec} undef, float 0.25, i32 0
  %p = shufflevector {vec} %p0, {vec} undef, <{lanes} x i32> zeroinitializer
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
{phis}
{fmas}
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %count
  br i1 %more, label %loop, label %done
done:
{sums}
  store {vec} %s{CHAINS - 1}, ptr %out, align 4
  ret void
}}"""
    mod = llvm.parse_assembly(module)
    mod.verify()
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
    engine = llvm.create_mcjit_compiler(mod, machine)  # the engine owns its target machine
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(engine.get_function_address("peak"))
    return fn, engine  # the engine owns the code: keep it alive with the function


def fp32_peak_gflops(threads: int, seconds: float = 0.2, runs: int = 5) -> float:
    """The best rate of ``threads`` threads each running the fma loop (ctypes releases the GIL), GFLOP/s."""
    from ragsched import float32, natural_vector_size

    lanes = natural_vector_size(float32)
    fn, _engine = _peak_kernel(lanes)
    out = [np.zeros(lanes, np.float32) for _ in range(threads)]
    count = 1 << 16
    while True:  # iterations for about ``seconds`` a run
        t0 = time.perf_counter()
        fn(count, out[0].ctypes.data)
        if time.perf_counter() - t0 > seconds / 4 or count > 1 << 34:
            break
        count *= 4
    best = 0.0
    for _ in range(runs):
        workers = [threading.Thread(target=fn, args=(count, out[k].ctypes.data)) for k in range(threads)]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        dt = time.perf_counter() - t0
        best = max(best, threads * count * STEPS * CHAINS * lanes * 2 / dt / 1e9)
    return best


def sgemm_seconds(m: int, k: int, n: int, repeats: int = 5) -> float:
    """Median seconds of NumPy's float32 matmul (OpenBLAS in NumPy's wheels, its own thread count) of an
    [m, k] by [k, n] product, after a warm-up."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    np.matmul(a, b, out=c)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.matmul(a, b, out=c)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def blas_name() -> str:
    """The BLAS NumPy calls (from its build configuration), e.g. 'scipy-openblas 0.3.29'."""
    try:
        cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{cfg.get('name', '?')} {cfg.get('version', '')}".strip()
    except Exception:  # an older NumPy without mode="dicts"
        return "NumPy's BLAS"


if __name__ == "__main__":
    print(f"fp32 peak: 1 thread {fp32_peak_gflops(1):.0f} GFLOP/s, 2 threads {fp32_peak_gflops(2):.0f} GFLOP/s")
    s = sgemm_seconds(4096, 512, 2048)
    print(f"{blas_name()} SGEMM 4096x512x2048: {2 * 4096 * 512 * 2048 / s / 1e9:.0f} GFLOP/s")
