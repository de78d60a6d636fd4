"""Each bundled pipeline, compiled with the default schedule and with its hand schedule, matches its plain
NumPy reference()."""

import importlib

import numpy as np
import pytest

from ragsched import RaggedArray
from ragsched.pipeline_file import load
from tests import ROOT

# name: (rtol, atol relative to the largest |value|); float32 with reassociation and LLVM's contractions
PIPELINES = {
    "blur": (1e-5, 1e-6),
    "unsharp": (1e-4, 1e-5),
    "harris": (1e-3, 1e-5),
    "matmul": (1e-4, 1e-5),
    "softmax": (1e-4, 1e-6),
    "local_laplacian": (1e-4, 1e-5),
    "bilateral_grid": (1e-4, 1e-5),
    "conv_layer": (1e-4, 1e-5),
    "attention": (1e-4, 1e-6),
    "trimatmul": (1e-4, 1e-5),
    "batched_gemm": (1e-4, 1e-5),
    "image_batch": (1e-5, 1e-6),
    "encoder": (1e-4, 1e-5),
    "linear": (1e-4, 1e-5),
}
# local_laplacian indexes a LUT by a truncated float: a last-bit difference in the gray level (FMA
# contraction, order of operations) moves a point by one LUT entry. A few points may be off by that.
OUTLIERS = {"local_laplacian": 3e-3}


IMAGE_PIPELINES = ("blur", "unsharp", "harris", "local_laplacian", "bilateral_grid", "conv_layer")


def flat_values(g, w):
    """Ragged results compare by their lengths, then their packed values."""
    if isinstance(g, RaggedArray) or isinstance(w, RaggedArray):
        assert isinstance(g, RaggedArray) and isinstance(w, RaggedArray)
        assert g.lengths.tolist() == w.lengths.tolist() and g.template == w.template
        return g.values, w.values
    return g, w


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_compiled_matches_numpy(name):
    _check(name, None)


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_hand_schedule_matches_numpy(name, cpu_target):
    """Hand schedules size their vectors by the target's lanes: checked at each width."""
    if not load(ROOT / "pipelines" / f"{name}.py").has_hand_schedule:
        assert name not in IMAGE_PIPELINES, f"{name}: every image pipeline has a hand schedule"
        return
    _check(name, "hand")


def _check(name: str, schedule) -> None:
    pf = load(ROOT / "pipelines" / f"{name}.py")
    inputs = pf.inputs("small")
    got = pf.pipeline(schedule).compile(threads=2)(**inputs)
    want = pf.reference(inputs)
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    rtol, atol = PIPELINES[name]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = flat_values(g, w)
        assert g.shape == w.shape and g.dtype == w.dtype
        scale = float(np.abs(w).max())
        if name in OUTLIERS:
            assert np.isclose(g, w, rtol=rtol, atol=atol * scale).mean() >= 0.999
            atol = OUTLIERS[name]
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale)


def test_every_pipeline_is_covered():
    bundled = {p.stem for p in (ROOT / "pipelines").glob("*.py") if p.stem != "__init__"}
    assert bundled == set(PIPELINES)
    for name in bundled:
        importlib.import_module(f"pipelines.{name}")


def test_blur_hand_schedule_slides_a_folded_window():
    """Halide's blur schedule computes each row of blur_x once per strip, in four rows of storage."""
    text = load(ROOT / "pipelines" / "blur.py").pipeline("hand").lowered()
    assert "allocate blur_x: float32[4 * " in text and "% 4" in text
    assert "select(" in text  # first iteration of a strip: three rows; the others: the one new row


def test_local_laplacian_output_pyramid_slides_at_every_level():
    """Each output pyramid level stored per strip slides along the strip's rows, also when the level
    it feeds is itself slid (its region then starts with that level's first-iteration select)."""
    text = load(ROOT / "pipelines" / "local_laplacian.py").pipeline("hand").lowered()
    for j in range(1, 5):
        assert f"let outGPyramid{j}.req.0.min = select(" in text, j
