"""The CUDA path, measured: ``python -m benchmarks.gpu``.

Always (no GPU needed): each GPU pipeline (its hand GPU schedule where the file has one, else the default
GPU schedule) lowered, rendered and compiled by NVRTC for sm_90, with ptxas's figures per kernel
(registers, spills, shared memory), and run in the GPU emulator on its small inputs against the NumPy
reference.

On a machine with a CUDA GPU and CuPy: the same kernels timed on the device (CUDA events, medians) on the
full inputs, beside PyTorch on CUDA where it is installed (padded SDPA with a key mask, one SDPA per
sequence, torch.nested) for ragged attention at batch 128 on MNLI and RACE lengths, and beside cuBLAS
(CuPy's matmul, per entry and padded to the longest) for the batched GEMM. Useful TFLOP/s count the
unpadded FLOPs only; the fraction of the GPU's fp32 peak uses 128 fp32 lanes per SM (Hopper) at the
clock the driver reports. Ragged calls copy their packed values to the device and back (RaggedArray is
NumPy-backed): the ragsched times include those copies, the PyTorch and cuBLAS ones start on the device.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from ragsched.codegen import target as targets
from ragsched.codegen.cuda.nvrtc import compile_cuda
from ragsched.codegen.cuda.nvrtc import version as nvrtc_version
from ragsched.pipeline_file import load
from ragsched.runtime.compare import matches
from ragsched.runtime.interop import to_device, to_host

ROOT = Path(__file__).resolve().parent.parent
PIPELINES = ("attention", "encoder", "batched_gemm", "blur", "harris")
HEADS, DIM = 8, 64


def compile_report(name: str) -> dict:
    """Lowering, CUDA C, NVRTC and ptxas figures for one pipeline, and its result in the emulator."""
    pf = load(ROOT / "pipelines" / f"{name}.py")
    sched = "gpu" if pf.has_schedule("gpu") else None
    t0 = time.perf_counter()
    kern = pf.pipeline(sched).compile(target="cuda", device="emulate")
    t1 = time.perf_counter()
    compiled = compile_cuda(kern.source)
    t2 = time.perf_counter()
    res = compiled.resources.values()
    row = {"pipeline": name, "schedule": sched or "default", "lower_render_s": t1 - t0, "nvrtc_s": t2 - t1,
           "kernels": len(compiled.resources), "max_registers": max(r.registers for r in res),
           "spill_bytes": sum(r.spill_stores + r.spill_loads for r in res),
           "max_shared_bytes": max(r.shared_bytes for r in res)}
    if name not in ("encoder",):  # minutes in the emulator (Python)
        inputs = pf.inputs("small")
        t3 = time.perf_counter()
        ok, why = matches(kern(**inputs), pf.reference(inputs))
        row |= {"emulator_ok": bool(ok), "emulator_s": time.perf_counter() - t3, "emulator_note": why}
    return row


# ------------------------------------------------------------------------------------------ on a device
def _events_median(fn, repeats: int = 10) -> float:
    import cupy

    fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(times)


def fp32_peak_tflops() -> float:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    return props["multiProcessorCount"] * 128 * 2 * props["clockRate"] * 1e3 / 1e12


def _lengths(dataset: str, batch: int) -> np.ndarray:
    return np.loadtxt(ROOT / "pipelines" / "data" / f"{dataset}_lengths.txt", dtype=np.int32)[:batch]


def attention_on_device(dataset: str, batch: int) -> dict:
    import ragsched as rs

    lens = _lengths(dataset, batch)
    rng = np.random.default_rng(0)
    qkv = [rs.RaggedArray.from_list([rng.standard_normal((n, HEADS, DIM)).astype(np.float32) for n in lens],
                                    ragged_axes=[0]) for _ in range(3)]
    pf = load(ROOT / "pipelines" / "attention.py")
    kern = pf.pipeline("gpu").compile(target="cuda")
    inputs = {"Q": qkv[0], "K": qkv[1], "V": qkv[2], "lens": lens}
    ok, _ = matches(kern(**inputs), pf.reference(inputs))
    useful = float(sum(4 * int(n) ** 2 * DIM * HEADS for n in lens))
    row = {"dataset": dataset, "batch": batch, "matches": bool(ok), "useful_gflop": useful / 1e9,
           "variants": {"ragsched (incl. copies)": _events_median(lambda: kern(**inputs), 5)}}
    row["variants"] |= _torch_attention(qkv, lens)
    row["copies alone"] = _copies_median([a.values for a in qkv], qkv[0].values)
    peak = fp32_peak_tflops()
    row["tflops"] = {k: useful / t / 1e12 for k, t in row["variants"].items() if t}
    row["fraction_of_fp32_peak"] = {k: v / peak for k, v in row["tflops"].items()}
    return row


def _copies_median(inputs: list, output) -> float:
    """Host-to-device copies of ``inputs`` and a device-to-host copy of an array like ``output``: what a
    ragged call's time holds beside its kernels."""
    import cupy

    dev_out = cupy.asarray(output)
    return _events_median(lambda: ([cupy.asarray(a) for a in inputs], dev_out.get()))


