"""Non-local means denoising of a planar RGB float32 image [3, H, W] (written from Halide's apps/nl_means).

Each output pixel is a weighted average of the pixels in a SEARCH x SEARCH window around it; the weight
of offset (dy, dx) is exp(-|patch(y, x) - patch(y + dy, x + dx)|^2 / (sigma^2 PATCH^2)), the squared
distance between the PATCH x PATCH neighbourhoods summed over the colour channels. Stages as in the app:
per-channel squared differences dc -> channel sum d (an RDom over 3) -> box sums over the patch, in y
(blur_d_y) then in x (blur_d) -> weights w -> one update over the search window (an RDom) accumulating
w * (r, g, b, 1) into a 4-channel sum -> the first three channels over the fourth, clamped to [0, 1].
The image is extended by its edge values (repeat_edge in the app). Index order is NumPy's: the
difference images are [dy, dx, y, x] (the app's (x, y, dx, dy) reversed).

Differences from the app: patch_size, search_area and sigma are its benchmark values (7, 7, 0.12) baked
in as constants rather than runtime parameters; the weights use exp where the app uses Halide's
fast_exp (a degree-5 polynomial, up to 2e-6 relative error), which ragsched does not have. The
"full" size is a quarter of the app's 1536 x 2560 (width x height) RGB image: a schedule that stores the
difference images at root holds 49 of them per pixel (0.8 GB each at the app's size), and the benchmark,
which keeps its eight variants loaded to time them alternately, ran out of a 23 GB host's memory.
"""

import numpy as np

import ragsched as rs

PATCH = 7
SEARCH = 7
SIGMA = 0.12
# The app's -1 / (sigma^2 patch_size^2), evaluated in float32 in the same order.
INV_SIGMA_SQ = float(np.float32(-1.0) / (np.float32(SIGMA) * np.float32(SIGMA) * np.float32(PATCH)
                                         * np.float32(PATCH)))
SHAPES = {"small": (3, 41, 53), "full": (3, 1280, 768)}
# Measured at "small": 6e-7 of the output's range, compiled or Halide's (whose fast_exp adds a little).
TOLERANCE = (1e-5, 1e-6)


