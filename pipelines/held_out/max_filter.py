"""A circular max filter of radius 26 on a float32 image [C, H, W] (written from Halide's apps/max_filter).

Stages: vert_log[t] is the maximum over t-th power-of-two windows of rows, 2^t rows looking downwards,
built by an update with an RDom over (slice, row) that maxes two windows of the slice before;
slice_for_radius[t] (a LUT) picks the slice whose window is at least half as tall as 2 t + 1 rows, so
vert[t] (the max over rows [y - t, y + t]) is the max of two overlapping windows of that slice;
filter_height[dx] (a LUT: an RDom count) is the half-height of the disk at column offset dx; the output
is the maximum over dx in [-26, 26] of vert[filter_height[dx]] at column x + dx. The image is extended
by its edge values in y and x. Index order is NumPy's: vert_log is [t, c, y, x] (the app's (x, y, c, t)
reversed). The clamps that change no value are the app's: they bound the shifted offsets for bounds
inference (ragsched also needs them: it does not bound ``1 << e``). The "full" size is the app's
1536 x 2560 (width x height) RGB image.
"""

import math

import numpy as np

import ragsched as rs

R = 26  # the app's radius
SLICES = math.ceil(math.log(R) / math.log(2)) + 1  # vert_log's power-of-two windows: 1, 2, ..., 32 rows
TILE = 256  # the hand schedule's strip of columns
# "small" is wider than a strip: the app's schedule shifts the last strip inwards, which needs that.
SHAPES = {"small": (3, 45, 301), "full": (3, 2560, 1536)}
TOLERANCE = (0, 0)  # maxima of input values: exact


def build():
    C, H, W = rs.Size("C"), rs.Size("H"), rs.Size("W")
    t, c, y, x = rs.vars("t c y x")
    img = rs.Input("img", rs.float32, [C, H, W])
    edge = rs.clamp_edge(img)
    one = rs.cast(rs.int32, 1)

    vert_log = rs.Func("vert_log")
    vert_log[t, c, y, x] = edge[c, y, x]
    r = rs.RDom((1, SLICES - 1), (-R, H + R), name="r")  # slices outer, rows inner (the app's r.y, r.x)
    rt, ry = r[0], r[1]
    vert_log[rt, c, ry, x] = rs.max(vert_log[rt - 1, c, ry, x],
                                    vert_log[rt - 1, c, ry + rs.clamp(one << (rt - 1), 0, 2 * R), x])

    slice_for_radius = rs.Func("slice_for_radius")
    slice_for_radius[t] = rs.cast(rs.int32, rs.floor(rs.log(rs.cast(rs.float32, 2 * t + 1)) / math.log(2)))

    vert = rs.Func("vert")
    s = rs.clamp(slice_for_radius[t], 0, SLICES)
    first = vert_log[s, c, y - t, x]
    second = vert_log[s, c, y + t + 1 - rs.clamp(one << s, 0, 2 * R), x]
    vert[t, c, y, x] = rs.max(first, second)

    filter_height = rs.Func("filter_height")
    dy = rs.RDom(0, R + 1, name="dy")
    inside = rs.cast(rs.float32, x * x + dy * dy) < (R + 0.25) * (R + 0.25)
    filter_height[x] = rs.cast(rs.int32, rs.sum(rs.select(inside, 1, 0)))

    dx = rs.RDom(-R, 2 * R + 1, name="dx")
    out = rs.Func("max_filter", shape=[C, H, W])
    out[c, y, x] = rs.maximum(vert[rs.clamp(filter_height[dx], 0, R + 1), c, y, x + dx])
    return out


def example_inputs(scale="small"):
    rng = np.random.default_rng(0)
    return {"img": rng.random(SHAPES[scale], dtype=np.float32)}


def reference(img):
    """Dilation by the disk: for each column offset dx, the max over rows [y - h, y + h] with h the
    number of rows dy in [0, R] for which (dx, dy) lies in the disk of radius R + 1/4."""
    _, H, W = img.shape
    dxs = np.arange(-R, R + 1)
    heights = ((dxs[:, None] ** 2 + np.arange(R + 1)[None, :] ** 2) < (R + 0.25) ** 2).sum(axis=1)
    top = int(heights.max())
    a = np.pad(img, ((0, 0), (top, top), (R, R)), mode="edge")
    cols = {}  # h -> max over rows [y - h, y + h], for every padded column
    v = a
    for h in range(top + 1):
        if h > 0:
            v = np.maximum(np.maximum(v[:, :-2], v[:, 1:-1]), v[:, 2:])  # one row more on each side
        cols[h] = v[:, top - h:top - h + H]
    out = np.full(img.shape, -np.inf, np.float32)
    for dx, h in zip(dxs, heights, strict=True):
        out = np.maximum(out, cols[int(h)][:, :, R + dx:R + dx + W])
    return out


def hand_schedule(funcs):
    """Halide's apps/max_filter CPU schedule: the output in strips of 256 columns, the strip and channel
    loops fused into one parallel loop (its order: strip, channel, row, column); vert_log computed per
    strip and channel, its update run channel, slice, row, column; vert computed per output row; the two
    LUTs at root; vectors of the native float32 width (the app's 8). The app leaves the output's inline
    maximum over dx unscheduled, which Halide computes inside the output's innermost (vectorized) loop;
    ragsched computes such a Func at root by default, so it is put at the output's vector loop here,
    vectorized along x with the dx loop outside."""
    vec = rs.natural_vector_size(rs.float32)
    funcs["slice_for_radius"].compute_root()
    funcs["filter_height"].compute_root()
    out, vert_log = funcs["max_filter"], funcs["vert_log"]
    out.compute_root().split("x", "tx", "x", TILE).reorder("tx", "c", "y", "x").fuse("tx", "c", "t") \
        .parallel("t").vectorize("x", vec)
    vert_log.compute_at(out, "t").vectorize("x", vec)
    vert_log.update(0).reorder("c", "r.0", "r.1", "x").vectorize("x", vec)
    funcs["vert"].compute_at(out, "y").vectorize("x", vec)
    maximum = next(f for name, f in funcs.items() if name.startswith("maximum_"))  # rs.maximum's Func
    maximum.compute_at(out, "x").vectorize("x", vec)
    maximum.update(0).reorder("c", "y", "dx.0", "x").vectorize("x", vec)
