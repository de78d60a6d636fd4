"""apps/depthwise_separable_conv with the halide package: the algorithm of
pipelines/held_out/depthwise_conv.py (channel multiplier 1, 3x3 filter, as that file explains) and the
app's CPU hand schedule."""

import numpy as np

from benchmarks.halide_apps import _App, _f32, _vars, hl
from pipelines.held_out.depthwise_conv import tile_sizes


def _tile_sizes(target, vec):
    """The app's register tile (channels in vectors, columns, rows) for the target's vector registers."""
    regs = 32 if target.has_feature(hl.TargetFeature.AVX512_Skylake) or (target.arch == hl.TargetArch.ARM
                                                                         and target.bits == 64) else 16
    return tile_sizes(regs, vec)


def app(shapes) -> _App:
    n_, h_, w_, c_ = shapes["input"]
    co_ = shapes["pointwise_filter"][1]
    input = hl.ImageParam(hl.Float(32), 4, "input")  # (d, x, y, b)
    depthwise_filter = hl.ImageParam(hl.Float(32), 4, "depthwise_filter")  # (multiplier, d, kx, ky)
    pointwise_filter = hl.ImageParam(hl.Float(32), 2, "pointwise_filter")  # (co, d)
    bias = hl.ImageParam(hl.Float(32), 1, "bias")
    d, x, y, b = _vars("d x y b")

    inside = (x >= 0) & (x < input.dim(1).extent()) & (y >= 0) & (y < input.dim(2).extent())
    input_bounded = hl.Func("input_bounded")
    input_bounded[d, x, y, b] = hl.select(
        inside, input[d, hl.clamp(x, 0, input.dim(1).max()), hl.clamp(y, 0, input.dim(2).max()), b], _f32(0))

    r = hl.RDom([hl.Range(0, 1), hl.Range(0, 3), hl.Range(0, 3)], "r")  # multiplier, kx, ky
    rd, rx, ry = r.x, r.y, r.z
    depthwise_convolved = hl.Func("depthwise_convolved")
    depthwise_convolved[d, x, y, b] = _f32(0)
    depthwise_convolved[d, x, y, b] += depthwise_filter[rd, d, rx, ry] * input_bounded[d, x + rx - 1, y + ry - 1, b]

    rc = hl.RDom([hl.Range(0, pointwise_filter.dim(1).extent())], "rc")
    pointwise_convolved = hl.Func("pointwise_convolved")
    pointwise_convolved[d, x, y, b] = bias[d]
    pointwise_convolved[d, x, y, b] += pointwise_filter[d, rc.x] * depthwise_convolved[rc.x, x, y, b]

    output = hl.Func("output")
    output[d, x, y, b] = hl.max(pointwise_convolved[d, x, y, b], _f32(0))

    def hand(target):
        """The app's CPU branch. Its bound_extent(d, tile_d) and the RoundUp tiles of input_bounded read
        channels up to the next multiple of tile_d, which only exist when C is one (the app's sizes, and
        its specialization C % 32 == 0): for other C (the odd test sizes) both are left out, and
        input_bounded's channel loop is guarded instead."""
        vec = target.natural_vector_size(hl.Float(32))
        tile_d, tile_w, tile_h = _tile_sizes(target, vec)
        tile_d *= vec
        whole = c_ % tile_d == 0
        di, xi, yi = _vars("di xi yi")
        ro, ri = hl.RVar("ro"), hl.RVar("ri")

        output.tile([d, x, y], [di, xi, yi], [tile_d, tile_w, tile_h]).vectorize(di).unroll(xi).unroll(yi) \
            .fuse(y, b, b).parallel(b)
        pointwise_convolved.compute_at(output, d).vectorize(d).unroll(x).unroll(y)
        pointwise_convolved.update().reorder(d, x, y, rc.x, b).vectorize(d).unroll(x).unroll(y) \
            .split(rc.x, ro, ri, tile_d)
        depthwise_convolved.store_in(hl.MemoryType.Stack).compute_at(pointwise_convolved, ro).vectorize(d) \
            .reorder(x, y, d).unroll(x).unroll(y)
        if whole:
            depthwise_convolved.bound_extent(d, tile_d)
        depthwise_convolved.update().vectorize(d).reorder(x, y, d, rd, rx, ry, b).unroll(x).unroll(y)
        input_bounded.store_in(hl.MemoryType.Stack).compute_at(pointwise_convolved, ro)
        if whole:
            input_bounded.tile(d, x, di, xi, vec, 4, hl.TailStrategy.RoundUp)
        else:
            input_bounded.split(d, d, di, vec, hl.TailStrategy.GuardWithIf) \
                .split(x, x, xi, 4, hl.TailStrategy.RoundUp).reorder(di, xi, d, x)
        input_bounded.vectorize(di).unroll(xi)

        depthwise_filter.dim(1).set_stride(1)  # the app's set_stride(channel_multiplier)
        channels = pointwise_filter.dim(1).extent()
        output.specialize(channels == (channels / 32) * 32)

    inputs = [("input", input), ("depthwise_filter", depthwise_filter), ("pointwise_filter", pointwise_filter),
              ("bias", bias)]
    return _App(inputs, output, (n_, h_, w_, co_), hand, out_dtype=np.float32)
