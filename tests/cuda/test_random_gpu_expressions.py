"""Random expressions (tests/codegen/test_random_expressions.py's: every operator, type, cast, boundary
condition and stencil offset) compiled for CUDA under the default GPU schedule: run in the GPU emulator
against the NumPy reference, and the CUDA C compiled by NVRTC for sm_90 (every operator's rendering);
where there is a GPU, run on it too."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.codegen.cuda.nvrtc import compile_cuda
from tests.codegen.test_random_expressions import _check as check_on
from tests.codegen.test_random_expressions import float_exprs, int_exprs
from tests.cuda import DEVICES

SETTINGS = settings(max_examples=int(os.environ.get("RAGSCHED_EXAMPLES", "25")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _check(e, seed, h, w, device):
    kern = check_on(e, seed, h, w, target="cuda", device=device, xp=_array_module(device))
    assert compile_cuda(kern.source).resources


def _array_module(device: str):
    if device == "emulate":
        return None
    import cupy

    return cupy


@SETTINGS
@given(int_exprs(), st.integers(0, 2**16), st.integers(1, 9), st.integers(1, 13))
def _random_integer_expressions(device, e, seed, h, w):
    _check(rs.cast(rs.int64, 0) + e if isinstance(e, int) else e, seed, h, w, device)


@SETTINGS
@given(float_exprs(), st.integers(0, 2**16), st.integers(1, 9), st.integers(1, 13))
def _random_float_expressions(device, e, seed, h, w):
    _check(rs.cast(rs.float32, e) if isinstance(e, float) else e, seed, h, w, device)


@pytest.mark.parametrize("device", DEVICES)
def test_random_integer_expressions_on_the_gpu(device):
    _random_integer_expressions(device)


@pytest.mark.parametrize("device", DEVICES)
def test_random_float_expressions_on_the_gpu(device):
    _random_float_expressions(device)
