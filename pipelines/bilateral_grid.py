"""Bilateral filter of a float32 gray image [H, W] through a bilateral grid (Halide's apps/bilateral_grid).

The grid has one cell per S x S tile (S = s_sigma = 8) and one z bin per R_SIGMA of intensity. An update
with an RDom over the tile scatters each pixel's value and a count of 1 into the cell's z bin; the grid
is blurred by a 1 4 6 4 1 filter in z, x and y; each output pixel is a trilinear sample of the blurred
grid (value channel over count channel). The image is extended by its edge values, as in the app.
Index order is NumPy's: the grid is [c, z, y, x] (the app's (x, y, z, c) reversed). r_sigma is a
constant (the app's benchmark value 0.1) rather than a runtime parameter. The "full" size is the app's
1536 x 2560 (width x height) image.
"""

import numpy as np

import ragsched as rs

S = 8  # s_sigma: pixels per grid cell in x and y
R_SIGMA = 0.1  # intensity per z bin
INV_R = 1 / R_SIGMA
ZMAX = round(INV_R)  # the largest z bin a value in [0, 1] falls in
SHAPES = {"small": (151, 197), "full": (2560, 1536)}


def _lerp(a, b, w):
    """Halide's float lerp."""
    return a * (1.0 - w) + b * w


def _bin(zv):
    """The z bin of ``zv`` in [0, ZMAX + 0.5]. The clamp changes no value: it is there because ragsched's
    bounds inference does not bound a float-to-int cast by the float's range (Halide does)."""
    return rs.clamp(rs.cast(rs.int32, zv), 0, ZMAX)


