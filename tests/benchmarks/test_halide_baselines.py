"""The Halide baselines of the benchmark compute what our pipelines compute (benchmarks/halide_apps.py).

Every hand schedule must build and match the pipeline's reference(); an autoscheduled variant must
either match or be reported as failed with a reason (a string), never crash. Adams2019 runs with a
greedy search (beam_size 1) to keep this fast; the benchmark uses its default search. Where Halide's
three autoschedulers take over 20 s together (``SLOW_TO_AUTOSCHEDULE``), only the hand schedule is
checked here: the variants differ from it in schedule alone, and ``make bench`` checks every variant's
output against the reference at full scale before it reports a time (a mismatch is marked ``!``).
"""

import importlib

import numpy as np
import pytest

pytest.importorskip("halide")

from benchmarks.halide_apps import APPS, HalideVariant, halide_variants, variants_to_test  # noqa: E402

FAST = {"Adams2019": {"beam_size": "1"}}
# relative to the largest |value|: float32 with Halide's own evaluation order (and FMA contraction)
TOLERANCE = 1e-5
# local_laplacian indexes a LUT by a truncated float: a last-bit difference in the gray level moves a
# point by one LUT entry. A few points may be off by that.
OUTLIERS = {"local_laplacian": 3e-3}


@pytest.mark.parametrize("name", sorted(APPS))
def test_variants_match_reference(name):
    mod = importlib.import_module(f"pipelines.{name}")
    inputs = mod.example_inputs("small")
    want = mod.reference(**inputs)
    asked = variants_to_test(name)
    variants = halide_variants(name, inputs, threads=2, variants=asked, autoscheduler_params=FAST)
    assert set(variants) == set(asked)
    assert isinstance(variants["hand"], HalideVariant), variants["hand"]
    scale = float(np.abs(want).max())
    for v, run in variants.items():
        if isinstance(run, str):
            assert run.startswith(f"{v} failed: ") and len(run) > len(f"{v} failed: ")
            continue
        got = run()
        assert got.shape == want.shape and got.dtype == want.dtype, v
        atol = TOLERANCE * scale
        if name in OUTLIERS:
            assert np.isclose(got, want, rtol=1e-5, atol=atol).mean() >= 0.999, v
            atol = OUTLIERS[name] * scale
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol, err_msg=f"{name} {v}")
        assert run() is got  # the output is preallocated once


def test_a_failing_variant_is_reported():
    inputs = importlib.import_module("pipelines.blur").example_inputs("small")
    out = halide_variants("blur", inputs, variants=("NoSuchScheduler",))
    assert isinstance(out["NoSuchScheduler"], str) and "NoSuchScheduler failed" in out["NoSuchScheduler"]


def test_halide_buffer_reverses_numpy_axes():
    import halide as hl

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = hl.Buffer(a)
    assert (b.dim(0).extent(), b.dim(1).extent()) == (3, 2)
    assert b[2, 1] == a[1, 2]
