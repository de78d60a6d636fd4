"""Ragged attention and a ragged encoder layer on real sequence lengths: ragsched beside NumPy and PyTorch
ways of doing the same.

``python -m benchmarks.ragged`` (and ``make bench``): for each dataset's first B lengths
(pipelines/data/*_lengths.txt), the attention core O = softmax(Q K^T / 8) V with 8 heads of 64 and the
encoder layer of pipelines/encoder.py (its baselines in benchmarks/encoder.py), timed as the median of
repeated runs, the variants taking turns, each checked against the pipeline's reference first.
Attention variants:

- ragsched: pipelines/attention.py with its hand schedule (loops bounded by each length; rows of scores
  padded to whole vector tiles), the same unpadded (``UNPADDED_ATTENTION``: tiles with a scalar rest,
  scores as dot products along k, and vectors along the heads, per sequence), the autoscheduler's
  committed schedule (schedules/<isa>/: the one tuned on this host's vector instruction set, else
  another's; by ``make autoschedule``, one schedule per length class, tuned on MNLI b128 and on RACE b32,
  each call running the class nearest its mean length; CoLA and SQuAD are held out from it), and the
  rules' schedule made for each batch's lengths (``trials=0``: the rules widen
  the tiles of scores where the padding stays small, and run the vectors along the heads where entries
  are short and the heads fill enough of a vector; so for the encoder layer too);
- NumPy padded: every sequence padded to the batch's longest, batched matmuls, padded keys masked;
- NumPy per sequence: one pair of matmuls per sequence;
- PyTorch padded SDPA: ``scaled_dot_product_attention`` on the padded batch with a key mask;
- PyTorch nested: a jagged nested tensor made from the packed values and offsets (zero-copy), SDPA;
- PyTorch per sequence: SDPA once per sequence;
- PyTorch sorted: sequences sorted by length, padded to the longest of each chunk of 8, SDPA with a mask.

The ffn part is held out (pipelines/held_out/ragged/ffn.py, written after the rules for ragged products,
which never saw it): a feed-forward block at BERT-base's sizes, ragsched's hand schedule and the rules'
beside NumPy (OpenBLAS) and PyTorch (oneDNN on and off) on the packed tokens.

The linear part times one linear layer on the packed tokens (pipelines/linear.py) at each of the encoder's
four product shapes: ragsched's hand schedule and the rules' (``trials=0``) beside OpenBLAS's SGEMM on the
packed tokens (NumPy's matmul: the same product as one dense GEMM) and PyTorch's ``addmm`` with oneDNN
on and off. Every row also gives each variant's fraction of this host's measured fp32 peak
(benchmarks/cpu_rates.py).

Useful FLOPs are those of the unpadded computation (4 n^2 64 8 per sequence of n tokens: two matmuls);
padding overhead is FLOPs spent on padded points over useful FLOPs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "pipelines" / "data"
DATASETS = ("mnli", "squad", "race", "cola")
HEADS, DIM = 8, 64


def lengths(dataset: str, batch: int) -> np.ndarray:
    return np.loadtxt(DATA / f"{dataset}_lengths.txt", dtype=np.int32)[:batch]


def attention_flops(lens) -> float:
    """FLOPs of the two matmuls of attention over these exact lengths (softmax is negligible beside them)."""
    return float(sum(4 * int(n) ** 2 * DIM * HEADS for n in lens))


def score_padding_flops(lens, multiple: int) -> float:
    """FLOPs a schedule spends on padded scores: the sum Q K^T over each row's columns rounded up to
    ``multiple`` (``pad`` records on QK: whole vector tiles, no serial rest)."""
    return float(sum(2 * int(n) * (-(-int(n) // multiple) * multiple - int(n)) * DIM * HEADS for n in lens))


#: attention's hand schedules without padded scores, by their names in the tables: keyword arguments of
#: its ``hand_schedule``
UNPADDED_ATTENTION = {"ragsched hand unpadded": {"pad": False}, "ragsched hand dot": {"scores": "dot"},
                      "ragsched hand heads": {"lanes": "heads"}}


def hand_attention(pf, **options):
    """Attention's hand schedule with ``options`` (keywords of its ``hand_schedule``)."""
    import ragsched as rs
    from ragsched.lang import schedulable

    outs = pf.outputs()
    pf.module.hand_schedule(schedulable(list(outs)), **options)
    return rs.Pipeline(list(outs))


