"""A depthwise separable convolution layer, float32 (written from Halide's apps/depthwise_separable_conv).

Stages, as in the app: input_bounded (the input with x and y padded by zeros, written as a select of a
clamped read, as the app does to avoid the boundary helpers' loop partitioning) -> depthwise_convolved
(a 3x3 filter per channel: an update over the RDom (ky, kx, channel multiplier)) -> pointwise_convolved
(bias, then an update summing the intermediate channels through a 1x1 filter) -> output = ReLU.

Layouts are the app's in NumPy's index order (channels contiguous): input [N, H, W, C], depthwise filter
[3, 3, C, CM], pointwise filter [C * CM, CO], bias [CO], output [N, H, W, CO]. CM (the channel
multiplier) is fixed at 1: the app indexes its filter by the intermediate channel, so only CM = 1 stays
inside it, and its hand schedule is specialized for it. Intermediate channel d therefore reads input
channel d (the app's d / CM); the RDom keeps the app's multiplier dimension, of extent 1. (A symbolic CM
does not compile: ragsched bounds ``d // CM`` with negative indices and refuses the call.) "full" is the
app's benchmark, the second layer of MobileNet v2 (N=4, 112x112, C=32, CO=16).
"""

import platform

import numpy as np

import ragsched as rs

SHAPES = {"small": (3, 15, 17, 35, 21), "full": (4, 112, 112, 32, 16)}  # N, H, W, C, CO (CM = 1)
TOLERANCE = (1e-4, 1e-5)


def build():
    N, H, W, C = rs.Size("N"), rs.Size("H"), rs.Size("W"), rs.Size("C")
    CO = rs.Size("CO")
    b, y, x, d = rs.vars("b y x d")
    input = rs.Input("input", rs.float32, [N, H, W, C])
    depthwise_filter = rs.Input("depthwise_filter", rs.float32, [3, 3, C, 1])
    pointwise_filter = rs.Input("pointwise_filter", rs.float32, [C, CO])
    bias = rs.Input("bias", rs.float32, [CO])

    input_bounded = rs.Func("input_bounded")
    inside = (x >= 0) & (x < W) & (y >= 0) & (y < H)
    input_bounded[b, y, x, d] = rs.select(inside, input[b, rs.clamp(y, 0, H - 1), rs.clamp(x, 0, W - 1), d], 0.0)

    r = rs.RDom((0, 3), (0, 3), (0, 1), name="r")  # ky, kx, then the channel multiplier fastest (the app's)
    ky, kx, rd = r
    depthwise_convolved = rs.Func("depthwise_convolved")
    # The app's += starts from an implicit 0; ragsched would name that stage's loops v0..v3, not b y x d.
    depthwise_convolved[b, y, x, d] = rs.cast(rs.float32, 0)
    depthwise_convolved[b, y, x, d] += (depthwise_filter[ky, kx, d, rd]
                                        * input_bounded[b, y + ky - 1, x + kx - 1, d])

    rc = rs.RDom(0, C, name="rc")
    pointwise_convolved = rs.Func("pointwise_convolved")
    pointwise_convolved[b, y, x, d] = bias[d]
    pointwise_convolved[b, y, x, d] += pointwise_filter[rc, d] * depthwise_convolved[b, y, x, rc]

    output = rs.Func("output", shape=[N, H, W, CO])
    output[b, y, x, d] = rs.max(pointwise_convolved[b, y, x, d], 0.0)
    return output


def example_inputs(scale="small"):
    n, h, w, c, co = SHAPES[scale]
    rng = np.random.default_rng(0)
    return {"input": rng.uniform(-1, 1, (n, h, w, c)).astype(np.float32),
            "depthwise_filter": rng.uniform(-1, 1, (3, 3, c, 1)).astype(np.float32),
            "pointwise_filter": rng.uniform(-1, 1, (c, co)).astype(np.float32),
            "bias": rng.uniform(-1, 1, (co,)).astype(np.float32)}


