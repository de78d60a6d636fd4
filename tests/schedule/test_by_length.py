"""Schedules by length class (``rs.SchedulesByLength``): the class a call runs is the one whose mean
length is nearest the call's by ratio; whichever runs, the values are the reference's; the classes
survive JSON and Python files; bad classes and non-ragged pipelines are refused by name."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.pipeline_file import load
from ragsched.reference import run
from tests.ragged.test_padding import _token_inputs as token_inputs
from tests.ragged.test_padding import _tokens as token_funcs


def _tokens():
    return token_funcs()[2]


def _padded(multiple: int) -> rs.Schedule:
    """A schedule whose output is stored padded to ``multiple`` (so a call's result says which ran)."""
    out = _tokens()
    out.reorder("b", "h", "i").pad("i", multiple).store_padded("i", multiple).vectorize("i", multiple)
    return rs.Pipeline([out]).schedule()


def _inputs(lengths):
    return token_inputs(lengths)


def _classes(*means_and_multiples):
    return rs.SchedulesByLength(tuple(rs.LengthClass(m, _padded(k) if k > 1 else rs.Schedule()) for m, k in
                                      means_and_multiples))


def test_pick_is_nearest_by_ratio():
    s = _classes((4.0, 1), (64.0, 8), (16.0, 4))
    assert [c.mean_length for c in s.classes] == [4.0, 16.0, 64.0]  # kept shortest first
    assert s.pick(0.0) == 0 and s.pick(1.0) == 0 and s.pick(7.9) == 0  # the boundary: sqrt(4 * 16) = 8
    assert s.pick(8.1) == 1 and s.pick(31.9) == 1 and s.pick(32.1) == 2 and s.pick(1e6) == 2


@settings(max_examples=12, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=6),
       means=st.lists(st.floats(1.0, 50.0), min_size=2, max_size=3, unique=True))
