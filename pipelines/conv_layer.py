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

    r = rs.RDom((0, 3), (0, 3), (0, CI), name="r")
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


def hand_schedule(funcs):
    """Halide's apps/conv_layer CPU schedule for this machine's vectors (AVX-512: 16 lanes, a 4-vector x
    5-column register tile; AVX2: 8 lanes, 3 x 4): the output channels in blocks of vec * tile_w, the
    columns in blocks of tile_h; conv computed per block with its reduction outside the unrolled tile,
    so the tile's accumulators stay in registers. Loop orders are written outermost first; the app's
    three nested parallel loops (co, n, y) are one fused parallel loop here, and its in() wrappers that
    stage the filter and the input are left out: ragsched's ``in_`` places them, but their buffers,
    computed inside the reduction, have sizes that bounds inference does not reduce to constants, so each
    iteration allocates (Halide puts such buffers on the stack) and the schedule runs 10x slower."""
    vec = rs.natural_vector_size(rs.float32)
    tile_w, tile_h = (4, 5) if vec >= 16 else (3, 4)
    relu, conv = funcs["relu"], funcs["conv"]
    relu.split("c", "co", "ci", vec * tile_w).split("x", "xo", "xi", tile_h) \
        .reorder("co", "n", "y", "xo", "xi", "ci").vectorize("ci", vec).unroll("ci").unroll("xi") \
        .fuse("co", "n", "con").fuse("con", "y", "cony").parallel("cony")
    conv.compute_at(relu, "xo").vectorize("c", vec).unroll("c").unroll("x").unroll("y")
    conv.update().reorder("n", "r.0", "r.1", "r.2", "y", "x", "c").vectorize("c", vec).unroll("c") \
        .unroll("x").unroll("y").unroll("r.2", 2)