def build():
    H, W = rs.Size("H"), rs.Size("W")
    c, z, y, x = rs.vars("c z y x")
    img = rs.Input("img", rs.float32, [H, W])
    clamped = rs.clamp_edge(img)

    # Scatter every pixel of the tile around each grid cell into its z bin: (value, 1).
    ry, rx = rs.RDom((0, S), (0, S), name="r")
    val = rs.clamp(clamped[y * S + ry - S // 2, x * S + rx - S // 2], 0.0, 1.0)
    zi = _bin(val * INV_R + 0.5)
    histogram = rs.Func("histogram", dtype=rs.float32)
    histogram[c, z, y, x] = 0.0
    histogram[c, zi, y, x] += rs.select(c == 0, val, 1.0)

    blurz, blurx, blury = rs.Func("blurz"), rs.Func("blurx"), rs.Func("blury")
    blurz[c, z, y, x] = (histogram[c, z - 2, y, x] + histogram[c, z - 1, y, x] * 4 + histogram[c, z, y, x] * 6
                         + histogram[c, z + 1, y, x] * 4 + histogram[c, z + 2, y, x])
    blurx[c, z, y, x] = (blurz[c, z, y, x - 2] + blurz[c, z, y, x - 1] * 4 + blurz[c, z, y, x] * 6
                         + blurz[c, z, y, x + 1] * 4 + blurz[c, z, y, x + 2])
    blury[c, z, y, x] = (blurx[c, z, y - 2, x] + blurx[c, z, y - 1, x] * 4 + blurx[c, z, y, x] * 6
                         + blurx[c, z, y + 1, x] * 4 + blurx[c, z, y + 2, x])

    # Trilinear sampling of the blurred grid at each pixel.
    val = rs.clamp(img[y, x], 0.0, 1.0)
    zv = val * INV_R
    zi = _bin(zv)
    zf = zv - rs.cast(rs.float32, zi)
    xf = rs.cast(rs.float32, x % S) / S
    yf = rs.cast(rs.float32, y % S) / S
    xi, yi = x // S, y // S
    interpolated = rs.Func("interpolated")
    interpolated[c, y, x] = _lerp(
        _lerp(_lerp(blury[c, zi, yi, xi], blury[c, zi, yi, xi + 1], xf),
              _lerp(blury[c, zi, yi + 1, xi], blury[c, zi, yi + 1, xi + 1], xf), yf),
        _lerp(_lerp(blury[c, zi + 1, yi, xi], blury[c, zi + 1, yi, xi + 1], xf),
              _lerp(blury[c, zi + 1, yi + 1, xi], blury[c, zi + 1, yi + 1, xi + 1], xf), yf),
        zf)

    out = rs.Func("bilateral_grid", shape=[H, W])
    out[y, x] = interpolated[0, y, x] / interpolated[1, y, x]
    return out


def example_inputs(scale="small"):
    rng = np.random.default_rng(0)
    return {"img": rng.random(SHAPES[scale], dtype=np.float32)}


def _blur5(a, axis):
    """1 4 6 4 1 along ``axis``: the output is 4 shorter there."""
    n = a.shape[axis] - 4
    t = [np.take(a, np.arange(d, d + n), axis=axis) for d in range(5)]
    return t[0] + t[1] * 4 + t[2] * 6 + t[3] * 4 + t[4]


def reference(img):
    H, W = img.shape
    gy, gx = (H - 1) // S + 1, (W - 1) // S + 1  # grid cells the samples read: [0, gy] x [0, gx]
    zbins = ZMAX + 2  # sampled z bins: [0, zbins)
    # The histogram over z in [-2, zbins + 2) and cells [-2, g + 3), as the blurs need it.
    ys, xs = np.arange(-2, gy + 3), np.arange(-2, gx + 3)
    hist = np.zeros((2, zbins + 4, ys.size, xs.size), np.float32)
    cy, cx = np.meshgrid(np.arange(ys.size), np.arange(xs.size), indexing="ij")
    for ry in range(S):  # the RDom's order, rx fastest
        py = np.clip(ys * S + ry - S // 2, 0, H - 1)
        for rx in range(S):
            px = np.clip(xs * S + rx - S // 2, 0, W - 1)
            val = np.clip(img[np.ix_(py, px)], 0.0, 1.0)
            zi = (val * np.float32(INV_R) + np.float32(0.5)).astype(np.int32) + 2
            hist[0, zi, cy, cx] += val
            hist[1, zi, cy, cx] += 1.0
    blury = _blur5(_blur5(_blur5(hist, 1), 3), 2)  # [2, zbins, gy + 1, gx + 1]: z, x, then y

    val = np.clip(img, 0.0, 1.0)
    zv = val * np.float32(INV_R)
    zi = zv.astype(np.int32)
    zf = zv - zi.astype(np.float32)
    y, x = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    xf = (x % S).astype(np.float32) / S
    yf = (y % S).astype(np.float32) / S
    xi, yi = x // S, y // S

    def at(dz, dy, dx):
        return blury[:, zi + dz, yi + dy, xi + dx]

    interp = _lerp(_lerp(_lerp(at(0, 0, 0), at(0, 0, 1), xf), _lerp(at(0, 1, 0), at(0, 1, 1), xf), yf),
                   _lerp(_lerp(at(1, 0, 0), at(1, 0, 1), xf), _lerp(at(1, 1, 0), at(1, 1, 1), xf), yf), zf)
    return interp[0] / interp[1]


def hand_schedule(funcs):
    """Halide's apps/bilateral_grid CPU schedule (its loop orders written outermost first): the grid
    blurred along x at root, parallel over grid rows; the histogram and its z blur computed per grid
    row inside it; blury per output row; vectors of 8 along x, the two channels unrolled. The app's
    store_in(Stack) and reorder_storage of blury have no ragsched counterpart."""
    blurz, blurx, blury, hist = funcs["blurz"], funcs["blurx"], funcs["blury"], funcs["histogram"]
    out = funcs["bilateral_grid"]
    funcs["interpolated"].compute_inline()
    blurz.compute_at(blurx, "y").reorder("y", "x", "z", "c").vectorize("x", 8).unroll("c")
    hist.compute_at(blurz, "y")
    hist.update().reorder("y", "x", "r.0", "r.1", "c").unroll("c")
    blurx.compute_root().reorder("y", "z", "x", "c").parallel("y").vectorize("x", 8).unroll("c")
    blury.compute_at(out, "y").reorder("z", "y", "x", "c").vectorize("x", 8).unroll("c")
    out.compute_root().parallel("y", 8).vectorize("x", 8)
