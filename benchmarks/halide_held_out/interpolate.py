"""apps/interpolate with the halide package: the algorithm of pipelines/held_out/interpolate.py (RGBA as
colour planes and an alpha plane; the app's own upsampling indices, (x + 1) / 2) and the app's CPU
schedule."""

from benchmarks.halide_apps import _App, _f32, _vars, hl


def app(shapes) -> _App:
    from pipelines.held_out.interpolate import CLAMP_LEVEL, LEVELS

    H, W = shapes["alpha"]
    rgb = hl.ImageParam(hl.Float(32), 3, "rgb")
    alpha = hl.ImageParam(hl.Float(32), 2, "alpha")
    x, y, c = _vars("x y c")
    rgb_c, alpha_c = hl.BoundaryConditions.repeat_edge(rgb), hl.BoundaryConditions.repeat_edge(alpha)

    down = [hl.Func("downsampled_0")]
    down[0][x, y, c] = hl.select(c < 3, rgb_c[x, y, c] * alpha_c[x, y], alpha_c[x, y])
    downx = [None]
    for level in range(1, LEVELS):
        prev = down[level - 1]
        if level == CLAMP_LEVEL:
            s = 2 ** (level - 1)
            w, h = alpha.width() // s, alpha.height() // s
            prev = hl.Func(f"downsampled_{level - 1}_clamped")
            prev[x, y, c] = down[level - 1][hl.clamp(x, 0, w), hl.clamp(y, 0, h), c]
        dx, d = hl.Func(f"downx_{level}"), hl.Func(f"downsampled_{level}")
        dx[x, y, c] = (prev[x * 2 - 1, y, c] + _f32(2) * prev[x * 2, y, c] + prev[x * 2 + 1, y, c]) * _f32(0.25)
        d[x, y, c] = (dx[x, y * 2 - 1, c] + _f32(2) * dx[x, y * 2, c] + dx[x, y * 2 + 1, c]) * _f32(0.25)
        downx.append(dx)
        down.append(d)

    interp = [None] * LEVELS
    interp[LEVELS - 1] = hl.Func(f"interpolated_{LEVELS - 1}")
    interp[LEVELS - 1][x, y, c] = down[LEVELS - 1][x, y, c]
    for level in range(LEVELS - 2, -1, -1):
        upx, up = hl.Func(f"upsampledx_{level}"), hl.Func(f"upsampled_{level}")
        upx[x, y, c] = (interp[level + 1][x // 2, y, c] + interp[level + 1][(x + 1) // 2, y, c]) / _f32(2)
        up[x, y, c] = (upx[x, y // 2, c] + upx[x, (y + 1) // 2, c]) / _f32(2)
        opacity_left = _f32(1) - down[level][x, y, 3]
        interp[level] = hl.Func(f"interpolated_{level}")
        interp[level][x, y, c] = down[level][x, y, c] + opacity_left * up[x, y, c]

    normalize = hl.Func("interpolate")
    normalize[x, y, c] = interp[0][x, y, c] / interp[0][x, y, 3]

    def hand(target):
        vec = target.natural_vector_size(hl.Float(32))
        xo, xi, yo, yi = _vars("xo xi yo yi")
        for level in range(1, LEVELS - 1):
            down[level].compute_root().never_partition([x]).reorder(x, c, y).split(y, yo, yi, 8).parallel(yo) \
                .vectorize(x, vec)
        down[0].clone_in(downx[1]).store_at(down[1], yo).compute_at(down[1], yi).reorder(c, x, y).unroll(c) \
            .vectorize(x, vec).never_partition([y])
        normalize.bound(x, 0, alpha.width()).bound(y, 0, alpha.height()).bound(c, 0, 3).never_partition([y]) \
            .split(x, xo, xi, vec).split(y, yo, yi, 32).reorder(xi, c, xo, yi, yo).unroll(c).vectorize(xi) \
            .parallel(yo)
        for level in range(1, LEVELS):
            interp[level].store_at(normalize, yo).compute_at(normalize, yi).never_partition_all().vectorize(x, vec)

    return _App([("rgb", rgb), ("alpha", alpha)], normalize, (3, H, W), hand)
