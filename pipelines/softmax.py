"""Numerically stable softmax of each row of a float32 matrix [N, M]: exp(x - max) / sum(exp(x - max))."""

import numpy as np

import ragsched as rs

SHAPES = {"small": (97, 203), "full": (4096, 1024)}


def build():
    N, M = rs.Size("N"), rs.Size("M")
    i, j = rs.vars("i j")
    x = rs.Input("x", rs.float32, [N, M])
    r = rs.RDom(0, M)
    row_max = rs.Func("row_max")
    row_max[i] = rs.maximum(x[i, r])
    e = rs.Func("e")
    e[i, j] = rs.exp(x[i, j] - row_max[i])
    row_sum = rs.Func("row_sum")
    row_sum[i] = rs.sum(e[i, r])
    out = rs.Func("softmax", shape=[N, M])
    out[i, j] = e[i, j] / row_sum[i]
    return out


def example_inputs(scale="small"):
    rng = np.random.default_rng(0)
    return {"x": rng.normal(0, 4, SHAPES[scale]).astype(np.float32)}


def reference(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
