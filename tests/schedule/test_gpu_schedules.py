"""GPU schedule primitives as schedule data: gpu_blocks, gpu_threads, gpu_tile, gpu_lanes and store_in are
records checked when written (blocks outside threads, pure loops only, at most three of each; lanes an
update's innermost RVar), survive JSON and Python, and a target without GPU loops or shared memory (every
CPU) refuses them by name before any code is made. tests/cuda runs them."""

from __future__ import annotations

import pytest

import ragsched as rs


def _funcs():
    x, y = rs.Var("x"), rs.Var("y")
    W = rs.Size("W")
    a = rs.Input("a", rs.float32, [rs.Size("H"), W])
    g = rs.Func("g")
    g[y, x] = a[y, x] * 2
    g[y, x] += a[y, rs.RDom(0, W, name="r")]
    h = rs.Func("h")
    h[y, x] = g[y, x] + 1
    return g, h


def _kinds(f, stage=0):
    return [(d.name, d.kind.value) for d in f.stage_plan(stage).dims]


def test_gpu_tile_maps_the_outer_loops_to_blocks_and_the_inner_ones_to_threads():
    g, h = _funcs()
    h.gpu_tile("y", "x", "yo", "xo", "yi", "xi", 16, 16)
    assert _kinds(h) == [("yo", "gpu_block"), ("xo", "gpu_block"), ("yi", "gpu_thread"), ("xi", "gpu_thread")]
    g.gpu_tile("x", "xo", "xi", 64)
    assert _kinds(g) == [("y", "for"), ("xo", "gpu_block"), ("xi", "gpu_thread")]
    g.store_in(rs.MemoryType.Shared)
    g.update(0).gpu_blocks("y", "x").gpu_lanes("r.0")
    assert _kinds(g, 1) == [("y", "gpu_block"), ("x", "gpu_block"), ("r.0", "gpu_lane")]
    sched = rs.Pipeline([h]).schedule()
    assert rs.Schedule.from_json(sched.to_json()) == sched
    namespace: dict = {}
    exec(sched.to_python(), namespace)
    g2, h2 = _funcs()
    namespace["apply_schedule"]({"g": g2, "h": h2})
    assert rs.Pipeline([h2]).schedule() == sched


def test_gpu_loops_that_cannot_be_a_grid_are_refused_naming_the_func():
    g, h = _funcs()
    with pytest.raises(ValueError, match="Func h: the block loops .x. must all be outside the thread loops .y."):
        h.gpu_threads("y").gpu_blocks("x")
    g2, _ = _funcs()
    with pytest.raises(ValueError, match="Func g: gpu_blocks takes one to three distinct loops"):
        g2.gpu_blocks("x", "x")
    with pytest.raises(ValueError, match="no loop of that name"):
        g2.gpu_threads("z")
    r = rs.RDom(0, 8, name="r")
    x = rs.Var("x")
    s = rs.Func("s")
    s[x] = 0.0
    s[x] += rs.cast(rs.float32, x + r)
    with pytest.raises(ValueError, match="Func s .update 0.: loop 'r.0' runs over an RDom"):
        s.update(0).gpu_threads(r)
    with pytest.raises(ValueError, match="store_in.. takes one of global, shared, register"):
        g2.store_in("texture")


def test_a_cpu_target_refuses_gpu_loops_and_shared_memory_before_making_code():
    g, h = _funcs()
    h.gpu_tile("y", "x", "yo", "xo", "yi", "xi", 8, 8)
    with pytest.raises(ValueError, match=r"loop h\.s0\.yo is a gpu_block loop, which target cpu:.* does not run"):
        h.compile()
    g2, h2 = _funcs()
    g2.compute_root().store_in(rs.MemoryType.Shared)
    with pytest.raises(ValueError, match="Func g: store_in.'shared'.: target cpu:.* keeps buffers in global"):
        h2.compile()
