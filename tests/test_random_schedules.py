"""Random valid schedules on every bundled pipeline, at sizes that divide nothing, against the reference.

The schedule changes how the loops run, never what they compute: every accepted schedule must give
the reference's values (floats up to reassociation). Refusals (ValueError) are rejected examples; the
test also checks that hypothesis found as many accepted schedules as it was asked for, so that it cannot
pass by refusing everything.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched import reference
from ragsched.pipeline_file import load

from .random_schedules import random_schedule

ROOT = Path(__file__).resolve().parent.parent / "pipelines"
# ragged pipelines: tests/ragged/test_compiled_ragged.py draws schedules that keep their batch loop outside
RAGGED = {"attention", "batched_gemm", "encoder"}
PIPELINES = sorted(p.stem for p in ROOT.glob("*.py") if not p.stem.startswith("_") and p.stem not in RAGGED)
# compiling a random schedule takes 0.1-3 s (local_laplacian's: 5-20 s), so few examples per pipeline here;
# RAGSCHED_EXAMPLES=100 runs a longer search
EXAMPLES = int(os.environ.get("RAGSCHED_EXAMPLES", "6"))
# harris and softmax: most random schedules are refused when called (a shifted tile wider than the small
# input), after compiling, so each accepted one costs many compiles (about 30 s each)
SLOW = {"local_laplacian": 1, "harris": 3, "softmax": 3}
accepted: dict[str, list[int]] = {}


@cache
def _expected(name: str):
    pf = load(ROOT / f"{name}.py")
    inputs = pf.inputs("small")
    outs = reference.run(list(pf.outputs()), **inputs)
    return inputs, outs


@pytest.mark.parametrize("name", PIPELINES)
def test_random_schedules_compute_the_reference(name):
    inputs, want = _expected(name)
    stats = accepted.setdefault(name, [0, 0])

    wanted = EXAMPLES if "RAGSCHED_EXAMPLES" in os.environ else SLOW.get(name, EXAMPLES)

    @settings(max_examples=wanted, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.data())
    def check(data):
        pf = load(ROOT / f"{name}.py")
        outputs = list(pf.outputs())
        stats[1] += 1
        try:
            data.draw(random_schedule(outputs))
            got = rs.Pipeline(outputs).compile()(**inputs)
        except ValueError as err:  # a refused schedule (tail shift/pad too large for the input, ...)
            if os.environ.get("RAGSCHED_SHOW_REFUSALS"):
                print(f"refused: {err}")
            reject()
        stats[0] += 1
        log = [rs.Pipeline(outputs).schedule().to_python()]
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want, strict=True):
            tol = 1e-4 if g.dtype == np.float32 else 1e-9
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol * float(np.abs(w).max(initial=1.0)),
                                       err_msg="\n".join(log))

    check()
    # hypothesis stops drawing after too many refusals: then fewer than `wanted` schedules were compiled
    assert stats[0] >= wanted, f"{name}: only {stats[0]} of {stats[1]} random schedules accepted"
