"""Loop partitioning of vectorized tail guards: a steady state without the guard, the rest with it;
results and memory safety for every extent, and guards it must leave alone."""

from __future__ import annotations

import numpy as np
import pytest

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.passes.partition import partition_vector_tails
from ragsched.codegen.passes.vectorize import vectorize_loops

from .helpers import Compiled, c64, guarded, load, split_loop, v64

F32, I32, I64 = T.float32, T.int32, T.int64
VEC = ir.ForKind.VECTORIZED
rng = np.random.default_rng(8)


def _guards_outside_loops(s: ir.Stmt) -> int:
    """IfThenElse statements with a vector condition, per top-level loop of ``s``."""
    return sum(isinstance(t, ir.IfThenElse) and t.cond.dtype.lanes > 1 for t in ir.walk_stmts(s))


def _tail_loop(n_expr, body_of, width=8, int32_guard=False):
    """for x.o in [0, ceil(n / width)): vectorized x.i: if x < n: body_of(x)."""
    o, i = v64("x.o"), v64("x.i")
    x = E.Add(E.Mul(o, c64(width)), i)
    cond = E.LT(E.Cast(x, I32), E.Cast(n_expr, I32)) if int32_guard else E.LT(x, n_expr)
    inner = ir.For("x.i", c64(0), c64(width), VEC, ir.IfThenElse(cond, body_of(x)))
    return ir.For("x.o", c64(0), E.FloorDiv(E.Add(n_expr, c64(width - 1)), c64(width)), ir.ForKind.SERIAL, inner)


@pytest.mark.parametrize("int32_guard", [False, True])
def test_steady_state_has_no_guard_and_every_extent_works(int32_guard):
    body = _tail_loop(v64("n"), lambda x: ir.Store("out", x, E.add(load("a", x, F32), E.const(1.0, F32))),
                      int32_guard=int32_guard)
    out = partition_vector_tails(vectorize_loops(body))
    loops = [t for t in ir.walk_stmts(out) if isinstance(t, ir.For)]
    assert len(loops) == 2 and _guards_outside_loops(loops[0]) == 0 and _guards_outside_loops(loops[1]) == 1
    k = Compiled(body, {"a": F32, "out": F32}, {"n": I64})
    for n in (0, 1, 7, 8, 9, 16, 21):
        a = guarded(rng.random(n, dtype=np.float32))
        o = guarded(np.zeros(n, np.float32))
        assert k(a=a, out=o, n=n) == 0
        np.testing.assert_array_equal(o, a + np.float32(1))


def test_two_dimensional_guard_keeps_the_other_condition():
    """if x < W and y < H: the x.o loop's steady state still tests y < H."""
    H, W = 5, 19
    y = v64("y")

    def body_of(x):
        return ir.Store("out", E.Add(E.Mul(y, c64(W)), x), E.Cast(E.Add(E.Mul(y, c64(100)), x), F32))

    loop = _tail_loop(c64(W), body_of)
    inner = loop.body
    guard = inner.body
    guard = ir.IfThenElse(E.And(guard.cond, E.LT(y, v64("h"))), guard.then)
    loop = ir.For(loop.var, loop.min, loop.extent, loop.kind, ir.For(inner.var, inner.min, inner.extent, VEC, guard))
    body = ir.For("y", c64(0), c64(H + 2), ir.ForKind.SERIAL, loop)
    k = Compiled(body, {"out": F32}, {"h": I64})
    assert sum(isinstance(t, ir.For) for t in ir.walk_stmts(k.body)) == 3
    out = np.zeros((H + 2, W), np.float32)
    assert k(out=out, h=H) == 0
    want = (np.arange(H + 2)[:, None] * 100 + np.arange(W)[None, :]).astype(np.float32)
    want[H:] = 0
    np.testing.assert_array_equal(out, want)


