"""A batch of images of different sizes (pipelines/image_batch.py: a 3 x 3 box blur of each image with its
own edges, centred on its mean), ragsched's default, rules (``trials=0``) and hand schedules beside
NumPy and PyTorch image by image, and PyTorch on the batch padded to its largest image (what a padded
batch computes: the whole box, twice the pixels here, and each image's edges extended by zeros rather
than its own pixels, so its values differ at the edges; timed for its speed only). Medians of rounds
taken in turns; every ragsched result checked against the NumPy one.

``python -m benchmarks.ragged_images [--rounds R] [--threads T]``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import ragsched as rs
from benchmarks.held_out import alternate

ROOT = Path(__file__).resolve().parent.parent


def torch_variants(images, threads: int) -> dict:
    """PyTorch image by image (replicate padding: each image's own edges) and on the padded batch."""
    try:
        import torch
    except ImportError:
        return {}
    torch.set_num_threads(threads)
    box = torch.full((1, 1, 3, 3), 1 / 9.0)
    each = [torch.from_numpy(im)[None, None] for im in images]
    pad = torch.nn.functional.pad

    def per_image():
        with torch.no_grad():
            return [torch.nn.functional.conv2d(pad(t, (1, 1, 1, 1), mode="replicate"), box) - t.mean()
                    if t.numel() else t for t in each]

    h = max(im.shape[0] for im in images)
    w = max(im.shape[1] for im in images)
    batch = torch.zeros(len(images), 1, h, w)
    for b, t in enumerate(each):
        batch[b, :, :t.shape[2], :t.shape[3]] = t

    def padded_batch():
        with torch.no_grad():
            return torch.nn.functional.conv2d(batch, box, padding=1) - batch.mean(dim=(1, 2, 3), keepdim=True)

    return {"PyTorch per image": per_image, "PyTorch padded batch (edges differ)": padded_batch}


def measure(rounds: int, threads: int) -> dict:
    from ragsched.pipeline_file import load

    pf = load(ROOT / "pipelines" / "image_batch.py")
    inputs = pf.inputs("full")
    images = inputs["img"].to_list()
    want = [pf.module.reference_image(im) for im in images]
    calls, errors = {}, {}
    for label in ("default", "rules", "hand"):
        if label == "rules":
            outs = list(pf.outputs())
            rs.autoschedule(outs, trials=0, inputs=inputs, threads=threads).apply(outs)
            pipe = rs.Pipeline(outs)
        else:
            pipe = pf.pipeline(None if label == "default" else "hand")
        kern = pipe.compile(threads=threads)
        got = kern(**inputs)
        errors[f"ragsched {label}"] = max(float(np.abs(g - w).max(initial=0.0)) for g, w in
                                          zip(got.to_list(), want, strict=True))
        calls[f"ragsched {label}"] = lambda kern=kern, got=got: kern(**inputs, out=got)
    calls["NumPy per image"] = lambda: [pf.module.reference_image(im) for im in images]
    calls.update(torch_variants(images, threads))
    seconds = alternate(calls, rounds)
    pixels = sum(im.size for im in images)
    box = len(images) * max(im.shape[0] for im in images) * max(im.shape[1] for im in images)
    return {"images": len(images), "pixels": pixels, "padded_box": box, "ms": {k: s * 1e3 for k, s in seconds.items()},
            "max_error": errors}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ragged_images", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("-o", "--output", default=str(ROOT / "bench-results" / "ragged_images.json"))
    args = ap.parse_args(argv)
    from ragsched.codegen.target import machine_line, machine_summary

    res = measure(args.rounds, args.threads)
    print(f"a batch of {res['images']} images of different sizes ({res['pixels'] / 1e6:.2f} M pixels; padded to the "
          f"largest, {res['padded_box'] / 1e6:.2f} M), blur and centre, {args.threads} threads, median of "
          f"{args.rounds} rounds in turns; {machine_line()}")
    ours = [k for k in res["ms"] if k.startswith("ragsched")]
    best_other = min((v for k, v in res["ms"].items() if k not in ours and "differ" not in k), default=None)
    for k, v in res["ms"].items():
        vs = f"{best_other / v:8.2f}x" if best_other and k in ours else ""
        print(f"  {k:<38} {v:9.2f} ms {vs}")
    print(f"  (x: the fastest other correct variant's time over ragsched's; ragsched's largest error "
          f"{max(res['max_error'].values()):.1e})")
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"host": machine_summary(), "threads": args.threads, **res}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
