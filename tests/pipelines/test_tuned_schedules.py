"""The committed tuned schedules (``make autoschedule`` and ``make autoschedule-held-out`` write them into
``schedules/<isa>/`` and ``schedules/held_out/<isa>/``): each says what it was tuned on and sits in the
directory of that vector instruction set; the one the benchmarks use on this host (its own width's, else
another's: ``tuned_schedule``) computes the reference here. Another width's, where this width has its own,
is lowered here (its schedule still applies to the pipeline and lowers) and computes the reference on
hosts of its width, where it is the one used: compiling and running the AVX-512 files on an AVX2 host took
80 of the suite's 1200 s of CPU (the encoder's alone 28 s) to check code that host never runs."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.codegen import target as targets
from ragsched.codegen.lower import lower
from ragsched.pipeline_file import load, tuned_isa, tuned_schedule
from tests import ROOT

COMMITTED = sorted(p.relative_to(ROOT / "schedules") for p in (ROOT / "schedules").rglob("*.json"))


def _pipeline_file(rel):
    base = ROOT / "pipelines" / ("held_out" if rel.parts[0] == "held_out" else "")
    return load(base / f"{rel.stem}.py")


def test_there_are_committed_schedules():
    assert len(COMMITTED) >= 7


@pytest.mark.parametrize("rel", COMMITTED, ids=str)
def test_a_committed_schedule_records_its_width_and_computes_the_reference(rel):
    path = ROOT / "schedules" / rel
    tuned_for = rs.Schedule.tuned_for(path.read_text())
    assert tuned_for is not None and tuned_for["isa"] == tuned_isa(path)
    assert targets.ISAS[tuned_for["vector_bits"]] == tuned_for["isa"]
    per_cpu = path.parent.name != tuned_isa(path)  # directory/<isa>/<cpu>/: tuned on that core
    assert not per_cpu or tuned_for["cpu"] == path.parent.name
    pf = _pipeline_file(rel)
    pipe = pf.pipeline(path)
    base = path.parent.parent.parent if per_cpu else path.parent.parent
    if tuned_schedule(base, rel.stem) != path:  # this width (or core) has its own: never run here
        classes = [pipe.schedule()] if pipe.by_length is None else [c.schedule for c in pipe.by_length.classes]
        for schedule in classes:
            lower(pipe.program(), schedule)  # raises if the schedule no longer applies or lowers
        return
    kernel = pipe.compile(threads=2)
    # schedules by length class: each class on the inputs it was made for (each call runs its own class)
    scales = ["small"] if pipe.by_length is None else [c.scale for c in pipe.by_length.classes]
    for scale in scales:
        inputs = pf.inputs(scale)
        if pipe.by_length is not None:
            assert kernel.kernel_for(**inputs) is kernel.kernels[scales.index(scale)], scale
        try:
            got = kernel(**inputs)
        except ValueError as err:  # tiles too large for the small inputs: refused, so on the inputs it was tuned on
            assert "tail" in str(err) and scale == "small", err
            inputs = pf.inputs("full")
            got = kernel(**inputs)
        want = pf.reference(inputs)
        rtol, atol = getattr(pf.module, "TOLERANCE", (1e-4, 1e-5))
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                        strict=True):
            g, w = (np.asarray(getattr(a, "values", a)) for a in (g, w))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * float(np.abs(w).max(initial=1.0)))


def test_the_target_s_own_width_comes_first(tmp_path):
    for isa in ("avx2", "avx512"):
        (tmp_path / isa).mkdir()
        (tmp_path / isa / "p.json").write_text("{}")
    (tmp_path / "avx512" / "q.json").write_text("{}")
    assert tuned_schedule(tmp_path, "p", "cpu:x86-64-v3") == tmp_path / "avx2" / "p.json"
    assert tuned_schedule(tmp_path, "p", "cpu:x86-64-v4") == tmp_path / "avx512" / "p.json"
    assert tuned_schedule(tmp_path, "q", "cpu:x86-64-v3") == tmp_path / "avx512" / "q.json"  # another width's
    assert tuned_schedule(tmp_path, "r", "cpu:x86-64-v3") is None


def test_a_schedule_tuned_on_the_target_s_core_comes_before_its_width_s(tmp_path):
    (tmp_path / "avx512" / "znver4").mkdir(parents=True)
    for rel in ("avx512/p.json", "avx512/znver4/p.json", "avx512/q.json"):
        (tmp_path / rel).write_text("{}")
    zen4, intel, zen3 = (targets.CpuTarget("host", cpu, "", bits)
                         for cpu, bits in (("znver4", 512), ("rocketlake", 512), ("znver3", 256)))
    assert tuned_schedule(tmp_path, "p", zen4) == tmp_path / "avx512" / "znver4" / "p.json"
    assert tuned_schedule(tmp_path, "p", intel) == tmp_path / "avx512" / "p.json"
    assert tuned_schedule(tmp_path, "q", zen4) == tmp_path / "avx512" / "q.json"
    assert tuned_schedule(tmp_path, "p", zen3) == tmp_path / "avx512" / "p.json"  # another width's
    assert [tuned_isa(tuned_schedule(tmp_path, "p", t)) for t in (zen4, intel)] == ["avx512", "avx512"]
