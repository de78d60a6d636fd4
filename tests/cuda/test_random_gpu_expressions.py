"""Random expressions (tests/codegen/test_random_expressions.py's: every operator, type, cast, boundary
condition and stencil offset) compiled for CUDA under the default GPU schedule: run in the GPU emulator
against the NumPy reference, and the CUDA C compiled by NVRTC for sm_90 (every operator's rendering)."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched import reference
from ragsched.codegen.cuda.nvrtc import compile_cuda
from tests.codegen.test_random_expressions import H, W, _inputs, float_exprs, int_exprs, x, y

SETTINGS = settings(max_examples=int(os.environ.get("RAGSCHED_EXAMPLES", "25")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _check(e, seed, h, w):
    f = rs.Func("f", shape=[H, W])
    f[y, x] = e
    pipe = rs.Pipeline([f])
    inputs = _inputs(seed, h, w)
    used = {i.name for i in pipe.program().inputs} | {p.name for p in pipe.program().params}
    inputs = {k: v for k, v in inputs.items() if k in used}
    kern = f.compile(target="cuda", device="emulate")
    got = kern(out_shape=(h, w), **inputs)
    want = reference.evaluate(pipe.program(), inputs, {"f": (h, w)})[0]
    assert got.dtype == want.dtype
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-5 if got.dtype == np.float64 else 2e-4, atol=1e-5,
                                   equal_nan=True, err_msg=str(e))
    else:
        np.testing.assert_array_equal(got, want, err_msg=str(e))
    assert compile_cuda(kern.source).resources


@SETTINGS
@given(int_exprs(), st.integers(0, 2**16), st.integers(1, 9), st.integers(1, 13))
def test_random_integer_expressions_on_the_gpu(e, seed, h, w):
    _check(rs.cast(rs.int64, 0) + e if isinstance(e, int) else e, seed, h, w)


@SETTINGS
@given(float_exprs(), st.integers(0, 2**16), st.integers(1, 9), st.integers(1, 13))
def test_random_float_expressions_on_the_gpu(e, seed, h, w):
    _check(rs.cast(rs.float32, e) if isinstance(e, float) else e, seed, h, w)
