"""Compiling with a schedule (``compile(schedule=s)``) never depends on what was compiled before: the
Funcs are not changed, records they hold already count once, and applying a schedule twice is harmless."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from pipelines.blur import build
from ragsched.lang import schedulable


def _blur():
    """pipelines/blur.py's Funcs (blur_x, blur_y), freshly built."""
    by = build()
    return schedulable(by)["blur_x"], by


def _want(image):
    bx = (image[:, :-2] + image[:, 1:-1] + image[:, 2:]) / 3
    return (bx[:-2] + bx[1:-1] + bx[2:]) / 3


IMAGE = np.random.default_rng(0).random((37, 45), dtype=np.float32)


def test_a_funcs_own_schedule_given_again_compiles():
    bx, by = _blur()
    by.split("y", "y", "yi", 8).vectorize("x", 8).parallel("y")
    bx.compute_at(by, "y").vectorize("x", 4)
    s = rs.Pipeline([by]).schedule()
    before = rs.Pipeline([by]).schedule()
    kernels = []
    for _ in range(2):  # twice: the first call must not leave anything behind
        kernels.append(by.compile(schedule=s))
        np.testing.assert_allclose(kernels[-1](img=IMAGE), _want(IMAGE), rtol=1e-6)
    assert rs.Pipeline([by]).schedule() == before
    assert kernels[0].lowered == kernels[1].lowered and kernels[0].source == kernels[1].source


def test_a_schedule_on_an_unscheduled_pipeline_leaves_its_funcs_unscheduled():
    bx, by = _blur()
    s = rs.Schedule.from_json(_scheduled_json())
    kern = by.compile(schedule=s)
    assert "blur_x" in kern.lowered and "yi" in kern.lowered
    np.testing.assert_allclose(kern(img=IMAGE), _want(IMAGE), rtol=1e-6)
    assert len(rs.Pipeline([by]).schedule()) == 0
    # the same schedule on a freshly built pipeline gives the same loops
    _, by2 = _blur()
    assert by2.compile(schedule=s).lowered == kern.lowered


def _scheduled_json() -> str:
    bx, by = _blur()
    by.split("y", "y", "yi", 4).vectorize("x", 8)
    bx.compute_at(by, "y")
    return rs.Pipeline([by]).schedule().to_json()


def test_a_schedule_that_extends_the_funcs_own_adds_only_the_rest():
    bx, by = _blur()
    by.split("y", "y", "yi", 4)
    _, by2 = _blur()
    by2.split("y", "y", "yi", 4).vectorize("x", 8)
    more = rs.Pipeline([by2]).schedule()
    kern = by.compile(schedule=more)
    assert [d.op for d in kern.schedule] == ["split", "split", "vectorize"]
    np.testing.assert_allclose(kern(img=IMAGE), _want(IMAGE), rtol=1e-6)
    assert [d.op for d in rs.Pipeline([by]).schedule()] == ["split"]


def test_applying_a_schedule_twice_is_harmless_and_conflicts_are_still_refused():
    _, by = _blur()
    by.split("y", "y", "yi", 4).reorder("yi", "y").reorder("y", "yi").reorder("yi", "y")
    s = rs.Pipeline([by]).schedule()
    _, fresh = _blur()
    s.apply(fresh)
    s.apply(fresh)
    assert rs.Pipeline([fresh]).schedule() == s  # the last reorder is kept: it is not a repeat
    s.apply(fresh)
    assert fresh.compile().lowered == by.compile().lowered
    _, other = _blur()
    other.split("y", "y", "yi", 8)  # a different split of y: the schedule's split now clashes
    with pytest.raises(ValueError, match="blur_y.*'yi'"):
        other.compile(schedule=s)


def test_a_schedule_does_not_leak_into_the_next_build_through_an_inline_reduction():
    """An inline reduction that reads nothing (a count over its RDom) used to be one Func shared by every
    build: scheduling it in one build scheduled it in the next, and a second schedule was refused."""
    import numpy as np

    import ragsched as rs

    def build():
        y, x = rs.vars("y x")
        H, W = rs.Size("H"), rs.Size("W")
        img = rs.Input("img", rs.float32, [H, W])
        r = rs.RDom(0, 5)
        count = rs.Func("count")
        count[x] = rs.sum(rs.select(r <= x, 1, 0))
        out = rs.Func("out", shape=[H, W])
        out[y, x] = img[y, x] * rs.cast(rs.float32, count[x])
        return out, count

    out1, count1 = build()
    from ragsched.lang import schedulable

    inner1 = next(f for n, f in schedulable([out1]).items() if n.startswith("sum_"))
    inner1.compute_root().parallel("x")
    out2, _ = build()
    inner2 = next(f for n, f in schedulable([out2]).items() if n.startswith("sum_"))
    assert inner2 is not inner1
    inner2.compute_root().split("x", "xo", "xi", 2).parallel("xo")  # refused when shared with build 1
    img = np.ones((3, 4), np.float32)
    np.testing.assert_array_equal(out2.compile()(img=img), out1.compile()(img=img))
