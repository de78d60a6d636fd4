"""The autoscheduler on random realistic pipelines (benchmarks/random_pipelines.py: DAGs of stencils,
pointwise maps with transcendentals, reductions, 2x resampling and table lookups): the default schedule,
the rules' schedule and random points of the search space compute ragsched.reference's answer, or (a
random point only) are refused with a ValueError before generated code runs. A longer hunt:
``RAGSCHED_EXAMPLES=50`` (pipelines)."""

from __future__ import annotations

import os

import optuna
import pytest

import ragsched as rs
from benchmarks.random_pipelines import build, inputs, random_spec
from ragsched.autosched.measure import Measurer
from ragsched.autosched.space import analyze, suggest
from ragsched.lang import Pipeline
from ragsched.reference import run
from ragsched.runtime.compare import matches

EXAMPLES = int(os.environ.get("RAGSCHED_EXAMPLES", "3"))
SHAPE = (37, 53)  # odd: divides no tile


def _compiled(spec, schedule=None):
    pipe = Pipeline([build(spec)])
    if schedule is not None:
        schedule.apply(pipe.outputs)
    return pipe.compile(threads=2)


@pytest.mark.parametrize("seed", range(EXAMPLES))
def test_the_rules_schedule_of_a_random_pipeline_computes_the_reference(seed, cpu_target):
    spec = random_spec(seed)
    ins = inputs(spec, SHAPE)
    want = run(build(spec), **ins)
    ok, err = matches(_compiled(spec)(**ins), want)
    assert ok, (err, spec.describe())
    rules = rs.autoschedule(Pipeline([build(spec)]), trials=0, inputs=ins)
    ok, err = matches(_compiled(spec, rules)(**ins), want)
    assert ok, (err, spec.describe(), rules.to_python())


@pytest.mark.parametrize("seed", range(100, 100 + EXAMPLES))
def test_random_points_of_the_space_on_a_random_pipeline_compute_the_reference(seed, cpu_target):
    """Measured as the tuner measures them (a worker process, a compile-time limit): each point computes
    the reference, or is refused ("invalid"), or takes longer than the limit to compile (some points of
    the space unroll loop nests inside unrolled loops: LLVM took 150 s over one), never a wrong answer,
    an error or a crash."""
    spec = random_spec(seed, n_stages=5)
    ins = inputs(spec, SHAPE)
    program = Pipeline([build(spec)]).program()
    funcs = analyze(program, cpu_target.natural_vector_size)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    statuses = []
    with Measurer(program, ins, run(build(spec), **ins), threads=2, repeats=1, compile_limit=20.0,
                  target=cpu_target.text) as m:
        for _ in range(3):
            sched = suggest(study.ask(), funcs)
            result = m.measure(sched)
            assert result.status in ("ok", "invalid", "timeout"), (result.status, result.message,
                                                                    spec.describe(), sched.to_python())
            statuses.append(result.status)
    assert "ok" in statuses, (statuses, spec.describe())


def test_random_specs_are_deterministic_and_varied():
    assert random_spec(7) == random_spec(7)
    kinds = {st.kind for seed in range(30) for st in random_spec(seed).stages}
    assert kinds == {"stencil", "pointwise", "reduce", "lookup", "down", "up"}
    ops = {st.op for seed in range(30) for st in random_spec(seed).stages if st.kind == "pointwise"}
    assert {"exp", "tanh", "pow", "sin", "erf", "log", "sqrt"} <= ops
