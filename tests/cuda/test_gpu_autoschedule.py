"""The autoscheduler's CUDA target: without a GPU, candidates compiled by NVRTC, run in the emulator and
ranked by the cost model; with one, timed on it; the best schedule computes the reference; failing
candidates are recorded; the model sees coalescing (threads along the contiguous dimension read fewer
sectors per request)."""

from __future__ import annotations

import numpy as np

import ragsched as rs
from ragsched.autosched.driver import tune
from ragsched.autosched.gpu import estimate
from ragsched.codegen import target as targets
from ragsched.pipeline_file import load
from ragsched.runtime.compare import matches
from tests import ROOT


def test_tuning_for_cuda_ranks_by_the_cost_model_or_times_on_the_gpu():
    """Without a GPU, candidates are ranked by the cost model's figures; with one, timed on it (NumPy
    inputs copied to the device: seen failing every trial on an H200 when they were not)."""
    pf = load(ROOT / "pipelines" / "blur.py")
    inputs = {"img": np.random.default_rng(0).random((40, 70), dtype=np.float32)}
    result = tune(pf.pipeline(), target="cuda", trials=5, inputs=inputs, progress=False, seed=3)
    assert result.seconds is not None and result.trials == 5
    done = [t for t in result.study.trials if t.state.name == "COMPLETE"]
    assert done
    if not targets.gpu_present():
        assert all(t.user_attrs["figures"]["sectors"] > 0 for t in done)
    assert sum(result.failures.values()) + len(done) == 5  # every trial is either ranked or recorded failed
    kern = pf.pipeline().compile(target="cuda", device="emulate", schedule=result.schedule)
    ok, why = matches(kern(**inputs), pf.reference(inputs))
    assert ok, why


def _copy(ty: int, tx: int):
    x, y = rs.Var("x"), rs.Var("y")
    a = rs.Input("a", rs.float32, 2)
    out = rs.Func("out")
    out[y, x] = a[y, x] * 2.0
    out.gpu_tile(y, x, "yo", "xo", "yi", "xi", ty, tx, tail="guard")
    return out.compile(target="cuda", device="emulate")


def test_the_cost_model_sees_coalescing():
    inputs = {"a": np.ones((64, 64), np.float32)}
    along_rows, _, _ = estimate(_copy(1, 32), {**inputs, "out_shape": (64, 64)})
    along_columns, figures, _ = estimate(_copy(32, 1), {**inputs, "out_shape": (64, 64)})
    assert along_rows < along_columns
    assert figures["sectors_per_request"] == 32  # a warp down a column: one sector per thread