def build():
    H, W = rs.Size("H"), rs.Size("W")
    c, y, x, dy, dx = rs.vars("c y x dy dx")
    img = rs.Input("img", rs.float32, [3, H, W])
    clamped = rs.clamp_edge(img)

    # The difference images: one per offset (dy, dx) of the search window.
    dc = rs.Func("dc")
    diff = clamped[c, y, x] - clamped[c, y + dy, x + dx]
    dc[c, dy, dx, y, x] = diff * diff  # the app's pow(diff, 2), which Halide turns into a product
    ch = rs.RDom(0, 3, name="channels")
    d = rs.Func("d")
    d[dy, dx, y, x] = rs.sum(dc[ch, dy, dx, y, x])

    # Patch distances: box sums of the difference images.
    p = rs.RDom(-(PATCH // 2), PATCH, name="patch_dom")
    blur_d_y = rs.Func("blur_d_y")
    blur_d_y[dy, dx, y, x] = rs.sum(d[dy, dx, y + p, x])
    q = rs.RDom(-(PATCH // 2), PATCH, name="patch_dom_x")
    blur_d = rs.Func("blur_d")
    blur_d[dy, dx, y, x] = rs.sum(blur_d_y[dy, dx, y, x + q])

    w = rs.Func("w")
    w[dy, dx, y, x] = rs.exp(blur_d[dy, dx, y, x] * INV_SIGMA_SQ)

    # The image with a fourth channel of ones: its weighted sum is the sum of the weights.
    clamped_with_alpha = rs.Func("clamped_with_alpha")
    clamped_with_alpha[c, y, x] = rs.select(c == 0, clamped[0, y, x],
                                            rs.select(c == 1, clamped[1, y, x],
                                                      rs.select(c == 2, clamped[2, y, x], 1.0)))

    s = rs.RDom((-(SEARCH // 2), SEARCH), (-(SEARCH // 2), SEARCH), name="s_dom")
    sy, sx = s[0], s[1]  # the app's s_dom.y (outer) and s_dom.x (inner)
    nlm_sum = rs.Func("non_local_means_sum", dtype=rs.float32)
    nlm_sum[c, y, x] = 0.0  # what the app's += on an undefined Func starts from, with named Vars
    nlm_sum[c, y, x] += w[sy, sx, y, x] * clamped_with_alpha[c, y + sy, x + sx]

    out = rs.Func("non_local_means", shape=[3, H, W])
    out[c, y, x] = rs.clamp(nlm_sum[c, y, x] / nlm_sum[3, y, x], 0.0, 1.0)
    return out


def example_inputs(scale="small"):
    # A smooth image plus noise, as a denoiser sees: with sigma 0.12 the weights then spread over the
    # window instead of all but the centre's underflowing to 0, as they would on white noise.
    rng = np.random.default_rng(0)
    C, H, W = SHAPES[scale]
    yy, xx = np.meshgrid(np.arange(H, dtype=np.float32), np.arange(W, dtype=np.float32), indexing="ij")
    base = [0.5 + 0.3 * np.sin(yy / 9.0 + k) * np.cos(xx / 13.0 - k) for k in range(C)]
    noisy = np.stack(base) + rng.normal(0.0, 0.05, (C, H, W))
    return {"img": np.clip(noisy, 0.0, 1.0).astype(np.float32)}


def reference(img):
    _, H, W = img.shape
    r, s = PATCH // 2, SEARCH // 2
    m = r + s  # the margin: differences are needed r outside the image, offsets reach s further
    P = np.pad(img, ((0, 0), (m, m), (m, m)), mode="edge")
    alpha = np.concatenate([P, np.ones_like(P[:1])])
    total = np.zeros((4, H, W), np.float32)
    centre = P[:, s:s + H + 2 * r, s:s + W + 2 * r]  # positions [-r, H + r) x [-r, W + r)
    for oy in range(-s, s + 1):
        for ox in range(-s, s + 1):
            moved = P[:, s + oy:s + oy + H + 2 * r, s + ox:s + ox + W + 2 * r]
            dist = ((centre - moved) ** 2).sum(axis=0, dtype=np.float32)
            by = dist[0:H]
            for k in range(1, PATCH):
                by = by + dist[k:k + H]
            bd = by[:, 0:W]
            for k in range(1, PATCH):
                bd = bd + by[:, k:k + W]
            weight = np.exp(bd * np.float32(INV_SIGMA_SQ))
            total += weight * alpha[:, m + oy:m + oy + H, m + ox:m + ox + W]
    return np.clip(total[:3] / total[3], 0.0, 1.0)


def _reduction(f):
    """The Func behind the inline reduction (rs.sum) in ``f``'s definition."""
    (red,) = (g for g in rs.lang.func_deps(f) if isinstance(g, rs.Func) and g.name.startswith("sum_"))
    return red


def hand_schedule(funcs):
    """Halide's apps/nl_means CPU schedule (loop orders written outermost first): the output in 8 x 16
    tiles, rows of tiles in parallel, vectorized along x; per tile, the difference images d and their
    y box sums blur_d_y for all 49 offsets; per vector of output pixels, the 4-channel sum (channels
    unrolled, the update ordered offset y, offset x, y, x, c) with blur_d computed per offset inside it.
    dc, w and clamped_with_alpha are inlined and each inline reduction (rs.sum) is computed per vector
    of its consumer, as Halide does by default. Missing: the app hoists d's and blur_d_y's storage out
    to the row of tiles (hoist_storage, no sliding window); ragsched has only store_at, which would
    slide them along the tiles, so they are stored per tile. Halide vectorizes loops that have serial
    loops inside (the output's c, blur_d_y's y); here those loops are moved outside the vector loop,
    which is the loop nest Halide makes of them."""
    vec = rs.natural_vector_size(rs.float32)
    for name in ("dc", "w", "clamped_with_alpha"):
        funcs[name].compute_inline()
    out = funcs["non_local_means"]
    out.compute_root().reorder("y", "x", "c").tile("y", "x", "ty", "tx", "y", "x", 8, 16).parallel("ty") \
        .vectorize("x", vec).reorder("c", "x.v")
    funcs["blur_d_y"].compute_at(out, "tx").reorder("dy", "dx", "x", "y").vectorize("x", vec).reorder("y", "x.v")
    funcs["d"].compute_at(out, "tx").vectorize("x", vec)
    nlm_sum = funcs["non_local_means_sum"]
    nlm_sum.compute_at(out, "x").reorder("y", "x", "c").bound("c", 0, 4).unroll("c").vectorize("x", vec) \
        .reorder("c", "x.v")
    nlm_sum.update(0).reorder("s_dom.0", "s_dom.1", "y", "x", "c").unroll("c").vectorize("x", vec) \
        .reorder("c", "x.v")
    funcs["blur_d"].compute_at(nlm_sum.update(0), "x").vectorize("x", vec)
    for name in ("d", "blur_d_y", "blur_d"):
        red = _reduction(funcs[name])
        red.compute_at(funcs[name], "y" if name == "blur_d_y" else "x").vectorize("x", vec)
        red.update(0).reorder(red.stage_plan(1).dims[-1].name, "x").vectorize("x", vec)
