"""A producer computed per tile of a consumer's flat ragged loop, stored by flat position: a tile of
tokens that crosses entries computes exactly its own tokens (a token-flattened GEMM with its sum in
registers), against the reference, over random lengths (empty entries, one-token entries), tiles, tails
and compute sites."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.reference import run


def linear(k=5, n=12):
    """Y[b, i, :] = bias + X[b, i, :] W, a sum Func per token copied to a ragged output."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L, k])
    W = rs.Input("W", rs.float32, [k, n])
    bias = rs.Input("bias", rs.float32, [n])
    b, i, j = rs.vars("b i j")
    c = rs.RDom(0, k, name="c")
    total = rs.Func("total", dtype=rs.float32)
    total[b, i, j] = bias[j]
    total[b, i, j] += X[b, i, c] * W[c, j]
    Y = rs.Func("Y", shape=[B, L, n])
    Y[b, i, j] = total[b, i, j] * 2.0
    return Y, total


def _inputs(lengths, k=5, n=12, seed=0):
    rng = np.random.default_rng(seed)
    x = rs.RaggedArray.from_list([rng.standard_normal((m, k)).astype(np.float32) for m in lengths],
                                 ragged_axes=[0])
    return {"X": x, "W": rng.standard_normal((k, n)).astype(np.float32),
            "bias": rng.standard_normal(n).astype(np.float32), "lens": np.array(lengths, np.int32)}


def flat_tiles(Y, total, rows, tail, at, cols=4, vector=True):
    """Y's valid tokens in tiles of ``rows`` (crossing entries), ``total`` per tile at loop ``at``."""
    Y.fuse("b", "i", "bi").split("bi", "bo", "bt", rows, tail=tail).split("j", "jo", "ji", cols, tail="guard") \
        .reorder("bo", "jo", "bt", "ji")
    total.compute_at(Y, at).fuse("b", "i", "bi")
    total.update().fuse("b", "i", "bi").reorder("c.0", "bi", "j")
    if vector:
        total.update().vectorize("j")
    return Y, total


def _check(Y, lengths_list, seed=0):
    kern = Y.compile(threads=2)
    for lengths in lengths_list:
        inputs = _inputs(lengths, seed=seed)
        got = kern(**inputs)
        assert got.lengths.tolist() == list(lengths)
        np.testing.assert_allclose(got.values, run(Y, **inputs).values, rtol=1e-5, atol=1e-5)


@settings(max_examples=12, deadline=None)
@given(lengths=st.lists(st.integers(0, 9), min_size=1, max_size=7), rows=st.integers(1, 7),
       tail=st.sampled_from(["split", "guard"]), at=st.sampled_from(["bo", "jo", "bt"]), vector=st.booleans())
def test_a_producer_per_flat_tile_matches_the_reference(lengths, rows, tail, at, vector):
    Y, total = flat_tiles(*linear(), rows, tail, at, vector=vector)
    _check(Y, [lengths, [0] * len(lengths)])


def test_unrolled_rows_and_parallel_column_strips():
    """The encoder's shape of it: column strips in parallel outermost, tiles of rows inside, the
    producer's rows unrolled (constant in whole tiles, a serial loop in the last)."""
    Y, total = linear(k=7, n=32)
    Y.split("j", "jo", "ji", 16, tail="split").fuse("b", "i", "bi").split("bi", "bo", "bt", 3, tail="split") \
        .reorder("jo", "bo", "bt", "ji").parallel("jo").vectorize("ji", 8).unroll("bt")
    total.compute_at(Y, "bo").fuse("b", "i", "bi").vectorize("j", 8).unroll("bi")
    total.update().fuse("b", "i", "bi").reorder("c.0", "bi", "j").vectorize("j", 8).unroll("bi")
    kern = Y.compile(threads=2)
    for lengths in ([5, 0, 1, 7, 3], [1], [0, 0], [2, 2, 2, 2]):
        inputs = _inputs(lengths, k=7, n=32)
        np.testing.assert_allclose(kern(**inputs).values, run(Y, **inputs).values, rtol=1e-5, atol=1e-5)


