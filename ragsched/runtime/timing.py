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


class Settling:
    """The samples of one call's time, taken a round of ``repeats`` at a time: after ``warmup`` calls,
    each sample ``inner`` calls lasting at least ``min_time`` seconds. ``call_s``, a time of one call
    already measured (a checking run), spares the call that would measure it (a run of a quarter of a
    second on an encoder layer) where it is ten times ``min_time`` or more: one call a sample, however
    much faster the later calls are than that first one."""

    def __init__(self, fn, repeats: int = 5, warmup: int = 1, min_time: float = 1e-3,
                 call_s: float | None = None):
        self.fn, self.repeats = fn, repeats
        if call_s is None or call_s < 10 * min_time:
            self.inner = _calls_per_sample(fn, warmup, min_time)
        else:
            for _ in range(warmup):
                fn()
            self.inner = 1
        self.samples = _samples(fn, repeats, self.inner)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def settled(self, spread: float = 0.1) -> bool:
        """Whether the samples' interquartile range is within ``spread`` of their median (or too few to
        tell)."""
        if len(self.samples) < 4:
            return True
        q1, _, q3 = statistics.quantiles(self.samples, n=4)
        return q3 - q1 <= spread * statistics.median(self.samples)

    def more(self, rewarm: bool = False) -> None:
        """Another round of samples (after one more call where other work ran since the last round)."""
        if rewarm:
            self.fn()
        self.samples += _samples(self.fn, self.repeats, self.inner)


def settled_median(fn, repeats: int = 5, warmup: int = 1, spread: float = 0.1, rounds: int = 3,
                   min_time: float = 1e-3) -> float:
    """Median wall time of ``fn()`` in seconds, after ``warmup`` calls, over ``repeats`` samples, and
    ``repeats`` more (up to ``rounds`` times as many in all) while the samples' interquartile range is over
    ``spread`` of their median: a machine busy for part of a measurement gives a wide spread, and the
    added samples outvote it (a schedule measured at 0.86, 8.08 and 4.74 ms in one study). Each sample
    runs ``fn`` for at least ``min_time`` seconds (a call of microseconds is timed over many)."""
    s = Settling(fn, repeats, warmup, min_time)
    for _ in range(max(1, rounds) - 1):
        if s.settled(spread):
            break
        s.more()
    return s.median