def reference(input, depthwise_filter, pointwise_filter, bias):
    _, h, w, _ = input.shape
    padded = np.pad(input, ((0, 0), (1, 1), (1, 1), (0, 0)))
    dw = np.zeros_like(input)
    for ky in range(3):
        for kx in range(3):
            dw += depthwise_filter[ky, kx, :, 0] * padded[:, ky:ky + h, kx:kx + w, :]
    return np.maximum(dw @ pointwise_filter + bias, 0)


def _tile_sizes(vec):
    """The app's register tile (channels in vectors, columns, rows) for this machine's vector registers."""
    return tile_sizes(32 if vec == 16 or platform.machine().lower() in ("aarch64", "arm64") else 16, vec)


def tile_sizes(regs: int, vec: int) -> tuple[int, int, int]:
    """The app's register tile for ``regs`` vector registers of ``vec`` lanes (its Halide version too)."""
    if regs == 32 and vec == 16:
        return 1, 6, 4
    if regs == 32 and vec == 4:
        return 4, 3, 2
    if regs == 16 and vec == 8:
        return 2, 3, 2
    return 4, 2, 1


def hand_schedule(funcs):
    """Halide's apps/depthwise_separable_conv CPU schedule (loop orders written outermost first): the
    output in register tiles of tile_d channels x tile_w columns x tile_h rows, vectorized and unrolled,
    rows and images fused into one parallel loop; pointwise_convolved per tile, its channel sum outside
    the tile and split in slices of tile_d channels; per slice, the depthwise conv of those channels
    (its reduction outside the unrolled tile) and the zero-padded input it reads, in vec x 4 tiles. A
    tile_d-wide Halide vector is written as native vectors, unrolled where the extent is a constant.

    Nearest things where ragsched differs: the app's bound_extent(d, tile_d) on depthwise_convolved has
    no counterpart (ragsched's bound needs a constant min), so the channel-slice split is tail="split"
    (whole slices have constant-size buffers, the last partial one its own loop) and the depthwise
    channel loop is not unrolled; input_bounded's channel split is guarded instead of RoundUp, which
    would read input channels past C (ragsched compiles one kernel for all C; the app specializes for
    C % 32 == 0). store_in(Stack) and the specialization are left out."""
    vec = rs.natural_vector_size(rs.float32)
    tile_d, tile_w, tile_h = _tile_sizes(vec)
    tile_d *= vec
    out, pw = funcs["output"], funcs["pointwise_convolved"]
    dw, inb = funcs["depthwise_convolved"], funcs["input_bounded"]

    out.split("d", "d", "di", tile_d).split("x", "x", "xi", tile_w).split("y", "y", "yi", tile_h) \
        .reorder("b", "y", "x", "d", "yi", "xi", "di").vectorize("di", vec).unroll("di").unroll("xi").unroll("yi") \
        .fuse("b", "y", "b").parallel("b")

    pw.compute_at(out, "d").vectorize("d", vec).unroll("d").unroll("x").unroll("y")
    pw.update().reorder("b", "rc.0", "y", "x", "d").vectorize("d", vec).unroll("d").unroll("x").unroll("y") \
        .split("rc.0", "ro", "ri", tile_d, tail="split")

    dw.compute_at(pw.update(), "ro").split("d", "d", "dv", vec).reorder("b", "d", "y", "x", "dv").vectorize("dv") \
        .unroll("x").unroll("y")
    dw.update().split("d", "d", "dv", vec).reorder("b", "r.0", "r.1", "r.2", "d", "y", "x", "dv").vectorize("dv") \
        .unroll("x").unroll("y")

    inb.compute_at(pw.update(), "ro").split("d", "d", "di", vec, tail="guard").split("x", "x", "xi", 4, tail="pad") \
        .reorder("b", "y", "x", "d", "xi", "di").vectorize("di").unroll("xi")
