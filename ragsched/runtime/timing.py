"""Timing that is hard to fool: warm-up, repeated runs, the median."""

from __future__ import annotations

import statistics
import time


def _calls_per_sample(fn, warmup: int, min_time: float) -> int:
    """Call ``fn`` ``warmup`` times; then how many calls one sample needs to last ``min_time`` seconds."""
    for _ in range(warmup):
        fn()
    if min_time <= 0:
        return 1
    t0 = time.perf_counter()
    fn()
    return max(1, int(min_time / max(time.perf_counter() - t0, 1e-9)))


def _samples(fn, repeats: int, inner: int) -> list[float]:
    """``repeats`` samples of ``inner`` calls each: seconds per call."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        out.append((time.perf_counter() - t0) / inner)
    return out


def median_time(fn, repeats: int = 7, warmup: int = 1, min_time: float = 0.0) -> float:
    """Median wall time of ``fn()`` in seconds, after ``warmup`` calls. With ``min_time``, each sample
    runs ``fn`` enough times to last at least that long (for very fast calls)."""
    return statistics.median(_samples(fn, repeats, _calls_per_sample(fn, warmup, min_time)))


def settled_median(fn, repeats: int = 5, warmup: int = 1, spread: float = 0.1, rounds: int = 3,
                   min_time: float = 1e-3) -> float:
    """Median wall time of ``fn()`` in seconds, after ``warmup`` calls, over ``repeats`` samples, and
    ``repeats`` more (up to ``rounds`` times as many in all) while the samples' interquartile range is over
    ``spread`` of their median: a machine busy for part of a measurement gives a wide spread, and the
    added samples outvote it (a schedule measured at 0.86, 8.08 and 4.74 ms in one study). Each sample
    runs ``fn`` for at least ``min_time`` seconds (a call of microseconds is timed over many)."""
    inner = _calls_per_sample(fn, warmup, min_time)
    samples: list[float] = []
    for _ in range(max(1, rounds)):
        samples += _samples(fn, repeats, inner)
        if len(samples) < 4:
            break
        q1, _, q3 = statistics.quantiles(samples, n=4)
        if q3 - q1 <= spread * statistics.median(samples):
            break
    return statistics.median(samples)
