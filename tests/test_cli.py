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
    assert "matches the reference" in out and ("x faster than the NumPy reference" in out or
                                               "x slower than the NumPy reference" in out)


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
    assert "# loop nest" in out and "produce" in out and "define i32" in out and "# assembly" not in out
    assert cli.main(["show", str(PIPELINES / "softmax.py"), "--llvm", "--asm"]) == 0
    out = capsys.readouterr().out
    assert "define i32" in out and "# assembly" in out and "ret" in out.split("# assembly")[1]


def test_version_and_every_option_explained(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--version"])
    assert capsys.readouterr().out.startswith("sched (ragsched) ")
    for command in ("run", "show", "autoschedule", "study"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        text = capsys.readouterr().out
        options = text.split("options:")[1]
        for entry in options.split("\n  -")[1:]:  # every option has words after its name, not just the metavar
            name, _, rest = entry.strip().partition("  ")
            assert rest.strip() or "\n" in entry, f"{command} -{name} has no help"
    with pytest.raises(SystemExit):
        cli.main(["autoschedule", "--help"])
    assert "(default: 100)" in capsys.readouterr().out


def test_speedups_are_worded_both_ways():
    assert cli._speedup(2.0, 1.0).strip() == "2.00x faster" and cli._speedup(1.0, 4.0).strip() == "4.00x slower"


def test_study_prints_a_storage_and_its_trials(tmp_path, capsys):
    import optuna

    from ragsched.autosched import open_storage

    journal = tmp_path / "s.journal"
    st = optuna.create_study(study_name="mine", storage=open_storage(journal))
    for v in (0.002, 0.001):
        st.add_trial(optuna.trial.create_trial(value=v, user_attrs={"status": "ok", "compile_s": 0.5}))
    st.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.PRUNED, user_attrs={"status": "wrong"}))
    assert cli.main(["study", str(journal)]) == 0
    assert "mine: 3 trial(s), best 1.000 ms (trial 1)" in capsys.readouterr().out
    assert cli.main(["study", str(journal), "--study", "mine"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[2].split()[:2] == ["1", "1.000"] and lines[3].split()[:2] == ["0", "2.000"]
    assert "wrong" in out and "best: trial 1, 1.000 ms" in out
    assert cli.main(["study", str(journal), "--study", "other"]) == 2
    assert "no study 'other'" in capsys.readouterr().err
    # timed side by side at the end of the run, trial 0 won: it is the study's best (its first time, 2 ms
    # against 1, was one of many noisy times, not taken beside the other)
    st.set_user_attr("final_times", {"0": 0.0015, "1": 0.0016})
    assert cli.main(["study", str(journal)]) == 0
    assert "mine: 3 trial(s), best 1.500 ms (trial 0)" in capsys.readouterr().out
    assert cli.main(["study", str(journal), "--study", "mine"]) == 0
    assert "best: trial 0, 1.500 ms timed side by side" in capsys.readouterr().out


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
    assert "rules vs NumPy" in out  # each dense pipeline under the rules' schedule too, checked
    assert "MISMATCH" not in out


def test_demo_autoschedules_attention(capsys):
    """The demo's main job, on a batch of 4 sentences with a few seconds of tuning."""
    from pathlib import Path

    assert demo.autoscheduled_attention(Path(demo.__file__).resolve().parent.parent / "pipelines", budget_s=3,
                                        batch=4, repeats=1) == 0
    out = capsys.readouterr().out
    assert "def apply_schedule(funcs)" in out and "ragsched autoscheduled" in out and "NumPy per sequence" in out
    assert "MISMATCH" not in out
