"""Pyramid interpolation of an RGBA float32 image (written from Halide's apps/interpolate).

Fills the transparent parts of an image from its opaque neighbours at every scale: the colour is
premultiplied by alpha (downsampled_0), a pyramid of LEVELS levels is built by 1 2 1 downsampling in
x then y, and from the coarsest level up each level is its own value plus (1 - its alpha) times the
bilinear 2x upsampling of the level below (interpolated_l). The output divides the colour of
interpolated_0 by its alpha: [3, H, W]. The image is extended by its edge values; as in the app, the
input of level 4 is clamped to [0, size / 8] so that the coarse levels do not reach far outside it.

The app's 4-channel input arrives as two inputs, the colour planes ``rgb`` [3, H, W] and the ``alpha``
plane [H, W] (the suite's small sizes are odd in every dimension larger than 3); downsampled_0 still
joins them into one 4-channel level (c = 3 reads the clamped rgb's last plane in the unused branch of
its select, as the app's reads the alpha plane there). Along x the upsampling reads level l + 1 at
x // 2 and x // 2 + x % 2, the app's (x + 1) / 2 written so that ragsched's bounds expressions stay
small (it keeps them as unshared expression trees, and the union of x // 2 and (x + 1) // 2 doubles
them per level; with (x + 1) // 2 the default schedule took 19 s to compile and the hand schedule
lowered to 4.5M characters). The values are the same; the inferred regions may be one point larger
per level. Along y
it keeps (y + 1) // 2: ragsched's sliding window sees a region move forward only through a floor
division, not through y % 2, and the hand schedule slides along y.
"""

import numpy as np

import ragsched as rs

LEVELS = 10
CLAMP_LEVEL = 4  # the level whose input the app clamps
SLID = 4  # the hand schedule slides interpolated levels 1 .. SLID (see hand_schedule)
SHAPES = {"small": (97, 131), "full": (2560, 1536)}  # (H, W)


