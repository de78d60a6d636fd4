"""A sum blocked over its reduction (k split in blocks outside a register tile's columns): the tile's
accumulators are updated in place at indices the innermost loop does not change, and
``passes/register_accumulators`` moves them into a buffer of their own for that loop (read before, written
back after, addressed by constants). Checked against the NumPy reference over sizes, block sizes, tiles
and types (blocks that do not divide the reduction, an empty reduction), and on the loop IR: what it
must leave alone (indices it cannot tell apart, an Input's elements, an index that the loop changes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.lower import lower
from ragsched.codegen.passes.register_accumulators import register_accumulators
from ragsched.reference import run

from .helpers import c64, v64


def _product(dtype):
    """C[i, j] = 1 + sum over k of A[i, k] * B[k, j]."""
    M, N, K = rs.Size("M"), rs.Size("N"), rs.Size("K")
    i, j = rs.vars("i j")
    A, B = rs.Input("A", dtype, [M, K]), rs.Input("B", dtype, [K, N])
    k = rs.RDom(0, K, name="k")
    total = rs.Func("total", dtype=dtype)
    total[i, j] = rs.cast(dtype, 1)
    total[i, j] += A[i, k] * B[k, j]
    C = rs.Func("C", shape=[M, N])
    C[i, j] = total[i, j]
    return C, total


def _k_blocked(C, total, rows: int, width: int, block: int, cols: int):
    """C in blocks of ``rows`` x ``cols``; per block, the sum with k in blocks of ``block`` outermost,
    then tiles of ``width`` columns, k within the block, the rows unrolled (guarded where the block has
    fewer), the columns vectorized."""
    C.split("i", "io", "ii", rows, tail="split").split("j", "jo", "ji", cols, tail="split") \
        .reorder("io", "jo", "ii", "ji")
    total.compute_at(C, "jo")
    total.update().split("k.0", "ko", "ki", block, tail="split").split("j", "jt", "jv", width, tail="split") \
        .split("i", "it", "iu", rows, tail="guard").reorder("it", "ko", "jt", "ki", "iu", "jv").vectorize("jv") \
        .unroll("iu")


def _pipeline(dtype, rows=4, width=8, block=16, cols=32):
    C, total = _product(dtype)
    _k_blocked(C, total, rows, width, block, cols)
    return rs.Pipeline([C])


@settings(deadline=None, max_examples=25)
@given(m=st.integers(1, 13), n=st.integers(1, 70), k=st.integers(0, 70), rows=st.sampled_from([1, 2, 3, 6]),
       width=st.sampled_from([4, 8, 16]), block=st.sampled_from([1, 5, 16, 64]),
       dtype=st.sampled_from(["float32", "float64", "int32"]), seed=st.integers(0, 2**16))
def test_k_blocked_sums_compute_the_reference(m, n, k, rows, width, block, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        A, B = rng.integers(-9, 9, (m, k)).astype(dtype), rng.integers(-9, 9, (k, n)).astype(dtype)
    else:
        A, B = rng.uniform(-1, 1, (m, k)).astype(dtype), rng.uniform(-1, 1, (k, n)).astype(dtype)
    C, _ = _product(getattr(rs, dtype))
    want = run(C, A=A, B=B)
    got = _pipeline(getattr(rs, dtype), rows, width, block).compile()(A=A, B=B)
    if dtype == "int32":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5)


def test_the_tiles_accumulators_move_out_of_the_stored_sum():
    """The innermost loop of whole tiles (k within a block, four rows unguarded) reads and writes only the
    new buffer, at constant indices, one vector per unrolled row; the stored sum is read before it and
    written after it. (Tiles of the rows' guarded rest keep theirs: an element past the region's end
    is not read before the loop; so do those of C's last block of columns, where the rows of the sum
    lie a symbolic extent apart, which the pass does not compare with a vector's width.)"""
    pipe = _pipeline(rs.float32, rows=4, width=8)
    body = register_accumulators(lower(pipe.program(), pipe.schedule()).body)
    loops = [s for s in ir.walk_stmts(body) if isinstance(s, ir.For) and s.var.endswith(".ki")
             and len([t for t in ir.walk_stmts(s.body) if isinstance(t, ir.Store)]) == 4
             and not any(isinstance(t, ir.IfThenElse) for t in ir.walk_stmts(s.body))]
    assert loops
    for loop in loops[:1]:  # the first: whole blocks of C
        stores = [s for s in ir.walk_stmts(loop.body) if isinstance(s, ir.Store)]
        assert stores and all(s.buffer.startswith("total.acc") for s in stores), loop.var
        assert all(isinstance(s.index, (E.Const, E.Ramp)) and isinstance(getattr(s.index, "base", s.index), E.Const)
                   for s in stores)
        reads = {n.buffer for t in ir.walk_stmts(loop.body) for e in ir.exprs_of(t) for n in E.walk(e)
                 if isinstance(n, E.Load)}
        assert "total" not in reads
    moved = [s for s in ir.walk_stmts(body) if isinstance(s, ir.Allocate) and s.buffer.startswith("total.acc")]
    assert moved and all(isinstance(s.size, E.Const) for s in moved)
    assert max(s.size.value for s in moved) == 4 * 8  # four rows of one vector each


def _loop(stmts, var="k") -> ir.Stmt:
    return ir.For(var, c64(0), c64(10), ir.ForKind.SERIAL, ir.block(*stmts))


def _accumulate(buffer, index, var="k"):
    t = T.float32.with_lanes(index.dtype.lanes)
    return ir.Store(buffer, index, E.Add(E.Load(buffer, index, t), E.Load("x", E.Ramp(v64(var), c64(1), t.lanes)
                                                                           if t.lanes > 1 else v64(var), t)))


def _ramp(base, lanes=8):
    return E.Ramp(base, c64(1), lanes)


def _allocated(s, name="acc"):
    return ir.Allocate(name, T.float32, c64(256), s)


@pytest.mark.parametrize("case, stmts, allocated, moved", [
    ("rows a vector apart", [_accumulate("acc", _ramp(v64("t"))), _accumulate("acc", _ramp(E.add(v64("t"), c64(8))))],
     True, True),
    ("rows a let apart", [_accumulate("acc", _ramp(v64("t"))), _accumulate("acc", _ramp(E.add(v64("t"), v64("s"))))],
     True, True),  # s is bound to 64 around the loop
    ("may overlap", [_accumulate("acc", _ramp(v64("t"))), _accumulate("acc", _ramp(E.add(v64("t"), c64(3))))],
     True, False),
    ("symbolic distance", [_accumulate("acc", _ramp(v64("t"))), _accumulate("acc", _ramp(v64("u")))], True, False),
    ("an input's elements", [_accumulate("acc", _ramp(v64("t"))), _accumulate("acc", _ramp(E.add(v64("t"), c64(8))))],
     False, False),
    ("the loop moves the index", [_accumulate("acc", _ramp(E.add(v64("t"), v64("k")))),
                                  _accumulate("acc", _ramp(E.add(v64("t"), c64(64))))], True, False),
    ("one accumulator", [_accumulate("acc", _ramp(v64("t")))], True, False),  # LLVM keeps that one itself
])
def test_only_disjoint_loop_invariant_accumulators_of_own_buffers_move(case, stmts, allocated, moved):
    loop = _loop(stmts)
    s = ir.LetStmt("s", c64(64), _allocated(loop) if allocated else loop)
    out = register_accumulators(s)
    fresh = [t for t in ir.walk_stmts(out) if isinstance(t, ir.Allocate) and t.buffer.startswith("acc.acc")]
    assert bool(fresh) == moved, case
    if moved:  # the copies run only when the loop does
        (guard,) = [t for t in ir.walk_stmts(out) if isinstance(t, ir.IfThenElse)]
        assert any(isinstance(t, ir.For) for t in ir.walk_stmts(guard.then))


def _masked_tail_pipeline(dtype, width: int):
    """The sum per strip of four rows, its columns in vectors of ``width`` with a guarded tail, k innermost:
    the tail's loop over k runs under a condition on the lanes (masked loads and stores)."""
    C, total = _product(dtype)
    C.split("i", "io", "ii", 4, tail="split").reorder("io", "ii", "j")
    total.compute_at(C, "io")
    total.update().split("j", "jt", "jv", width, tail="guard").reorder("i", "jt", "jv", "k.0").vectorize("jv")
    return rs.Pipeline([C])


@settings(deadline=None, max_examples=25)
@given(m=st.integers(1, 9), n=st.integers(1, 40), k=st.integers(0, 20), width=st.sampled_from([4, 8, 16]),
       dtype=st.sampled_from(["float32", "float64", "int32"]), seed=st.integers(0, 2**16))
def test_sums_of_masked_vector_tails_compute_the_reference(m, n, k, width, dtype, seed):
    rng = np.random.default_rng(seed)
    A, B = rng.integers(-9, 9, (m, k)).astype(dtype), rng.integers(-9, 9, (k, n)).astype(dtype)
    C, _ = _product(getattr(rs, dtype))
    got = _masked_tail_pipeline(getattr(rs, dtype), width).compile()(A=A, B=B)
    np.testing.assert_array_equal(got, run(C, A=A, B=B))  # small integers: exact in every type


def test_a_masked_tails_single_accumulator_moves_with_its_copies_under_the_mask():
    """The vector tail's loop over k accumulates into one vector of the stored sum under a lane condition:
    it runs on a buffer of its own (which the backend reads and writes unmasked), read before the loop
    and written back after it, both inside the condition; the whole vectors' loop keeps its one
    accumulator (LLVM keeps that in a register itself)."""
    pipe = _masked_tail_pipeline(rs.float32, 8)
    body = register_accumulators(lower(pipe.program(), pipe.schedule()).body)
    masked = [s for s in ir.walk_stmts(body) if isinstance(s, ir.IfThenElse) and s.cond.dtype.lanes > 1]
    assert masked
    for guard in masked:
        loops = [t for t in ir.walk_stmts(guard.then) if isinstance(t, ir.For) and t.var.endswith("k.0")]
        assert loops
        for loop in loops:
            stores = [t for t in ir.walk_stmts(loop.body) if isinstance(t, ir.Store)]
            assert stores and all(t.buffer.startswith("total.acc") for t in stores)
        copies = [t for t in ir.walk_stmts(guard.then) if isinstance(t, ir.Store) and t.buffer == "total"]
        assert len(copies) == len(loops)  # written back, under the mask
    whole = [s for s in ir.walk_stmts(body) if isinstance(s, ir.For) and s.var.endswith("k.0")
             and not any(s is t for g in masked for t in ir.walk_stmts(g.then))]
    assert whole and all(t.buffer == "total" for s in whole for t in ir.walk_stmts(s.body) if isinstance(t, ir.Store))


def _guarded(cond, stmts, var="k"):
    return ir.For(var, c64(0), c64(10), ir.ForKind.SERIAL, ir.IfThenElse(cond, ir.block(*stmts)))


_LANES_CONDITION = E.LE(E.Ramp(E.Var("t", T.int32), E.Const(1, T.int32), 8), E.Broadcast(E.Var("n", T.int32), 8))


@pytest.mark.parametrize("case, loop, moved", [
    ("one accumulator under a lane condition",
     ir.IfThenElse(_LANES_CONDITION, _loop([_accumulate("acc", _ramp(v64("t")))])), True),
    ("one accumulator under a scalar condition", ir.IfThenElse(E.LT(v64("t"), v64("u")),
                                                               _loop([_accumulate("acc", _ramp(v64("t")))])), False),
    ("the body under a condition the loop keeps", _guarded(_LANES_CONDITION, [_accumulate("acc", _ramp(v64("t")))]),
     True),
    ("the body under a condition the loop changes", _guarded(E.LT(v64("t"), v64("k")),
                                                             [_accumulate("acc", _ramp(v64("t")))]), False),
])
def test_accumulators_under_a_mask_move_one_at_a_time(case, loop, moved):
    out = register_accumulators(_allocated(loop))
    fresh = [t for t in ir.walk_stmts(out) if isinstance(t, ir.Allocate) and t.buffer.startswith("acc.acc")]
    assert bool(fresh) == moved, case
    if moved:  # the copies in and out of the new buffer run under the condition the accumulator had
        (new,) = fresh
        copies = [t for t in ir.walk_stmts(new.body) if isinstance(t, ir.Store) and t.buffer == "acc"]
        assert len(copies) == 1
        conds = [t for t in ir.walk_stmts(out) if isinstance(t, ir.IfThenElse)
                 and any(c is copies[0] for c in ir.walk_stmts(t.then))]
        assert any(c.cond == _LANES_CONDITION for c in conds)
