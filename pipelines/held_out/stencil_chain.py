"""A chain of 32 5x5 stencils on a uint16 image [H, W] (written from Halide's apps/stencil_chain).

The image is extended by its edge values (a Func, as Halide's repeat_edge is, so that a schedule can
place it); each stage s is a weighted sum of the previous one over a 5x5 window, weight (dx + 3) (dy + 3)
for offsets dy, dx in [-2, 2]; the output is the last stage. The arithmetic is the app's: uint16
throughout, wrapping on overflow (it overflows at once: the weights sum to 225), so results are exact.
Each stage reads 2 pixels further out, so stage s is computed over the image grown by 4 (31 - s) rows
and columns. The app's input is the red channel of a 1536 x 2560 (width x height) image.
"""

import numpy as np

import ragsched as rs

STENCILS = 32
RADIUS = 2
GROUP = 11  # the hand schedule's stages per compute_root group (the app's group_size)
SHAPES = {"small": (97, 151), "full": (2560, 1536)}
TOLERANCE = (0, 0)  # integer arithmetic: exact


def build():
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.uint16, [H, W])
    edge = rs.clamp_edge(img)
    prev = rs.Func("repeat_edge")
    prev[y, x] = edge[y, x]
    for s in range(STENCILS):
        f = rs.Func(f"stage_{s}")
        e = rs.cast(rs.uint16, 0)
        for dx in range(-RADIUS, RADIUS + 1):  # the app's loop order: x offsets outer, y offsets inner
            for dy in range(-RADIUS, RADIUS + 1):
                e = e + ((dx + 3) * (dy + 3)) * prev[y + dy, x + dx]
        f[y, x] = e
        prev = f
    out = rs.Func("stencil_chain", shape=[H, W])
    out[y, x] = prev[y, x]
    return out


def example_inputs(scale="small"):
    rng = np.random.default_rng(0)
    return {"img": rng.integers(0, 1 << 16, SHAPES[scale], dtype=np.uint16)}


def reference(img):
    r = RADIUS
    a = np.pad(img, r * STENCILS, mode="edge")
    for _ in range(STENCILS):
        h, w = a.shape[0] - 2 * r, a.shape[1] - 2 * r
        acc = np.zeros((h, w), np.uint16)
        for dy in range(-r, r + 1):
            for dx in range(-r, r + 1):
                acc += np.uint16((dx + 3) * (dy + 3)) * a[r + dy:r + dy + h, r + dx:r + dx + w]
        a = acc
    return a


def hand_schedule(funcs):
    """Halide's apps/stencil_chain CPU schedule: counting back from the output, every 11th stage is
    computed at root in 4 x 4 tiles (the app's image size grown by that stage's border, so 16 tasks at the
    "full" size), the tiles fused and run in parallel; the 10 stages before it are stored per tile and
    computed per row of the tile, sliding down it; vectors of the natural uint16 width (the app's
    natural_vector_size<uint16_t>). The tile sizes are the app's constants, so at other sizes the tiles
    do not divide the image into 16; the output's tiles guard their tail (an if): at the app's size they
    divide it, and Halide's shift-inwards tail cannot fit a smaller output. stage_31 is inlined into the
    output, as the app leaves it unscheduled (Halide inlines by default; ragsched computes at root)."""
    vec = rs.natural_vector_size(rs.uint16)
    full_h, full_w = SHAPES["full"]
    stages = [funcs["repeat_edge"]] + [funcs[f"stage_{s}"] for s in range(STENCILS)]
    last = len(stages) - 1
    stages[last].compute_inline()
    for j in range(last, 0, -GROUP):
        out = funcs["stencil_chain"] if j == last else stages[j]
        grow = 4 * (last - j)  # two pixels on each side per stage after j
        tail = "guard" if j == last else "auto"
        out.compute_root().tile("y", "x", "yo", "xo", "yi", "xi", (full_h + grow) // 4, (full_w + grow) // 4,
                                tail=tail).fuse("yo", "xo", "t").parallel("t").vectorize("xi", vec)
        for i in range(max(0, j - GROUP + 1), j):
            stages[i].store_at(out, "t").compute_at(out, "yi").vectorize("x", vec)
