"""A 3x3 convolution layer with bias and ReLU, float32 (Halide's apps/conv_layer).

Layouts are the app's with NumPy's index order (first index outermost): input [N, H + 2, W + 2, CI],
filter [CI, 3, 3, CO], bias [CO], output [N, H, W, CO]; channels are the contiguous dimension. The
reduction visits ky, kx, then ci fastest, as the app's RDom does. The "full" sizes are the app's
(N=5, H=80, W=100, CI=CO=128).
"""

import numpy as np

import ragsched as rs

SHAPES = {"small": (3, 15, 17, 19, 67), "full": (5, 80, 100, 128, 128)}  # N, H, W, CI, CO


def build():
    N, HP, WP, CI, CO = rs.Size("N"), rs.Size("HP"), rs.Size("WP"), rs.Size("CI"), rs.Size("CO")
    n, y, x, c = rs.vars("n y x c")
    input = rs.Input("input", rs.float32, [N, HP, WP, CI])
    filter = rs.Input("filter", rs.float32, [CI, 3, 3, CO])
    bias = rs.Input("bias", rs.float32, [CO])

    r = rs.RDom((0, 3), (0, 3), (0, CI))
    ky, kx, ci = r
    conv = rs.Func("conv")
    conv[n, y, x, c] = bias[c]
    conv[n, y, x, c] += filter[ci, ky, kx, c] * input[n, y + ky, x + kx, ci]

    relu = rs.Func("relu", shape=[N, HP - 2, WP - 2, CO])
    relu[n, y, x, c] = rs.max(0, conv[n, y, x, c])
    return relu


def example_inputs(scale="small"):
    n, h, w, ci, co = SHAPES[scale]
    rng = np.random.default_rng(0)
    return {"input": rng.uniform(-1, 1, (n, h + 2, w + 2, ci)).astype(np.float32),
            "filter": rng.uniform(-1, 1, (ci, 3, 3, co)).astype(np.float32),
            "bias": rng.uniform(-1, 1, (co,)).astype(np.float32)}


def reference(input, filter, bias):
    n, hp, wp, ci = input.shape
    h, w = hp - 2, wp - 2
    conv = np.broadcast_to(bias, (n, h, w, bias.shape[0])).copy()
    for ky in range(3):
        for kx in range(3):
            conv += input[:, ky:ky + h, kx:kx + w, :] @ filter[:, ky, kx, :]
    return np.maximum(conv, 0)
