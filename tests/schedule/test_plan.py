"""Stage plans and schedule records: what each primitive does to the loop list, what is refused, and
that schedules survive JSON and Python round trips."""

from __future__ import annotations

import pytest

from ragsched import schedule as S
from ragsched.algebra import f2
from ragsched.schedule import loops as P
from ragsched.schedule.loops import ForKind


def names(plan):
    return [(d.name, d.kind.value) for d in plan.dims]


def run(*records, pure=("y", "x"), rvars=()):
    p = P.initial_plan("f", 0 if not rvars else 1, list(pure), list(rvars))
    for r in records:
        p = r.on_plan(p)
    return p


def test_split_reorder_vectorize_parallel():
    p = run(S.Split("f", 0, "x", "xo", "xi", 8, "guard"), S.Split("f", 0, "y", "yo", "yi", 4, "shift"),
            S.Reorder("f", 0, ("yo", "xo", "yi", "xi")), S.Vectorize("f", 0, "xi"), S.Parallel("f", 0, "yo"))
    assert names(p) == [("yo", "parallel"), ("xo", "for"), ("yi", "for"), ("xi", "vectorized")]
    assert [t.old for t in p.transforms] == ["x", "y"]


def test_split_keeping_the_outer_name_and_fuse():
    p = run(S.Split("f", 0, "x", "x", "x.v", 8, "pad"), S.Fuse("f", 0, "y", "x", "yx"))
    assert names(p) == [("yx", "for"), ("x.v", "for")]


@pytest.mark.parametrize("record, message", [
    (S.Split("f", 0, "z", "zo", "zi", 8, "guard"), r"cannot split 'z': no loop of that name; its loops are y, x"),
    (S.Split("f", 0, "x", "xo", "xi", 0, "guard"), "positive int factor"),
    (S.Split("f", 0, "x", "xo", "xi", 8, "wrap"), "tail must be one of auto, guard, shift, pad, split"),
    (S.Split("f", 0, "x", "y", "xi", 8, "guard"), "'y': that name is already used"),
    (S.Fuse("f", 0, "x", "y", "xy"), "needs 'x' directly outside 'y'"),
    (S.Reorder("f", 0, ("x", "x")), "lists a loop twice"),
])
def test_refusals_name_the_func_and_var(record, message):
    with pytest.raises(ValueError, match=message):
        run(record)


def test_rvar_order_is_kept_and_pad_is_refused_on_rvars():
    p = run(S.Reorder("f", 1, ("r.0", "x", "y")), pure=("y", "x"), rvars=("r.0",))
    assert names(p)[0] == ("r.0", "for")
    with pytest.raises(ValueError, match="changes the order of the reduction loops"):
        run(S.Reorder("f", 1, ("r.1", "r.0")), pure=("x",), rvars=("r.0", "r.1"))
    with pytest.raises(ValueError, match="tail='pad' on RVar"):
        run(S.Split("f", 1, "r.0", "ro", "ri", 4, "pad"), pure=("x",), rvars=("r.0",))


def test_marking_twice_is_refused():
    with pytest.raises(ValueError, match="already vectorized"):
        run(S.Vectorize("f", 0, "x"), S.Parallel("f", 0, "x"))
    p = run(S.Unroll("f", 0, "y"))
    assert p.dims[0].kind == ForKind.UNROLLED


def test_schedule_json_and_python_round_trip():
    sched = S.Schedule((S.Split("blur_y", 0, "y", "yo", "yi", 32, "shift"), S.Reorder("blur_y", 0, ("yo", "yi")),
                        S.Vectorize("blur_y", 0, "yi"), S.ComputeAt("blur_x", "blur_y", "yo"),
                        S.StoreRoot("blur_x"), S.Bound("blur_y", "x", 0, 640), S.Parallel("hist", 1, "x")))
    assert S.Schedule.from_json(sched.to_json()) == sched
    text = sched.to_python()
    assert "funcs['blur_x'].compute_at(funcs['blur_y'], 'yo')" in text
    assert "funcs['hist'].update(0).parallel('x')" in text
    compile(text, "<schedule>", "exec")
    with pytest.raises(ValueError, match="not a ragsched schedule"):
        S.Schedule.from_json("[1, 2]")
    with pytest.raises(ValueError, match="unknown primitive"):
        S.Schedule.from_json('{"ragsched_schedule": 1, "directives": [{"op": "teleport", "func": "f"}]}')


def test_long_calls_are_written_on_lines_of_at_most_120_characters():
    """A copy of a long-named Input for a long-named Func (what the autoscheduler writes for a filter's
    packed copy) is broken between its arguments; the text still makes the same records."""
    name = "depthwise_filter_in_depthwise_convolved"
    sched = S.Schedule((S.Wrap(name, "depthwise_filter", "depthwise_convolved"), S.ComputeRoot(name),
                        S.Reorder("f", 0, tuple(f"a_rather_long_loop_name_{k}" for k in range(6)))))
    text = sched.to_python()
    assert max(map(len, text.splitlines())) <= 120 and len(text.splitlines()) > 2 + len(sched)
    made = []

    class Recorder:
        def __init__(self, name):
            self.name = name

        def __getattr__(self, method):
            def call(*args, **kw):
                made.append((self.name, method, args, kw))
                return Recorder(kw.get("name", self.name))
            return call

    namespace: dict = {}
    exec(text, namespace)
    funcs = {n: Recorder(n) for n in (name, "depthwise_filter", "depthwise_convolved", "f")}
    namespace["apply_schedule"](funcs)
    assert [(f, m) for f, m, *_ in made] == [("depthwise_filter", "in_"), (name, "compute_root"), ("f", "reorder")]
    assert made[2][2] == tuple(f"a_rather_long_loop_name_{k}" for k in range(6))


def _example(cls):
    """A record of primitive ``cls`` with plausible field values."""
    import dataclasses

    values = {"func": "f", "stage": 0, "var": "x", "outer": "xo", "inner": "xi", "factor": 4, "tail": "guard",
              "vars": ("x", "y"), "fused": "xy", "multiple": 8, "consumer": "g", "min": 0, "extent": 16,
              "wrapped": "a", "layout": f2.morton({"y": 4, "x": 4}), "memory": "shared"}
    return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)})


@pytest.mark.parametrize("op", sorted(S.REGISTRY))
def test_every_registered_primitive_has_its_method_json_and_python(op):
    """The registry is the list of primitives: each one round-trips through JSON, writes Python that
    calls a method the Funcs have, and (for a loop record) acts on a stage plan or refuses, never both
    silently."""
    import ragsched as rs

    cls = S.REGISTRY[op]
    record = _example(cls)
    assert S.Schedule.from_json(S.Schedule((record,)).to_json()) == S.Schedule((record,))
    method = "in_" if op == "in" else op
    assert callable(getattr(rs.Func, method)), f"rs.Func has no method {method} for primitive {op}"
    assert f".{method}(" in record.python_call()
    if isinstance(record, S.StageDirective):
        plan = P.initial_plan("f", 0, ["y", "x"], [])
        try:
            after = record.on_plan(plan)
        except ValueError as err:
            assert "Func f" in str(err)
        else:
            assert after != plan or op == "reorder"
