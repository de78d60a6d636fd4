"""A 3x3 box blur done in linear light, of a planar float32 sRGB image [C, H, W] (written from Halide's
apps/linear_blur).

The app composes three generators: srgb_to_linear (the sRGB decoding curve: a linear segment below
0.04045, a 2.4 power above), simple_blur (a box blur of 3 taps in x then 3 in y, the image extended by
its edge values, repeat_edge in the app) and linear_to_srgb (the encoding curve back). Each stage is
per-pixel or a small stencil; the output has the input's shape, taps reaching 2 pixels past the right
and bottom edges as in the app. The "full" size is the app's test image (rgb.png: 1536 x 2560, 3
channels).
"""

import numpy as np

import ragsched as rs

SHAPES = {"small": (3, 61, 83), "full": (3, 2560, 1536)}
# The app's float constants, folded in float32 as the C++ does.
ONE_055 = float(np.float32(1.0) + np.float32(0.055))
INV_GAMMA = float(np.float32(1.0) / np.float32(2.4))
# Measured at "small": about 2e-7 of the output's range (pow, reassociation by contraction).
TOLERANCE = (1e-5, 1e-6)


def build():
    C, H, W = rs.Size("C"), rs.Size("H"), rs.Size("W")
    c, y, x = rs.vars("c y x")
    img = rs.Input("img", rs.float32, [C, H, W])

    linear = rs.Func("linear")  # srgb_to_linear
    v = img[c, y, x]
    linear[c, y, x] = rs.select(v <= 0.04045, v / 12.92, rs.pow((v + 0.055) / ONE_055, 2.4))

    # simple_blur: the app's repeat_edge of the linear Func over the image's extent.
    edge = rs.Func("repeat_edge")
    edge[c, y, x] = linear[c, rs.clamp(y, 0, H - 1), rs.clamp(x, 0, W - 1)]
    blur_x = rs.Func("blur_x")
    blur_x[c, y, x] = (edge[c, y, x] + edge[c, y, x + 1] + edge[c, y, x + 2]) / 3
    blurred = rs.Func("blurred")
    blurred[c, y, x] = (blur_x[c, y, x] + blur_x[c, y + 1, x] + blur_x[c, y + 2, x]) / 3

    srgb = rs.Func("srgb")  # linear_to_srgb
    b = blurred[c, y, x]
    srgb[c, y, x] = rs.select(b <= 0.0031308, b * 12.92, ONE_055 * rs.pow(b, INV_GAMMA) - 0.055)

    out = rs.Func("linear_blur", shape=[C, H, W])
    out[c, y, x] = srgb[c, y, x]
    return out


def example_inputs(scale="small"):
    rng = np.random.default_rng(0)
    return {"img": rng.random(SHAPES[scale], dtype=np.float32)}


def reference(img):
    _, H, W = img.shape
    lin = np.where(img <= np.float32(0.04045), img / np.float32(12.92),
                   ((img + np.float32(0.055)) / np.float32(ONE_055)) ** np.float32(2.4))
    p = np.pad(lin, ((0, 0), (0, 2), (0, 2)), mode="edge")
    bx = (p[:, :, 0:W] + p[:, :, 1:W + 1] + p[:, :, 2:W + 2]) / np.float32(3)
    blurred = (bx[:, 0:H] + bx[:, 1:H + 1] + bx[:, 2:H + 2]) / np.float32(3)
    return np.where(blurred <= np.float32(0.0031308), blurred * np.float32(12.92),
                    np.float32(ONE_055) * blurred ** np.float32(INV_GAMMA) - np.float32(0.055))


def hand_schedule(funcs):
    """The CPU schedules of the app's three generators. The composite linear_blur generator has none
    (it aborts unless autoscheduled); each part's own schedule is what it runs as a separate pipeline,
    so here each part's result is computed at root with it: strips of 8 rows in parallel, vectorized
    along x; simple_blur's blur_x stored per strip and slid down it row by row. The output copies srgb,
    which is inlined into it with srgb's schedule; repeat_edge is inlined (Halide's default). The app's
    vectors of 8 are the native width here."""
    vec = rs.natural_vector_size(rs.float32)
    for name in ("repeat_edge", "srgb"):
        funcs[name].compute_inline()
    funcs["linear"].compute_root().split("y", "y", "yi", 8).parallel("y").vectorize("x", vec)
    blurred = funcs["blurred"]
    blurred.compute_root().split("y", "y", "yi", 8).parallel("y").vectorize("x", vec)
    funcs["blur_x"].store_at(blurred, "y").compute_at(blurred, "yi").vectorize("x", vec)
    funcs["linear_blur"].split("y", "y", "yi", 8).parallel("y").vectorize("x", vec)