def score_multiple(pipeline):
    """The multiple a ragsched pipeline's schedule pads the rows of scores of its sum QK to (1: none); for
    schedules by length class, a function of the lengths (the class they run)."""
    from ragsched.schedule import records as R

    def multiple(schedule) -> int:
        return max((d.multiple for d in schedule if isinstance(d, R.Pad) and d.func == "QK"), default=1)

    if pipeline.by_length is not None:
        from ragsched.codegen.ragged_domains import lengths_inputs
        from ragsched.schedule.by_length import mean_length

        classes, names = pipeline.by_length, lengths_inputs(pipeline.program())

        def picked(lens) -> int:
            return multiple(classes.classes[classes.pick(mean_length(names, dict.fromkeys(names, lens)))].schedule)

        return picked
    return multiple(pipeline.schedule())


def _padded_flops(groups) -> float:
    return float(sum(len(g) * 4 * int(max(g, default=0)) ** 2 * DIM * HEADS for g in groups))


# ----------------------------------------------------------------------------------------- variants
def numpy_padded(q, k, v, lens):
    n = int(lens.max(initial=0))
    qp, kp, vp = (np.ascontiguousarray(x.to_padded().transpose(0, 2, 1, 3)) for x in (q, k, v))  # [B, H, n, D]
    s = np.matmul(qp, kp.transpose(0, 1, 3, 2)) * np.float32(1 / np.sqrt(DIM))
    # the most negative float, not -inf: a sequence of length 0 masks a whole row, and -inf - -inf is NaN
    np.copyto(s, np.finfo(np.float32).min, where=np.arange(n)[None, None, None, :] >= lens[:, None, None, None])
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    s /= s.sum(axis=-1, keepdims=True)
    o = np.matmul(s, vp).transpose(0, 2, 1, 3)  # [B, n, H, D]
    return [o[b, :m] for b, m in enumerate(lens)]


def numpy_per_sequence(q, k, v, lens):
    out = []
    for qq, kk, vv in zip(q.to_list(), k.to_list(), v.to_list(), strict=True):
        qh, kh, vh = (x.transpose(1, 0, 2) for x in (qq, kk, vv))  # [H, n, D]
        s = np.matmul(qh, kh.transpose(0, 2, 1)) * np.float32(1 / np.sqrt(DIM))
        s = np.exp(s - s.max(axis=-1, keepdims=True, initial=-np.inf))
        s /= s.sum(axis=-1, keepdims=True)
        out.append(np.matmul(s, vh).transpose(1, 0, 2))
    return out


def _torch_views(x):
    import torch

    return torch.from_numpy(x.values.reshape(-1, HEADS, DIM))  # [total tokens, H, D], shared with x


def _token_offsets(x) -> np.ndarray:
    return np.asarray(x.offsets, dtype=np.int64) // (HEADS * DIM)


def torch_padded(q, k, v, lens, groups=None):
    """SDPA on padded batches: the whole batch (``groups`` None) or chunks of sequences (sorted)."""
    import torch.nn.functional as F

    tq, tk, tv = (_torch_views(x) for x in (q, k, v))

    def attend(idx, mask):
        qp, kp, vp = (t[idx].transpose(1, 2) for t in (tq, tk, tv))  # [G, H, n, D]
        return F.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask).transpose(1, 2)
    return run_padded(lens, _token_offsets(q), groups, attend, np.zeros((0, HEADS, DIM), np.float32))


def run_padded(lens, offsets, groups, compute, empty) -> list:
    """One array per entry: ``compute(idx, mask)`` on each group of entries (all of them when ``groups``
    is None) padded to the group's longest, ``idx`` [G, n] the packed token of each padded position (0
    past an entry), ``mask`` [G, 1, 1, n] its valid keys; ``empty`` for entries of groups with no token."""
    import torch

    out = [empty] * len(lens)
    for g in [list(range(len(lens)))] if groups is None else groups:
        n = int(max((lens[b] for b in g), default=0))
        if n == 0:
            continue
        idx = torch.zeros((len(g), n), dtype=torch.long)
        mask = torch.zeros((len(g), 1, 1, n), dtype=torch.bool)
        for r, b in enumerate(g):
            m = int(lens[b])
            idx[r, :m] = torch.arange(offsets[b], offsets[b] + m)
            mask[r, 0, 0, :m] = True
        o = compute(idx, mask)
        for r, b in enumerate(g):
            out[b] = o[r, :int(lens[b])].numpy()
    return out


