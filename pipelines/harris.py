"""Harris corner response of a planar RGB float32 image [3, H, W] (Halide's apps/harris).

gray -> 3x3 Sobel derivatives Ix, Iy -> products -> 3x3 box sums -> det - 0.04 trace^2. The output
[H-4, W-4] is the response at the points whose 5x5 neighbourhood lies inside the image.
"""

import numpy as np

import ragsched as rs

SHAPES = {"small": (3, 101, 157), "full": (3, 1536, 2560)}


def _sum3x3(f, y, x):
    return (f[y - 1, x - 1] + f[y - 1, x] + f[y - 1, x + 1] + f[y, x - 1] + f[y, x] + f[y, x + 1]
            + f[y + 1, x - 1] + f[y + 1, x] + f[y + 1, x + 1])


def build():
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [3, H, W])

    gray = rs.Func("gray")
    gray[y, x] = 0.299 * img[0, y, x] + 0.587 * img[1, y, x] + 0.114 * img[2, y, x]

    Iy = rs.Func("Iy")
    Iy[y, x] = (gray[y - 1, x - 1] * (-1 / 12) + gray[y + 1, x - 1] * (1 / 12)
                + gray[y - 1, x] * (-2 / 12) + gray[y + 1, x] * (2 / 12)
                + gray[y - 1, x + 1] * (-1 / 12) + gray[y + 1, x + 1] * (1 / 12))
    Ix = rs.Func("Ix")
    Ix[y, x] = (gray[y - 1, x - 1] * (-1 / 12) + gray[y - 1, x + 1] * (1 / 12)
                + gray[y, x - 1] * (-2 / 12) + gray[y, x + 1] * (2 / 12)
                + gray[y + 1, x - 1] * (-1 / 12) + gray[y + 1, x + 1] * (1 / 12))

    Ixx, Iyy, Ixy = rs.Func("Ixx"), rs.Func("Iyy"), rs.Func("Ixy")
    Ixx[y, x] = Ix[y, x] * Ix[y, x]
    Iyy[y, x] = Iy[y, x] * Iy[y, x]
    Ixy[y, x] = Ix[y, x] * Iy[y, x]
    Sxx, Syy, Sxy = rs.Func("Sxx"), rs.Func("Syy"), rs.Func("Sxy")
    Sxx[y, x] = _sum3x3(Ixx, y, x)
    Syy[y, x] = _sum3x3(Iyy, y, x)
    Sxy[y, x] = _sum3x3(Ixy, y, x)

    det, trace = rs.Func("det"), rs.Func("trace")
    det[y, x] = Sxx[y, x] * Syy[y, x] - Sxy[y, x] * Sxy[y, x]
    trace[y, x] = Sxx[y, x] + Syy[y, x]
    out = rs.Func("harris", shape=[H - 4, W - 4])
    out[y, x] = det[y + 2, x + 2] - 0.04 * trace[y + 2, x + 2] * trace[y + 2, x + 2]
    return out


def example_inputs(scale="small"):
    rng = np.random.default_rng(0)
    return {"img": rng.random(SHAPES[scale], dtype=np.float32)}


def reference(img):
    gray = 0.299 * img[0] + 0.587 * img[1] + 0.114 * img[2]

    def at(a, dy, dx):  # a[y + dy, x + dx] for the points one inside the border of a
        h, w = a.shape
        return a[1 + dy:h - 1 + dy, 1 + dx:w - 1 + dx]

    g = gray
    Iy = (at(g, -1, -1) * (-1 / 12) + at(g, 1, -1) * (1 / 12) + at(g, -1, 0) * (-2 / 12)
          + at(g, 1, 0) * (2 / 12) + at(g, -1, 1) * (-1 / 12) + at(g, 1, 1) * (1 / 12))
    Ix = (at(g, -1, -1) * (-1 / 12) + at(g, -1, 1) * (1 / 12) + at(g, 0, -1) * (-2 / 12)
          + at(g, 0, 1) * (2 / 12) + at(g, 1, -1) * (-1 / 12) + at(g, 1, 1) * (1 / 12))

    def sum3x3(a):
        return (at(a, -1, -1) + at(a, -1, 0) + at(a, -1, 1) + at(a, 0, -1) + at(a, 0, 0) + at(a, 0, 1)
                + at(a, 1, -1) + at(a, 1, 0) + at(a, 1, 1))

    Sxx, Syy, Sxy = sum3x3(Ix * Ix), sum3x3(Iy * Iy), sum3x3(Ix * Iy)
    det = Sxx * Syy - Sxy * Sxy
    trace = Sxx + Syy
    return det - 0.04 * trace * trace


def hand_schedule(funcs):
    """Halide's apps/harris CPU schedule: strips of 32 rows in parallel; gray, Ix and Iy stored per strip
    and slid down it; vectorized by the native width. (The app also fuses Ix's loop into Iy's with
    compute_with, which ragsched does not have.) The other Funcs are inlined (Halide's default)."""
    vec = rs.natural_vector_size(rs.float32)
    for name in ("Ixx", "Iyy", "Ixy", "Sxx", "Syy", "Sxy", "det", "trace"):
        funcs[name].compute_inline()
    out = funcs["harris"]
    out.split("y", "y", "yi", 32).parallel("y").vectorize("x", vec)
    for name in ("gray", "Ix", "Iy"):
        funcs[name].store_at(out, "y").compute_at(out, "yi").vectorize("x", vec)


def gpu_schedule(funcs):
    """Halide's GPU schedule for harris in outline: 16x16 thread tiles of the output; per block, the gray
    image (20x20) and the derivatives Ix, Iy (18x18) staged in shared memory, everything else inline."""
    out = funcs["harris"]
    out.gpu_tile("y", "x", "yo", "xo", "yi", "xi", 16, 16)
    for name in ("Ixx", "Iyy", "Ixy", "Sxx", "Syy", "Sxy", "det", "trace"):
        funcs[name].compute_inline()
    for name in ("Ix", "Iy", "gray"):
        funcs[name].compute_at(out, "xo").gpu_threads("y", "x").store_in(rs.MemoryType.Shared)
