"""Bicubic upsampling of a planar RGB float32 image [3, H, W] by a non-integer factor (written from
Halide's apps/resize, its cubic kernel and its upsample=true pipeline).

Each output column x samples the input at sourcex = (x + 0.5) / SCALE - 0.5 from TAPS = 4 inputs
starting at beginx = ceil(sourcex - 2) (clamped so that all four lie inside the image), with weights
of the cubic convolution kernel (a = -0.5) normalized to sum 1: unnormalized_kernel_x, kernel_sum_x
(an inline sum), kernel_x; the same along y. Upsampling resizes along x first (resized_x, a sum of 4
taps of the input), then along y (resized_y, a sum of 4 rows of resized_x); the output clamps to
[0, 1], the app's float path. The scale factor (a runtime input of the app) is the constant 2.2 here,
so that the output's shape, int(2.2 size), is an expression of the input's; the app's inverse
1 / scale is the float32 constant INV. The "full" input is half the 1536 x 2560 (width x height)
image of the app's benchmarks, so that the output (1689 x 2816) has about its size.
"""

import numpy as np

import ragsched as rs

NUM, DEN = 11, 5  # the scale factor 2.2 as a fraction, for the output's integer shape
SCALE = NUM / DEN
INV = float(np.float32(1.0) / np.float32(SCALE))  # the app's strict float32 1 / scale_factor
TAPS = 4  # the cubic kernel's support; upsampling does not widen it
A = -0.5  # the cubic kernel's parameter
SHAPES = {"small": (3, 67, 89), "full": (3, 1280, 768)}


def _cubic(t):
    """The app's cubic kernel at float32 offsets t."""
    tt = rs.abs(t)
    tt2 = tt * tt
    tt3 = tt2 * tt
    return rs.select(tt < 1.0, (A + 2.0) * tt3 - (A + 3.0) * tt2 + 1.0,
                     rs.select(tt < 2.0, A * tt3 - 5 * A * tt2 + 8 * A * tt - 4.0 * A, 0.0))


def _source(v):
    """Where output coordinate v samples the input: sourcev, and the first tap's position before the
    app's clamp to the image. The extra clamp to [v * DEN // NUM - 3, v * DEN // NUM] changes no value
    (the float's ceil lies in [-2, -1] of v * DEN // NUM; checked for v < 2e6): it is there because
    ragsched's bounds inference does not bound a float-to-int cast by the float's range (Halide does),
    and without it a tile of the output would need every row of resized_x."""
    s = (rs.cast(rs.float32, v) + 0.5) * INV - 0.5
    near = v * DEN // NUM
    return s, rs.clamp(rs.cast(rs.int32, rs.ceil(s - 0.5 * TAPS)), near - 3, near)


def _sum(name, args, e):
    """What the app's inline sum() makes: a Func with an update over r (here named, so that the
    schedule can place it, and in NumPy order)."""
    f = rs.Func(name, dtype=rs.float32)
    f[args] = 0.0
    f[args] += e
    return f


