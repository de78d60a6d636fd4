"""Tuning on several input sets (``tune(inputs=[...])``, ``sched autoschedule --scale a b``): every
candidate is checked on each set and timed as the geometric mean over them, so that one schedule serves
batches of different length distributions; the rules read the lengths of every set and bound tiles by
the least extents."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import ragsched as rs
from ragsched.autosched import driver
from ragsched.autosched.measure import input_sets, measure_one
from ragsched.pipeline_file import load
from tests import ROOT


def _attention():
    return load(ROOT / "pipelines" / "attention.py")


def _batch(lens, seed):
    pf = _attention()
    inputs = pf.inputs("small")
    rng = np.random.default_rng(seed)

    def tokens():
        return rs.RaggedArray.from_list([rng.standard_normal((n, 8, 64)).astype(np.float32) for n in lens],
                                        ragged_axes=[0])
    return {**inputs, "Q": tokens(), "K": tokens(), "V": tokens(), "lens": np.asarray(lens, np.int32)}


def test_a_candidate_is_checked_on_every_set_and_timed_on_each():
    pf = _attention()
    program = pf.pipeline().program()
    a, b = _batch([5, 0, 9], 1), _batch([30, 2], 2)
    want = [pf.reference(a), pf.reference(b)]
    text = rs.autoschedule(list(pf.outputs()), trials=0, inputs=a).to_json()
    ok = measure_one(program, [a, b], want, 1, 1, text)
    assert ok.status == "ok" and ok.seconds > 0, ok.message
    other = _batch([5, 0, 9], 3)  # the first set's lengths, other values: its outputs are not the first's
    bad = measure_one(program, [a, other], [want[0], want[0]], 1, 1, text)
    assert bad.status == "wrong", bad
    assert measure_one(program, [a, other], [want[0], pf.reference(other)], 1, 1, text).status == "ok"
    assert measure_one(program, a, want[0], 1, 1, text).status == "ok"  # one set, as before


def test_input_sets_pairs_each_set_with_its_outputs():
    assert input_sets({"x": 1}, "y") == [({"x": 1}, "y")]
    assert input_sets([{"x": 1}, {"x": 2}], ["a", "b"]) == [({"x": 1}, "a"), ({"x": 2}, "b")]
    with pytest.raises(ValueError):
        input_sets([{"x": 1}, {"x": 2}], ["a"])


def test_the_rules_read_every_sets_lengths_and_the_least_extents():
    program = _attention().pipeline().program()
    a, b = _batch([5, 7], 1), _batch([40, 3, 2], 2)
    assert list(driver._example_lengths(program, [a, b])) == [5, 7, 40, 3, 2]
    assert driver._example_lengths(program, None) is None
    assert driver._least_extents([{"f": (4, 9), "g": (3,)}, {"f": (6, 2)}]) == {"f": (4, 2), "g": (3,)}


def test_tuning_on_two_sets_finds_a_schedule_that_runs_on_both():
    pf = _attention()
    a, b = _batch([5, 0, 9, 3], 1), _batch([24, 2], 2)
    result = driver.tune(list(pf.outputs()), trials=3, inputs=[a, b], threads=1, repeats=1, progress=False, seed=0)
    assert result.seconds is not None and result.seconds > 0 and result.trials - result.repeated == 3
    kern = pf.pipeline(result.schedule).compile(threads=1)
    for inputs in (a, b):
        for got, want in zip(kern(**inputs).to_list(), pf.reference(inputs).to_list(), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_bad_input_sets_are_refused_by_name():
    pf = _attention()
    a = _batch([3], 1)
    with pytest.raises(TypeError, match="inputs"):
        driver.tune(list(pf.outputs()), trials=1, inputs=[a, 3], progress=False)
    with pytest.raises(TypeError, match="inputs"):
        driver.tune(list(pf.outputs()), trials=1, inputs=[], progress=False)
    with pytest.raises(ValueError, match="reference"):
        driver.tune(list(pf.outputs()), trials=1, inputs=[a, a], reference=[pf.reference(a)], progress=False)
    with pytest.raises(ValueError, match="scale 'huge'"):
        pf.inputs("huge")
    assert pf.scales == ("small", "full", "long") and load(ROOT / "pipelines" / "blur.py").scales == ("small", "full")


def test_the_command_tunes_on_several_scales(tmp_path):
    """A pipeline file naming its own scales; the schedule file records the ones it was timed on."""
    src = (
        "import numpy as np\nimport ragsched as rs\nSCALES = ('small', 'full', 'wide')\n"
        "def build():\n    x, y = rs.vars('x y')\n    H, W = rs.Size('H'), rs.Size('W')\n"
        "    a = rs.Input('a', rs.float32, [H, W])\n"
        "    f = rs.Func('f', shape=[H, W])\n    f[y, x] = a[y, x] * 2.0 + 1.0\n    return f\n"
        "def example_inputs(scale='small'):\n"
        "    shape = {'small': (5, 7), 'full': (64, 64), 'wide': (3, 300)}[scale]\n"
        "    return {'a': np.arange(np.prod(shape), dtype=np.float32).reshape(shape)}\n"
        "def reference(a):\n    return a * 2 + 1\n")
    path = tmp_path / "twice.py"
    path.write_text(src)
    out = tmp_path / "twice.schedule.json"  # (its .py goes beside it)
    run = subprocess.run([sys.executable, "-m", "ragsched.cli", "autoschedule", str(path), "--scale", "small", "wide",
                          "--trials", "3", "--repeats", "1", "-o", str(out), "--quiet"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "geometric mean over the inputs small, wide" in run.stdout
    assert json.loads(out.read_text())["tuned_for"]["scales"] == ["small", "wide"]
    bad = subprocess.run([sys.executable, "-m", "ragsched.cli", "autoschedule", str(path), "--scale", "huge",
                          "--trials", "1", "-o", str(out), "--quiet"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode != 0 and "scale 'huge'" in bad.stderr
