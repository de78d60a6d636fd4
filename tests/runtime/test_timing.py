"""Timing: a round of samples at a time, more rounds only where they spread wide, no call spent measuring
a call already timed, and no more rounds for a tuning candidate clearly slower than the best."""

from __future__ import annotations

import time

import pytest

from ragsched.autosched import measure
from ragsched.runtime import timing


class _Calls:
    """A function that counts its calls, each lasting ``seconds``."""

    def __init__(self, seconds: float = 0.0):
        self.n, self.seconds = 0, seconds

    def __call__(self):
        self.n += 1
        time.sleep(self.seconds)


def _fake_samples(monkeypatch, rounds: list[list[float]]):
    """``timing._samples`` answering these rounds in turn (each call of the function once a sample)."""
    it = iter(rounds)

    def samples(fn, repeats, inner):
        for _ in range(repeats * inner):
            fn()
        return list(next(it))

    monkeypatch.setattr(timing, "_samples", samples)


WIDE, NARROW = [1.0, 2.0, 1.0, 2.0, 1.5], [1.0, 1.01, 1.0, 1.01, 1.0]


def test_a_call_already_timed_is_not_called_again_to_measure_it(monkeypatch):
    _fake_samples(monkeypatch, [NARROW, NARROW])
    calls = _Calls()
    timing.Settling(calls, repeats=5, warmup=1, min_time=1e-3, call_s=0.5)
    assert calls.n == 1 + 5  # the warm-up, the samples
    calls = _Calls(2e-3)
    timing.Settling(calls, repeats=5, warmup=1, min_time=1e-3)
    assert calls.n == 1 + 1 + 5  # and the call that measures one call (2 ms: one a sample)


def test_settled_median_adds_rounds_while_the_samples_spread_wide(monkeypatch):
    _fake_samples(monkeypatch, [WIDE, WIDE, NARROW * 3])
    assert timing.settled_median(_Calls(), repeats=5, rounds=3) == pytest.approx(1.0)  # three rounds
    _fake_samples(monkeypatch, [NARROW, WIDE])
    assert timing.settled_median(_Calls(), repeats=5, rounds=3) == pytest.approx(1.0)  # one


class _Kernel(_Calls):
    def __call__(self, **kw):
        self.n += 1


@pytest.mark.parametrize("sets", [1, 2])
def test_a_candidate_clearly_slower_than_the_best_is_not_sampled_further(monkeypatch, sets):
    """Its first round spreads wide: within ``SETTLE_WITHIN`` of the best it gets more rounds (each set
    warmed again where there are several); past it, its first round is its time."""
    inputs = [({}, None)] * sets
    for best, more in ((1.4 / measure.SETTLE_WITHIN, False), (1.6 / measure.SETTLE_WITHIN, True)):
        _fake_samples(monkeypatch, [WIDE] * sets + [NARROW * 2] * (2 * sets))
        kern = _Kernel()
        measure._timed(kern, inputs, 5, warmup=0, best=best, call_s=[0.5] * sets)
        assert kern.n == sets * 5 + (sets * 5 + (sets if sets > 1 else 0) if more else 0)


def test_the_set_left_in_the_caches_is_timed_first_without_a_warm_up(monkeypatch):
    """On two input sets, the one the checking runs left in the caches (``warm``) is sampled first and not
    warmed again; the other is warmed once."""
    seen = []

    class Kernel:
        def __call__(self, **kw):
            seen.append(kw["set"])

    _fake_samples(monkeypatch, [NARROW, NARROW])
    measure._timed(Kernel(), [({"set": 0}, None), ({"set": 1}, None)], 5, warmup=1, call_s=[0.5, 0.5], warm=1)
    assert seen == [1] * 5 + [0] * (1 + 5)
