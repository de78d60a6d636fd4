"""A linear layer on a ragged batch of token vectors: Y[b, i, n] = bias[n] + sum_c X[b, i, c] W[c, n], with
i < lens[b] and one weight matrix for every token (a transformer's projections: the encoder's four
products are this with (K, N) = (512, 1536), (512, 512), (512, 2048), (2048, 512)). X and Y are
RaggedArrays [B, L, K] and [B, L, N] on packed tokens; no padded token is computed. The "full" inputs are
the first 128 MNLI lengths with the FFN's first product (K = 512, N = 2048); "small" are 5 short entries.
The benchmark times it beside OpenBLAS's SGEMM on the packed tokens (the same product as one dense GEMM).
"""

from pathlib import Path

import numpy as np

import ragsched as rs

LENGTHS = Path(__file__).resolve().parent / "data" / "mnli_lengths.txt"
SHAPES = {"small": (19, 71), "full": (512, 2048)}  # K, N


def build():
    B, K, N = rs.Size("B"), rs.Size("K"), rs.Size("N")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L, K])
    W = rs.Input("W", rs.float32, [K, N])
    bias = rs.Input("bias", rs.float32, [N])
    b, i, n = rs.vars("b i n")
    c = rs.RDom(0, K, name="c")
    total = rs.Func("total", dtype=rs.float32)
    total[b, i, n] = bias[n]
    total[b, i, n] += X[b, i, c] * W[c, n]
    Y = rs.Func("Y", shape=[B, L, N])
    Y[b, i, n] = total[b, i, n]
    return Y


def inputs_for(lens, k: int, n: int, seed: int = 0) -> dict:
    """Random tokens for entries of ``lens`` tokens, weights of a trained layer's scale (unit outputs)."""
    rng = np.random.default_rng(seed)
    x = rs.RaggedArray.from_list([rng.standard_normal((int(m), k)).astype(np.float32) for m in lens],
                                 ragged_axes=[0])
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    return {"X": x, "W": w, "bias": (0.1 * rng.standard_normal(n)).astype(np.float32),
            "lens": np.asarray(lens, np.int32)}


def example_inputs(scale="small"):
    lens = np.array([5, 1, 0, 7, 3], np.int32) if scale == "small" else np.loadtxt(LENGTHS, dtype=np.int32)[:128]
    return inputs_for(lens, *SHAPES[scale])


def reference(X, W, bias, lens):
    return rs.RaggedArray.from_list([x @ W + bias for x in X.to_list()], ragged_axes=[0])


def hand_schedule(funcs, rows=6, vectors=None):
    """The encoder's products' schedule (``schedule_product``)."""
    schedule_product(funcs, funcs["Y"], funcs["total"], funcs["W"], ("c.0",), rows, vectors)


def schedule_product(funcs, out, total, weights, reduce, rows=6, vectors=None):
    """A product on packed tokens as one GEMM over every valid token of the batch: strips of 64 output
    columns in parallel (outermost, so a strip of weights is copied once and stays in L2 while every
    token passes), the tokens flattened (``fuse(b, i)``: one loop over the valid (entry, token) pairs) in
    tiles of ``rows`` tokens that cross entries, by ``vectors`` native vectors, with the sum ``total``
    computed per tile in registers (2 vectors with 16 vector registers, 4 with 32); whole tiles and the
    last one separate (tail="split"), and whole strips and the last one too (so that a tile's width is
    a constant, and its vectors need no guard). A tile per entry instead left a short tile at the end
    of each entry: 1.25-2.6x slower on short sentences, 1.2x on long ones. ``out`` is [b, i, n] (n its
    last Var), ``reduce`` the sum's reduction loops."""
    vec = rs.natural_vector_size(rs.float32)
    width = vec * (vectors or (4 if vec >= 16 else 2))
    n = out.args[2].name
    out.fuse("b", "i", "bi").split("bi", "bo", "bt", rows, tail="split").split(n, "no", "ni", 64, tail="split") \
        .split("ni", "nio", "nii", width).reorder("no", "bo", "nio", "bt", "nii").parallel("no") \
        .vectorize("nii").unroll("bt")
    tile_sum(total, out, "nio", (*reduce, "bi", n))
    w = weights.in_(total)
    w.compute_at(out, "no").vectorize(w.args[-1].name, vec)


def tile_sum(total, consumer, tile, update_order):
    """``total`` computed per tile (loop ``tile``) of ``consumer``'s flat loop over tokens, stored by
    flat position (it fuses the same (b, i) in each stage), its sum over k outside the unrolled rows and
    vectors of the tile: the accumulators stay in registers. The tile's columns are one vector loop,
    which LLVM splits into native vectors (a split into native vectors here guarded each of them against
    the tile's end, inside the loop over k: 2.5x slower on AVX-512)."""
    last = update_order[-1]
    total.compute_at(consumer, tile).fuse("b", "i", "bi").vectorize(last).unroll("bi")
    total.update().fuse("b", "i", "bi").reorder(*update_order).vectorize(last).unroll("bi")