def sorted_chunks(lens, chunk=8) -> list[list[int]]:
    """The entries sorted by length, in groups of ``chunk``: PyTorch sorted pads each group to its longest."""
    order = sorted(range(len(lens)), key=lambda b: int(lens[b]))
    return [order[i:i + chunk] for i in range(0, len(order), chunk)]


def torch_sorted(q, k, v, lens):
    return torch_padded(q, k, v, lens, sorted_chunks(lens))


def torch_nested(q, k, v, lens):
    import torch
    import torch.nn.functional as F

    offsets = torch.from_numpy(_token_offsets(q))
    nt = [torch.nested.nested_tensor_from_jagged(_torch_views(x), offsets).transpose(1, 2) for x in (q, k, v)]
    o = F.scaled_dot_product_attention(*nt).transpose(1, 2)  # [B, j, H, D]
    return [t.numpy() for t in o.unbind()]


def torch_per_sequence(q, k, v, lens):
    import torch.nn.functional as F

    tq, tk, tv = (_torch_views(x) for x in (q, k, v))
    offs, out = _token_offsets(q), []
    for b, m in enumerate(lens):
        s = slice(int(offs[b]), int(offs[b]) + int(m))
        qh, kh, vh = (t[s].transpose(0, 1) for t in (tq, tk, tv))  # [H, n, D]
        out.append(F.scaled_dot_product_attention(qh, kh, vh).transpose(0, 1).numpy())
    return out


def variants(lens):
    """name -> (call(q, k, v, lens), FLOPs it spends)."""
    useful = attention_flops(lens)
    longest = int(lens.max(initial=0))
    chunks = [[int(lens[b]) for b in g] for g in sorted_chunks(lens)]
    padded = float(len(lens) * 4 * longest ** 2 * DIM * HEADS)
    return {
        "NumPy padded": (numpy_padded, padded),
        "NumPy per sequence": (numpy_per_sequence, useful),
        "PyTorch padded SDPA": (torch_padded, padded),
        "PyTorch nested": (torch_nested, useful),
        "PyTorch per sequence": (torch_per_sequence, useful),
        "PyTorch sorted x8": (torch_sorted, _padded_flops(chunks)),
    }


# ------------------------------------------------------------------------------------------ workloads
@dataclass(frozen=True)
class Workload:
    """One benchmarked computation: its pipeline file, random inputs for given lengths, the arguments
    its baselines take, and its baselines."""

    title: str
    pipeline: str
    make_inputs: Callable  # (lens, rng) -> the pipeline's inputs
    baseline_args: Callable  # inputs -> the positional arguments of every baseline
    variants: Callable  # lens -> {name: (baseline, FLOPs it spends)}
    useful_flops: Callable  # lens -> FLOPs of the unpadded computation
    row_kernels: Callable | None = None  # (pipeline file, inputs, threads) -> {label: kernel} made per row


LINEAR_SHAPES = ((512, 1536), (512, 512), (512, 2048), (2048, 512))  # the encoder's products (K, N)


def _linear_inputs(k, n):
    def make(lens, rng):
        from pipelines.linear import inputs_for

        return inputs_for(lens, k, n, seed=int(rng.integers(1 << 30)))
    return make


def _packed_rows(x, width: int) -> np.ndarray:
    return x.values.reshape(-1, width)  # [total tokens, width], shared with x


def _split_rows(c, lens) -> list:
    return np.split(c, np.cumsum(lens)[:-1]) if len(lens) else []


def blas_linear(x, w, bias, lens):
    """OpenBLAS's SGEMM (NumPy's matmul) on the packed tokens, then the bias added in place."""
    c = np.matmul(_packed_rows(x, w.shape[0]), w)
    c += bias
    return _split_rows(c, lens)


def torch_linear(x, w, bias, lens, onednn=True):
    """PyTorch's addmm on the packed tokens (bias fused), with oneDNN enabled or not."""
    import torch

    before = torch.backends.mkldnn.enabled  # (mkldnn.flags() also sets TF32 and warns about it)
    torch.backends.mkldnn.enabled = onednn
    try:
        c = torch.addmm(torch.from_numpy(bias), torch.from_numpy(_packed_rows(x, w.shape[0])), torch.from_numpy(w))
    finally:
        torch.backends.mkldnn.enabled = before
    return _split_rows(c.numpy(), lens)


def linear_flops(k, n):
    return lambda lens: float(2 * k * n * int(np.sum(lens)))


def linear_variants(k, n):
    def variants(lens):
        f = linear_flops(k, n)(lens)
        return {"OpenBLAS SGEMM packed": (blas_linear, f), "PyTorch addmm packed": (torch_linear, f),
                "PyTorch addmm, no oneDNN": (lambda *a: torch_linear(*a, onednn=False), f)}
    return variants


