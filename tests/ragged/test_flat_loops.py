"""fuse(b, i, bi) with i ragged inside b: one flat loop over the valid (b, i) pairs, its b and i read
from tables that generated code builds (each entry's first position, each position's entry); against
the reference, with empty and one-token entries, under the schedules a flat loop takes."""

from pathlib import Path

import numpy as np
import pytest

import ragsched as rs
from ragsched.lang import schedulable
from ragsched.pipeline_file import load
from ragsched.reference import run
from ragsched.runtime.compare import matches

ROOT = Path(__file__).resolve().parents[2]

LENGTHS = [[3, 0, 5, 1], [0, 0], [1], [7, 2, 0, 0, 9, 4]]


def layer(projected: bool = False):
    """A per-token layer norm over 8 features: a reduction per (b, i) and an elementwise step, of X, or
    when ``projected`` of a ragged Func proj = 2 X (then returned too: two Funcs read it)."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L, 8])
    b, i, n = rs.vars("b i n")
    c = rs.RDom(0, 8, name="c")
    src = X
    if projected:
        src = rs.Func("proj", shape=[B, L, 8])
        src[b, i, n] = X[b, i, n] * 2.0
    mean = rs.Func("mean", shape=[B, L], dtype=rs.float32)
    mean[b, i] = 0.0
    mean[b, i] += src[b, i, c] * 0.125
    Y = rs.Func("Y", shape=[B, L, 8])
    Y[b, i, n] = (src[b, i, n] - mean[b, i]) * rs.cast(rs.float32, b + 1)
    return (Y, mean, src) if projected else (Y, mean)


def _inputs(lengths):
    rng = np.random.default_rng(len(lengths))
    x = rs.RaggedArray.from_list([rng.standard_normal((m, 8)).astype(np.float32) for m in lengths], ragged_axes=[0])
    return {"X": x, "lens": np.array(lengths, np.int32)}


SCHEDULES = {
    "flat": lambda Y, mean: Y.fuse("b", "i", "bi"),
    "flat parallel": lambda Y, mean: Y.fuse("b", "i", "bi").parallel("bi").vectorize("n", 4),
    "flat tiles": lambda Y, mean: Y.fuse("b", "i", "bi").split("bi", "bo", "bii", 3, tail="split")
    .parallel("bo").vectorize("n", 8),
    "flat guarded tiles": lambda Y, mean: Y.fuse("b", "i", "bi").split("bi", "bo", "bii", 4, tail="guard"),
    "producer flat too": lambda Y, mean: (Y.fuse("b", "i", "bi").parallel("bi"),
                                          mean.compute_root().fuse("b", "i", "bi").parallel("bi")),
    "producer at each position": lambda Y, mean: (Y.fuse("b", "i", "bi").parallel("bi"),
                                                  mean.compute_at(Y, "bi")),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_flat_ragged_loops_match_the_reference(name):
    Y, mean = layer()
    SCHEDULES[name](Y, mean)
    kern = Y.compile(threads=2)
    for lengths in LENGTHS:
        inputs = _inputs(lengths)
        got = kern(**inputs)
        assert got.lengths.tolist() == lengths
        np.testing.assert_allclose(got.values, run(Y, **inputs).values, rtol=1e-5, atol=1e-6)


def test_the_flat_loop_runs_over_the_valid_pairs_only():
    Y, _ = layer()
    Y.fuse("b", "i", "bi")
    text = rs.Pipeline([Y]).lowered()
    assert "for Y.s0.bi in [0, Y.flat0.bi.total)" in text
    assert "allocate Y.flat0.bi.row" in text


def test_a_flat_loop_cannot_be_vectorized():
    Y, _ = layer()
    Y.reorder("n", "b", "i").fuse("b", "i", "bi").vectorize("bi")
    with pytest.raises(ValueError, match="runs over the valid .* cannot be vectorized"):
        Y.compile()



@pytest.mark.parametrize("at", ["i", "ii"])
def test_a_reduction_computed_per_token_of_its_ragged_consumer(at):
    """mean computed inside Y's loop over an entry's tokens reads X from that token on: the check of
    reads per entry must know that the loop starts at the region's start, 0 (the region is a let around
    the loop). It refused this schedule (found by the autoscheduler on the encoder layer)."""
    Y, mean = layer()
    if at == "ii":
        Y.split("i", "i", "ii", 4, tail="split")
    mean.compute_at(Y, at)
    kern = Y.compile(threads=2)
    for lengths in LENGTHS:
        inputs = _inputs(lengths)
        np.testing.assert_allclose(kern(**inputs).values, run(Y, **inputs).values, rtol=1e-5, atol=1e-6)


def test_a_tile_of_a_sum_lying_past_an_entry_reads_nothing():
    """A sum computed per tile of its ragged consumer, itself tiled with a split tail: where the
    consumer's tile lies past an entry's end the sum's region is empty ([lo, lo + max(n, 0) - 1]); the
    ragged read check knows such a box reads nothing, instead of refusing the schedule."""
    from pipelines.attention import example_inputs, reference

    pf = load(ROOT / "pipelines" / "attention.py")
    outs = pf.outputs()
    funcs = schedulable(list(outs))
    funcs["S"].compute_root().split("i", "i", "i.i", 4, tail="split").split("j", "j", "j.i", 16, tail="split") \
        .reorder("b", "h", "i", "j", "i.i", "j.i")
    funcs["QK"].compute_at(funcs["S"], "j")
    funcs["QK"].update().split("i", "i", "i.i", 4, tail="split").split("j", "j", "j.i", 8, tail="split") \
        .reorder("b", "h", "i", "j", "k.0", "i.i", "j.i").vectorize("j.i").unroll("i.i")
    inputs = example_inputs("small")
    ok, err = matches(rs.Pipeline(list(outs)).compile(threads=2)(**inputs), reference(**inputs))
    assert ok, err


@pytest.mark.parametrize("fused", [False, True])
def test_a_producer_stored_by_flat_position_is_read_by_its_flat_consumer_alone(fused):
    """proj computed per position of Y's flat loop and fusing its own (b, i) is stored by flat position,
    and only Y's reads of it are made flat: mean, computed there too, read it by entry and position and
    got other positions' values and uninitialized memory (a random point of the encoder layer's space,
    7585 of 8192 outputs wrong). Refused now, naming both; unfused, it computes the reference."""
    Y, mean, proj = layer(projected=True)
    Y.fuse("b", "i", "bi")
    mean.compute_at(Y, "bi")
    proj.compute_at(Y, "bi")
    if fused:
        proj.fuse("b", "i", "bi")
        with pytest.raises(ValueError, match="Func proj is computed per tile of Func Y's flat loop .* Func mean reads"):
            Y.compile(threads=1)
        return
    kern = Y.compile(threads=1)
    for lengths in LENGTHS:
        inputs = _inputs(lengths)
        np.testing.assert_allclose(kern(**inputs).values, run(Y, **inputs).values, rtol=1e-5, atol=1e-6)