def test_the_producer_holds_one_tile():
    """Stored by flat position: one tile of rows by the column tile, not the batch's box."""
    Y, total = flat_tiles(*linear(), 6, "split", "jo")
    text = rs.Pipeline([Y]).lowered()
    assert "allocate total: float32[24]" in text  # 6 rows by the columns' tile
    assert "let total.extent.2 = 4" in text
    assert "total.flat" not in text  # it reads Y's tables, builds none of its own


def test_a_ragged_reduction_per_flat_tile():
    """A producer whose reduction runs over its entry's tokens (rj < lens[b]): b is read per position."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L, 3])
    b, i, j = rs.vars("b i j")
    r = rs.RDom(0, lens[b], name="r")
    s = rs.Func("s", dtype=rs.float32)
    s[b, i, j] = 0.0
    s[b, i, j] += X[b, r, j] * X[b, i, j]
    Y = rs.Func("Y", shape=[B, L, 3])
    Y[b, i, j] = s[b, i, j] + 1.0
    Y.fuse("b", "i", "bi").split("bi", "bo", "bt", 4, tail="split")
    s.compute_at(Y, "bo").fuse("b", "i", "bi")
    s.update().fuse("b", "i", "bi")
    kern = Y.compile(threads=2)
    rng = np.random.default_rng(1)
    for lengths in ([3, 0, 5, 1], [7, 2, 0, 9]):
        x = rs.RaggedArray.from_list([rng.standard_normal((m, 3)).astype(np.float32) for m in lengths],
                                     ragged_axes=[0])
        inputs = {"X": x, "lens": np.array(lengths, np.int32)}
        np.testing.assert_allclose(kern(**inputs).values, run(Y, **inputs).values, rtol=1e-5, atol=1e-5)


def test_without_the_producers_fuse_it_computes_its_box():
    """Not fused: a plain compute_at, the box of (b, i) each tile reads (every entry: correct, slow)."""
    Y, total = linear()
    Y.fuse("b", "i", "bi").split("bi", "bo", "bt", 4, tail="split")
    total.compute_at(Y, "bo")
    _check(Y, [[3, 0, 5, 1]])
    assert "total.s0.b in" in rs.Pipeline([Y]).lowered()


def test_every_stage_must_fuse():
    Y, total = linear()
    Y.fuse("b", "i", "bi").split("bi", "bo", "bt", 4, tail="split")
    total.compute_at(Y, "bo").fuse("b", "i", "bi")
    with pytest.raises(ValueError, match="fuse them in every stage .stage 1 does not"):
        Y.compile()


def test_an_update_at_other_tokens_is_refused():
    """Stored by flat position, a Func's update must write its own token (a pure Var there)."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L, 3])
    b, i, j = rs.vars("b i j")
    s = rs.Func("s", dtype=rs.float32)
    s[b, i, j] = X[b, i, j]
    s[b, 0, j] += 1.0
    Y = rs.Func("Y", shape=[B, L, 3])
    Y[b, i, j] = s[b, i, j]
    Y.fuse("b", "i", "bi").split("bi", "bo", "bt", 4, tail="split")
    s.compute_at(Y, "bo").fuse("b", "i", "bi")
    with pytest.raises(ValueError, match="update 0 does not write it at its own Vars"):
        Y.compile()


@pytest.mark.parametrize("at", ["jo", "ji"])
def test_a_producer_per_flat_tile_on_the_gpu_emulator(at):
    """Blocks of 4 tokens across entries by 4 columns, a thread per (token, column): the sum per block or
    per thread, stored by flat position, run by the emulator (bounds and races checked)."""
    Y, total = linear()
    Y.fuse("b", "i", "bi").split("bi", "bo", "bt", 4, tail="guard").split("j", "jo", "ji", 4, tail="guard") \
        .reorder("bo", "jo", "bt", "ji").gpu_blocks("bo", "jo").gpu_threads("bt", "ji")
    total.compute_at(Y, at).fuse("b", "i", "bi")
    total.update().fuse("b", "i", "bi")
    kern = Y.compile(target="cuda", device="emulate")
    for lengths in ([3, 0, 5, 1], [7, 2, 0, 9]):
        inputs = _inputs(lengths)
        np.testing.assert_allclose(kern(**inputs).values, run(Y, **inputs).values, rtol=1e-5, atol=1e-5)
