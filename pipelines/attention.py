"""Ragged multi-head attention (the core of a transformer layer) over a batch of sequences of different
lengths: O = softmax(Q K^T / sqrt(64)) V per sequence and head, with no padded position computed.

Q, K and V are RaggedArrays [B, L, 8, 64] (entry b has lens[b] tokens); the scores S[b, h, i, j] exist
for i, j < lens[b] only, and so does every step after. The "full" inputs are the first 128 sequences of
MNLI (mean length 43, max 128); "small" are 5 short ones.
"""

from pathlib import Path

import numpy as np

import ragsched as rs

HEADS, DIM = 8, 64
LENGTHS = Path(__file__).resolve().parent / "data" / "mnli_lengths.txt"


def build():
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    Q, K, V = (rs.Input(n, rs.float32, [B, L, HEADS, DIM]) for n in "QKV")
    b, h, i, j, d = rs.vars("b h i j d")
    k = rs.RDom(0, DIM, name="k")
    S = rs.Func("S", shape=[B, HEADS, L, L])
    scale = float(1 / np.sqrt(DIM))  # a Python float: weak, so the scores stay float32
    S[b, h, i, j] = rs.sum(Q[b, i, h, k] * K[b, j, h, k]) * scale
    rj = rs.RDom(0, lens[b], name="rj")
    top = rs.Func("top", shape=[B, HEADS, L])
    top[b, h, i] = rs.maximum(S[b, h, i, rj])
    P = rs.Func("P", shape=[B, HEADS, L, L])
    P[b, h, i, j] = rs.exp(S[b, h, i, j] - top[b, h, i])
    den = rs.Func("den", shape=[B, HEADS, L])
    den[b, h, i] = rs.sum(P[b, h, i, rj])
    O = rs.Func("attention", shape=[B, L, HEADS, DIM])
    O[b, i, h, d] = rs.sum(P[b, h, i, rj] * V[b, rj, h, d]) / den[b, h, i]
    return O


def example_inputs(scale="small"):
    lengths = np.loadtxt(LENGTHS, dtype=np.int32)
    lens = np.array([5, 1, 0, 7, 3], np.int32) if scale == "small" else lengths[:128]
    rng = np.random.default_rng(0)

    def tokens():
        return rs.RaggedArray.from_list([rng.standard_normal((n, HEADS, DIM)).astype(np.float32) for n in lens],
                                        ragged_axes=[0])
    return {"Q": tokens(), "K": tokens(), "V": tokens(), "lens": lens}


def reference(Q, K, V, lens):
    """NumPy, one sequence at a time."""
    out = []
    for q, k, v in zip(Q.to_list(), K.to_list(), V.to_list(), strict=True):
        s = np.einsum("ihd,jhd->hij", q, k) / np.float32(np.sqrt(DIM))
        if len(q):
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
        out.append(np.einsum("hij,jhd->ihd", s, v).astype(np.float32))
    return rs.RaggedArray.from_list(out, ragged_axes=[0])


def hand_schedule(funcs):
    """Each sequence computed whole inside a parallel loop over the batch: every intermediate at the
    batch loop (its storage one entry's worth), the head-dim loop of the output vectorized."""
    out = funcs["attention"]
    out.parallel("b").vectorize("d", rs.natural_vector_size(rs.float32))
    for f in funcs.values():
        if isinstance(f, rs.Func) and f is not out:
            f.compute_at(out, "b")
    funcs["P"].vectorize("j", 8)