def build():
    H, W = rs.Size("H"), rs.Size("W")
    c, y, x, k = rs.vars("c y x k")
    img = rs.Input("img", rs.float32, [3, H, W])
    r = rs.RDom(0, TAPS, name="r")

    as_float = rs.Func("as_float")
    as_float[c, y, x] = rs.cast(rs.float32, img[c, y, x])

    sourcex, beginx = _source(x)
    sourcey, beginy = _source(y)
    beginx = rs.clamp(beginx, 0, W - TAPS)
    beginy = rs.clamp(beginy, 0, H - TAPS)

    unnormalized_kernel_x, unnormalized_kernel_y = rs.Func("unnormalized_kernel_x"), rs.Func("unnormalized_kernel_y")
    unnormalized_kernel_x[k, x] = _cubic(rs.cast(rs.float32, k + beginx) - sourcex)
    unnormalized_kernel_y[k, y] = _cubic(rs.cast(rs.float32, k + beginy) - sourcey)
    kernel_sum_x, kernel_sum_y = rs.Func("kernel_sum_x"), rs.Func("kernel_sum_y")
    kernel_sum_x[x] = _sum("kernel_sum_x_sum", x, unnormalized_kernel_x[r, x])[x]
    kernel_sum_y[y] = _sum("kernel_sum_y_sum", y, unnormalized_kernel_y[r, y])[y]
    kernel_x, kernel_y = rs.Func("kernel_x"), rs.Func("kernel_y")
    kernel_x[k, x] = unnormalized_kernel_x[k, x] / kernel_sum_x[x]
    kernel_y[k, y] = unnormalized_kernel_y[k, y] / kernel_sum_y[y]

    resized_x, resized_y = rs.Func("resized_x"), rs.Func("resized_y")
    resized_x[c, y, x] = _sum("resized_x_sum", (c, y, x), kernel_x[r, x] * as_float[c, y, r + beginx])[c, y, x]
    resized_y[c, y, x] = _sum("resized_y_sum", (c, y, x), kernel_y[r, y] * resized_x[c, r + beginy, x])[c, y, x]
    out = rs.Func("resize", shape=[3, H * NUM // DEN, W * NUM // DEN])
    out[c, y, x] = rs.clamp(resized_y[c, y, x], 0.0, 1.0)
    return out


def example_inputs(scale="small"):
    rng = np.random.default_rng(0)
    return {"img": rng.random(SHAPES[scale], dtype=np.float32)}


def _weights(n_out: int, n_in: int):
    """(begin [n_out], normalized weights [TAPS, n_out]) along one axis, in float32 as the app."""
    s = (np.arange(n_out).astype(np.float32) + np.float32(0.5)) * np.float32(INV) - np.float32(0.5)
    begin = np.clip(np.ceil(s - np.float32(0.5 * TAPS)).astype(np.int32), 0, n_in - TAPS)
    t = np.abs((np.arange(TAPS)[:, None] + begin).astype(np.float32) - s)
    t2 = t * t
    t3 = t2 * t
    a = np.float32(A)
    near = (a + 2) * t3 - (a + 3) * t2 + 1
    far = a * t3 - 5 * a * t2 + 8 * a * t - 4 * a
    w = np.where(t < 1, near, np.where(t < 2, far, 0)).astype(np.float32)
    total = np.zeros(n_out, np.float32)
    for i in range(TAPS):
        total = total + w[i]
    return begin, w / total


def reference(img):
    _, H, W = img.shape
    bx, wx = _weights(W * NUM // DEN, W)
    by, wy = _weights(H * NUM // DEN, H)
    rx = np.zeros((3, H, bx.size), np.float32)
    for i in range(TAPS):
        rx = rx + wx[i] * img[:, :, bx + i]
    ry = np.zeros((3, by.size, bx.size), np.float32)
    for i in range(TAPS):
        ry = ry + wy[i][:, None] * rx[:, by + i, :]
    return np.clip(ry, 0.0, 1.0)


# Source coordinates reach about 1280 at full scale, where float32 rounds them by about 1e-4; FMA
# contraction of (x + 0.5) * INV - 0.5 changes that rounding, and the kernel's slope carries it into
# the output (Halide's hand schedule: up to 1.5e-4 from NumPy; ragsched: 4.4e-5; at "small": 1e-5).
TOLERANCE = (1e-4, 3e-4)


def hand_schedule(funcs):
    """Halide's apps/resize CPU schedule for upsampling, loop orders written outermost first: kernel_x at
    root, x in vectors with the taps inside, its unnormalized weights and their sum per vector; kernel_y
    per strip of 64 output rows, the same way; the output in 64 x 16 tiles, parallel over strips,
    vectorized along the tile's 16 columns; resized_x per tile, resized_y per 16-wide vector of the
    output, its channel unrolled.

    Departures, each the nearest ragsched has: Halide computes a Func that has an update and is not
    scheduled (the *_sum Funcs of the inline sums) inside its consumer's innermost loop, which is
    vectorized here, and its vectorizer widens it across the lanes; ragsched leaves a loop that computes
    a producer serial, so each sum is computed at its wrapper's level and vectorized along the same Var
    (the code Halide's widening makes). For the same reason resized_y is computed per output row of the
    tile (``yi``), where the app's ``compute_at(output, xi)`` is per 16-wide vector of xi: the same
    points. No counterpart: store_in(Stack) for unnormalized_kernel_x, hoist_storage of resized_x (its
    buffer is allocated per tile), and the app's specializations on packed layouts (the images here are
    planar)."""
    vec = rs.natural_vector_size(rs.float32)
    out = funcs["resize"]
    funcs["as_float"].compute_inline()
    kx, ky = funcs["kernel_x"], funcs["kernel_y"]
    kx.compute_root().reorder("x", "k").vectorize("x", vec)
    funcs["unnormalized_kernel_x"].compute_at(kx, "x").vectorize("x")
    funcs["kernel_sum_x"].compute_at(kx, "x").vectorize("x")
    ky.compute_at(out, "y").reorder("y", "k").vectorize("y", vec)
    funcs["unnormalized_kernel_y"].compute_at(ky, "y").vectorize("y", vec)
    funcs["kernel_sum_y"].compute_at(ky, "y").vectorize("y")
    out.tile("y", "x", "yi", "xi", 64, 16).parallel("y").vectorize("xi")
    funcs["resized_x"].compute_at(out, "x").vectorize("x")
    funcs["resized_y"].compute_at(out, "yi").vectorize("x").unroll("c")
    for name, consumer, at, v in (("kernel_sum_x", kx, "x", "x"), ("kernel_sum_y", ky, "y", "y"),
                                  ("resized_x", out, "x", "x"), ("resized_y", out, "yi", "x")):
        funcs[f"{name}_sum"].compute_at(consumer, at).vectorize(v).update(0).vectorize(v)
