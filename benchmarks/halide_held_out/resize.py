"""apps/resize (cubic, upsample=true, float32) with the halide package: the algorithm of
pipelines/held_out/resize.py with the app's own inline sums and first taps (no extra clamp: Halide bounds
the float-to-int cast), and the app's CPU schedule for upsampling."""

from benchmarks.halide_apps import _App, _f32, _vars, hl


def _cubic(t):
    from pipelines.held_out.resize import A

    tt = hl.abs(t)
    tt2 = tt * tt
    tt3 = tt2 * tt
    return hl.select(tt < _f32(1), _f32(A + 2) * tt3 - _f32(A + 3) * tt2 + _f32(1),
                     hl.select(tt < _f32(2), _f32(A) * tt3 - _f32(5 * A) * tt2 + _f32(8 * A) * tt - _f32(4 * A),
                               _f32(0)))


def app(shapes) -> _App:
    from pipelines.held_out.resize import DEN, INV, NUM, TAPS

    _, H, W = shapes["img"]
    img = hl.ImageParam(hl.Float(32), 3, "img")
    x, y, c, k = _vars("x y c k")
    r = hl.RDom([hl.Range(0, TAPS)], "r")

    as_float = hl.Func("as_float")
    as_float[x, y, c] = hl.cast(hl.Float(32), img[x, y, c])
    inv = hl.strict_float(_f32(INV))
    sourcex = (x + _f32(0.5)) * inv - _f32(0.5)
    sourcey = (y + _f32(0.5)) * inv - _f32(0.5)
    radius = _f32(0.5 * TAPS)
    beginx = hl.cast(hl.Int(32), hl.strict_float(hl.ceil(sourcex - radius)))
    beginy = hl.cast(hl.Int(32), hl.strict_float(hl.ceil(sourcey - radius)))
    beginx = hl.clamp(beginx, img.dim(0).min(), img.dim(0).max() + 1 - TAPS)
    beginy = hl.clamp(beginy, img.dim(1).min(), img.dim(1).max() + 1 - TAPS)

    unnormalized_kernel_x, unnormalized_kernel_y = hl.Func("unnormalized_kernel_x"), hl.Func("unnormalized_kernel_y")
    unnormalized_kernel_x[x, k] = _cubic(k + beginx - sourcex)
    unnormalized_kernel_y[y, k] = _cubic(k + beginy - sourcey)
    kernel_sum_x, kernel_sum_y = hl.Func("kernel_sum_x"), hl.Func("kernel_sum_y")
    kernel_sum_x[x] = hl.sum(unnormalized_kernel_x[x, r], "kernel_sum_x_sum")
    kernel_sum_y[y] = hl.sum(unnormalized_kernel_y[y, r], "kernel_sum_y_sum")
    kernel_x, kernel_y = hl.Func("kernel_x"), hl.Func("kernel_y")
    kernel_x[x, k] = unnormalized_kernel_x[x, k] / kernel_sum_x[x]
    kernel_y[y, k] = unnormalized_kernel_y[y, k] / kernel_sum_y[y]

    resized_x, resized_y = hl.Func("resized_x"), hl.Func("resized_y")
    resized_x[x, y, c] = hl.sum(kernel_x[x, r] * as_float[r + beginx, y, c], "resized_x_sum")
    resized_y[x, y, c] = hl.sum(kernel_y[y, r] * resized_x[x, r + beginy, c], "resized_y_sum")
    output = hl.Func("resize")
    output[x, y, c] = hl.clamp(resized_y[x, y, c], _f32(0), _f32(1))

    def hand(target):
        vec = target.natural_vector_size(hl.Float(32))
        xi, yi = _vars("xi yi")
        unnormalized_kernel_x.compute_at(kernel_x, x).store_in(hl.MemoryType.Stack).vectorize(x)
        kernel_sum_x.compute_at(kernel_x, x).vectorize(x)
        kernel_x.compute_root().reorder(k, x).vectorize(x, vec)
        unnormalized_kernel_y.compute_at(kernel_y, y).vectorize(y, vec)
        kernel_sum_y.compute_at(kernel_y, y).vectorize(y)
        kernel_y.compute_at(output, y).reorder(k, y).vectorize(y, vec)
        output.tile(x, y, xi, yi, 16, 64).parallel(y).vectorize(xi)
        resized_x.compute_at(output, x).hoist_storage(output, y).vectorize(x)
        resized_y.compute_at(output, xi).unroll(c)

    return _App([("img", img)], output, (3, H * NUM // DEN, W * NUM // DEN), hand)
