"""Every bundled pipeline compiled for CUDA under the default GPU schedule: NVRTC accepts the generated C
for sm_90 and ptxas reports no local-memory spills for any kernel; the pipelines that the emulator runs
in seconds (the rest take minutes in Python) compute the NumPy reference in it on their small inputs."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

import ragsched as rs
from ragsched import reference
from ragsched.codegen.cuda.nvrtc import compile_cuda
from ragsched.pipeline_file import load
from ragsched.runtime.compare import matches
from tests import ROOT

PIPELINES = sorted(p.stem for p in (ROOT / "pipelines").glob("*.py") if not p.stem.startswith("_"))
#: minutes in the emulator at the small scale (conv_layer 2, local_laplacian 3, encoder 6)
EMULATOR_TOO_SLOW = {"conv_layer", "local_laplacian", "encoder"}


@cache
def _kernel(name: str):
    pf = load(ROOT / "pipelines" / f"{name}.py")
    outs = list(pf.outputs())
    return pf, outs, rs.Pipeline(outs).compile(target="cuda", device="emulate")


@pytest.mark.parametrize("name", PIPELINES)
def test_the_cuda_c_compiles_for_sm90_without_spills(name):
    _, _, kern = _kernel(name)
    compiled = compile_cuda(kern.source, "sm_90")
    kernels = {line.split("void ", 1)[1].split("(", 1)[0] for line in kern.source.splitlines()
               if line.startswith('extern "C" __global__')}
    assert set(compiled.resources) == kernels
    for k, r in compiled.resources.items():
        assert r.spill_stores == 0 and r.spill_loads == 0, (k, r)
        assert 0 < r.registers <= 255
        assert r.shared_bytes <= 48 * 1024


@pytest.mark.parametrize("name", sorted(set(PIPELINES) - EMULATOR_TOO_SLOW))
def test_the_emulated_gpu_kernels_compute_the_reference(name):
    pf, outs, kern = _kernel(name)
    inputs = pf.inputs("small")
    got = kern(**inputs)
    want = reference.run(outs, **inputs) if len(outs) > 1 else (reference.run(outs[0], **inputs),)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want, strict=True):
        if isinstance(g, rs.RaggedArray):
            assert g.lengths.tolist() == w.lengths.tolist()
            g, w = g.values, w.values
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


GPU_SCHEDULED = [n for n in PIPELINES if load(ROOT / "pipelines" / f"{n}.py").has_schedule("gpu")]


def test_the_hand_gpu_schedules_are_there():
    assert {"attention", "batched_gemm", "blur", "encoder", "harris"} <= set(GPU_SCHEDULED)


@pytest.mark.parametrize("name", GPU_SCHEDULED)
def test_the_hand_gpu_schedules_compile_without_spills(name):
    kern = load(ROOT / "pipelines" / f"{name}.py").pipeline("gpu").compile(target="cuda", device="emulate")
    for k, r in compile_cuda(kern.source).resources.items():
        assert r.spill_stores == 0 and r.spill_loads == 0, (k, r)


@pytest.mark.parametrize("name", sorted(set(GPU_SCHEDULED) - EMULATOR_TOO_SLOW))
def test_the_hand_gpu_schedules_compute_the_reference(name):
    pf = load(ROOT / "pipelines" / f"{name}.py")
    kern = pf.pipeline("gpu").compile(target="cuda", device="emulate")
    inputs = pf.inputs("small")
    ok, why = matches(kern(**inputs), pf.reference(inputs))
    assert ok, why
