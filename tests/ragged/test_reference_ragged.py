"""The NumPy reference on ragged pipelines: RaggedArray inputs checked against their lengths Input,
ragged and triangular extents, reductions over ragged RDoms, ragged outputs returned as RaggedArray;
compared with a per-sequence NumPy computation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.reference import run


def attention_scores():
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    Q = rs.Input("Q", rs.float32, [B, L, 2, 4])
    K = rs.Input("K", rs.float32, [B, L, 2, 4])
    b, h, i, j = rs.vars("b h i j")
    k = rs.RDom(0, 4, name="k")
    S = rs.Func("S", shape=[B, 2, L, L])
    S[b, h, i, j] = rs.sum(Q[b, i, h, k] * K[b, j, h, k]) * 0.5
    m = rs.Func("m")
    rj = rs.RDom(0, lens[b], name="rj")
    m[b, h, i] = rs.maximum(S[b, h, i, rj])
    P = rs.Func("P", shape=[B, 2, L, L])
    P[b, h, i, j] = rs.exp(S[b, h, i, j] - m[b, h, i])
    return P


@settings(max_examples=25, deadline=None)
@given(lengths=st.lists(st.integers(0, 5), min_size=1, max_size=5), seed=st.integers(0, 2**16))
def test_ragged_attention_scores_match_a_per_sequence_loop(lengths, seed):
    rng = np.random.default_rng(seed)
    qs = [rng.standard_normal((n, 2, 4)).astype(np.float32) for n in lengths]
    ks = [rng.standard_normal((n, 2, 4)).astype(np.float32) for n in lengths]
    lens = np.array(lengths, np.int32)
    got = run(attention_scores(), Q=rs.RaggedArray.from_list(qs, ragged_axes=[0]),
              K=rs.RaggedArray.from_list(ks, ragged_axes=[0]), lens=lens)
    assert isinstance(got, rs.RaggedArray) and got.lengths.tolist() == lengths
    for b, (q, k) in enumerate(zip(qs, ks)):
        s = np.einsum("ihk,jhk->hij", q, k) * np.float32(0.5)
        want = np.exp(s - s.max(axis=2, keepdims=True)) if len(q) else s
        np.testing.assert_allclose(got[b], want, rtol=1e-5, atol=1e-6)


def test_triangular_extent_and_reduction():
    N = rs.Size("N")
    i, j = rs.vars("i j")
    A = rs.Input("A", rs.float32, [N, N])
    T = rs.Ragged("T", lambda i: i + 1)
    low = rs.Func("low", shape=[N, T])  # j <= i
    r = rs.RDom(0, i + 1, name="r")
    low[i, j] = rs.sum(A[i, r] * A[j, r])
    a = np.random.default_rng(1).standard_normal((5, 5)).astype(np.float32)
    got = run(low, A=a)
    assert got.lengths.tolist() == [1, 2, 3, 4, 5]
    for row in range(5):
        want = np.array([a[row, :row + 1] @ a[col, :row + 1] for col in range(row + 1)], np.float32)
        np.testing.assert_allclose(got[row], want, rtol=1e-5)


@pytest.mark.parametrize("q, lens, error, message", [
    (lambda: np.zeros((2, 3, 2, 4), np.float32), [3, 3], TypeError, "Input Q is ragged; pass a RaggedArray"),
    (lambda: rs.RaggedArray.from_list([np.zeros((3, 2, 4), np.float32)] * 2, ragged_axes=[0]), [3, 2],
     ValueError, "entry 1 has length 3 in dimension 1, but its shape says"),
    (lambda: rs.RaggedArray.from_list([np.zeros((3, 2, 4), np.float32)] * 2, ragged_axes=[0]), [3, 3, 3],
     ValueError, r"Size B is 2 from K \(dimension 0\) but 3 from lens"),
    (lambda: rs.RaggedArray.from_list([np.zeros((3, 2, 5), np.float32)] * 2, ragged_axes=[0]), [3, 3],
     ValueError, "dimension 3 has extent 5, but its shape says 4"),
    (lambda: rs.RaggedArray.from_list([np.zeros((3, 2, 4))] * 2, ragged_axes=[0]), [3, 3],
     TypeError, "expected dtype float32, got float64"),
    (lambda: rs.RaggedArray.from_list([np.zeros((2, 3, 4), np.float32)] * 2, ragged_axes=[1]), [3, 3],
     ValueError, "dimension 1 is ragged in Input Q but not in the RaggedArray"),
])
def test_bad_ragged_arguments_are_refused(q, lens, error, message):
    k = rs.RaggedArray.from_list([np.zeros((3, 2, 4), np.float32)] * 2, ragged_axes=[0])
    with pytest.raises(error, match=message):
        run(attention_scores(), Q=q(), K=k, lens=np.array(lens, np.int32))


def test_ragged_extent_must_follow_the_dimensions_it_uses():
    lens = rs.Input("lens", rs.int32, 1)
    with pytest.raises(ValueError, match="Ragged L depends on the first 1 dimension"):
        rs.Func("f", shape=[rs.Ragged("L", lens), 3])
    with pytest.raises(TypeError, match="must have an integer type"):
        rs.Ragged("L", rs.Input("x", rs.float32, 1))

