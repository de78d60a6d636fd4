"""Rows of dot products: a reduction over a vectorized RDom inside an unrolled loop over a pure Var
(``f[i, j] = op(f[i, j], a[i, r] * b[j, r])``, j unrolled, r vectorized). Each unrolled element keeps
its own vector accumulator across the outer part of r (``passes/vectorize``), a tile's versions are
unswitched, the rest of a ragged row (run serially) keeps one per element too, and the backend combines
the unrolled elements' lanes as one vector (``passes/batch_reductions``). Checked against the NumPy
reference over ops, types, widths, group sizes and ragged lengths, and against the lowered code."""

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
from ragsched.codegen.passes.batch_reductions import batch_lane_reductions
from ragsched.reference import run

OPS = {"add": lambda a, c: a + c, "min": rs.min, "max": rs.max}
DTYPES = {"float32": rs.float32, "float64": rs.float64, "int32": rs.int32}
DEPTH = 37


def _dots(op: str, dtype):
    """f[b, i, j] = op over r of x[b, i, r] * y[b, j, r], i and j < lens[b] (ragged), started from 1."""
    B, b, i, j = rs.Size("B"), *rs.vars("b i j")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    x, y = rs.Input("x", dtype, [B, L, DEPTH]), rs.Input("y", dtype, [B, L, DEPTH])
    r = rs.RDom(0, DEPTH, name="r")
    f = rs.Func("f", shape=[B, L, L], dtype=dtype)
    f[b, i, j] = rs.cast(dtype, 1)
    f[b, i, j] = OPS[op](f[b, i, j], x[b, i, r] * y[b, j, r])
    out = rs.Func("out", shape=[B, L, L])
    out[b, i, j] = f[b, i, j]
    return out, f


def _schedule(out, f, lanes: int, group: int, tail: str):
    f.compute_at(out, "b")
    f.update().split("j", "jo", "ji", group, tail="split").split("r.0", "ro", "ri", lanes, tail=tail) \
        .reorder("b", "i", "jo", "ro", "ji", "ri").vectorize("ri").unroll("ji")


def _inputs(dtype: str, lengths, seed: int) -> dict:
    rng = np.random.default_rng(seed)

    def rows(n):
        if dtype.startswith("float"):
            return rng.uniform(-2, 2, (n, DEPTH)).astype(dtype)
        return rng.integers(-20, 20, (n, DEPTH)).astype(dtype)

    return {"x": rs.RaggedArray.from_list([rows(n) for n in lengths], ragged_axes=[0]),
            "y": rs.RaggedArray.from_list([rows(n) for n in lengths], ragged_axes=[0]),
            "lens": np.array(lengths, np.int32)}


@settings(deadline=None, max_examples=30)
@given(op=st.sampled_from(sorted(OPS)), dtype=st.sampled_from(sorted(DTYPES)),
       lengths=st.lists(st.integers(0, 20), min_size=1, max_size=4), lanes=st.sampled_from([4, 8, 16]),
       group=st.sampled_from([2, 3, 4, 8, 16]), tail=st.sampled_from(["guard", "split"]),
       seed=st.integers(0, 2**16))
def test_rows_of_dot_products_compute_the_reference(op, dtype, lengths, lanes, group, tail, seed):
    inputs = _inputs(dtype, lengths, seed)
    out, f = _dots(op, DTYPES[dtype])
    want = run(out, **inputs)
    _schedule(out, f, lanes, group, tail)
    got = rs.Pipeline([out]).compile()(**inputs)
    for g, w in zip(got.to_list(), want.to_list(), strict=True):
        if dtype.startswith("float"):  # sums reassociated
            np.testing.assert_allclose(g, w, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-4)
        else:
            np.testing.assert_array_equal(g, w)


def test_each_element_keeps_an_accumulator_and_the_group_is_one_vector():
    """No lanes combined inside the loop over r's outer part (whole groups and the serial rest alike; r's
    own rest guarded inside it), one accumulator per unrolled element, and the 8 elements' totals
    combined as one vector of 8."""
    out, f = _dots("add", rs.float32)
    _schedule(out, f, 16, 8, "guard")
    pipe = rs.Pipeline([out])
    body = lower(pipe.program(), pipe.schedule()).body
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.For) and s.var.endswith(".ro"):
            inside = [n for t in ir.walk_stmts(s.body) for e in ir.exprs_of(t) for n in E.walk(e)]
            assert not any(isinstance(n, E.VectorReduce) for n in inside), s.var
    accumulators = {s.buffer for s in ir.walk_stmts(body) if isinstance(s, ir.Allocate) and ".lanes" in s.buffer}
    assert len(accumulators) >= 8
    combined = batch_lane_reductions(body)
    stores = [s for s in ir.walk_stmts(combined) if isinstance(s, ir.Store) and s.buffer == "f"
              and isinstance(s.value, E.Add) and any(isinstance(n, E.Shuffle) for n in E.walk(s.value))]
    assert stores and all(s.index.dtype.lanes == 8 for s in stores)


def _reductions(offsets, *, into: str = "f", reads_into: bool = False) -> ir.Stmt:
    """f[base + offsets[c]] = f[...] + add_lanes(v_c) for each c (v_c reading f when ``reads_into``)."""
    base = E.Var("base", T.INDEX)
    t = rs.float32
    stmts = []
    for c, o in enumerate(offsets):
        index = E.add(base, E.const(o, T.INDEX))
        v = E.Load("f" if reads_into else f"acc{c}", E.Ramp(E.const(0, T.INDEX), E.const(1, T.INDEX), 4),
                   t.with_lanes(4))
        stmts.append(ir.Store(into, index, E.Add(E.Load(into, index, t), E.VectorReduce("add", v))))
    return ir.block(*stmts)


@pytest.mark.parametrize("case, offsets, reads_into, grouped", [
    ("side by side", [0, 1, 2, 3], False, True),
    ("a power of two of them", [0, 1, 2], False, True),  # the first two combined, the third alone
    ("not in order", [0, 2, 1, 3], False, False),
    ("a total reads the buffer", [0, 1, 2, 3], True, False),
])
def test_only_neighbouring_independent_reductions_are_combined(case, offsets, reads_into, grouped):
    block = _reductions(offsets, reads_into=reads_into)
    combined = batch_lane_reductions(block)
    vector_stores = [s for s in ir.walk_stmts(combined) if isinstance(s, ir.Store) and s.index.dtype.lanes > 1]
    assert bool(vector_stores) == grouped, case