def test_guards_it_leaves_alone():
    n = 13
    # a bound computed inside the loop, and a guard true on a suffix of the lanes
    inside = _tail_loop(c64(n), lambda x: ir.Store("out", x, load("a", x, F32)))
    inner = inside.body
    bound = ir.LetStmt("m", E.Add(v64("x.o"), c64(n)), ir.IfThenElse(
        E.LT(E.Add(E.Mul(v64("x.o"), c64(8)), v64("x.i")), E.Sub(v64("m"), v64("x.o"))), inner.body.then))
    inside = ir.For(inside.var, inside.min, inside.extent, inside.kind, ir.For(inner.var, inner.min, inner.extent,
                                                                               VEC, bound))
    suffix = split_loop(16, "z", 8, VEC, lambda x: ir.IfThenElse(
        E.LT(c64(4), x), ir.Store("out2", x, load("a", x, F32))), guard=False)
    for body in (inside, suffix):
        out = partition_vector_tails(vectorize_loops(body))
        assert sum(isinstance(t, ir.For) for t in ir.walk_stmts(out)) == 1
    k = Compiled(ir.block(inside, suffix), {"a": F32, "out": F32, "out2": F32})
    a = rng.random(16, dtype=np.float32)
    o, o2 = np.zeros(n, np.float32), np.zeros(16, np.float32)
    assert k(a=guarded(a), out=o, out2=o2) == 0
    np.testing.assert_array_equal(o, a[:n])
    np.testing.assert_array_equal(o2, np.where(np.arange(16) > 4, a, 0))


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 8, 19])
def test_unrolled_copies_of_one_guard_are_partitioned_one_by_one(n):
    """for r.o: (let r = 2 r.o + 0: if r < n: acc += a[r]); (let r = 2 r.o + 1: if r < n: ...): both
    copies spell the guard alike, but only the steady state of both may drop it."""
    ro = v64("r.o")

    def copy(k):
        r = v64("r")
        add = ir.Store("acc", c64(0), E.add(load("acc", c64(0), F32), load("a", r, F32)))
        return ir.LetStmt("r", E.Add(E.Mul(ro, c64(2)), c64(k)), ir.IfThenElse(E.LT(r, v64("n")), add))

    loop = ir.For("r.o", c64(0), E.FloorDiv(E.Add(v64("n"), c64(1)), c64(2)), ir.ForKind.SERIAL,
                  ir.block(copy(0), copy(1)))
    out = partition_vector_tails(loop)
    assert "steady" in str(out)
    k = Compiled(out, {"a": F32, "acc": F32}, {"n": I64})
    a = rng.random(max(n, 1), dtype=np.float32)
    acc = np.zeros(1, np.float32)
    assert k(a=a, acc=acc, n=n) == 0
    np.testing.assert_allclose(acc[0], a[:n].sum(dtype=np.float32), rtol=1e-5)


@pytest.mark.parametrize("n", [0, 1, 5, 7, 8, 9, 23, 24])
def test_the_strictest_copy_of_an_unrolled_guard_drops_them_all(n):
    """for r.o: (let r = 8 r.o + k: if r < n: out[r] = a[r] + k) for k in 0..7, the copies in an order
    that puts the strictest (k = 7) neither first nor last: one steady loop without a guard, one guarded
    rest, not a full copy of the body per guard (random harris schedules compiled for 30 s so)."""
    ro, r = v64("r.o"), v64("r")

    def copy(k):
        store = ir.Store("out", r, E.add(load("a", r, F32), E.const(float(k), F32)))
        return ir.LetStmt("r", E.Add(E.Mul(ro, c64(8)), c64(k)), ir.IfThenElse(E.LT(r, v64("n")), store))

    order = (3, 0, 7, 1, 6, 2, 5, 4)
    loop = ir.For("r.o", c64(0), E.FloorDiv(E.Add(v64("n"), c64(7)), c64(8)), ir.ForKind.SERIAL,
                  ir.block(*(copy(k) for k in order)))
    out = partition_vector_tails(loop)
    loops = [t for t in ir.walk_stmts(out) if isinstance(t, ir.For)]
    assert len(loops) == 2
    assert not any(isinstance(t, ir.IfThenElse) for t in ir.walk_stmts(loops[0]))
    k = Compiled(out, {"a": F32, "out": F32}, {"n": I64}, passes=False)
    a = guarded(rng.random(n, dtype=np.float32))
    o = guarded(np.zeros(n, np.float32))
    assert k(a=a, out=o, n=n) == 0
    np.testing.assert_array_equal(o, a + (np.arange(n) % 8).astype(np.float32))