def _ffn_inputs(lens, rng):
    from pipelines.held_out.ragged.ffn import inputs_for

    return inputs_for(lens, seed=int(rng.integers(1 << 30)))


def blas_ffn(x, lens, w1, b1, w2, b2):
    """NumPy (OpenBLAS's SGEMM) on the packed tokens: both products, the GELU between, the residual."""
    from pipelines.held_out.ragged.ffn import HIDDEN, packed

    return _split_rows(packed(_packed_rows(x, HIDDEN), w1, b1, w2, b2), lens)


def torch_ffn(x, lens, w1, b1, w2, b2, onednn=True):
    """PyTorch on the packed tokens: addmm, GELU (tanh), addmm, the residual added; oneDNN on or off."""
    import torch

    from pipelines.held_out.ragged.ffn import HIDDEN

    before = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = onednn
    try:
        t = torch.from_numpy(_packed_rows(x, HIDDEN))
        z = torch.nn.functional.gelu(torch.addmm(torch.from_numpy(b1), t, torch.from_numpy(w1)), approximate="tanh")
        c = torch.addmm(torch.from_numpy(b2), z, torch.from_numpy(w2)).add_(t)
    finally:
        torch.backends.mkldnn.enabled = before
    return _split_rows(c.numpy(), lens)


def ffn_flops(lens) -> float:
    from pipelines.held_out.ragged.ffn import HIDDEN, INNER

    return float(4 * HIDDEN * INNER * int(np.sum(lens)))


def ffn_variants(lens):
    f = ffn_flops(lens)
    return {"OpenBLAS SGEMM packed": (blas_ffn, f), "PyTorch packed": (torch_ffn, f),
            "PyTorch packed, no oneDNN": (lambda *a: torch_ffn(*a, onednn=False), f)}


def _rules_kernel(pf, inputs, threads):
    """The rules' schedule for these inputs (``trials=0``: nothing measured; the rules read the inputs'
    lengths), compiled, and the multiple it pads rows of scores to."""
    import ragsched as rs

    rules = pf.pipeline(rs.autoschedule(list(pf.outputs()), trials=0, inputs=inputs, threads=threads))
    return {"ragsched rules": (rules.compile(threads=threads), score_multiple(rules))}


def _attention_inputs(lens, rng) -> dict:
    import ragsched as rs

    q, k, v = (rs.RaggedArray.from_list([rng.standard_normal((int(n), HEADS, DIM)).astype(np.float32)
                                         for n in lens], ragged_axes=[0]) for _ in range(3))
    return {"Q": q, "K": k, "V": v, "lens": lens}


def _encoder_inputs(lens, rng) -> dict:
    import ragsched as rs
    from pipelines.encoder import HIDDEN, example_inputs

    inputs = example_inputs("small")  # for its weights (fixed seed); the tokens are drawn for these lengths
    inputs["X"] = rs.RaggedArray.from_list([rng.standard_normal((int(n), HIDDEN)).astype(np.float32)
                                            for n in lens], ragged_axes=[0])
    inputs["lens"] = lens
    return inputs


def _encoder_args(inputs):
    return inputs["X"], inputs["lens"], {k: v for k, v in inputs.items() if k not in ("X", "lens")}


def workloads() -> dict[str, Workload]:
    from benchmarks import encoder

    return {
        "attention": Workload("ragged attention core", "attention", _attention_inputs,
                              lambda d: (d["Q"], d["K"], d["V"], d["lens"]), variants, attention_flops,
                              _rules_kernel),
        "encoder": Workload("ragged encoder layer", "encoder", _encoder_inputs, _encoder_args,
                            encoder.variants, encoder.flops, _rules_kernel),
        "ffn": Workload("ragged feed-forward block, held out (768 -> 3072 -> 768, GELU, residual)",
                        "held_out/ragged/ffn", _ffn_inputs,
                        lambda d: (d["X"], d["lens"], d["W1"], d["b1"], d["W2"], d["b2"]), ffn_variants, ffn_flops,
                        _rules_kernel),
        **{f"linear {k}x{n}": Workload(f"ragged linear layer, K {k}, N {n}", "linear", _linear_inputs(k, n),
                                       lambda d: (d["X"], d["W"], d["bias"], d["lens"]), linear_variants(k, n),
                                       linear_flops(k, n), _rules_kernel)
           for k, n in LINEAR_SHAPES},
    }


