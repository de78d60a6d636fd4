"""apps/nl_means with the benchmark's patch size, search area and sigma (7, 7, 0.12) as constants, as
pipelines/held_out/nl_means.py explains. The weights keep the app's fast_exp."""

from benchmarks.halide_apps import _App, _f32, _vars, hl
from pipelines.held_out.nl_means import INV_SIGMA_SQ, PATCH, SEARCH


def app(shapes) -> _App:
    _, H, W = shapes["img"]
    img = hl.ImageParam(hl.Float(32), 3, "img")  # (x, y, c)
    x, y, c, dx, dy = _vars("x y c dx dy")
    clamped = hl.BoundaryConditions.repeat_edge(img)

    dc = hl.Func("dc")
    dc[x, y, dx, dy, c] = hl.pow(clamped[x, y, c] - clamped[x + dx, y + dy, c], 2)
    channels = hl.RDom([hl.Range(0, 3)], "channels")
    d = hl.Func("d")
    d[x, y, dx, dy] = hl.sum(dc[x, y, dx, dy, channels])

    patch = hl.RDom([hl.Range(-(PATCH // 2), PATCH)], "patch_dom")
    blur_d_y, blur_d = hl.Func("blur_d_y"), hl.Func("blur_d")
    blur_d_y[x, y, dx, dy] = hl.sum(d[x, y + patch, dx, dy])
    blur_d[x, y, dx, dy] = hl.sum(blur_d_y[x + patch, y, dx, dy])

    w = hl.Func("w")
    w[x, y, dx, dy] = hl.fast_exp(blur_d[x, y, dx, dy] * _f32(INV_SIGMA_SQ))

    clamped_with_alpha = hl.Func("clamped_with_alpha")
    clamped_with_alpha[x, y, c] = hl.mux(c, [clamped[x, y, 0], clamped[x, y, 1], clamped[x, y, 2], _f32(1)])

    s = hl.RDom([hl.Range(-(SEARCH // 2), SEARCH), hl.Range(-(SEARCH // 2), SEARCH)], "s_dom")
    nlm_sum = hl.Func("non_local_means_sum")
    nlm_sum[x, y, c] += w[x, y, s.x, s.y] * clamped_with_alpha[x + s.x, y + s.y, c]

    output = hl.Func("non_local_means")
    output[x, y, c] = hl.clamp(nlm_sum[x, y, c] / nlm_sum[x, y, 3], _f32(0), _f32(1))

    def hand(target):
        vec = target.natural_vector_size(hl.Float(32))
        tx, ty, xi, yi = _vars("tx ty xi yi")
        output.compute_root().reorder(c, x, y).tile(x, y, tx, ty, x, y, 16, 8).parallel(ty).vectorize(x, vec)
        blur_d_y.compute_at(output, tx).hoist_storage(output, ty).reorder(y, x).vectorize(x, vec)
        d.compute_at(output, tx).hoist_storage(output, ty).vectorize(x, vec)
        nlm_sum.compute_at(output, x).reorder(c, x, y).bound(c, 0, 4).unroll(c).vectorize(x, vec)
        nlm_sum.update(0).reorder(c, x, y, s.x, s.y).unroll(c).vectorize(x, vec)
        blur_d.compute_at(nlm_sum, x).vectorize(x, vec)

    def bounds():
        output.output_buffer().dim(2).set_bounds(0, 3)  # the app requires three output channels

    return _App([("img", img)], output, (3, H, W), hand, bounds=bounds)
