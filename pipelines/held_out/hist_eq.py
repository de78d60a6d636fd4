"""Histogram equalization of the luma of a planar uint8 RGB image [3, H, W], written from Halide's apps/hist.

Stages: luma Y and chroma Cr, Cb (float32) from the RGB bytes; a 256-bin histogram of Y per row (an
RDom update scattering +1 into the row's bin of each pixel), summed over the rows (an RDom update);
its cumulative sum cdf (a scan over the bins, an RDom update); the equalized luma cdf[Y] * 255 / (H W);
and the output's RGB bytes from the equalized luma and the original chroma. The "full" size is the
app's 1536 x 2560 (width x height) image.
"""

import numpy as np

import ragsched as rs

SHAPES = {"small": (3, 97, 131), "full": (3, 2560, 1536)}
# Bytes, not floats: a luma on a bin boundary falls in the next bin under FMA contraction or Halide's
# float reassociation, moving that pixel's equalized luma by its bin's share of 255 (2.1 here), and a
# last-bit difference before a truncating cast moves a byte by 1. So 3 steps of the 255 range.
TOLERANCE = (0.0, 3 / 255)


def _bin(v):
    """The bin of luma ``v``: Halide's int(clamp(Y, 0, 255)). The outer clamp changes no value: ragsched's
    bounds inference does not bound a float-to-int cast by the float's range (Halide does)."""
    return rs.clamp(rs.cast(rs.int32, rs.clamp(v, 0.0, 255.0)), 0, 255)


def build():
    H, W = rs.Size("H"), rs.Size("W")
    c, y, x = rs.vars("c y x")
    img = rs.Input("img", rs.uint8, [3, H, W])
    red, green, blue = (rs.cast(rs.float32, img[k, y, x]) for k in range(3))

    Y = rs.Func("Y")
    Y[y, x] = 0.299 * red + 0.587 * green + 0.114 * blue
    Cr, Cb = rs.Func("Cr"), rs.Func("Cb")
    Cr[y, x] = (red - Y[y, x]) * 0.713 + 128.0
    Cb[y, x] = (blue - Y[y, x]) * 0.564 + 128.0

    hist_rows = rs.Func("hist_rows", dtype=rs.int32)
    hist_rows[y, x] = 0
    rx = rs.RDom(0, W, name="rx")
    hist_rows[y, _bin(Y[y, rx])] += 1

    hist = rs.Func("hist", dtype=rs.int32)
    hist[x] = 0
    ry = rs.RDom(0, H, name="ry")
    hist[x] += hist_rows[ry, x]

    cdf = rs.Func("cdf")
    cdf[x] = hist[0]
    b = rs.RDom(1, 255, name="b")
    cdf[b] = cdf[b - 1] + hist[b]

    cdf_bin = rs.Func("cdf_bin")
    cdf_bin[y, x] = rs.cast(rs.uint8, rs.clamp(Y[y, x], 0.0, 255.0))
    eq = rs.Func("equalize")
    scale = 255.0 / rs.cast(rs.float32, H * W)
    eq[y, x] = rs.clamp(rs.cast(rs.float32, cdf[cdf_bin[y, x]]) * scale, 0.0, 255.0)

    def byte(v):
        return rs.cast(rs.uint8, rs.clamp(v, 0.0, 255.0))

    r = byte(eq[y, x] + (Cr[y, x] - 128.0) * 1.4)
    g = byte(eq[y, x] - 0.343 * (Cb[y, x] - 128.0) - 0.711 * (Cr[y, x] - 128.0))
    bl = byte(eq[y, x] + 1.765 * (Cb[y, x] - 128.0))
    out = rs.Func("hist_eq", shape=[3, H, W])
    out[c, y, x] = rs.select(c == 0, r, rs.select(c == 1, g, bl))
    return out


def example_inputs(scale="small"):
    rng = np.random.default_rng(0)
    return {"img": rng.integers(0, 256, SHAPES[scale], dtype=np.uint8)}


def reference(img):
    f = np.float32
    red, green, blue = (img[k].astype(f) for k in range(3))
    Y = f(0.299) * red + f(0.587) * green + f(0.114) * blue
    Cr = (red - Y) * f(0.713) + f(128)
    Cb = (blue - Y) * f(0.564) + f(128)
    luma = np.clip(Y, f(0), f(255))
    cdf = np.cumsum(np.bincount(luma.astype(np.int32).ravel(), minlength=256))
    eq = np.clip(cdf[luma.astype(np.uint8)].astype(f) * (f(255) / f(img.shape[1] * img.shape[2])), f(0), f(255))
    out = [eq + (Cr - f(128)) * f(1.4),
           eq - f(0.343) * (Cb - f(128)) - f(0.711) * (Cr - f(128)),
           eq + f(1.765) * (Cb - f(128))]
    return np.stack([np.clip(v, f(0), f(255)).astype(np.uint8) for v in out])


def hand_schedule(funcs):
    """Halide's apps/hist CPU schedule: per strip of 4 rows (in parallel), a private copy of the luma
    (Halide's Y.clone_in(hist_rows): here a wrapper Y.in_(hist_rows) of the inlined Y) vectorized, and
    the strip's 4 row histograms updated together (rows unrolled inside the pixel loop), copied out
    through hist_rows.in_(); the row histograms summed with the bins vectorized, unrolled by 4 and split
    in parallel chunks; the cdf at root, serial; the output in parallel strips of 8 rows, channels
    unrolled, vectors of 2 vec along x; everything else inlined (Halide's default). (The output's
    bound(c) makes ragsched compute it into a buffer of its own and copy it out, a pass Halide has not.)"""
    vec = rs.natural_vector_size(rs.float32)
    for name in ("Y", "Cr", "Cb", "cdf_bin", "equalize"):
        funcs[name].compute_inline()
    hist_rows, hist, cdf, out = funcs["hist_rows"], funcs["hist"], funcs["cdf"], funcs["hist_eq"]
    luma = funcs["Y"].in_(hist_rows)
    rows = hist_rows.in_()
    rows.compute_root().vectorize("x", vec).parallel("y", 4)
    luma.compute_at(rows, "y").vectorize("x", vec)
    hist_rows.compute_at(rows, "y").vectorize("x", vec)
    hist_rows.update(0).reorder("rx.0", "y").unroll("y")
    hist.compute_root().vectorize("x", vec)
    hist.update(0).reorder("ry.0", "x").vectorize("x", vec).unroll("x", 4).parallel("x") \
        .reorder("x", "ry.0", "x.u", "x.v")
    cdf.compute_root().bound("x", 0, 256)
    out.reorder("y", "x", "c").bound("c", 0, 3).unroll("c").parallel("y", 8).vectorize("x", 2 * vec)