# ------------------------------------------------------------------------------------------ driver
def _interleaved_medians(calls: dict, repeats: int) -> dict:
    """Median time of each call, the calls taking turns (one run of each per round, after a warm-up
    round): this machine's speed drifts over minutes, and turns spread the drift over every variant
    alike instead of favouring whichever ran in a fast minute."""
    samples = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in samples.items()}


def _max_error(got, want) -> float:
    """Largest |difference| over max |reference|."""
    scale = max((float(np.abs(w).max(initial=0.0)) for w in want), default=0.0) or 1.0
    return max((float(np.abs(np.asarray(g) - w).max(initial=0.0)) for g, w in zip(got, want, strict=True)),
               default=0.0) / scale


def run(parts, datasets, batches, repeats: int, threads: int, peak: float | None = None) -> list[dict]:
    """Every part on every dataset and batch; ``peak`` (GFLOP/s) gives each variant's fraction of it."""
    import torch

    torch.set_num_threads(threads)
    import ragsched as rs
    from ragsched.autosched.space import VERSION as SPACE_VERSION
    from ragsched.codegen import target as targets
    from ragsched.pipeline_file import load, tuned_isa, tuned_schedule

    rows = []
    for part in parts:
        work = workloads()[part]
        pf = load(ROOT / "pipelines" / f"{work.pipeline}.py")
        t0 = time.perf_counter()
        kerns = {"ragsched hand": pf.pipeline("hand").compile(threads=threads)}
        compile_s = time.perf_counter() - t0
        multiples = {"ragsched hand": score_multiple(pf.pipeline("hand"))}
        if work.pipeline == "attention":  # the hand schedule without padded scores: no padding, slower
            for name, options in UNPADDED_ATTENTION.items():
                unpadded = hand_attention(pf, **options)
                kerns[name] = unpadded.compile(threads=threads)
                multiples[name] = score_multiple(unpadded)
        auto = tuned_schedule(ROOT / "schedules", work.pipeline)  # written by make autoschedule
        if auto is not None:
            kerns["ragsched auto"] = pf.pipeline(auto).compile(threads=threads)
            multiples["ragsched auto"] = score_multiple(pf.pipeline(auto))
        space = (rs.Schedule.tuned_for(auto.read_text()) or {}).get("space") if auto is not None else None
        auto_isa = tuned_isa(auto) if auto is not None else None
        other_isa = auto is not None and auto_isa != targets.default().isa
        if auto is not None and (other_isa or space != SPACE_VERSION):
            # tuned on another vector width, or in an older search space: the rules' schedule beside it
            why = (f"is {auto_isa}'s, not this host's {targets.default().isa}" if other_isa else
                   f"was found in search space {space or '10 or older'}, not today's {SPACE_VERSION}")
            print(f"{work.pipeline}: its tuned schedule {why}; the rules' (trials=0) are timed too")
            if work.row_kernels is None:  # (else the rules' are made for each batch's lengths)
                rules = pf.pipeline(rs.autoschedule(list(pf.outputs()), trials=0, inputs=pf.inputs("full"),
                                                    threads=threads))
                kerns["ragsched rules"] = rules.compile(threads=threads)
                multiples["ragsched rules"] = score_multiple(rules)
        rng = np.random.default_rng(0)
        for dataset in datasets:
            for batch in batches:
                row = measure_row(work, kerns, pf, dataset, batch, rng, repeats, threads, multiples)
                row["ragsched_compile_s"] = compile_s
                if auto is not None:
                    row["auto_tuned_for"] = auto.parent.name  # the vector instruction set it was tuned on
                if peak:
                    row["fp32_peak_gflops"] = peak
                    for r in row["variants"].values():
                        if "useful_gflops" in r:
                            r["fraction_of_peak"] = r["useful_gflops"] / peak
                rows.append(row)
                print_row(row)
    return rows


