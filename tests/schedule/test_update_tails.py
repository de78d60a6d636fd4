"""Tails of an update's splits: a shifted or rounded-up tile would apply the update twice to some points
or to points outside the region, so updates split with 'guard' or 'split' ('auto' means 'guard' there),
and the split loops of an update compute the reference (also fused, which a rounded-up tail used to make
bounds inference refuse). A split with tail='split' keeps its inner loops inside its outer one."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched import reference


def _counter():
    x = rs.Var("x")
    a = rs.Input("a", rs.int32, 1)
    f = rs.Func("f", shape=[a.shape[0]])
    f[x] = a[x]
    f[x] = f[x] + 1
    return f


@pytest.mark.parametrize("tail", ["shift", "pad"])
def test_an_update_refuses_tails_that_revisit_or_overrun(tail):
    f = _counter()
    with pytest.raises(ValueError, match=f"Func f: update 0: split of 'x' with tail='{tail}'.*'guard' or 'split'"):
        f.update(0).split("x", "xo", "xi", 3, tail=tail)
    saved = rs.Schedule.from_json(
        '{"ragsched_schedule": 1, "directives": [{"op": "split", "func": "f", "stage": 1, "var": "x", '
        f'"outer": "xo", "inner": "xi", "factor": 3, "tail": "{tail}"}}]}}')
    with pytest.raises(ValueError, match="update 0: split of 'x'"):  # a saved schedule is checked alike
        _counter().compile(schedule=saved)


@pytest.mark.parametrize("tail", ["auto", "guard", "split"])
def test_an_update_split_by_a_factor_that_does_not_divide_applies_once(tail):
    f = _counter()
    f.update(0).split("x", "xo", "xi", 3, tail=tail)
    np.testing.assert_array_equal(f.compile()(a=np.zeros(7, np.int32)), np.ones(7, np.int32))


def _accumulated(out: bool):
    y, x = rs.vars("y x")
    a = rs.Input("a", rs.float32, 2)
    g = rs.Func("g", shape=[a.shape[0], a.shape[1]] if out else None)
    g[y, x] = a[y, x]
    g[y, x] = g[y, x] + 1.0
    if out:
        return g, g
    f = rs.Func("f", shape=[a.shape[0], a.shape[1]])
    f[y, x] = g[y, x] * 2.0
    g.compute_root()
    return g, f


@pytest.mark.parametrize("out", [False, True])
@pytest.mark.parametrize("schedule", [
    lambda s: s.fuse("y", "x", "yx").split("yx", "yxo", "yxi", 8),
    lambda s: s.split("x", "xo", "xi", 4).fuse("y", "xo", "yxo").vectorize("xi"),
    lambda s: s.fuse("y", "x", "yx").vectorize("yx", 8),
    lambda s: s.fuse("y", "x", "yx").parallel("yx", 4),
])
def test_an_updates_pure_loops_fused_and_split_compute_the_reference(out, schedule):
    g, f = _accumulated(out)
    schedule(g.update(0))
    img = np.random.default_rng(0).random((5, 7), dtype=np.float32)
    want = reference.run([_accumulated(out)[1]], a=img)[0]
    np.testing.assert_allclose(f.compile()(a=img), want, rtol=1e-6)


def test_the_inner_loop_of_a_split_tail_split_stays_inside():
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, 1)
    f = rs.Func("f", shape=[a.shape[0]])
    f[x] = a[x] * 2.0
    f.split("x", "xo", "xi", 8, tail="split")
    with pytest.raises(ValueError, match="puts 'xi' outside 'xo'.*tail='split'.*tail='guard' to reorder"):
        f.reorder("xi", "xo")
    f.split("xi", "xio", "xii", 2)
    with pytest.raises(ValueError, match="puts 'xii' outside 'xo'"):
        f.reorder("xii", "xo", "xio")
    g = rs.Func("g", shape=[a.shape[0]])
    g[x] = a[x] * 2.0
    g.split("x", "xo", "xi", 8, tail="guard").reorder("xi", "xo")  # a guarded tail may be reordered
    np.testing.assert_array_equal(g.compile()(a=np.arange(20, dtype=np.float32)), np.arange(20) * 2.0)


def test_marking_a_marked_loop_says_what_it_is():
    f = _counter()
    f.vectorize("x")
    with pytest.raises(ValueError, match="loop 'x' is already vectorized; it cannot also be run in parallel"):
        f.parallel("x")


def test_the_whole_tiles_of_a_split_tail_split_are_not_fused():
    """fuse(x, xi) where xi runs the whole tiles of a tail='split' split of x's inner part: the rest's loop
    had no place in the fused loop and the update was applied twice to some points ([1 1 2 1 2 1 2]; found
    by the long random-schedule run on batched_gemm). Refused, naming the loop."""
    f = _counter()
    u = f.update(0)
    u.split("x", "x", "xi", 2).split("xi", "xi", "xii", 3, tail="split")
    with pytest.raises(ValueError, match="loop 'xi' runs the whole tiles of a split with tail='split'.*cannot be "
                                         "fused"):
        u.fuse("x", "xi", "xf")
    np.testing.assert_array_equal(f.compile()(a=np.zeros(7, np.int32)), np.ones(7, np.int32))