def test_each_call_runs_its_class_and_computes_the_reference(lengths, means):
    multiples = [1, 8, 4][: len(means)]
    s = _classes(*zip(means, multiples))
    kern = rs.Pipeline([_tokens()], by_length=s).compile()
    inputs = _inputs(lengths)
    k = s.pick(float(np.mean(lengths)))
    assert kern.kernel_for(**inputs) is kern.kernels[k]
    got = kern(**inputs)
    want = run(_tokens(), **inputs)
    by_mean = {c.mean_length: m for c, m in zip(s.classes, sorted(zip(means, multiples)))}
    assert got.pad == by_mean[s.classes[k].mean_length][1]  # the class's storage: it is the class that ran
    for a, b in zip(got.to_list(), want.to_list(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_compile_schedule_argument_and_bad_calls():
    s = _classes((2.0, 1), (20.0, 8))
    kern = _tokens().compile(schedule=s)
    assert len(kern.kernels) == 2 and "length class 1: mean length 20" in kern.loop_nest()
    assert repr(kern) == "<KernelsByLength out: classes of mean length 2, 20>"
    with pytest.raises(TypeError, match="missing argument.*lens"):  # the picked kernel's own checks
        kern(x=_inputs([3])["x"])
    with pytest.raises(ValueError, match="lens"):
        kern(**{**_inputs([3, 4]), "lens": np.array([3, -1], np.int32)})


def test_a_pipeline_without_lengths_is_refused():
    x = rs.Input("x", rs.float32, [rs.Size("N")])
    f = rs.Func("f")
    i = rs.Var("i")
    f[i] = x[i] + 1.0
    with pytest.raises(ValueError, match="ragged pipeline"):
        f.compile(schedule=rs.SchedulesByLength((rs.LengthClass(4.0, rs.Schedule()),)))


@pytest.mark.parametrize("classes, error, match", [
    ((), ValueError, "at least one"),
    ((rs.LengthClass(0.0, rs.Schedule()),), ValueError, "mean_length"),
    ((rs.LengthClass(float("nan"), rs.Schedule()),), ValueError, "mean_length"),
    ((rs.LengthClass(3.0, rs.Schedule()), rs.LengthClass(3.0, rs.Schedule())), ValueError, "same mean"),
    ((rs.LengthClass(3.0, "split"),), TypeError, "rs.Schedule"),
    (("x",), TypeError, "LengthClass"),
])
def test_bad_classes_are_refused(classes, error, match):
    with pytest.raises(error, match=match):
        rs.SchedulesByLength(classes)


def test_json_round_trip_and_the_plain_reader_refuses_classes():
    s = rs.SchedulesByLength((rs.LengthClass(2.5, _padded(4), "short"), rs.LengthClass(30.0, _padded(8))))
    text = s.to_json(tuned_for={"isa": "avx2"})
    assert rs.SchedulesByLength.from_json(text) == s == rs.read_schedule(text)
    assert rs.Schedule.tuned_for(text) == {"isa": "avx2"}
    with pytest.raises(ValueError, match="SchedulesByLength"):
        rs.Schedule.from_json(text)
    one = _padded(4).to_json()
    assert rs.read_schedule(one) == _padded(4)
    with pytest.raises(ValueError, match="by_length"):
        rs.SchedulesByLength.from_json(one)
    with pytest.raises(ValueError, match="mean_length"):
        rs.SchedulesByLength.from_json(json.dumps({"ragsched_schedule": 1, "by_length": [{"directives": []}]}))


PIPELINE = '''
import ragsched as rs
from tests.ragged.test_padding import _token_inputs, _tokens


def build():
    return _tokens()[2]


def example_inputs(scale="small"):
    return _token_inputs([3, 1, 0, 4] if scale == "small" else [40, 33, 57])


def reference(x, lens):
    return rs.RaggedArray.from_list([e * 2 + 1 for e in x.to_list()], ragged_axes=[0])
'''


def test_pipeline_files_read_classes_from_json_and_python(tmp_path):
    path = tmp_path / "tokens.py"
    path.write_text(PIPELINE)
    pf = load(path)
    s = rs.SchedulesByLength((rs.LengthClass(2.0, _padded(4), "small"), rs.LengthClass(43.0, _padded(8), "full")))
    (tmp_path / "s.json").write_text(s.to_json())
    (tmp_path / "s.py").write_text(s.to_python())
    for name in ("s.json", "s.py"):
        pipe = pf.pipeline(tmp_path / name)
        assert pipe.by_length == s, name
        kern = pipe.compile()
        for scale, pad in (("small", 4), ("full", 8)):
            got = kern(**pf.inputs(scale))
            assert got.pad == pad
            for a, b in zip(got.to_list(), pf.reference(pf.inputs(scale)).to_list(), strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="pipeline\\(schedule\\)"):
        pf.outputs(tmp_path / "s.json")


def test_the_command_tunes_a_class_per_scale(tmp_path, capsys):
    from ragsched import cli

    path = tmp_path / "tokens.py"
    path.write_text(PIPELINE)
    out = tmp_path / "t.json"
    common = [str(path), "--trials", "0", "--threads", "1", "-o", str(out), "--quiet"]
    assert cli.main(["autoschedule", *common, "--scale", "small", "--by-length"]) == 2
    assert "two or more scales" in capsys.readouterr().err
    assert cli.main(["autoschedule", *common, "--scale", "small", "full", "--by-length"]) == 0
    s = rs.read_schedule(out.read_text())
    assert [(c.mean_length, c.scale) for c in s.classes] == [(2.0, "small"), (pytest.approx(130 / 3), "full")]
    assert "SCHEDULES_BY_LENGTH" in out.with_suffix(".py").read_text()
    assert cli.main(["run", str(path), "--scale", "full", "--schedule", str(out.with_suffix(".py")),
                     "--repeats", "2"]) == 0
    assert "ran the length class made for mean length 43.3" in capsys.readouterr().out


def test_autoschedule_by_length_makes_a_class_per_input_set():
    sets = [_inputs([3, 1, 0, 4]), _inputs([40, 33, 57])]
    s = rs.autoschedule(_tokens(), trials=0, inputs=sets, by_length=True)
    assert isinstance(s, rs.SchedulesByLength) and [c.mean_length for c in s.classes] == [2.0, pytest.approx(130 / 3)]
    kern = _tokens().compile(schedule=s)
    for inputs in sets:
        for a, b in zip(kern(**inputs).to_list(), run(_tokens(), **inputs).to_list(), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="two or more"):
        rs.autoschedule(_tokens(), trials=0, inputs=sets[0], by_length=True)
    with pytest.raises(ValueError, match="one reference per input set"):
        rs.autoschedule(_tokens(), trials=0, inputs=sets, by_length=True, reference=[None])


def test_the_stats_of_the_classes_add_up():
    """Each step's times are the classes' summed; the total is the compile's wall time, since the classes
    are made side by side."""
    import time
    t0 = time.perf_counter()
    kern = _tokens().compile(schedule=_classes((2.0, 1), (20.0, 8)))
    wall = time.perf_counter() - t0
    each = [k.stats for k in kern.kernels]
    for step in ("lower_s", "codegen_s", "llvm_s", "load_s"):
        assert getattr(kern.stats, step) == pytest.approx(sum(getattr(s, step) for s in each))
    assert 0 < kern.stats.total_s <= wall
    assert kern.stats.cache in {s.cache for s in each}


def test_the_mean_length_of_any_array_kind():
    from ragsched.schedule.by_length import mean_length

    assert mean_length(["lens"], {"lens": np.array([2, 4], np.int32)}) == 3.0
    assert mean_length(["lens"], {"lens": [2, 4, 9]}) == 5.0
    assert mean_length(["a", "b"], {"a": np.array([1]), "b": np.array([3, 5])}) == 3.0
    assert mean_length(["lens"], {"lens": np.zeros(0, np.int32)}) == 0.0
    assert mean_length(["lens"], {}) == 0.0 and mean_length(["lens"], {"lens": "long"}) == 0.0


def test_the_mean_length_of_torch_tensors():
    torch = pytest.importorskip("torch")
    from ragsched.schedule.by_length import mean_length

    assert mean_length(["lens"], {"lens": torch.tensor([2, 5])}) == 3.5


def test_classes_on_the_gpu_emulator():
    s = rs.SchedulesByLength((rs.LengthClass(2.0, rs.Schedule()), rs.LengthClass(30.0, rs.Schedule())))
    kern = _tokens().compile(target="cuda", device="emulate", schedule=s)
    assert kern.source.startswith("// length class 0") and "// length class 1" in kern.source
    for lengths in ([3, 0, 1], [40, 25]):
        inputs = _inputs(lengths)
        for a, b in zip(kern(**inputs).to_list(), run(_tokens(), **inputs).to_list(), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _nothing_cached(monkeypatch):
    from ragsched.runtime import compiler
    compiler.forget_loaded()
    monkeypatch.setattr(compiler.cache, "load", lambda *a, **k: None)
    return compiler


def test_a_class_is_compiled_on_the_compile_thread_while_the_next_is_lowered(monkeypatch):
    """The first class's machine code is made on the compile thread, and it waits there until the second
    class's lowering has begun: done one after the other, the wait would end unanswered. The last class's
    is made on the caller's thread, which would otherwise only wait (a compile thread started then saw
    that thread running, and LLVM kept to one core)."""
    import threading
    compiler = _nothing_cached(monkeypatch)
    lowered, real_lower, real_compiled = [], compiler.lower, compiler._compiled
    second_lowering, threads = threading.Event(), []

    def lower(*a, **k):
        lowered.append(1)
        if len(lowered) == 2:
            second_lowering.set()
        return real_lower(*a, **k)

    def compiled(code):
        threads.append((threading.current_thread().name, second_lowering.wait(timeout=60)))
        return real_compiled(code)

    monkeypatch.setattr(compiler, "lower", lower)
    monkeypatch.setattr(compiler, "_compiled", compiled)
    s = _classes((2.0, 1), (20.0, 8))
    kern = rs.Pipeline([_tokens()], by_length=s).compile()
    assert [name for name, _ in threads] == ["ragsched-compile", threading.current_thread().name]
    assert threads[0][1], "the first class was compiled only after the second was lowered"
    for lengths in ([3, 1, 4], [30, 25]):
        inputs = _inputs(lengths)
        for a, b in zip(kern(**inputs).to_list(), run(_tokens(), **inputs).to_list(), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("failing", [1, 2])
def test_a_failure_on_either_thread_is_raised_by_compile(monkeypatch, failing):
    """The first class is compiled on the compile thread, the second on the caller's: a failure on
    either is raised by ``compile``, after both were tried."""
    compiler = _nothing_cached(monkeypatch)
    real, calls = compiler._compiled, []

    def compiled(code):
        calls.append(code.key)
        if len(calls) == failing:
            raise RuntimeError(f"LLVM failed on class {failing}")
        return real(code)

    monkeypatch.setattr(compiler, "_compiled", compiled)
    with pytest.raises(RuntimeError, match=f"LLVM failed on class {failing}"):
        rs.Pipeline([_tokens()], by_length=_classes((2.0, 1), (20.0, 8))).compile()
    assert len(calls) == 2
