"""Unsharp masking of a planar RGB float32 image [3, H, W] (Halide's apps/unsharp).

gray -> separable Gaussian blur (sigma 1.5, radius 3) -> sharpen = 2 gray - blur -> ratio = sharpen / gray
-> output = input * ratio. The image is extended by its edge values (clamp_edge), as in Halide's app.
"""

import math

import numpy as np

import ragsched as rs

SIGMA = 1.5
RADIUS = 3
SHAPES = {"small": (3, 97, 163), "full": (3, 1536, 2560)}


def build():
    H, W = rs.Size("H"), rs.Size("W")
    c, y, x, k = rs.vars("c y x k")
    img = rs.Input("img", rs.float32, [3, H, W])
    edge = rs.clamp_edge(img)

    kernel = rs.Func("kernel")
    kf = rs.cast(rs.float32, k)
    kernel[k] = rs.exp(-kf * kf / (2 * SIGMA * SIGMA)) / (math.sqrt(2 * math.pi) * SIGMA)

    gray = rs.Func("gray")
    gray[y, x] = 0.299 * edge[0, y, x] + 0.587 * edge[1, y, x] + 0.114 * edge[2, y, x]

    blur_y = rs.Func("blur_y")
    e = kernel[0] * gray[y, x]
    for d in range(1, RADIUS + 1):
        e = e + kernel[d] * (gray[y - d, x] + gray[y + d, x])
    blur_y[y, x] = e

    blur_x = rs.Func("blur_x")
    e = kernel[0] * blur_y[y, x]
    for d in range(1, RADIUS + 1):
        e = e + kernel[d] * (blur_y[y, x - d] + blur_y[y, x + d])
    blur_x[y, x] = e

    sharpen = rs.Func("sharpen")
    sharpen[y, x] = 2 * gray[y, x] - blur_x[y, x]
    ratio = rs.Func("ratio")
    ratio[y, x] = sharpen[y, x] / gray[y, x]
    out = rs.Func("unsharp", shape=[3, H, W])
    out[c, y, x] = ratio[y, x] * img[c, y, x]
    return out


def example_inputs(scale="small"):
    # Values away from 0: the ratio divides by the gray level.
    rng = np.random.default_rng(0)
    return {"img": rng.uniform(0.1, 1.0, SHAPES[scale]).astype(np.float32)}


def reference(img):
    k = np.arange(RADIUS + 1, dtype=np.float32)
    kernel = np.exp(-k * k / (2 * SIGMA * SIGMA)) / (math.sqrt(2 * math.pi) * SIGMA)
    gray = 0.299 * img[0] + 0.587 * img[1] + 0.114 * img[2]
    H, W = gray.shape
    g = np.pad(gray, RADIUS, mode="edge")
    r = RADIUS
    blur_y = kernel[0] * g[r:r + H]
    for d in range(1, r + 1):
        blur_y = blur_y + kernel[d] * (g[r - d:r - d + H] + g[r + d:r + d + H])
    blur_x = kernel[0] * blur_y[:, r:r + W]
    for d in range(1, r + 1):
        blur_x = blur_x + kernel[d] * (blur_y[:, r - d:r - d + W] + blur_y[:, r + d:r + d + W])
    sharpen = 2 * gray - blur_x
    ratio = sharpen / gray
    return ratio[None] * img


def hand_schedule(funcs):
    """Halide's apps/unsharp CPU schedule: strips of 32 rows in parallel; gray, blur_y and ratio stored
    per strip and slid down it row by row; everything vectorized by the native width. The other Funcs
    are inlined (Halide's default)."""
    vec = rs.natural_vector_size(rs.float32)
    for name in ("kernel", "blur_x", "sharpen"):
        funcs[name].compute_inline()
    out = funcs["unsharp"]
    out.split("y", "yo", "yi", 32).vectorize("x", vec).parallel("yo").reorder("yo", "yi", "c", "x")
    for name in ("gray", "blur_y", "ratio"):
        funcs[name].compute_at(out, "yi").store_at(out, "yo").vectorize("x", vec)
