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
    # unscaled scores (the scale is applied after the max), summed in QK, copied to S: a schedule can
    # then compute the sum per tile of S, in registers (as matmul's prod and C)
    QK = rs.Func("QK", dtype=rs.float32)
    QK[b, h, i, j] = 0.0
    QK[b, h, i, j] += Q[b, i, h, k] * K[b, j, h, k]
    S = rs.Func("S", shape=[B, HEADS, L, L])
    S[b, h, i, j] = QK[b, h, i, j]
    rj = rs.RDom(0, lens[b], name="rj")
    top = rs.Func("top", shape=[B, HEADS, L])
    top[b, h, i] = rs.maximum(S[b, h, i, rj])
    scale = float(1 / np.sqrt(DIM))  # a Python float: weak, so the scores stay float32
    P = rs.Func("P", shape=[B, HEADS, L, L])
    P[b, h, i, j] = rs.exp((S[b, h, i, j] - top[b, h, i]) * scale)
    inv = rs.Func("inv", shape=[B, HEADS, L])  # 1 / the softmax denominator: one division per row
    inv[b, h, i] = 1.0 / rs.sum(P[b, h, i, rj])
    PV = rs.Func("PV", dtype=rs.float32)
    PV[b, h, i, d] = 0.0
    PV[b, h, i, d] += P[b, h, i, rj] * V[b, rj, h, d]
    O = rs.Func("attention", shape=[B, L, HEADS, DIM])
    O[b, i, h, d] = PV[b, h, i, d] * inv[b, h, i]
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


def hand_schedule(funcs, rows=6):
    """One (sequence, head) pair per iteration of a parallel loop over both (fused: sequences of very
    different lengths balance over the threads), every intermediate computed there (its storage one
    head of one entry: S fits in L2 even for 512 tokens). Q K^T is register-tiled like matmul's hand
    schedule: S in tiles of ``rows`` rows by one vector, the sum QK computed per tile with k outside the
    unrolled rows (its accumulators stay in registers) from a copy of K stored k-major (a row of keys is
    contiguous). P V runs ``rows`` rows by the 64 values of d, j outside. Whole tiles and the rest of each
    entry are separate loops (tail="split"), and the unrolled loops run serially in the rest."""
    vec = rs.natural_vector_size(rs.float32)
    out, S, QK, PV = funcs["attention"], funcs["S"], funcs["QK"], funcs["PV"]
    out.reorder("b", "h", "i", "d").fuse("b", "h", "bh").vectorize("d", vec).parallel("bh")
    for f in funcs.values():
        if isinstance(f, rs.Func) and f not in (out, QK):
            f.compute_at(out, "bh")
    Kt = funcs["K"].in_(QK)  # [b, j, h, k] stored k-major: a row of scores reads contiguous keys
    Kt.compute_at(out, "bh").reorder_storage("_0", "_2", "_3", "_1").reorder("_0", "_2", "_3", "_1")
    S.split("i", "io", "ii", rows, tail="split").split("j", "jo", "ji", vec, tail="split") \
        .reorder("b", "h", "io", "jo", "ii", "ji").vectorize("ji")
    QK.compute_at(S, "jo").vectorize("j").unroll("i")
    QK.update().reorder("b", "h", "k.0", "i", "j").vectorize("j").unroll("i")
    funcs["P"].vectorize("j", vec)
    PV.bound("d", 0, DIM).vectorize("d", vec)
    PV.update().split("i", "io", "ii", rows, tail="split").split("d", "do", "di", vec) \
        .reorder("b", "h", "io", "rj.0", "ii", "do", "di").vectorize("di").unroll("do").unroll("ii")
