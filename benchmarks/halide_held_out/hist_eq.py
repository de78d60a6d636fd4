"""apps/hist: histogram equalization of the luma of a uint8 RGB image, with the app's CPU schedule."""

import numpy as np

from benchmarks.halide_apps import _App, _f32, _vars, hl


def app(shapes) -> _App:
    C, H, W = shapes["img"]
    img = hl.ImageParam(hl.UInt(8), 3, "img")
    x, y, c = _vars("x y c")
    f32 = hl.Float(32)
    red, green, blue = (hl.cast(f32, img[x, y, k]) for k in range(3))

    Y, Cr, Cb = hl.Func("Y"), hl.Func("Cr"), hl.Func("Cb")
    Y[x, y] = _f32(0.299) * red + _f32(0.587) * green + _f32(0.114) * blue
    Cr[x, y] = (red - Y[x, y]) * _f32(0.713) + _f32(128)
    Cb[x, y] = (blue - Y[x, y]) * _f32(0.564) + _f32(128)

    hist_rows = hl.Func("hist_rows")
    hist_rows[x, y] = 0
    rx = hl.RDom([hl.Range(0, img.width())], "rx")
    hist_rows[hl.cast(hl.Int(32), hl.clamp(Y[rx.x, y], _f32(0), _f32(255))), y] += 1

    hist = hl.Func("hist")
    hist[x] = 0
    ry = hl.RDom([hl.Range(0, img.height())], "ry")
    hist[x] += hist_rows[x, ry.x]

    cdf = hl.Func("cdf")
    cdf[x] = hist[0]
    b = hl.RDom([hl.Range(1, 255)], "b")
    cdf[b.x] = cdf[b.x - 1] + hist[b.x]

    cdf_bin, eq = hl.Func("cdf_bin"), hl.Func("equalize")
    cdf_bin[x, y] = hl.cast(hl.UInt(8), hl.clamp(Y[x, y], _f32(0), _f32(255)))
    scale = _f32(255) / hl.cast(f32, img.height() * img.width())
    eq[x, y] = hl.clamp(hl.cast(f32, cdf[cdf_bin[x, y]]) * scale, _f32(0), _f32(255))

    def byte(v):
        return hl.cast(hl.UInt(8), hl.clamp(v, _f32(0), _f32(255)))

    r = byte(eq[x, y] + (Cr[x, y] - _f32(128)) * _f32(1.4))
    g = byte(eq[x, y] - _f32(0.343) * (Cb[x, y] - _f32(128)) - _f32(0.711) * (Cr[x, y] - _f32(128)))
    bl = byte(eq[x, y] + _f32(1.765) * (Cb[x, y] - _f32(128)))
    output = hl.Func("hist_eq")
    output[x, y, c] = hl.mux(c, [r, g, bl])

    def hand(target):
        vec = target.natural_vector_size(f32)
        cdf.bound(x, 0, 256)
        Y.clone_in(hist_rows).compute_at(hist_rows.in_(), y).vectorize(x, vec)
        hist_rows.update(0).unscheduled()
        hist_rows.in_().compute_root().vectorize(x, vec).parallel(y, 4)
        hist_rows.compute_at(hist_rows.in_(), y).vectorize(x, vec).update().reorder(y, rx.x).unroll(y)
        hist.compute_root().vectorize(x, vec).update().reorder(x, ry.x).vectorize(x, vec).unroll(x, 4) \
            .parallel(x).reorder(ry.x, x)
        cdf.compute_root().update().unscheduled()
        output.reorder(c, x, y).bound(c, 0, 3).unroll(c).parallel(y, 8).vectorize(x, vec * 2)

    return _App([("img", img)], output, (C, H, W), hand, out_dtype=np.uint8)