def _torch_attention(qkv, lens) -> dict:
    try:
        import torch
        import torch.nn.functional as F
        if not torch.cuda.is_available():
            return {}
    except ImportError:
        return {}
    dev = torch.device("cuda")
    out = {}
    seqs = [[torch.from_numpy(np.ascontiguousarray(x)).to(dev).transpose(0, 1) for x in a.to_list()] for a in qkv]
    longest = int(lens.max())

    def padded():
        q, k, v = (torch.nn.utils.rnn.pad_sequence([s.transpose(0, 1) for s in xs], batch_first=True)
                   .transpose(1, 2) for xs in seqs)
        mask = torch.arange(longest, device=dev)[None, :] < torch.as_tensor(lens, device=dev)[:, None]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])

    def per_sequence():
        return [F.scaled_dot_product_attention(q[None], k[None], v[None]) for q, k, v in zip(*seqs, strict=True)]

    def nested():
        q, k, v = (torch.nested.nested_tensor([s for s in xs], layout=torch.jagged).transpose(1, 2) for xs in seqs)
        return F.scaled_dot_product_attention(q, k, v)

    for name, fn in (("torch padded SDPA", padded), ("torch per sequence", per_sequence), ("torch nested", nested)):
        try:
            fn()
            torch.cuda.synchronize()
            times = []
            for _ in range(10):
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            out[name] = statistics.median(times)
        except Exception as err:  # a variant that does not run here is recorded, not fatal
            out[name] = None
            out[f"{name} error"] = f"{type(err).__name__}: {err}"[:200]
    return out


def copy_bandwidth() -> float:
    """Bytes read plus written per second by a 1 GiB device-to-device copy: the memory ceiling measured."""
    import cupy

    a = cupy.ones(1 << 28, cupy.float32)
    b = cupy.empty_like(a)
    return 2 * a.nbytes / _events_median(lambda: cupy.copyto(b, a))


def dense_on_device(name: str) -> dict:
    """A dense pipeline's GPU schedule on its full inputs already on the device (CuPy in and out): time, and
    the bytes of its inputs and output moved once over that time."""
    import cupy

    pf = load(ROOT / "pipelines" / f"{name}.py")
    inputs = pf.inputs("full")
    kern = pf.pipeline("gpu").compile(target="cuda")
    dev = to_device(inputs)
    got = kern(**dev)
    ok, _ = matches(to_host(got), pf.reference(inputs), pf.tolerance)
    moved = sum(v.nbytes for v in dev.values() if isinstance(v, cupy.ndarray)) + got.nbytes
    seconds = _events_median(lambda: kern(**dev))
    return {"matches": bool(ok), "seconds": seconds, "gb_per_s": moved / seconds / 1e9}


