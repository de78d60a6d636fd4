"""On a machine with a CUDA GPU (and CuPy): the bundled pipelines' kernels launched on the device, CuPy in
and CuPy out, against the emulator's results for the same kernels. Skipped where there is no GPU."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched import reference
from ragsched.codegen import target as targets
from ragsched.pipeline_file import load
from tests import ROOT

pytestmark = pytest.mark.skipif(not targets.gpu_present(), reason="no CUDA GPU here")

DENSE = ["blur", "unsharp", "matmul", "softmax", "harris", "bilateral_grid"]


@pytest.mark.parametrize("name", DENSE)
def test_dense_pipelines_on_the_device(name):
    import cupy

    pf = load(ROOT / "pipelines" / f"{name}.py")
    outs = list(pf.outputs())
    inputs = pf.inputs("small")
    kern = rs.Pipeline(outs).compile(target="cuda")
    got = kern(**{k: cupy.asarray(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()})
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_allclose(got.get(), reference.run(outs[0], **inputs), rtol=1e-4, atol=1e-4)
