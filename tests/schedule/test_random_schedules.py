"""Random valid schedules on every bundled pipeline, at sizes that divide nothing, against the reference.

The schedule changes how the loops run, never what they compute: every accepted schedule must give
the reference's values (floats up to reassociation). Refusals (ValueError) are rejected examples; the
test also checks that hypothesis found as many accepted schedules as it was asked for, so that it cannot
pass by refusing everything. The ragged pipelines run on random lengths (0 and 1 among them) drawn for
each schedule.

A longer hunt than CI's: ``RAGSCHED_EXAMPLES=200`` (schedules per pipeline), ``RAGSCHED_SCHEDULE_STATS=FILE``
(a JSON line per pipeline: schedules tried, accepted, refused, wrong), ``RAGSCHED_CPU=x86-64-v3`` for the
AVX2 width, ``RAGSCHED_SHOW_REFUSALS=1`` to print why each refused schedule was refused,
``RAGSCHED_SCHEDULE_LOG=FILE`` to keep the schedule about to run (what a crash leaves to reproduce).
"""

from __future__ import annotations

import json
import os
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched import reference
from ragsched.codegen import target as targets
from ragsched.pipeline_file import load
from tests import ROOT as REPO
from tests.checked import checked_kernel

from .random_schedules import random_schedule

ROOT = REPO / "pipelines"
RAGGED = {"attention", "batched_gemm", "encoder"}
PIPELINES = sorted(p.stem for p in ROOT.glob("*.py") if not p.stem.startswith("_") and p.stem not in RAGGED)
# compiling a random schedule takes 0.1-3 s (local_laplacian's and the encoder's: 5-20 s), so few examples
# per pipeline here
EXAMPLES = int(os.environ.get("RAGSCHED_EXAMPLES", "6"))
# harris and softmax: most random schedules are refused when called (a shifted tile wider than the small
# input), after compiling, so each accepted one costs many compiles (about 30 s each)
SLOW = {"local_laplacian": 1, "harris": 3, "softmax": 3, "encoder": 1, "attention": 2, "batched_gemm": 3}


@cache
def _expected(name: str):
    pf = load(ROOT / f"{name}.py")
    inputs = pf.inputs("small")
    outs = reference.run(list(pf.outputs()), **inputs)
    return inputs, outs


def _with_lengths(inputs: dict, lengths: list[int], seed: int) -> dict:
    """The example inputs with every ragged argument repacked for ``lengths`` (the same number of entries,
    new random values) and the lengths Input(s) that matched the old lengths replaced."""
    rng = np.random.default_rng(seed)
    old = next(v.lengths for v in inputs.values() if isinstance(v, rs.RaggedArray))
    out = {}
    for name, v in inputs.items():
        if isinstance(v, rs.RaggedArray):
            entries = [rng.standard_normal(tuple(n if d is None else d for d in v.template)).astype(v.dtype)
                       for n in lengths]
            out[name] = rs.RaggedArray(np.concatenate([e.reshape(-1) for e in entries] + [np.zeros(0, v.dtype)]),
                                       lengths, v.template)
        elif isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind == "i" and np.array_equal(v, old):
            out[name] = np.asarray(lengths, v.dtype)
        else:
            out[name] = v
    return out


class _Tally:
    """Schedules tried, accepted, refused and wrong for one pipeline; written as a JSON line to the file
    ``RAGSCHED_SCHEDULE_STATS`` names, if any."""

    def __init__(self, name: str):
        self.name, self.counts = name, {"tried": 0, "accepted": 0, "refused": 0, "wrong": 0}

    def __enter__(self):
        return self.counts

    def __exit__(self, *exc):
        path = os.environ.get("RAGSCHED_SCHEDULE_STATS")
        if path:
            with open(path, "a") as f:
                f.write(json.dumps({"pipeline": self.name, "target": targets.default().text,
                                    "examples": EXAMPLES, **self.counts}) + "\n")


def _compare(got, want, log) -> None:
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want, strict=True):
        if isinstance(w, rs.RaggedArray):
            assert g.lengths.tolist() == w.lengths.tolist(), log
            g, w = g.to_padded(), w.to_padded()
        tol = 1e-4 if g.dtype == np.float32 else 1e-9
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * float(np.abs(w).max(initial=1.0)), err_msg=log)


def _log_attempt(name: str, outputs, inputs) -> None:
    """With ``RAGSCHED_SCHEDULE_LOG=FILE``, the schedule (and the lengths) about to run, written before the
    kernel runs: what a crash of generated code leaves behind to reproduce it."""
    path = os.environ.get("RAGSCHED_SCHEDULE_LOG")
    if path:
        lengths = [v.lengths.tolist() for v in inputs.values() if isinstance(v, rs.RaggedArray)][:1]
        with open(path, "w") as f:
            f.write(f"# {name}, lengths {lengths}\n{rs.Pipeline(outputs).schedule().to_python()}")


def _run(name: str, counts: dict, draw_inputs) -> None:
    wanted = EXAMPLES if "RAGSCHED_EXAMPLES" in os.environ else SLOW.get(name, EXAMPLES)

    @settings(max_examples=wanted, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(st.data())
    def check(data):
        pf = load(ROOT / f"{name}.py")
        outputs = list(pf.outputs())
        inputs, want = draw_inputs(data)
        counts["tried"] += 1
        try:
            data.draw(random_schedule(outputs))
            kernel = checked_kernel(rs.Pipeline(outputs), inputs)
            _log_attempt(name, outputs, inputs)
            got = kernel(**inputs)
        except ValueError as err:  # a refused schedule (tail shift/pad too large for the input, ...)
            if os.environ.get("RAGSCHED_SHOW_REFUSALS"):
                print(f"refused: {err}")
            counts["refused"] += 1
            reject()
        counts["accepted"] += 1
        try:
            _compare(got, want, rs.Pipeline(outputs).schedule().to_python())
        except AssertionError:
            counts["wrong"] += 1  # hypothesis then shrinks it: its replays count too
            raise

    check()
    # hypothesis stops drawing after too many refusals: then fewer than `wanted` schedules were compiled
    assert counts["accepted"] >= wanted, f"{name}: only {counts['accepted']} of {counts['tried']} accepted"


@pytest.mark.parametrize("name", PIPELINES)
def test_random_schedules_compute_the_reference(name):
    inputs, want = _expected(name)
    with _Tally(name) as counts:
        _run(name, counts, lambda data: (inputs, want))


# the encoder only in a long hunt: most of its random schedules are refused (its 20 Funcs each draw loops
# that a ragged nest cannot take) and some take minutes of LLVM (Funcs nested deep in each other)
RAGGED_RANDOM = ["attention", "batched_gemm"] + (["encoder"] if "RAGSCHED_EXAMPLES" in os.environ else [])


@pytest.mark.parametrize("name", RAGGED_RANDOM)
def test_random_schedules_of_ragged_pipelines_on_random_lengths(name):
    """The generic random schedules on the ragged pipelines (many are refused: a ragged loop vectorized
    or split without a guard, the batch loop inside a ragged one), each on new lengths of its five entries."""
    base, _ = _expected(name)
    batch = len(next(v for v in base.values() if isinstance(v, rs.RaggedArray)).lengths)

    def draw_inputs(data):
        lengths = data.draw(st.lists(st.sampled_from([0, 1, 1, 2, 3, 5, 8, 13]), min_size=batch, max_size=batch))
        inputs = _with_lengths(base, lengths, seed=sum(lengths))
        return inputs, reference.run(list(load(ROOT / f"{name}.py").outputs()), **inputs)

    with _Tally(name) as counts:
        _run(name, counts, draw_inputs)
