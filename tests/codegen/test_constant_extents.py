"""The constant-extents pass: lets and loop extents made constant by the lets and loops around them."""

from __future__ import annotations

import numpy as np

import ragsched as rs
from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.passes.constant_extents import constant_loop_extents

from .helpers import c64, v64

I64 = T.int64


def _lets(s: ir.Stmt) -> dict:
    return {x.name: x.value for x in ir.walk_stmts(s) if isinstance(x, ir.LetStmt)}


def test_a_tile_of_a_strip_is_constant_within_the_loops_ranges():
    """A tile of 16 columns in a strip of 4 tiles (the strip split with tail="guard") spans
    16 * min(4 s + t, 31) - 64 s - 16 t + 16 columns: 16 for every s < 8, t < 4, not for s < 9."""
    width = E.Add(E.Sub(E.Mul(c64(16), E.Min(E.Add(E.Mul(c64(4), v64("s")), v64("t")), c64(31))),
                        E.Add(E.Mul(c64(64), v64("s")), E.Mul(c64(16), v64("t")))), c64(16))
    store = ir.Store("out", v64("w"), E.Cast(v64("w"), T.float32))

    def nest(strips):
        inner = ir.For("t", c64(0), c64(4), ir.ForKind.SERIAL, ir.LetStmt("w", width, store))
        return ir.For("s", c64(0), c64(strips), ir.ForKind.SERIAL, inner)

    assert _lets(constant_loop_extents(nest(8)))["w"] == E.const(16, I64)
    assert not isinstance(_lets(constant_loop_extents(nest(9)))["w"], E.Const)  # s = 8 clamps the tile