def measure_row(work: Workload, kerns: dict, pf, dataset: str, batch: int, rng, repeats: int,
                threads: int = 2, multiples: dict | None = None) -> dict:
    """Every variant on one batch: ragsched's ``kerns`` (label -> compiled kernel) and those the workload
    makes for these inputs, and the baselines, each checked against the reference, then timed.
    ``multiples`` (label -> the multiple a kernel's schedule pads rows of scores to) counts the padded
    scores a ragsched kernel computes in its FLOPs (its padding overhead)."""
    lens = lengths(dataset, batch)
    inputs = work.make_inputs(lens, rng)
    if work.row_kernels is not None:
        made = work.row_kernels(pf, inputs, threads)
        kerns = {**kerns, **{label: kern for label, (kern, _) in made.items()}}
        multiples = {**(multiples or {}), **{label: m for label, (_, m) in made.items()}}
    want = pf.reference(inputs).to_list()
    useful = work.useful_flops(lens)
    row = {"workload": work.pipeline, "title": work.title, "dataset": dataset, "batch": batch,
           "mean_length": float(lens.mean()), "max_length": int(lens.max()), "useful_gflop": useful / 1e9,
           "variants": {}}
    calls = {}
    for label, kern in kerns.items():
        out = kern(**inputs)
        multiple = (multiples or {}).get(label, 1)
        spent = useful + score_padding_flops(lens, multiple(lens) if callable(multiple) else multiple)
        calls[label] = (lambda kern=kern, out=out: kern(**inputs, out=out), spent,
                        lambda kern=kern: kern(**inputs).to_list())
    args = work.baseline_args(inputs)
    for name, (fn, flops) in work.variants(lens).items():
        calls[name] = (lambda fn=fn: fn(*args), flops, lambda fn=fn: fn(*args))
    timed = {}
    for name, (call, flops, result) in calls.items():
        try:
            err = _max_error(result(), want)
            call()  # warm-up
            timed[name] = call
            row["variants"][name] = {"padding_overhead": flops / useful - 1 if useful else 0.0,
                                     "max_rel_error": err, "matches": err < 1e-3}
        except Exception as e:  # a variant PyTorch cannot run here is reported, not fatal
            row["variants"][name] = {"error": f"{type(e).__name__}: {e}"}
    for name, t in _interleaved_medians(timed, repeats).items():
        row["variants"][name].update(ms=t * 1e3, useful_gflops=useful / t / 1e9)
    return row


def print_row(row: dict) -> None:
    print(f"\n{row['title']}, {row['dataset'].upper()} batch {row['batch']} (mean length {row['mean_length']:.0f}, max "
          f"{row['max_length']}; {row['useful_gflop']:.2f} useful GFLOP)")
    print(f"  {'variant':<26} {'time':>10} {'GFLOP/s':>8} {'of peak':>8} {'padding':>8} {'vs best other':>14}")
    others = [r["ms"] for n, r in row["variants"].items()
              if not n.startswith("ragsched") and "ms" in r and r["matches"]]
    best = min(others, default=float("nan"))
    for name, r in row["variants"].items():
        if "error" in r:
            print(f"  {name:<26} {r['error'][:70]}")
            continue
        flag = "" if r["matches"] else f"  MISMATCH ({r['max_rel_error']:.1e})"
        share = f"{r['fraction_of_peak'] * 100:7.0f}%" if "fraction_of_peak" in r else f"{'-':>8}"
        print(f"  {name:<26} {r['ms']:7.1f} ms {r['useful_gflops']:8.1f} {share} {r['padding_overhead'] * 100:7.0f}% "
              f"{best / r['ms']:13.2f}x{flag}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ragged")
    ap.add_argument("--parts", nargs="*", default=["attention", "encoder", "linear", "ffn"],
                    choices=["attention", "encoder", "linear", "ffn"],
                    help="what to time: the attention core, the encoder layer, the encoder's four linear layers "
                         "alone, the held-out feed-forward block (pipelines/held_out/ragged/; default: all four)")
    ap.add_argument("--datasets", nargs="*", default=list(DATASETS), choices=DATASETS)
    ap.add_argument("--batches", nargs="*", type=int, default=[32, 128])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-o", "--output", default=str(ROOT / "bench-results" / "ragged.json"))
    args = ap.parse_args(argv)
    from ragsched.codegen.target import machine_line, machine_summary

    print(machine_line())
    print(f"ragged attention core and encoder layer, {HEADS} heads x {DIM}, {args.threads} threads, "
          f"median of {args.repeats}; "
          "'vs best other' is the fastest matching non-ragsched variant's time over this one's")
    from benchmarks.cpu_rates import fp32_peak_gflops

    peak = fp32_peak_gflops(args.threads)
    print(f"measured fp32 peak: {peak:.0f} GFLOP/s ({args.threads} threads, independent vector fma chains)")
    parts = [p for part in args.parts for p in workloads() if p == part or p.startswith(f"{part} ")]
    rows = run(parts, args.datasets, args.batches, args.repeats, args.threads, peak)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M:%S"), "host": machine_summary(),
                               "threads": args.threads, "fp32_peak_gflops": peak, "rows": rows}, indent=2))
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
