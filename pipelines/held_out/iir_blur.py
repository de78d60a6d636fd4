"""First-order IIR low-pass blur of a planar float32 image [3, H, W], written from Halide's apps/iir_blur.

Each of two passes runs the recursive filter b[i] = (1 - ALPHA) b[i - 1] + ALPHA in[i] down the columns
(the first row is copied), then back up them, b[i] = (1 - ALPHA) b[i + 1] + ALPHA b[i], and transposes
the result; the first pass blurs along y, the second (on the transposed image) along x, so the output
has the input's orientation. Each pass is one Func with three updates (the top row, then the causal
and the anticausal scan, each over an RDom of the rows) and a transpose Func.

Differences from the app: ALPHA is the constant 0.5 that the app's benchmark (filter.cpp) passes,
not a runtime parameter; the blur's pure definition is 0 where Halide's is undef (ragsched has no
undef), which costs one extra store pass per scan buffer. The "full" size is the app's 1536 x 2560
(width x height) image.
"""

import numpy as np

import ragsched as rs

ALPHA = 0.5
SHAPES = {"small": (3, 97, 131), "full": (3, 2560, 1536)}
TOLERANCE = (1e-5, 1e-6)  # float32 scans against a float64 reference that sums in another order


def _blur_cols_transpose(inp, height, tag, out_name, shape=None):
    """Blur the columns of ``inp`` (index [c, row, col], ``height`` rows) down and up, then transpose."""
    c, y, x = rs.vars("c y x")
    blur = rs.Func(f"blur_{tag}", dtype=rs.float32)
    blur[c, y, x] = 0.0
    blur[c, 0, x] = inp[c, 0, x]
    ry = rs.RDom(1, height - 1, name="ry")
    blur[c, ry, x] = (1 - ALPHA) * blur[c, ry - 1, x] + ALPHA * inp[c, ry, x]
    flip = height - ry - 1
    blur[c, flip, x] = (1 - ALPHA) * blur[c, flip + 1, x] + ALPHA * blur[c, flip, x]
    transpose = rs.Func(out_name, shape=shape)
    transpose[c, y, x] = blur[c, x, y]
    return transpose


def build():
    H, W = rs.Size("H"), rs.Size("W")
    img = rs.Input("img", rs.float32, [3, H, W])
    blur_y_t = _blur_cols_transpose(img, H, "y", "blur_y_t")  # [3, W, H]
    return _blur_cols_transpose(blur_y_t, W, "x", "iir_blur", shape=[3, H, W])


def example_inputs(scale="small"):
    rng = np.random.default_rng(0)
    return {"img": rng.random(SHAPES[scale], dtype=np.float32)}


def _scan(b, beta):
    """s[i] = beta s[i - 1] + b[i] along axis 1, by recursive doubling (log2(n) vectorized steps)."""
    s = b.copy()
    step, w = 1, beta
    while step < s.shape[1]:
        s[:, step:] += w * s[:, :-step]
        step, w = 2 * step, w * w
    return s


def _blur_cols(a):
    """The app's down-and-up IIR along axis 1 of a [C, N, M] array, in float64."""
    beta = 1.0 - ALPHA
    b = ALPHA * a
    b[:, 0] = a[:, 0]
    down = _scan(b, beta)
    b = ALPHA * down[:, ::-1]
    b[:, 0] = down[:, -1]
    return _scan(b, beta)[:, ::-1]


def reference(img):
    t = _blur_cols(img.astype(np.float64)).transpose(0, 2, 1)
    return _blur_cols(t).transpose(0, 2, 1).astype(np.float32)


def hand_schedule(funcs):
    """Halide's apps/iir_blur CPU schedule, for each pass: the transpose at root in tiles of vec x 4 vec
    (x, y) whose y is split in vectors, both vectorized (Halide's register transpose of a vec x vec
    block), channels fused with tile rows into one parallel loop; the scan Func computed per parallel
    iteration, its two scans with the strip's 4 vec columns innermost and vectorized whole. Tails shift
    inwards, as Halide's do. The pure definition (Halide's undef, no loop) is vectorized along the strip.
    ragsched accepts all of it but emits the outer of the two vectorized transpose loops serially (a
    vectorized loop inside a vectorized loop: no register transpose)."""
    vec = rs.natural_vector_size(rs.float32)
    for tag, out in (("y", "blur_y_t"), ("x", "iir_blur")):
        t, blur = funcs[out], funcs[f"blur_{tag}"]
        t.compute_root().tile("y", "x", "yo", "xo", "y", "x", 4 * vec, vec, tail="shift")
        t.split("y", "y", "yi", vec, tail="shift").vectorize("yi").vectorize("x")
        t.fuse("c", "yo", "t").parallel("t")
        blur.compute_at(t, "t").vectorize("x")
        blur.update(1).reorder("ry.0", "x").vectorize("x")
        blur.update(2).reorder("ry.0", "x").vectorize("x")