def gemm_on_device(batch: int = 32) -> dict:
    import cupy

    pf = load(ROOT / "pipelines" / "batched_gemm.py")
    inputs = pf.inputs("full")
    kern = pf.pipeline("gpu").compile(target="cuda")
    ok, _ = matches(kern(**inputs), pf.reference(inputs))
    a_list = [cupy.asarray(a) for a in inputs["A"].to_list()]
    b_dev = cupy.asarray(inputs["B"])
    lens = inputs["lens"]
    kk, n = b_dev.shape[1], b_dev.shape[2]
    useful = float(2 * int(lens.sum()) * kk * n)
    padded_a = cupy.zeros((len(lens), int(lens.max()), kk), cupy.float32)
    for k, a in enumerate(a_list):
        padded_a[k, :a.shape[0]] = a
    copies = _copies_median([inputs["A"].values, inputs["B"]], np.empty((int(lens.sum()), n), np.float32))
    variants = {"ragsched (incl. copies)": _events_median(lambda: kern(**inputs), 5),
                "cuBLAS per entry": _events_median(lambda: [a @ b_dev[k] for k, a in enumerate(a_list)]),
                "cuBLAS padded batch": _events_median(lambda: cupy.matmul(padded_a, b_dev))}
    peak = fp32_peak_tflops()
    return {"matches": bool(ok), "useful_gflop": useful / 1e9, "variants": variants, "copies alone": copies,
            "tflops": {k: useful / t / 1e12 for k, t in variants.items()},
            "fraction_of_fp32_peak": {k: useful / t / 1e12 / peak for k, t in variants.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    print(targets.machine_line())
    print(f"NVRTC {nvrtc_version()}")
    report = {"host": targets.machine_summary(), "gpu": targets.gpu_present(), "compile": [], "device": {}}
    print(f"\n{'pipeline':<13} {'schedule':<8} {'lower+C':>8} {'NVRTC':>7} {'kernels':>7} {'regs':>5} "
          f"{'spills':>6} {'smem':>6}  emulator")
    failures = 0
    for name in PIPELINES:
        row = compile_report(name)
        report["compile"].append(row)
        emu = ("not run (minutes in Python)" if "emulator_ok" not in row else
               f"{'ok' if row['emulator_ok'] else 'MISMATCH'} in {row['emulator_s']:.1f} s")
        failures += row.get("emulator_ok") is False
        print(f"{name:<13} {row['schedule']:<8} {row['lower_render_s']:7.2f}s {row['nvrtc_s']:6.2f}s "
              f"{row['kernels']:>7} {row['max_registers']:>5} {row['spill_bytes']:>5}B "
              f"{row['max_shared_bytes']:>5}B  {emu}")
    if not report["gpu"]:
        print("\nno CUDA GPU here (or no CuPy): the kernels were compiled for sm_90 and checked in the emulator; "
              "device timings need a GPU")
    else:
        report["device"]["copy_gb_per_s"] = copy_bandwidth() / 1e9
        print(f"\ndevice-to-device copy: {report['device']['copy_gb_per_s']:.0f} GB/s (read + written)")
        for name in ("blur", "harris"):
            row = dense_on_device(name)
            report["device"][name] = row
            print(f"{name}, full inputs on the device: {row['seconds'] * 1e3:.3f} ms, {row['gb_per_s']:.0f} GB/s "
                  f"moved once, {'matches' if row['matches'] else 'MISMATCH'}")
        for dataset in ("mnli", "race"):
            row = attention_on_device(dataset, args.batch)
            report["device"][f"attention_{dataset}"] = row
            print(f"\nattention, {dataset}, batch {args.batch}: {json.dumps(row, indent=1, default=str)}")
        row = gemm_on_device()
        report["device"]["batched_gemm"] = row
        print(f"\nbatched GEMM: {json.dumps(row, indent=1, default=str)}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
