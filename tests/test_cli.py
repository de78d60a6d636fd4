"""The ``sched`` command and the demo, on the bundled pipeline files."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import demo
from ragsched import cli

PIPELINES = Path(__file__).resolve().parent.parent / "pipelines"


def test_run_checks_and_times(capsys):
    assert cli.main(["run", str(PIPELINES / "blur.py"), "--scale", "small", "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    assert "matches the reference" in out and "x the reference" in out


def test_run_hand_schedule_and_show_it(capsys):
    assert cli.main(["run", str(PIPELINES / "blur.py"), "--scale", "small", "--repeats", "2",
                     "--schedule", "hand"]) == 0
    out = capsys.readouterr().out
    assert "blur (schedule hand): matches the reference" in out and "blur (default schedule): matches" in out
    assert cli.main(["show", str(PIPELINES / "blur.py"), "--schedule", "hand"]) == 0
    assert "parallel blur_y.s0.y" in capsys.readouterr().out
    assert cli.main(["run", str(PIPELINES / "softmax.py"), "--scale", "small", "--schedule", "hand"]) == 2
    assert "has no hand_schedule" in capsys.readouterr().err


def test_show_prints_loop_nest_and_code(capsys):
    assert cli.main(["show", str(PIPELINES / "softmax.py"), "--llvm"]) == 0
    out = capsys.readouterr().out
    assert "# loop nest" in out and "produce" in out and "define i32" in out


def test_bad_file_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "nothing.py"
    bad.write_text("x = 1\n")
    assert cli.main(["run", str(bad)]) == 2
    assert "needs build(), example_inputs(scale) and reference" in capsys.readouterr().err
    assert cli.main(["run", str(tmp_path / "missing.py")]) == 2


@pytest.mark.parametrize("scale", ["small"])
def test_demo_runs(scale, capsys):
    assert demo.main(scale) == 0
    out = capsys.readouterr().out
    for name in (*demo.PIPELINES, "encoder"):
        assert name in out
    assert "MISMATCH" not in out


def test_demo_autoschedules_attention(capsys):
    """The demo's main job, on a batch of 4 sentences with a few seconds of tuning."""
    from pathlib import Path

    assert demo.autoscheduled_attention(Path(demo.__file__).resolve().parent.parent / "pipelines", budget_s=3,
                                        batch=4, repeats=1) == 0
    out = capsys.readouterr().out
    assert "def apply_schedule(funcs)" in out and "ragsched autoscheduled" in out and "NumPy per sequence" in out
    assert "MISMATCH" not in out
