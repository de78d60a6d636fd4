"""Timing that is hard to fool: warm-up, repeated runs, the median."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeats: int = 7, warmup: int = 1, min_time: float = 0.0) -> float:
    """Median wall time of ``fn()`` in seconds, after ``warmup`` calls. With ``min_time``, each sample
    runs ``fn`` enough times to last at least that long (for very fast calls)."""
    for _ in range(warmup):
        fn()
    inner = 1
    if min_time > 0:
        t0 = time.perf_counter()
        fn()
        once = max(time.perf_counter() - t0, 1e-9)
        inner = max(1, int(min_time / once))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)
