"""apps/linear_blur: srgb_to_linear, simple_blur and linear_to_srgb composed in one pipeline. The composite
generator only runs autoscheduled; the hand schedule is each part's own generator schedule, its result
computed at root, as pipelines/held_out/linear_blur.py explains."""

from benchmarks.halide_apps import _App, _f32, _vars, hl
from pipelines.held_out.linear_blur import INV_GAMMA, ONE_055


def app(shapes) -> _App:
    C, H, W = shapes["img"]
    img = hl.ImageParam(hl.Float(32), 3, "img")  # (x, y, c)
    x, y, c = _vars("x y c")

    linear = hl.Func("linear")
    v = img[x, y, c]
    linear[x, y, c] = hl.select(v <= _f32(0.04045), v / _f32(12.92),
                                hl.pow((v + _f32(0.055)) / _f32(ONE_055), _f32(2.4)))

    edge = hl.BoundaryConditions.repeat_edge(linear, [hl.Range(0, img.width()), hl.Range(0, img.height())])
    blur_x, blurred = hl.Func("blur_x"), hl.Func("blurred")
    blur_x[x, y, c] = (edge[x, y, c] + edge[x + 1, y, c] + edge[x + 2, y, c]) / 3
    blurred[x, y, c] = (blur_x[x, y, c] + blur_x[x, y + 1, c] + blur_x[x, y + 2, c]) / 3

    srgb = hl.Func("srgb")
    b = blurred[x, y, c]
    srgb[x, y, c] = hl.select(b <= _f32(0.0031308), b * _f32(12.92),
                              _f32(ONE_055) * hl.pow(b, _f32(INV_GAMMA)) - _f32(0.055))
    output = hl.Func("linear_blur")
    output[x, y, c] = srgb[x, y, c]

    def hand(target):
        yi = hl.Var("yi")
        vec = target.natural_vector_size(hl.Float(32))
        linear.compute_root().split(y, y, yi, 8).parallel(y).vectorize(x, vec)
        blurred.compute_root().split(y, y, yi, 8).parallel(y).vectorize(x, vec)
        blur_x.store_at(blurred, y).compute_at(blurred, yi).vectorize(x, vec)
        output.split(y, y, yi, 8).parallel(y).vectorize(x, vec)

    return _App([("img", img)], output, (C, H, W), hand)
