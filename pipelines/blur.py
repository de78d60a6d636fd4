"""3x3 box blur of a float32 image, separable as blur_x then blur_y (Halide's apps/blur).

The output shrinks by 2 in each dimension, so no read falls outside the image.
"""

import numpy as np

import ragsched as rs

SHAPES = {"small": (131, 227), "full": (1536, 2560)}


def build():
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    blur_x = rs.Func("blur_x")
    blur_x[y, x] = (img[y, x] + img[y, x + 1] + img[y, x + 2]) / 3
    blur_y = rs.Func("blur_y", shape=[H - 2, W - 2])
    blur_y[y, x] = (blur_x[y, x] + blur_x[y + 1, x] + blur_x[y + 2, x]) / 3
    return blur_y


def example_inputs(scale="small"):
    rng = np.random.default_rng(0)
    return {"img": rng.random(SHAPES[scale], dtype=np.float32)}


def reference(img):
    blur_x = (img[:, :-2] + img[:, 1:-1] + img[:, 2:]) / 3
    return (blur_x[:-2] + blur_x[1:-1] + blur_x[2:]) / 3


def hand_schedule(funcs):
    """Halide's apps/blur CPU schedule: strips of 32 rows in parallel, blur_x slid down each strip (each
    of its rows computed once, four rows stored), both vectorized by the native width (16 with AVX-512)."""
    vec = rs.natural_vector_size(rs.float32)
    funcs["blur_y"].split("y", "y", "yi", 32).parallel("y").vectorize("x", vec)
    funcs["blur_x"].store_at(funcs["blur_y"], "y").compute_at(funcs["blur_y"], "x").vectorize("x", vec)


def gpu_schedule(funcs):
    """16x16 thread tiles of blur_y; each block first computes the 18 rows of blur_x its tile reads into
    shared memory (one point per thread), then a barrier."""
    funcs["blur_y"].gpu_tile("y", "x", "yo", "xo", "yi", "xi", 16, 16)
    funcs["blur_x"].compute_at(funcs["blur_y"], "xo").gpu_threads("y", "x").store_in(rs.MemoryType.Shared)
