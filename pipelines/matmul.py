"""Matrix product C[i, j] = sum_k A[i, k] * B[k, j] in float32: a Func ``prod`` that starts at zero and
accumulates over k, copied to the output C (so that a schedule can place the accumulation)."""

import numpy as np

import ragsched as rs

SHAPES = {"small": (67, 53, 71), "full": (1024, 1024, 1024)}  # M, K, N


def build():
    M, K, N = rs.Size("M"), rs.Size("K"), rs.Size("N")
    i, j = rs.vars("i j")
    A = rs.Input("A", rs.float32, [M, K])
    B = rs.Input("B", rs.float32, [K, N])
    k = rs.RDom(0, K, name="k")
    prod = rs.Func("prod", dtype=rs.float32)
    prod[i, j] = 0.0
    prod[i, j] += A[i, k] * B[k, j]
    C = rs.Func("C", shape=[M, N])
    C[i, j] = prod[i, j]
    return C


def example_inputs(scale="small"):
    m, k, n = SHAPES[scale]
    rng = np.random.default_rng(0)
    return {"A": rng.uniform(-1, 1, (m, k)).astype(np.float32),
            "B": rng.uniform(-1, 1, (k, n)).astype(np.float32)}


def reference(A, B):
    return A @ B


def hand_schedule(funcs, rows=6, vectors=None):
    """Register tiling with a packed strip of B. C in tiles of ``rows`` x ``vectors`` native vectors
    (6 x 64 with AVX-512: 24 accumulators), the column strips in parallel. A copy of B's strip
    (``B.in_(prod)``, 4 KB rows to 256 B rows) is made once per strip, so the tiles stream it from the
    cache contiguously instead of reading B's rows 4 KB apart, which all fall in the same L1 sets. Each
    tile's sum over k is computed at the tile, k outside the unrolled tile, so the accumulators stay in
    registers and each step loads ``vectors`` vectors of the strip and broadcasts ``rows`` elements of A."""
    vec = rs.natural_vector_size(rs.float32)
    vectors = vectors or (4 if vec >= 16 else 2)  # rows x vectors accumulators in 32 vector registers, or 16
    C, prod = funcs["C"], funcs["prod"]
    C.split("i", "io", "ii", rows).split("j", "jo", "ji", vec * vectors).reorder("jo", "io", "ii", "ji") \
        .vectorize("ji", vec).unroll("ji").unroll("ii").parallel("jo")
    prod.compute_at(C, "io").vectorize("j", vec).unroll("j").unroll("i")
    prod.update().reorder("k.0", "i", "j").vectorize("j", vec).unroll("j").unroll("i")
    funcs["B"].in_(prod).compute_at(C, "jo").vectorize("_1", vec)
