"""apps/max_filter: a circular max filter of radius 26, as pipelines/held_out/max_filter.py."""

import math

from benchmarks.halide_apps import _App, _f32, _vars, hl
from pipelines.held_out.max_filter import SLICES, TILE, R


def app(shapes) -> _App:
    C, H, W = shapes["img"]
    img = hl.ImageParam(hl.Float(32), 3, "img")
    x, y, c, t = _vars("x y c t")
    edge = hl.BoundaryConditions.repeat_edge(img, [hl.Range(img.dim(0).min(), img.dim(0).extent()),
                                                   hl.Range(img.dim(1).min(), img.dim(1).extent())])

    vert_log = hl.Func("vert_log")
    vert_log[x, y, c, t] = edge[x, y, c]
    r = hl.RDom([hl.Range(-R, img.height() + R), hl.Range(1, SLICES - 1)], "r")
    vert_log[x, r.x, c, r.y] = hl.max(vert_log[x, r.x, c, r.y - 1],
                                      vert_log[x, r.x + hl.clamp(1 << (r.y - 1), 0, 2 * R), c, r.y - 1])

    slice_for_radius = hl.Func("slice_for_radius")
    slice_for_radius[t] = hl.cast(hl.Int(32), hl.floor(hl.log(2 * t + 1) / _f32(math.log(2))))

    vert = hl.Func("vert")
    s = hl.clamp(slice_for_radius[t], 0, SLICES)
    first = vert_log[x, y - t, c, s]
    second = vert_log[x, y + t + 1 - hl.clamp(1 << s, 0, 2 * R), c, s]
    vert[x, y, c, t] = hl.max(first, second)

    filter_height = hl.Func("filter_height")
    dy = hl.RDom([hl.Range(0, R + 1)], "dy")
    filter_height[x] = hl.sum(hl.select(hl.cast(hl.Float(32), x * x + dy * dy) < _f32((R + 0.25) * (R + 0.25)), 1, 0))

    dx = hl.RDom([hl.Range(-R, 2 * R + 1)], "dx")
    output = hl.Func("max_filter")
    output[x, y, c] = hl.maximum(vert[x + dx, y, c, hl.clamp(filter_height[dx], 0, R + 1)])

    def hand(target):
        tx = hl.Var("tx")
        slice_for_radius.compute_root()
        filter_height.compute_root()
        output.compute_root().split(x, tx, x, TILE).reorder(x, y, c, tx).fuse(c, tx, t).parallel(t).vectorize(x, 8)
        vert_log.compute_at(output, t)
        vert_log.vectorize(x, 8)
        vert_log.update().reorder(x, r.x, r.y, c).vectorize(x, 8)
        vert.compute_at(output, y).vectorize(x, 8)

    return _App([("img", img)], output, (C, H, W), hand)
