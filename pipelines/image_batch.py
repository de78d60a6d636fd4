"""A batch of images of different sizes, preprocessed without padding: each image blurred by a 3 x 3 box
(its edges extended by its own edge pixels) and centred on its mean. The images are a RaggedArray
[B, H_b, W_b] with a height and a width per image (``hs``, ``ws``); no pixel outside an image is
computed, read or stored, where padding the batch to its largest image computes the whole box (twice
the pixels for the "full" sizes) and extends each image by zeros or the box's edge, not its own.

The sizes are synthetic (no image-size data is bundled): "full" is 32 images of 240 to 640 pixels a
side, drawn uniformly with a fixed seed; "small" includes an empty image and a one-pixel one.
"""

import numpy as np

import ragsched as rs

SIZES = {"small": [(15, 21), (0, 9), (1, 1), (27, 3), (13, 33), (17, 11), (5, 7)]}
TOLERANCE = (1e-5, 1e-6)


def _full_sizes():
    rng = np.random.default_rng(2026)
    return [(int(rng.integers(240, 641)), int(rng.integers(240, 641))) for _ in range(32)]


def build():
    B = rs.Size("B")
    hs, ws = rs.Input("hs", rs.int32, [B]), rs.Input("ws", rs.int32, [B])
    H, W = rs.Ragged("H", hs), rs.Ragged("W", ws)
    b, y, x = rs.vars("b y x")
    img = rs.Input("img", rs.float32, [B, H, W])
    blur_x = rs.Func("blur_x", shape=[B, H, W])
    blur_x[b, y, x] = (img[b, y, rs.clamp(x - 1, 0, ws[b] - 1)] + img[b, y, x]
                       + img[b, y, rs.clamp(x + 1, 0, ws[b] - 1)]) / 3
    blur = rs.Func("blur", shape=[B, H, W])
    blur[b, y, x] = (blur_x[b, rs.clamp(y - 1, 0, hs[b] - 1), x] + blur_x[b, y, x]
                     + blur_x[b, rs.clamp(y + 1, 0, hs[b] - 1), x]) / 3
    r = rs.RDom((0, hs[b]), (0, ws[b]), name="pixels")
    mean = rs.Func("mean", shape=[B])
    mean[b] = rs.sum(img[b, r[0], r[1]]) / rs.cast(rs.float32, rs.max(hs[b] * ws[b], 1))
    out = rs.Func("centred", shape=[B, H, W])
    out[b, y, x] = blur[b, y, x] - mean[b]
    return out


def example_inputs(scale="small"):
    sizes = SIZES[scale] if scale in SIZES else _full_sizes()
    rng = np.random.default_rng(0)
    images = [rng.random((h, w), dtype=np.float32) for h, w in sizes]
    return {"img": rs.RaggedArray.from_list(images, ragged_axes=[0, 1]),
            "hs": np.array([h for h, _ in sizes], np.int32), "ws": np.array([w for _, w in sizes], np.int32)}


def reference_image(im: np.ndarray) -> np.ndarray:
    """One image's result, in NumPy."""
    if im.size == 0:
        return im.copy()
    p = np.pad(im, 1, mode="edge")
    bx = (p[:, :-2] + p[:, 1:-1] + p[:, 2:]) / np.float32(3)
    return (bx[:-2] + bx[1:-1] + bx[2:]) / np.float32(3) - im.mean(dtype=np.float32)


def reference(img, hs, ws):
    return rs.RaggedArray.from_list([reference_image(im) for im in img.to_list()], ragged_axes=[0, 1])


def hand_schedule(funcs):
    """Strips of 32 rows of each image, images in parallel, vectorized along the rows; the horizontal
    blur computed per strip (slid down it) and each image's sum before, vectorized along its rows."""
    vec = rs.natural_vector_size(rs.float32)
    out = funcs["centred"]
    out.split("y", "y", "yi", 32, tail="split").reorder("b", "y", "yi", "x").vectorize("x", vec).parallel("b")
    funcs["blur"].compute_inline()
    funcs["blur_x"].store_at(out, "y").compute_at(out, "yi").vectorize("x", vec)
    funcs["mean"].compute_root()
    total = next(f for name, f in funcs.items() if name.startswith("sum_"))
    total.compute_root().parallel("b")
    total.update(0).parallel("b").vectorize("pixels.1", vec)
