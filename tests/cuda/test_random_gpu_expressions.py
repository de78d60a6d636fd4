"""Random expressions (tests/codegen/test_random_expressions.py's: every operator, type, cast, boundary
condition and stencil offset) compiled for CUDA under the default GPU schedule: run in the GPU emulator
against the NumPy reference, and the CUDA C compiled by NVRTC for sm_90 (every operator's rendering);
where there is a GPU, run on it too; and the CUDA C compiled as C++ for this CPU and run thread by thread
(``tests/cuda/host_cxx.py``), which checks the C's semantics without a GPU."""

from __future__ import annotations

import os
import sys
from collections import OrderedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.codegen import target as targets
from ragsched.codegen.cuda import backend as cuda_backend
from ragsched.codegen.cuda.nvrtc import compile_cuda
from ragsched.pipeline_file import load
from ragsched.runtime import compiler
from ragsched.runtime.compare import matches
from ragsched.runtime.interop import to_device, to_host
from tests import ROOT
from tests.codegen.test_random_expressions import _check as check_on
from tests.codegen.test_random_expressions import float_exprs, int_exprs
from tests.cuda import DEVICES, host_cxx

SETTINGS = settings(max_examples=int(os.environ.get("RAGSCHED_EXAMPLES", "25")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _check(e, seed, h, w, device):
    kern = check_on(e, seed, h, w, target="cuda", device="emulate" if device == "emulate" else "gpu",
                    on_device=device != "emulate")  # "host-c++": the stand-in cupy
    assert compile_cuda(kern.source).resources


@pytest.fixture
def device(request, monkeypatch):
    """The device a test runs on; "host-c++" puts the stand-in cupy and the C++ kernels in place."""
    if request.param == "host-c++":
        if host_cxx.compiler() is None:
            pytest.skip("no C++ compiler here")
        _use_host_cxx(monkeypatch)
    return request.param


def _use_host_cxx(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", host_cxx.fake_cupy())
    monkeypatch.setattr(targets, "gpu_present", lambda: True)
    monkeypatch.setattr(cuda_backend, "CupyLoaded", host_cxx.loaded_class())
    monkeypatch.setattr(compiler, "_loaded", OrderedDict())  # kernels loaded here stay out of the cache


@SETTINGS
@given(int_exprs(), st.integers(0, 2**16), st.integers(1, 9), st.integers(1, 13))
def _random_integer_expressions(device, e, seed, h, w):
    _check(rs.cast(rs.int64, 0) + e if isinstance(e, int) else e, seed, h, w, device)


@SETTINGS
@given(float_exprs(), st.integers(0, 2**16), st.integers(1, 9), st.integers(1, 13))
def _random_float_expressions(device, e, seed, h, w):
    _check(rs.cast(rs.float32, e) if isinstance(e, float) else e, seed, h, w, device)


@pytest.mark.parametrize("device", [*DEVICES, "host-c++"], indirect=True)
def test_random_integer_expressions_on_the_gpu(device):
    _random_integer_expressions(device)


@pytest.mark.parametrize("device", [*DEVICES, "host-c++"], indirect=True)
def test_random_float_expressions_on_the_gpu(device):
    _random_float_expressions(device)


PIPELINES = sorted(p.stem for p in (ROOT / "pipelines").glob("*.py") if not p.stem.startswith("_"))
CASES = [(n, None) for n in PIPELINES] + [(n, "gpu") for n in PIPELINES
                                          if load(ROOT / "pipelines" / f"{n}.py").has_schedule("gpu")]


def _narrow_cases():
    from tests.codegen.test_random_expressions import I, S, U, x, y

    u, s, i = U[y, x], S[y, x], I[y, x]
    return {"-uint8": -u, "~uint8": ~u, "-int16": -s, "~int16": ~s, "uint8 * uint8": u * u,
            "int16 << 9": s << 9, "uint8 >> 9": u >> 9, "int32 >> 32": i >> 32, "int32 >> 40": i >> 40,
            "int32 << 32": i << 32, "int32 << negative": i << (i - 100), "float32(-uint8)": rs.cast(rs.float32, -u)}


@pytest.mark.parametrize("case", sorted(_narrow_cases()))
@pytest.mark.parametrize("device", [*DEVICES, "host-c++"], indirect=True)
def test_narrow_integers_and_wide_shifts(device, case):
    """Where C's semantics and the language's part (integers narrower than int promoted, shifts by the
    width or more undefined): each case on inputs with negative and large values."""
    _check(_narrow_cases()[case], 1, 3, 5, device)


@pytest.mark.parametrize(("name", "schedule"), CASES, ids=[f"{n}-{s or 'default'}" for n, s in CASES])
def test_bundled_pipelines_in_cuda_c_on_the_cpu(name, schedule, monkeypatch):
    """Each bundled pipeline's default GPU schedule and hand GPU schedule: its CUDA C, run thread by thread
    here, computes the reference (kernels with barriers or warp shuffles cannot run so: skipped, saying
    so; every default schedule runs)."""
    if host_cxx.compiler() is None:
        pytest.skip("no C++ compiler here")
    _use_host_cxx(monkeypatch)
    pf = load(ROOT / "pipelines" / f"{name}.py")
    inputs = pf.inputs("small")
    try:  # the C++ is built when the kernel is loaded
        got = to_host(pf.pipeline(schedule).compile(target="cuda")(**to_device(inputs)))
    except host_cxx.CannotRunSerially as err:
        assert schedule is not None, err
        pytest.skip(str(err))
    ok, why = matches(got, pf.reference(inputs), pf.tolerance)
    assert ok, why
