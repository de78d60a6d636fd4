"""Variable-size batched matrix product: entry b multiplies its own M[b] x K matrix A_b by a K x N matrix
B_b, C_b = A_b B_b, with M[b] the length of a sequence (the token-by-weight products of a transformer
over a batch of sentences, each with its own weights here). A and C are RaggedArrays [batch, M, ...];
no padded row is computed. The "full" inputs are the first 32 SQuAD lengths (mean 159, max 281) with
K = N = 256; "small" are 5 short entries."""

from pathlib import Path

import numpy as np

import ragsched as rs

LENGTHS = Path(__file__).resolve().parent / "data" / "squad_lengths.txt"
SHAPES = {"small": (19, 71), "full": (256, 256)}  # K, N (N at least 64: the hand schedule's strip)


def build():
    nb, K, N = rs.Size("batch"), rs.Size("K"), rs.Size("N")
    lens = rs.Input("lens", rs.int32, [nb])
    M = rs.Ragged("M", lens)
    A = rs.Input("A", rs.float32, [nb, M, K])
    B = rs.Input("B", rs.float32, [nb, K, N])
    b, i, j = rs.vars("b i j")
    k = rs.RDom(0, K, name="k")
    prod = rs.Func("prod", dtype=rs.float32)
    prod[b, i, j] = 0.0
    prod[b, i, j] += A[b, i, k] * B[b, k, j]
    C = rs.Func("C", shape=[nb, M, N])
    C[b, i, j] = prod[b, i, j]
    return C


def example_inputs(scale="small"):
    kk, n = SHAPES[scale]
    lens = np.array([5, 1, 0, 7, 3], np.int32) if scale == "small" else np.loadtxt(LENGTHS, dtype=np.int32)[:32]
    rng = np.random.default_rng(0)
    a = rs.RaggedArray.from_list([rng.uniform(-1, 1, (m, kk)).astype(np.float32) for m in lens], ragged_axes=[0])
    return {"A": a, "B": rng.uniform(-1, 1, (len(lens), kk, n)).astype(np.float32), "lens": lens}


def reference(A, B, lens):
    return rs.RaggedArray.from_list([a @ bm for a, bm in zip(A.to_list(), B, strict=True)], ragged_axes=[0])


def hand_schedule(funcs, rows=6, vectors=None):
    """matmul's hand schedule inside each entry: tiles of ``rows`` rows by ``vectors`` native vectors,
    the sum over k in registers, B's strip copied per strip; entries in parallel. Whole tiles of rows
    and the rest of each entry are separate loops (tail="split")."""
    vec = rs.natural_vector_size(rs.float32)
    vectors = vectors or (4 if vec >= 16 else 2)  # rows x vectors accumulators in 32 vector registers, or 16
    C, prod = funcs["C"], funcs["prod"]
    C.split("i", "io", "ii", rows, tail="split").split("j", "jo", "ji", vec * vectors) \
        .reorder("b", "jo", "io", "ii", "ji").vectorize("ji", vec).unroll("ji").unroll("ii").parallel("b")
    prod.compute_at(C, "io").vectorize("j", vec).unroll("j").unroll("i")
    prod.update().reorder("b", "k.0", "i", "j").vectorize("j", vec).unroll("j").unroll("i")
    funcs["B"].in_(prod).compute_at(C, "jo").vectorize("_2", vec)


def gpu_schedule(funcs, rows=16, cols=16):
    """The valid (entry, row) pairs flattened into one loop (no padded row), in blocks of ``rows`` by
    ``cols`` columns of C; each thread sums its element over k in a register."""
    C, prod = funcs["C"], funcs["prod"]
    C.fuse("b", "i", "bi").split("bi", "bo", "bt", rows).split("j", "jo", "ji", cols, tail="guard") \
        .reorder("bo", "jo", "bt", "ji").gpu_blocks("bo", "jo").gpu_threads("bt", "ji")
    prod.compute_at(C, "ji")
