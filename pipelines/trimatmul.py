"""Triangular matrix product C = A B with A lower triangular: C[i, j] = sum over k <= i of A[i, k] B[k, j].
The reduction's bound depends on the row (an RDom over ``k < i + 1``), so a row computes only its own
triangle: half the FLOPs of a dense product of the same size, none spent on A's zero half."""

import numpy as np

import ragsched as rs

SHAPES = {"small": (37, 75), "full": (1024, 1024)}  # N (A is N x N), M (B is N x M; at least 64)


def build():
    N, M = rs.Size("N"), rs.Size("M")
    i, j = rs.vars("i j")
    A = rs.Input("A", rs.float32, [N, N])
    B = rs.Input("B", rs.float32, [N, M])
    k = rs.RDom(0, i + 1, name="k")
    prod = rs.Func("prod", dtype=rs.float32)
    prod[i, j] = 0.0
    prod[i, j] += A[i, k] * B[k, j]
    C = rs.Func("C", shape=[N, M])
    C[i, j] = prod[i, j]
    return C


def example_inputs(scale="small"):
    n, m = SHAPES[scale]
    rng = np.random.default_rng(0)
    # the upper half of A is never read: fill it with garbage so a wrong bound shows
    a = np.where(np.tri(n, dtype=bool), rng.uniform(-1, 1, (n, n)), 1e6).astype(np.float32)
    return {"A": a, "B": rng.uniform(-1, 1, (n, m)).astype(np.float32)}


def reference(A, B):
    return np.tril(A) @ B


def hand_schedule(funcs, vectors=None):
    """Column strips of ``vectors`` native vectors in parallel; in a strip, one row of C at a time, its
    sum over k <= i in registers (k outside the unrolled vectors). The reduction's extent depends on the
    row, so a tile is one row high. As in matmul's hand schedule, the strip of B is copied once per strip
    (``B.in_(prod)``): B's rows are far apart in memory and would all fall in the same L1 sets."""
    vec = rs.natural_vector_size(rs.float32)
    vectors = vectors or (4 if vec >= 16 else 2)  # rows x vectors accumulators in 32 vector registers, or 16
    C, prod = funcs["C"], funcs["prod"]
    C.split("j", "jo", "ji", vec * vectors).reorder("jo", "i", "ji").vectorize("ji", vec).parallel("jo")
    prod.compute_at(C, "i").vectorize("j", vec).unroll("j")
    prod.update().reorder("i", "k.0", "j").vectorize("j", vec).unroll("j")
    funcs["B"].in_(prod).compute_at(C, "jo").vectorize("_1", vec)