def build():
    H, W = rs.Size("H"), rs.Size("W")
    c, y, x = rs.vars("c y x")
    rgb = rs.Input("rgb", rs.float32, [3, H, W])
    alpha = rs.Input("alpha", rs.float32, [H, W])
    rgb_c, alpha_c = rs.clamp_edge(rgb), rs.clamp_edge(alpha)

    down = [rs.Func("downsampled_0")]
    down[0][c, y, x] = rs.select(c < 3, rgb_c[c, y, x] * alpha_c[y, x], alpha_c[y, x])
    for level in range(1, LEVELS):
        prev = down[level - 1]
        if level == CLAMP_LEVEL:
            s = 2 ** (level - 1)
            prev = rs.Func(f"downsampled_{level - 1}_clamped")
            prev[c, y, x] = down[level - 1][c, rs.clamp(y, 0, H // s), rs.clamp(x, 0, W // s)]
        downx = rs.Func(f"downx_{level}")
        downx[c, y, x] = (prev[c, y, 2 * x - 1] + 2.0 * prev[c, y, 2 * x] + prev[c, y, 2 * x + 1]) * 0.25
        d = rs.Func(f"downsampled_{level}")
        d[c, y, x] = (downx[c, 2 * y - 1, x] + 2.0 * downx[c, 2 * y, x] + downx[c, 2 * y + 1, x]) * 0.25
        down.append(d)

    interp = [None] * LEVELS
    interp[LEVELS - 1] = rs.Func(f"interpolated_{LEVELS - 1}")
    interp[LEVELS - 1][c, y, x] = down[LEVELS - 1][c, y, x]
    for level in range(LEVELS - 2, -1, -1):
        upx, up = rs.Func(f"upsampledx_{level}"), rs.Func(f"upsampled_{level}")
        upx[c, y, x] = (interp[level + 1][c, y, x // 2] + interp[level + 1][c, y, x // 2 + x % 2]) / 2.0
        up[c, y, x] = (upx[c, y // 2, x] + upx[c, (y + 1) // 2, x]) / 2.0
        opacity_left = 1.0 - down[level][3, y, x]
        interp[level] = rs.Func(f"interpolated_{level}")
        interp[level][c, y, x] = down[level][c, y, x] + opacity_left * up[c, y, x]

    out = rs.Func("interpolate", shape=[3, H, W])  # the app's normalize
    out[c, y, x] = interp[0][c, y, x] / interp[0][3, y, x]
    return out


def example_inputs(scale="small"):
    # Half the pixels fully transparent (the holes the app fills), the others partly or fully opaque.
    rng = np.random.default_rng(0)
    shape = SHAPES[scale]
    rgb = rng.random((3, *shape), dtype=np.float32)
    opaque = rng.random(shape) < 0.5
    alpha = np.where(opaque, rng.uniform(0.2, 1.0, shape), 0.0).astype(np.float32)
    return {"rgb": rgb, "alpha": alpha}


# ------------------------------------------------------------------------------ the NumPy reference
# A Func is defined everywhere: a level read outside the image is not its edge value. Each level is
# computed over the interval (per axis, inclusive ends) that its consumers read.


def _regions(n: int):
    """(R, D) per level for an axis of n points: R[l] is where interpolated_l is read, D[l] where
    downsampled_l is (R[l] and what level l + 1's downsampling reads)."""
    R = [(0, n - 1)]
    for _ in range(1, LEVELS):
        a, b = R[-1]
        R.append((a // 2, (b + 1) // 2))
    D = [None] * LEVELS
    D[LEVELS - 1] = R[LEVELS - 1]
    for level in range(LEVELS - 2, -1, -1):
        a, b = 2 * D[level + 1][0] - 1, 2 * D[level + 1][1] + 1
        if level + 1 == CLAMP_LEVEL:
            w = n // 2 ** level
            a, b = min(max(a, 0), w), min(max(b, 0), w)
        D[level] = (min(R[level][0], a), max(R[level][1], b))
    return R, D


def _down_axis(a, src_lo, dst, axis, clamp_to=None):
    """1 2 1 and decimation along ``axis`` onto dst (inclusive), reading through clamp(., 0, clamp_to)."""
    i = 2 * np.arange(dst[0], dst[1] + 1)
    t = []
    for d in (-1, 0, 1):
        j = i + d if clamp_to is None else np.clip(i + d, 0, clamp_to)
        t.append(np.take(a, j - src_lo, axis=axis))
    return (t[0] + 2.0 * t[1] + t[2]) * 0.25


def _up_axis(a, src_lo, dst, axis):
    v = np.arange(dst[0], dst[1] + 1)
    return (np.take(a, v // 2 - src_lo, axis=axis) + np.take(a, (v + 1) // 2 - src_lo, axis=axis)) / 2.0


def _crop(a, have_y, have_x, want_y, want_x):
    return a[..., want_y[0] - have_y[0]:want_y[1] - have_y[0] + 1, want_x[0] - have_x[0]:want_x[1] - have_x[0] + 1]


def reference(rgb, alpha):
    H, W = alpha.shape
    Ry, Dy = _regions(H)
    Rx, Dx = _regions(W)
    ys = np.clip(np.arange(Dy[0][0], Dy[0][1] + 1), 0, H - 1)
    xs = np.clip(np.arange(Dx[0][0], Dx[0][1] + 1), 0, W - 1)
    a = alpha[ys][:, xs]
    down = [np.concatenate([rgb[:, ys][:, :, xs] * a, a[None]])]
    for level in range(1, LEVELS):
        cy = cx = None
        if level == CLAMP_LEVEL:
            cy, cx = H // 2 ** (level - 1), W // 2 ** (level - 1)
        a = _down_axis(down[-1], Dx[level - 1][0], Dx[level], 2, cx)
        down.append(_down_axis(a, Dy[level - 1][0], Dy[level], 1, cy))

    interp = _crop(down[LEVELS - 1], Dy[LEVELS - 1], Dx[LEVELS - 1], Ry[LEVELS - 1], Rx[LEVELS - 1])
    for level in range(LEVELS - 2, -1, -1):
        up = _up_axis(interp, Rx[level + 1][0], Rx[level], 2)
        up = _up_axis(up, Ry[level + 1][0], Ry[level], 1)
        d = _crop(down[level], Dy[level], Dx[level], Ry[level], Rx[level])
        interp = d + (1.0 - d[3]) * up
    return interp[:3] / interp[3]


TOLERANCE = (1e-5, 1e-6)  # measured: 1.8e-7 (small) and 2.4e-7 (full) of the largest value, every variant


def hand_schedule(funcs):
    """Halide's apps/interpolate CPU schedule, loop orders written outermost first: downsampled levels
    1 .. LEVELS - 2 at root, rows over c over x, parallel over strips of 8 rows; a copy of
    downsampled_0 (the app's clone_in; here a wrapper, ``in_``) computed per row of downsampled_1 and
    slid down its strip, channels unrolled; the output in strips of 32 rows in parallel, x split by
    the vector width with the channels inside, and interpolated levels 1 .. LEVELS - 1 computed per output
    row and slid down the strip. Everything else is inlined (Halide's default). The app's
    never_partition calls have no counterpart (ragsched partitions only tail guards).

    Departure: only levels 1 .. SLID slide; the coarser ones are computed once per strip (store and
    compute at ``yo``). Their bounds expressions grow about 4x per slid level in ragsched (all 9 slid:
    55M characters of lowered code and about 35 s to compile, against 4-5 s); a strip of 32 rows needs
    at most 3 rows of each coarser level, which sliding would compute too, so the work is the same."""
    vec = rs.natural_vector_size(rs.float32)
    out = funcs["interpolate"]
    keep = {"interpolate"}
    for level in range(1, LEVELS - 1):
        d = funcs[f"downsampled_{level}"]
        d.compute_root().reorder("y", "c", "x").split("y", "yo", "yi", 8).parallel("yo").vectorize("x", vec)
        keep.add(d.name)
    d1 = funcs["downsampled_1"]
    clone = funcs["downsampled_0"].in_(funcs["downx_1"])
    clone.store_at(d1, "yo").compute_at(d1, "yi").reorder("y", "x", "c").unroll("c").vectorize("x", vec)
    keep.add(clone.name)
    out.bound("c", 0, 3).split("x", "xo", "xi", vec).split("y", "yo", "yi", 32) \
        .reorder("yo", "yi", "xo", "c", "xi").unroll("c").vectorize("xi").parallel("yo")
    for level in range(1, LEVELS):
        f = funcs[f"interpolated_{level}"]
        if level <= SLID:
            f.store_at(out, "yo").compute_at(out, "yi")
        else:
            f.compute_at(out, "yo")
        f.vectorize("x", vec)
        keep.add(f.name)
    for name, f in funcs.items():
        if name not in keep and isinstance(f, rs.Func):
            f.compute_inline()
