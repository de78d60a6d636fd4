"""apps/stencil_chain: 32 5x5 stencils on a uint16 image, as pipelines/held_out/stencil_chain.py."""

import numpy as np

from benchmarks.halide_apps import _App, _vars, hl
from pipelines.held_out.stencil_chain import GROUP, RADIUS, STENCILS


def app(shapes) -> _App:
    H, W = shapes["img"]
    img = hl.ImageParam(hl.UInt(16), 2, "img")
    x, y = _vars("x y")
    stages = [hl.BoundaryConditions.repeat_edge(img)]
    for s in range(STENCILS):
        f = hl.Func(f"stage_{s}")
        e = hl.cast(hl.UInt(16), 0)
        for dx in range(-RADIUS, RADIUS + 1):
            for dy in range(-RADIUS, RADIUS + 1):
                e = e + ((dx + 3) * (dy + 3)) * stages[-1][x + dx, y + dy]
        f[x, y] = e
        stages.append(f)
    output = hl.Func("stencil_chain")
    output[x, y] = stages[-1][x, y]

    def hand(target):
        # The app's tiles are a quarter of its 1536 x 2560 image (grown by the stage's border) in each
        # dimension; here a quarter of the actual image, which is the same at the "full" size and keeps
        # the output's tiles inside a smaller output.
        vec = target.natural_vector_size(hl.UInt(16))
        xi, yi, xo, yo, t = _vars("xi yi xo yo t")
        last = len(stages) - 1
        for j in range(last, 0, -GROUP):
            out = output if j == last else stages[j]
            grow = 4 * (last - j)
            out.compute_root().tile(x, y, xo, yo, xi, yi, (W + grow) // 4, (H + grow) // 4).fuse(xo, yo, t) \
                .parallel(t).vectorize(xi, vec)
            for i in range(max(0, j - GROUP + 1), j):
                stages[i].store_at(out, t).compute_at(out, yi).vectorize(stages[i].args()[0], vec)

    return _App([("img", img)], output, (H, W), hand, out_dtype=np.uint16)
