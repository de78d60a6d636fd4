"""On a machine with a CUDA GPU (and CuPy): every bundled pipeline's kernels launched on the device, under
the default GPU schedule and under its hand GPU schedule where the file has one, against the NumPy
reference (the pipelines too slow for the emulator included); dense calls take and return CuPy arrays,
ragged ones NumPy-backed RaggedArrays copied to the device and back. Skipped where there is no GPU."""

from __future__ import annotations

import pytest

import ragsched as rs
from ragsched.codegen import target as targets
from ragsched.pipeline_file import load
from ragsched.runtime.compare import matches
from ragsched.runtime.interop import to_device, to_host
from tests import ROOT

pytestmark = pytest.mark.skipif(not targets.gpu_present(), reason="no CUDA GPU here")

PIPELINES = sorted(p.stem for p in (ROOT / "pipelines").glob("*.py") if not p.stem.startswith("_"))
CASES = [(n, None) for n in PIPELINES] + [(n, "gpu") for n in PIPELINES
                                          if load(ROOT / "pipelines" / f"{n}.py").has_schedule("gpu")]


def run_on_device(kern, inputs: dict):
    """``kern`` called as a user would on the GPU: CuPy arrays for a dense call, checked to come back as CuPy
    arrays (then copied here to compare), the inputs as they are where any is a RaggedArray."""
    import cupy

    got = kern(**to_device(inputs))
    dense = not any(isinstance(v, rs.RaggedArray) for v in inputs.values())
    for g in got if isinstance(got, tuple) else (got,):
        assert isinstance(g, cupy.ndarray if dense else rs.RaggedArray), type(g)
    return to_host(got)


@pytest.mark.parametrize(("name", "schedule"), CASES, ids=[f"{n}-{s or 'default'}" for n, s in CASES])
def test_bundled_pipelines_on_the_device(name, schedule):
    pf = load(ROOT / "pipelines" / f"{name}.py")
    kern = pf.pipeline(schedule).compile(target="cuda")
    inputs = pf.inputs("small")
    ok, why = matches(run_on_device(kern, inputs), pf.reference(inputs), pf.tolerance)
    assert ok, why
