"""The held-out suite (pipelines/held_out/): each pipeline's NumPy reference() agrees with
ragsched.reference, with the compiled default and hand schedules, and with its Halide version (hand
schedule; the autoschedulers' variants match or report why they failed, except on the apps that take
them over 20 s, ``benchmarks.halide_apps.SLOW_TO_AUTOSCHEDULE``, whose variants ``make bench`` checks).
Each file states its own tolerance as ``TOLERANCE = (rtol, atol relative to the largest |value|)``."""

import importlib

import numpy as np
import pytest

from pipelines.held_out import NAMES
from ragsched.pipeline_file import load
from ragsched.reference import run
from tests import ROOT


def _module(name):
    return importlib.import_module(f"pipelines.held_out.{name}")


def _close(name, got, want, what):
    rtol, atol = _module(name).TOLERANCE
    assert got.shape == want.shape and got.dtype == want.dtype, what
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * float(np.abs(want).max()), err_msg=what)


def test_the_suite_is_the_files():
    files = {p.stem for p in (ROOT / "pipelines" / "held_out").glob("*.py") if p.stem != "__init__"}
    assert files == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_example_inputs_are_small_odd_and_deterministic(name):
    mod = _module(name)
    small, again = mod.example_inputs("small"), mod.example_inputs("small")
    assert 1000 <= sum(v.size for v in small.values()) <= 200_000
    for k, v in small.items():
        assert all(s % 2 == 1 for s in v.shape if s > 3), f"{name}.{k}: small sizes are odd"
        np.testing.assert_array_equal(v, again[k])


@pytest.mark.parametrize("name", NAMES)
def test_reference_interpreter_matches_numpy(name):
    mod = _module(name)
    inputs = mod.example_inputs("small")
    _close(name, run(mod.build(), **inputs), mod.reference(**inputs), "ragsched.reference")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("schedule", [None, "hand"])
def test_compiled_matches_numpy(name, schedule, cpu_target):
    pf = load(ROOT / "pipelines" / "held_out" / f"{name}.py")
    inputs = pf.inputs("small")
    got = pf.pipeline(schedule).compile(threads=2)(**inputs)
    _close(name, got, pf.reference(inputs), f"schedule {schedule}")


@pytest.mark.parametrize("name", NAMES)
def test_halide_version_matches_numpy(name):
    pytest.importorskip("halide")
    from benchmarks.halide_apps import HalideVariant, halide_variants, variants_to_test

    mod = _module(name)
    inputs = mod.example_inputs("small")
    want = mod.reference(**inputs)
    asked = variants_to_test(name)
    variants = halide_variants(name, inputs, threads=2, variants=asked,
                               autoscheduler_params={"Adams2019": {"beam_size": "1"}})
    assert set(variants) == set(asked)
    assert isinstance(variants["hand"], HalideVariant), variants["hand"]
    for v, call in variants.items():
        if isinstance(call, str):
            assert call.startswith(f"{v} failed: ")
            continue
        _close(name, call(), want, f"Halide {v}")


_CLAMPED_ROWS_PER_TILE = {
    # a producer tiled by 4 rows with shifted tails inside the output's shifted tiles of 88 rows (Adams2019's
    # structure): its region, a + min(4 y, b - a - 3), was bounded over all tiles with a from the last and b
    # from the first, and the call refused the image as read from row -18
    "shifted in shifted": """
def apply_schedule(funcs):
    out = funcs["resize"]
    out.split("y", "y", "y.i", 88, tail="shift").split("x", "x", "x.i", 24, tail="shift")
    out.reorder("y", "c", "x", "y.i", "x.i")
    funcs["resized_y"].compute_inline()
    funcs["resized_y_sum"].compute_at(out, "y.i")
    rows = funcs["resized_x"]
    rows.compute_at(out, "x").split("y", "y", "y.i", 4, tail="shift")
    funcs["resized_x_sum"].compute_at(rows, "y")
""",
    # the x pass per tile of 64 output rows, its update split by 4 rows with the rest in a loop of its own,
    # which starts at 4 ((b - a) // 4) + a: bounded term by term, row -1216 at full scale
    "split rest": """
def apply_schedule(funcs):
    out = funcs["resize"]
    out.split("y", "y", "y.i", 64)
    funcs["resized_y"].compute_inline()
    funcs["resized_y_sum"].compute_at(out, "y")
    funcs["resized_x"].compute_inline()
    funcs["resized_x_sum"].compute_at(out, "y")
    funcs["resized_x_sum"].update(0).split("y", "y", "y.i", 4, tail="split").unroll("y.i")
""",
}


@pytest.mark.parametrize("case", sorted(_CLAMPED_ROWS_PER_TILE))
def test_tiles_of_clamped_rows_read_inside_the_image(tmp_path, case):
    """Regions of producers computed per tile of an output whose rows are clamped to the image: the check
    of the input's reads must keep each tile's ends together, or it refuses valid schedules."""
    path = tmp_path / "schedule.py"
    path.write_text(_CLAMPED_ROWS_PER_TILE[case])
    pf = load(ROOT / "pipelines" / "held_out" / "resize.py")
    kernel = pf.pipeline(str(path)).compile(threads=1)
    img = np.random.default_rng(0).random((3, 101, 41), dtype=np.float32)
    _close("resize", np.asarray(kernel(img=img)), pf.reference({"img": img}), case)
