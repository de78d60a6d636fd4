"""Columns of a square block loaded as rows and transposed in registers (``passes/transpose_loads``): a
vectorized copy down the columns of an array, unrolled across them, computes the reference's result for
random shapes, types, widths and tails (dense and ragged), and is emitted as row loads and shuffles;
statements the pass must not touch (a copy that writes the buffer it reads, columns not side by side)
are left as they are."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.passes.transpose_loads import transpose_strided_loads
from ragsched.reference import run

DTYPES = {"float32": rs.float32, "float64": rs.float64, "int16": rs.int16, "uint8": rs.uint8}


def _transpose(dtype, n: int, tail: str, unroll: bool = True):
    """out[x, y] = a[y, x] * 1 (the copy computed at out's rows, k-major like attention's keys)."""
    N, M = rs.Size("N"), rs.Size("M")
    a = rs.Input("a", dtype, [N, M])
    x, y = rs.vars("x y")
    t = rs.Func("t", shape=[M, N])
    t[x, y] = a[y, x]
    t.split("y", "yo", "yi", n, tail=tail).split("x", "xo", "xi", n, tail=tail) \
        .reorder("yo", "xo", "xi", "yi").vectorize("yi")
    if unroll:
        t.unroll("xi")
    return t


def _values(dtype: str, shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 200, shape).astype(dtype)


@settings(max_examples=30, deadline=None)
@given(dtype=st.sampled_from(sorted(DTYPES)), n=st.sampled_from([2, 4, 8, 16]), rows=st.integers(0, 40),
       cols=st.integers(0, 40), tail=st.sampled_from(["split", "guard"]), seed=st.integers(0, 2**16))
def test_transposed_copies_match_the_reference(dtype, n, rows, cols, tail, seed):
    t = _transpose(DTYPES[dtype], n, tail)
    a = _values(dtype, (rows, cols), seed)
    got = t.compile()(a=a)
    np.testing.assert_array_equal(got, run(t, a=a))
    np.testing.assert_array_equal(got, a.T)


@settings(max_examples=15, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=5), n=st.sampled_from([4, 8, 16]),
       seed=st.integers(0, 2**16))
def test_ragged_rows_transposed_per_entry_match_the_reference(lengths, n, seed):
    """Each entry's [length, 24] rows stored feature-major, as attention copies its keys."""
    B, b, j, d = rs.Size("B"), *rs.vars("b j d")
    lens = rs.Input("lens", rs.int32, [B])
    x = rs.Input("x", rs.float32, [B, rs.Ragged("L", lens), 24])
    out = rs.Func("out", shape=[B, rs.Ragged("L", lens), 24])
    out[b, j, d] = x[b, j, d] * 2.0
    xt = x.in_(out)
    kb, kj, kd = (v.name for v in xt.args)
    xt.compute_at(out, "b").reorder_storage(kb, kd, kj) \
        .split(kj, "jo", "ji", n, tail="split").split(kd, "do", "di", n, tail="split") \
        .reorder(kb, "jo", "do", "di", "ji").vectorize("ji").unroll("di")
    rng = np.random.default_rng(seed)
    inputs = {"x": rs.RaggedArray.from_list([rng.standard_normal((k, 24)).astype(np.float32) for k in lengths],
                                            ragged_axes=[0]),
              "lens": np.array(lengths, np.int32)}
    got = out.compile()(**inputs)
    want = run(out, **inputs)
    for g, w in zip(got.to_list(), want.to_list(), strict=True):
        np.testing.assert_array_equal(g, w)


def test_whole_blocks_are_row_loads_and_shuffles():
    """16 x 16 float32: 16 row loads and 4 rounds of 16 shuffles per block, and no column of scalar
    loads left; without the unrolled columns there is nothing to transpose."""
    kernel = _transpose(rs.float32, 16, "split").compile()
    assert kernel.llvm_ir.count("shufflevector") == 64
    assert "masked.gather" not in kernel.llvm_ir
    plain = _transpose(rs.float32, 16, "split", unroll=False).compile()
    assert plain.llvm_ir.count("shufflevector") == 0


def _column_copies(n: int, *, into: str = "t", offsets=None) -> ir.Stmt:
    """n stores t[ramp(c*n, 1, n)] = a[ramp(base + offsets[c], S, n)]."""
    base, stride = E.Var("base", T.INDEX), E.Var("S", T.INDEX)
    offsets = range(n) if offsets is None else offsets
    return ir.block(*(ir.Store(into, E.Ramp(E.const(c * n, T.INDEX), E.const(1, T.INDEX), n),
                               E.Load("a", E.Ramp(E.add(base, E.const(o, T.INDEX)), stride, n),
                                      rs.float32.with_lanes(n)))
                      for c, o in enumerate(offsets)))


def test_only_side_by_side_columns_of_another_buffer_are_transposed():
    block = _column_copies(4)
    assert transpose_strided_loads(block) != block
    for untouched in (_column_copies(4, into="a"),  # the copy writes what it reads: loads stay in order
                      _column_copies(4, offsets=[0, 1, 3, 2]),  # not in column order
                      _column_copies(3)):  # not a power of two
        assert transpose_strided_loads(untouched) == untouched
