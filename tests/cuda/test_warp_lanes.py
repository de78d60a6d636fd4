"""``gpu_lanes(r)``: an update's reduction over RVar r spread over the 32 lanes of a warp and combined with
shuffles. Sums, maxima and integer sums of rows of every length around a warp's width (0, 1, 31, 32, 33,
...) against NumPy in the emulator, one row per block or several rows per block (lanes on x, rows on y);
the CUDA C uses ``__shfl_xor_sync`` and compiles; what is not a reduction, or not an RVar, is refused;
lanes of one warp that do not all reach a shuffle are caught."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.cuda.nvrtc import compile_cuda
from ragsched.codegen.gpu.emulate import DivergentBarrierError, compile_kernel, run_kernel
from ragsched.codegen.gpu.kernels import DeviceKernel


def row_reduction(kind: str, dtype=rs.float32, rows_per_block: int = 0):
    H, W = rs.Size("H"), rs.Size("W")
    y = rs.Var("y")
    inp = rs.Input("inp", dtype, [H, W])
    r = rs.RDom(0, W, name="r")
    s = rs.Func("s", shape=[H], dtype=dtype)
    if kind == "sum":
        s[y] = rs.cast(dtype, 0)
        s[y] += inp[y, r]
    else:
        s[y] = rs.cast(dtype, -1e30)
        s[y] = rs.max(s[y], inp[y, r])
    stage = s.update(0)
    if rows_per_block:
        stage.split(y, "yo", "yi", rows_per_block).gpu_blocks("yo").gpu_threads("yi")
    else:
        stage.gpu_blocks(y)
    stage.gpu_lanes(r)
    return s


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(["sum", "max"]), h=st.integers(1, 6), w=st.sampled_from([0, 1, 5, 31, 32, 33, 70]),
       rows=st.sampled_from([0, 1, 3, 4]), seed=st.integers(0, 2**16))
def test_row_reductions_across_lanes_compute_numpy(kind, h, w, rows, seed):
    kern = row_reduction(kind, rows_per_block=rows).compile(target="cuda", device="emulate")
    a = np.random.default_rng(seed).standard_normal((h, w)).astype(np.float32)
    got = kern(inp=a)
    want = a.sum(1) if kind == "sum" else np.maximum(a.max(1, initial=-1e30), -1e30)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_integer_sums_are_exact_and_the_cuda_c_shuffles():
    kern = row_reduction("sum", rs.int32, rows_per_block=2).compile(target="cuda", device="emulate")
    a = np.random.default_rng(0).integers(-1000, 1000, (5, 77)).astype(np.int32)
    np.testing.assert_array_equal(kern(inp=a), a.sum(1))
    assert "__shfl_xor_sync" in kern.source and "rs_warp_sum<int>(" in kern.source
    assert all(r.spill_stores == 0 for r in compile_cuda(kern.source).resources.values())


def recurrence():
    """s[y] = s[y] * 0.5 + inp[y, r] over r: its points depend on their order, not a reduction."""
    H, W = rs.Size("H"), rs.Size("W")
    y = rs.Var("y")
    inp = rs.Input("inp", rs.float32, [H, W])
    r = rs.RDom(0, W, name="r")
    s = rs.Func("s", shape=[H], dtype=rs.float32)
    s[y] = 1.0
    s[y] = s[y] * 0.5 + inp[y, r]
    return s, y, r


def test_gpu_lanes_is_refused_where_it_means_nothing():
    s, y, r = recurrence()
    with pytest.raises(ValueError, match=r"gpu_lanes\('y'\) needs an RVar of an update"):
        s.update(0).gpu_lanes(y)
    with pytest.raises(ValueError, match=r"needs the innermost loop"):
        s.update(0).reorder(r, y).gpu_lanes(r)  # the RVar outside y


def test_a_recurrence_on_lanes_is_refused_when_lowered():
    s, y, r = recurrence()
    s.update(0).gpu_blocks(y).gpu_lanes(r)
    with pytest.raises(ValueError, match=r"gpu_lanes loop .*: its update must be f\[\.\.\.\] = f\[\.\.\.\] \+ e"):
        s.compile(target="cuda", device="emulate")


def test_lanes_that_skip_a_shuffle_are_caught():
    I64, F32 = T.ADDRESS, T.float32
    lane = E.Var("l", I64)
    shuffle = ir.Store("out", lane, E.Call("warp_sum", (E.Load("a", lane, F32),), F32), True)
    body = ir.For("l", E.const(0, I64), E.const(32, I64), ir.ForKind.GPU_THREAD,
                  ir.IfThenElse(E.lt(lane, E.const(16, I64)), shuffle))
    k = DeviceKernel("k", body, (32, 1, 1), (("l", 0),), (("a", F32), ("out", F32)), (), (), ())
    with pytest.raises(DivergentBarrierError, match="shuffle"):
        run_kernel(k, compile_kernel(k), (1, 1, 1), [np.ones(32, np.float32), np.zeros(32, np.float32)], {})
