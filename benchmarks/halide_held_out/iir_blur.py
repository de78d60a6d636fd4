"""apps/iir_blur: two passes of a down-and-up first-order IIR blur of the columns, each followed by a
transpose. ALPHA is the constant of pipelines/held_out/iir_blur.py (the app's benchmark value). As in
the app's generator, the input's and output's bounds and strides are fixed (here to the inputs' own
sizes), for every variant."""

from benchmarks.halide_apps import _App, _f32, _vars, hl
from pipelines.held_out.iir_blur import ALPHA


def _blur_cols_transpose(inp, height, tag, out_name, x, y, c):
    blur = hl.Func(f"blur_{tag}")
    blur[x, y, c] = hl.undef(hl.Float(32))
    blur[x, 0, c] = inp[x, 0, c]
    ry = hl.RDom([hl.Range(1, height - 1)], "ry")
    blur[x, ry.x, c] = _f32(1 - ALPHA) * blur[x, ry.x - 1, c] + _f32(ALPHA) * inp[x, ry.x, c]
    flip = height - ry.x - 1
    blur[x, flip, c] = _f32(1 - ALPHA) * blur[x, flip + 1, c] + _f32(ALPHA) * blur[x, flip, c]
    transpose = hl.Func(out_name)
    transpose[x, y, c] = blur[y, x, c]
    return blur, transpose, ry


def app(shapes) -> _App:
    C, H, W = shapes["img"]
    img = hl.ImageParam(hl.Float(32), 3, "img")
    x, y, c = _vars("x y c")
    blur_y, blur_y_t, ry_y = _blur_cols_transpose(img, img.height(), "y", "blur_y_t", x, y, c)
    blur_x, output, ry_x = _blur_cols_transpose(blur_y_t, img.width(), "x", "iir_blur", x, y, c)

    def bounds():
        for p in (img, output.output_buffer()):
            p.dim(0).set_bounds(0, W).set_stride(1)
            p.dim(1).set_bounds(0, H).set_stride(W)
            p.dim(2).set_bounds(0, C).set_stride(W * H)

    def hand(target):
        vec = target.natural_vector_size(hl.Float(32))
        for blur, transpose, ry in ((blur_y, blur_y_t, ry_y), (blur_x, output, ry_x)):
            xo, yo, yi, t = _vars("xo yo yi t")
            transpose.compute_root().tile(x, y, xo, yo, x, y, vec, vec * 4).split(y, y, yi, vec) \
                .vectorize(yi).vectorize(x).fuse(yo, c, t).parallel(t)
            blur.compute_at(transpose, t)
            blur.update(0).unscheduled()
            blur.update(1).reorder(x, ry.x).vectorize(x)
            blur.update(2).reorder(x, ry.x).vectorize(x)

    return _App([("img", img)], output, (C, H, W), hand, bounds=bounds)
