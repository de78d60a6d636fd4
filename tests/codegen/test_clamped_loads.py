"""Loops versioned where their boundary conditions do nothing (``passes/clamped_loads.py``): a tile whose
clamped reads all lie inside the image runs a copy without the clamps; the border keeps them; clamps
that cannot be bounded stay."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.passes.clamped_loads import version_clamped_loads

I64 = T.INDEX


def _v(name: str) -> E.Var:
    return E.Var(name, I64)


def _c(v: int) -> E.Const:
    return E.const(v, I64)


def _clamped_read(base: E.Expr, lanes: int = 8) -> E.Load:
    ramp = E.Ramp(base, _c(1), lanes)
    index = E.Min(E.Max(ramp, E.Broadcast(_c(0), lanes)), E.Broadcast(E.Sub(_v("W"), _c(1)), lanes))
    return E.Load("img", index, T.float32.with_lanes(lanes))


def _clamps(s: ir.Stmt) -> int:
    return sum(isinstance(n, E.Min) for t in ir.walk_stmts(s) for e in ir.exprs_of(t) for n in E.walk(e))


def _tiles(inner_kind=ir.ForKind.SERIAL, reads=2) -> ir.For:
    """for t in [0, W / 16): for i in [0, 2): out[16 t + 8 i] = sum of img[clamp(16 t + 8 i + k - 1)]."""
    at = E.Add(E.Mul(_c(16), _v("t")), E.Mul(_c(8), _v("i")))
    value = _clamped_read(E.Sub(at, _c(1)))
    for k in range(1, reads):
        value = E.Add(value, _clamped_read(E.Add(at, _c(k - 1))))
    store = ir.Store("out", E.Ramp(at, _c(1), 8), value)
    return ir.For("t", _c(0), E.FloorDiv(_v("W"), _c(16)), ir.ForKind.SERIAL,
                  ir.For("i", _c(0), _c(2), inner_kind, store))


def test_a_tile_loop_runs_a_copy_without_clamps_where_its_reads_lie_inside():
    out = version_clamped_loads(_tiles())
    assert isinstance(out, ir.For) and isinstance(out.body, ir.IfThenElse)
    guard = out.body
    assert "t" in E.free_vars(guard.cond)
    assert _clamps(guard.then) == 0 and guard.otherwise == _tiles().body
    # the reads of tile t span [16 t - 1, 16 t + 15]: inside [0, W - 1] from t = 1 while 16 t + 16 <= W
    for t, w, inside in ((0, 64, False), (1, 64, True), (3, 64, True), (3, 63, False), (4, 64, False)):
        value = E.substitute(guard.cond, {"t": _c(t), "W": _c(w)})
        assert bool(simplify_const(value)) is inside, (t, w)


def simplify_const(e: E.Expr):
    from ragsched.algebra.simplify import simplify

    out = simplify(e)
    assert isinstance(out, E.Const), out
    return out.value


def test_clamps_that_cannot_be_bounded_stay_and_a_lone_read_is_not_worth_a_copy():
    """A read at a data-dependent column (a lookup) is not bounded by loops: the loop is left as it is (a
    test of the loaded column before the body could read what the body stores, or outside a guard); a
    body of many statements is not copied for one clamped read: the loop inside it that holds the read
    is versioned instead."""
    ramp = E.Ramp(E.Cast(E.Load("idx", _v("t"), T.int32), I64), _c(1), 8)
    index = E.Min(E.Max(ramp, E.Broadcast(_c(0), 8)), E.Broadcast(E.Sub(_v("W"), _c(1)), 8))
    lookup = ir.For("t", _c(0), _v("W"), ir.ForKind.SERIAL,
                    ir.Store("out", E.Ramp(_v("t"), _c(1), 8), E.Load("img", index, T.float32.with_lanes(8))))
    assert version_clamped_loads(lookup) == lookup
    many = ir.Block(tuple(ir.Store(f"o{k}", _v("t"), E.const(0.0, T.float32)) for k in range(40)))
    one_read = _tiles(reads=1)
    big = ir.For("t", one_read.min, one_read.extent, one_read.kind, ir.Block((one_read.body, many)))
    out = version_clamped_loads(big)
    assert isinstance(out.body, ir.Block) and out.body.stmts[1:] == many.stmts
    assert isinstance(out.body.stmts[0], ir.For) and isinstance(out.body.stmts[0].body, ir.IfThenElse)


def test_a_loop_over_whole_rows_is_not_versioned_but_the_tiles_inside_it_are():
    """The reads of a whole row always reach the border: no copy at the row loop; one per tile inside."""
    rows = ir.For("y", _c(0), _v("H"), ir.ForKind.PARALLEL, _tiles())
    out = version_clamped_loads(rows)
    assert isinstance(out, ir.For) and isinstance(out.body, ir.For)
    assert isinstance(out.body.body, ir.IfThenElse)


def _blur(radius: int, tile: int, lanes: int, tail: str):
    """A box blur of a clamped image along x, in tiles of ``tile`` columns computed per tile of the
    output, vectorized by ``lanes``."""
    H, W = rs.Size("H"), rs.Size("W")
    img = rs.Input("img", rs.float32, [H, W])
    y, x = rs.vars("y x")
    clamped = rs.clamp_edge(img)
    value = clamped[y, x] * 2.0
    for d in range(1, radius + 1):
        value = value + clamped[y, x - d] + clamped[y, x + d]
    row = rs.Func("row")
    row[y, x] = value
    out = rs.Func("out", shape=[H, W])
    out[y, x] = row[y, x] + clamped[rs.max(y - 1, 0), x]
    out.split(x, "xo", "xi", tile, tail=tail).reorder(y, "xo", "xi").vectorize("xi", lanes)
    row.compute_at(out, "xo").vectorize(x, lanes)
    return out


def _blur_reference(a: np.ndarray, radius: int) -> np.ndarray:
    H, W = a.shape
    p = np.pad(a, ((0, 0), (radius, radius)), mode="edge")
    row = 2 * a
    for d in range(1, radius + 1):
        row = row + p[:, radius - d:radius - d + W] + p[:, radius + d:radius + d + W]
    return row + a[np.maximum(np.arange(H) - 1, 0)]


@settings(max_examples=12, deadline=None)
@given(radius=st.integers(1, 3), tile=st.sampled_from([8, 16, 24]), lanes=st.sampled_from([4, 8]),
       tail=st.sampled_from(["guard", "shift", "split"]))
def test_versioned_tiles_compute_the_reference(radius, tile, lanes, tail):
    """Every width from one tile to four (a shifted tile needs a whole one): the tiles at both borders,
    whose reads reach past the image by up to the radius, and the tiles inside, one past or short of
    the border's test included; the same values as NumPy's."""
    kernel = _blur(radius, tile, lanes, tail).compile()
    rng = np.random.default_rng(tile * 10 + radius)
    for w in range(tile, 4 * tile + 2):
        for h in (1, 3):
            a = rng.random((h, w), dtype=np.float32)
            np.testing.assert_allclose(kernel(img=a), _blur_reference(a, radius), rtol=1e-5, atol=1e-6,
                                       err_msg=f"width {w}, height {h}")


def test_the_blurs_tiles_are_versioned():
    """The lowered blur has a tile without clamps (and one with, for the border)."""
    text = rs.Pipeline([_blur(2, 16, 8, "guard")]).lowered()
    assert text.count("min(max(ramp") >= 1
    lines = [line.strip() for line in text.splitlines()]
    assert any(line.startswith("if ") and "out.s0.xo" in line and "ramp" not in line for line in lines), text