def test_a_ragged_pipelines_constant_output_dims_are_constants_in_the_code():
    """An output of a ragged pipeline is checked against its declared shape, so a dimension declared 64
    is 64 in the generated code (the region of a Func computed inside it too); a dense pipeline's output
    extents stay arguments: it computes whatever region out= spans."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    X = rs.Input("X", rs.float32, [B, rs.Ragged("L", lens), 64])
    b, i, d = rs.vars("b i d")
    g = rs.Func("g", dtype=rs.float32)
    g[b, i, d] = X[b, i, d] * 2.0
    out = rs.Func("out", shape=[B, rs.Ragged("L", lens), 64])
    out[b, i, d] = g[b, i, d] + 1.0
    g.compute_at(out, "i")
    text = rs.Pipeline([out]).lowered()
    assert "out.extent.2" not in text and "g.extent.2 = 64" in text
    x = rs.RaggedArray.from_list([np.ones((n, 64), np.float32) for n in (3, 0, 5)], ragged_axes=[0])
    got = rs.Pipeline([out]).compile()(X=x, lens=np.array([3, 0, 5], np.int32))
    assert all(np.array_equal(a, np.full((len(a), 64), 3, np.float32)) for a in got.to_list())

    N = rs.Size("N")
    A = rs.Input("A", rs.float32, [N, 8])
    y, x2 = rs.vars("y x")
    f = rs.Func("f", shape=[N, 4])
    f[y, x2] = A[y, x2] * 2.0
    assert "f.extent.1" in rs.Pipeline([f]).lowered()
    wider = rs.Pipeline([f]).compile()(A=np.ones((3, 8), np.float32), out=np.zeros((3, 6), np.float32))
    np.testing.assert_array_equal(wider, np.full((3, 6), 2, np.float32))


def test_a_vector_loop_at_most_c_long_runs_c_lanes_where_it_is_c_long():
    """A padded tile of a ragged row spans 16 * ((min(n - m, 15) + 15) // 16) columns: 16 wherever the
    row has one, whatever n and m are (bounds, not a min(16, x) form). The vectorized loop is versioned:
    16 lanes where the extent is 16, a serial loop elsewhere; an extent of n % 16 (at most 15) is not."""
    n = E.Cast(E.Load("lens", v64("b"), T.int32), I64)
    padded = E.Mul(c64(16), E.FloorDiv(E.Add(E.Min(E.Sub(n, v64("m")), c64(15)), c64(15)), c64(16)))
    store = ir.Store("out", v64("j"), E.Cast(v64("j"), T.float32))
    for extent, versioned in ((padded, True), (E.Mod(n, c64(16)), False)):
        out = constant_loop_extents(ir.For("j", c64(0), extent, ir.ForKind.VECTORIZED, store))
        if versioned:
            assert isinstance(out, ir.IfThenElse) and out.then.extent == c64(16)
            assert out.then.kind is ir.ForKind.VECTORIZED and out.otherwise.kind is ir.ForKind.SERIAL
        else:
            assert isinstance(out, ir.For) and out.kind is ir.ForKind.SERIAL


def test_a_guard_the_lets_and_loop_ranges_decide_is_replaced_by_its_branch():
    """A tile's guard ``16 t + d <= m - 1`` with ``m`` a let bound to 64 and t < 4, d < 16: always true,
    so the guarded store stays alone; with t < 5 it is kept (t = 4 is past the end); a guard the ranges
    make false leaves its else branch."""
    store = ir.Store("out", v64("x"), E.Cast(v64("x"), T.float32))
    other = ir.Store("out", c64(0), E.const(0.0, T.float32))

    def nest(tiles, cond):
        body = ir.LetStmt("x", E.Add(E.Mul(c64(16), v64("t")), v64("d")), ir.IfThenElse(cond, store, other))
        inner = ir.For("d", c64(0), c64(16), ir.ForKind.SERIAL, body)
        return ir.LetStmt("m", c64(64), ir.For("t", c64(0), c64(tiles), ir.ForKind.SERIAL, inner))

    def ifs(s):
        return [x for x in ir.walk_stmts(s) if isinstance(x, ir.IfThenElse)]

    inside = E.LE(E.Add(E.Mul(c64(16), v64("t")), v64("d")), E.Sub(v64("m"), c64(1)))
    kept = constant_loop_extents(nest(4, inside))
    assert not ifs(kept) and store in list(ir.walk_stmts(kept)) and other not in list(ir.walk_stmts(kept))
    assert len(ifs(constant_loop_extents(nest(5, inside)))) == 1
    past = E.LT(E.Add(E.Mul(c64(16), v64("t")), v64("d")), E.const(-1, I64))
    dropped = constant_loop_extents(nest(4, past))
    assert not ifs(dropped) and other in list(ir.walk_stmts(dropped)) and store not in list(ir.walk_stmts(dropped))


def test_a_split_of_a_bound_update_dim_has_no_vector_guard_and_computes_the_reference():
    """An update split by tail="auto" (a guard) along a dim bound to 64, its region known only through
    lets: every guard of its vector tiles is true, so none is left (a masked tile each step, attention's
    P V 1.18x slower), and the result is the reference's."""
    x, y = rs.Var("x"), rs.Var("y")
    H = rs.Size("H")
    a = rs.Input("a", rs.float32, [H, 64])
    k = rs.RDom(0, 3, name="k")
    f = rs.Func("f", dtype=rs.float32)
    f[y, x] = 0.0
    f[y, x] += a[rs.min(y + k, H - 1), x]
    g = rs.Func("g", shape=[H, 64])
    g[y, x] = f[y, x] * 2.0
    g.split(y, "yo", "yi", 4).parallel("yo")
    f.compute_at(g, "yo").bound(x, 0, 64)
    f.update().split(x, "xt", "xd", 16).split("xd", "xo", "xi", 8).reorder("k.0", y, "xt", "xo", "xi") \
        .vectorize("xi").unroll("xo")
    guards = [line for line in rs.Pipeline([g]).lowered().splitlines() if line.strip().startswith("if ")]
    assert not [line for line in guards if "ramp" in line], guards
    image = np.random.default_rng(0).random((13, 64), dtype=np.float32)
    want = sum(image[np.minimum(np.arange(13) + k, 12)] for k in range(3)) * 2
    np.testing.assert_allclose(g.compile()(a=image), want, rtol=1e-6)


def test_storage_bounded_by_a_tile_is_constant():
    """Storage of ``min(n, 16 t + m + 15) - 16 t - m + 1`` elements (a tile clipped at the image's edge) is
    16 elements, a constant the backend keeps on the stack; one that nothing bounds keeps its size."""
    m = v64("m")
    store = ir.Store("out", v64("x"), E.const(1.0, T.float32))
    start = E.Add(E.Mul(c64(16), v64("t")), m)
    clipped = E.Add(E.Sub(E.Min(v64("n"), E.Add(start, c64(15))), start), c64(1))
    tile = ir.LetStmt("w", clipped, ir.Allocate("f", T.float32, v64("w"), store))
    assert constant_loop_extents(tile).body.size == c64(16)
    open_ended = ir.LetStmt("w", E.Sub(v64("n"), start), ir.Allocate("f", T.float32, v64("w"), store))
    assert constant_loop_extents(open_ended).body.size == v64("w")


def test_a_guard_in_int32_lanes_of_int64_regions_is_decided():
    """A guard ``int32(m + 16) <= int32(m + 23)`` (a tile's last vector in a region the lets make 24 wide)
    is true whatever m is, which the simplifier cannot see through the casts: the store stays, unguarded
    (with m + 15, false: nothing stays; with an unrelated bound, the guard stays)."""
    i32 = T.int32
    m = v64("m")
    store = ir.Store("out", v64("x"), E.const(1.0, T.float32))
    guard = ir.IfThenElse(E.LE(E.Cast(E.Add(m, c64(16)), i32), E.Cast(v64("hi"), i32)), store)
    nest = ir.LetStmt("hi", E.Add(m, c64(23)), guard)
    assert constant_loop_extents(nest) == ir.LetStmt("hi", E.Add(m, c64(23)), store)
    too_far = ir.LetStmt("hi", E.Add(m, c64(15)), guard)
    assert constant_loop_extents(too_far).body == ir.block()
    unknown = ir.LetStmt("hi", v64("n"), guard)
    assert isinstance(constant_loop_extents(unknown).body, ir.IfThenElse)


def test_a_loop_position_read_by_a_region_below_is_resolved_when_read():
    """``p = m + t`` (a tile's row: t a loop of 4) can never be a constant, so it is simplified only when
    something below reads it; a region below whose extent ``(p + 3) - p + 1`` it makes 4 still gets 4,
    and a loop position that nothing reads is left as written."""
    from ragsched.algebra.bounds import Interval
    from ragsched.codegen.passes.constant_extents import _varies

    rng = {"t": Interval(c64(0), c64(3)), "one": Interval(c64(0), c64(0))}
    assert _varies(E.Add(v64("m"), v64("t")), rng)
    assert _varies(E.Sub(v64("m"), E.Mul(c64(8), v64("t"))), rng)
    assert not _varies(E.Add(v64("m"), v64("one")), rng)  # a loop of one iteration: its position is fixed
    assert not _varies(E.Sub(v64("t"), E.Min(v64("t"), v64("m"))), rng)  # t in two terms: may cancel
    assert not _varies(E.Add(v64("m"), E.Mul(c64(0), v64("t"))), rng)
    store = ir.Store("out", v64("x"), E.Cast(v64("x"), T.float32))
    region = ir.LetStmt("lo", v64("p"), ir.LetStmt("hi", E.Add(v64("p"), c64(3)),
                        ir.For("x", v64("lo"), E.Add(E.Sub(v64("hi"), v64("lo")), c64(1)), ir.ForKind.SERIAL, store)))
    nest = ir.For("t", c64(0), c64(4), ir.ForKind.SERIAL, ir.LetStmt("p", E.Add(v64("m"), v64("t")), region))
    out = constant_loop_extents(nest)
    (loop,) = [s for s in ir.walk_stmts(out) if isinstance(s, ir.For) and s.var == "x"]
    assert loop.extent == E.const(4, I64)
    assert _lets(out)["p"] == E.Add(v64("m"), v64("t"))
