"""The ragged held-out pipelines (pipelines/held_out/ragged/): each NumPy reference() agrees with
ragsched.reference, and with the compiled default, hand and rules' (``trials=0``) schedules, over
lengths with empty and one-token entries."""

import importlib

import numpy as np
import pytest

import ragsched as rs
from pipelines.held_out.ragged import NAMES
from ragsched.pipeline_file import load
from ragsched.reference import run
from tests import ROOT


def _close(name, got, want, what):
    rtol, atol = importlib.import_module(f"pipelines.held_out.ragged.{name}").TOLERANCE
    assert got.lengths.tolist() == want.lengths.tolist(), what
    np.testing.assert_allclose(got.values, want.values, rtol=rtol, atol=atol * float(np.abs(want.values).max()),
                               err_msg=what)


def test_the_suite_is_the_files():
    files = {p.stem for p in (ROOT / "pipelines" / "held_out" / "ragged").glob("*.py") if p.stem != "__init__"}
    assert files == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_reference_interpreter_matches_numpy(name):
    pf = load(ROOT / "pipelines" / "held_out" / "ragged" / f"{name}.py")
    inputs = pf.inputs("small")
    _close(name, run(pf.module.build(), **inputs), pf.reference(inputs), "ragsched.reference")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("schedule", [None, "hand", "rules"])
def test_compiled_matches_numpy(name, schedule):
    pf = load(ROOT / "pipelines" / "held_out" / "ragged" / f"{name}.py")
    kern = None
    for lens in ([5, 1, 0, 7, 3], [0, 13, 6]):
        inputs = pf.module.inputs_for(np.array(lens, np.int32))
        if kern is None:
            sched = rs.autoschedule(list(pf.outputs()), trials=0, inputs=inputs, threads=2) \
                if schedule == "rules" else schedule
            kern = pf.pipeline(sched).compile(threads=2)
        _close(name, kern(**inputs), pf.reference(inputs), f"schedule {schedule}, lengths {lens}")
