"""The benchmarks' timing in turns: each call run twice in a row per round and the second run timed, so
that no call's time is what the call before it left behind (an allocator's state, a cache)."""

from benchmarks import held_out
from benchmarks.held_out import alternate


def test_each_call_is_timed_on_its_second_run_in_a_row(monkeypatch):
    order = []
    clock = iter(range(1000))
    monkeypatch.setattr(held_out.time, "perf_counter", lambda: next(clock))

    def call(name):
        def run():
            order.append(name)
        return run

    out = alternate({"a": call("a"), "b": call("b")}, rounds=3)
    assert order == ["a", "b"] + ["a", "a", "b", "b"] * 3  # a warm-up run each, then two in a row
    assert set(out) == {"a", "b"} and all(v == 1 for v in out.values())  # one tick: the timed run alone
