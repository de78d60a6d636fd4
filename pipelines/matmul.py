"""Matrix product C[i, j] = sum_k A[i, k] * B[k, j] in float32, as an inline reduction."""

import numpy as np

import ragsched as rs

SHAPES = {"small": (67, 53, 71), "full": (1024, 1024, 1024)}  # M, K, N


def build():
    M, K, N = rs.Size("M"), rs.Size("K"), rs.Size("N")
    i, j = rs.vars("i j")
    A = rs.Input("A", rs.float32, [M, K])
    B = rs.Input("B", rs.float32, [K, N])
    k = rs.RDom(0, K)
    C = rs.Func("C", shape=[M, N])
    C[i, j] = rs.sum(A[i, k] * B[k, j])
    return C


def example_inputs(scale="small"):
    m, k, n = SHAPES[scale]
    rng = np.random.default_rng(0)
    return {"A": rng.uniform(-1, 1, (m, k)).astype(np.float32),
            "B": rng.uniform(-1, 1, (k, n)).astype(np.float32)}


def reference(A, B):
    return A @ B
