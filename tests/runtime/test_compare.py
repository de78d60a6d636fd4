"""What matches the reference: float32 within 1e-3 of the largest |value|, other types exactly, or a
pipeline's stated tolerance (an integer output rounded from floats that reassociation moves by a step)."""

import numpy as np

from ragsched.pipeline_file import load
from ragsched.runtime.compare import matches
from tests import ROOT


def test_integer_outputs_match_exactly_unless_a_tolerance_is_stated():
    want = np.array([0, 100, 255], np.uint8)
    got = np.array([0, 102, 255], np.uint8)
    assert matches(want.copy(), want)[0]
    assert not matches(got, want)[0]
    assert matches(got, want, tolerance=3 / 255)[0]
    assert not matches(got, want, tolerance=1 / 255)[0]


def test_float32_within_rounding():
    want = np.linspace(0, 1, 11, dtype=np.float32)
    assert matches(want + np.float32(1e-4), want)[0]
    assert not matches(want + np.float32(1e-2), want)[0]


def test_a_pipeline_file_states_its_tolerance():
    assert load(ROOT / "pipelines" / "held_out" / "hist_eq.py").tolerance == 3 / 255
    assert load(ROOT / "pipelines" / "blur.py").tolerance is None
