"""Batches of images of different sizes: a RaggedArray whose ragged dimensions each have their own
lengths (heights and widths), compiled pipelines over ``[B, H_b, W_b]`` against the NumPy reference and
against a loop over the images, and the checks that keep generated code inside each image (a second
ragged dimension with other lengths than the first had gone unchecked: a kernel read past the buffer)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched import schedule as S
from ragsched.autosched.space import analyze
from ragsched.reference import run


def _images(sizes, seed, channels=None):
    rng = np.random.default_rng(seed)
    tail = () if channels is None else (channels,)
    return [rng.standard_normal((h, w, *tail)).astype(np.float32) for h, w in sizes]


# ----------------------------------------------------------------------------------- the array
def test_images_of_different_sizes_keep_a_length_per_axis():
    sizes = [(3, 4), (5, 2), (0, 6), (1, 1), (2, 0)]
    ims = _images(sizes, 0, channels=3)
    a = rs.RaggedArray.from_list(ims)
    assert a.template == (None, None, 3)
    assert a.lengths.tolist() == [list(s) for s in sizes]
    assert a.axis_lengths(1).tolist() == [h for h, _ in sizes] and a.axis_lengths(2).tolist() == [w for _, w in sizes]
    assert a.offsets.tolist() == np.concatenate([[0], np.cumsum([h * w * 3 for h, w in sizes])]).tolist()
    for got, want in zip(a.to_list(), ims, strict=True):
        assert got.shape == want.shape and np.array_equal(got, want)
    padded = a.to_padded(fill=-1)
    assert padded.shape == (5, 5, 6, 3)
    assert (padded[0, 3:] == -1).all() and (padded[0, :, 4:] == -1).all()
    back = rs.RaggedArray.from_padded(padded, a.lengths, axis=(1, 2))
    assert back.lengths.tolist() == a.lengths.tolist() and np.array_equal(back.values, a.values)
    stored = a.with_pad(4)
    assert stored.storage_shape() == (5, 8, 8, 3)
    assert all(np.array_equal(g, w) for g, w in zip(stored.to_list(), ims, strict=True))
    assert "L0, L1, 3" in repr(a)


def test_square_entries_share_one_length_per_entry():
    a = rs.RaggedArray.from_list([np.zeros((n, 2, n)) for n in (3, 1, 4)])
    assert a.lengths.tolist() == [3, 1, 4] and a.axis_lengths(3).tolist() == [3, 1, 4]
    with pytest.raises(ValueError, match="axis 2 is not a ragged dimension"):
        a.axis_lengths(2)


# ----------------------------------------------------------------------------------- compiled
def _batch():
    """The symbols of a batch of images of different sizes: (B, hs, ws, H, W, img), img [B, H_b, W_b]."""
    B = rs.Size("B")
    hs, ws = rs.Input("hs", rs.int32, [B]), rs.Input("ws", rs.int32, [B])
    H, W = rs.Ragged("H", hs), rs.Ragged("W", ws)
    return B, hs, ws, H, W, rs.Input("img", rs.float32, [B, H, W])


def _box_blur():
    """A 3 x 3 box blur of each image, its edges extended by the image's own edge pixels, and each
    image's mean: outputs [B, H_b, W_b] and [B]."""
    B, hs, ws, H, W, img = _batch()
    b, y, x = rs.vars("b y x")
    blur_x = rs.Func("blur_x", shape=[B, H, W])
    blur_x[b, y, x] = sum(img[b, y, rs.clamp(x + d, 0, ws[b] - 1)] for d in (-1, 0, 1)) / 3
    out = rs.Func("out", shape=[B, H, W])
    out[b, y, x] = sum(blur_x[b, rs.clamp(y + d, 0, hs[b] - 1), x] for d in (-1, 0, 1)) / 3
    r = rs.RDom((0, hs[b]), (0, ws[b]), name="r")
    total = rs.Func("total", shape=[B])
    total[b] = rs.sum(img[b, r[0], r[1]])
    mean = rs.Func("mean", shape=[B])
    mean[b] = total[b] / rs.max(hs[b] * ws[b], 1)
    return out, mean


def _numpy_box_blur(im):
    if im.size == 0:
        return im.copy()
    p = np.pad(im, 1, mode="edge")
    bx = (p[:, :-2] + p[:, 1:-1] + p[:, 2:]) / 3
    return (bx[:-2] + bx[1:-1] + bx[2:]) / 3


def _schedule(out, mean, choice, lanes):
    """One of a few schedules a user would write (0: the default)."""
    funcs = rs.lang.reachable_funcs([out, mean])
    if choice == 1:
        out.parallel("b").vectorize("x", lanes)
        funcs["blur_x"].compute_at(out, "b").vectorize("x", lanes)
    elif choice == 2:
        out.parallel("b").vectorize("x", lanes)
        funcs["blur_x"].compute_at(out, "y").vectorize("x", lanes)
    elif choice == 3:
        out.split("y", "yo", "yi", 2).parallel("b").vectorize("x", lanes)
        funcs["blur_x"].compute_at(out, "yo").vectorize("x", lanes)
        mean.parallel("b")
    elif choice == 4:
        funcs["blur_x"].compute_root().parallel("b").vectorize("x", lanes)
    elif choice == 5:  # tiles whose columns stop at each image's edge, the blur computed per tile
        out.split("y", "yo", "yi", 4, tail="split").split("x", "xo", "xi", lanes, tail="split") \
            .reorder("b", "yo", "xo", "yi", "xi").vectorize("xi").parallel("b")
        funcs["blur_x"].compute_at(out, "xo").vectorize("x", lanes)


SIZES = st.lists(st.tuples(st.integers(0, 9), st.integers(0, 11)), min_size=1, max_size=5)


@settings(max_examples=25, deadline=None)
@given(sizes=SIZES, seed=st.integers(0, 2**16), choice=st.integers(0, 5), lanes=st.sampled_from([4, 8, 16]))
def test_a_batch_of_images_of_different_sizes_matches_the_reference(sizes, seed, choice, lanes):
    out, mean = _box_blur()
    _schedule(out, mean, choice, lanes)
    ims = _images(sizes, seed)
    args = {"img": rs.RaggedArray.from_list(ims, ragged_axes=[0, 1]),
            "hs": np.array([h for h, _ in sizes], np.int32), "ws": np.array([w for _, w in sizes], np.int32)}
    got_blur, got_mean = rs.Pipeline([out, mean]).compile(threads=2)(**args)
    want_blur, want_mean = run([out, mean], **args)
    assert got_blur.lengths.tolist() == want_blur.lengths.tolist()
    np.testing.assert_allclose(got_blur.values, want_blur.values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_mean, want_mean, rtol=1e-5, atol=1e-6)
    for g, im in zip(got_blur.to_list(), ims, strict=True):  # and a loop over the images, apart
        np.testing.assert_allclose(g, _numpy_box_blur(im), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_mean, [im.sum() / max(im.size, 1) for im in ims], rtol=1e-4, atol=1e-5)


def test_the_rules_compute_the_blur_per_strip_of_an_images_rows():
    """A clamp to each image's own edge, ``clamp(y + 1, 0, hs[b] - 1)``, is a boundary condition as
    ``clamp(y + 1, 0, H - 1)`` is: the read is at offsets (-1, 0, 1), not a lookup, and the rules slide
    the horizontal blur down the output's strips instead of storing it whole."""
    out, mean = _box_blur()
    funcs = analyze(rs.Pipeline([out, mean]).program(), lambda dt: 16)
    (blur,) = (f for f in funcs if f.name == "blur_x")
    assert [(r.consumer, r.offsets, r.data) for r in blur.reads] == [("out", ((0, -1, 0), (0, 0, 0), (0, 1, 0)), False)]
    records = list(rs.autoschedule([out, mean], trials=0))
    assert any(isinstance(r, S.ComputeAt) and r.func == "blur_x" and r.consumer == "out" for r in records)


def test_a_clamp_that_moves_with_the_columns_is_no_boundary():
    B, hs, ws, H, W, img = _batch()
    b, y, x = rs.vars("b y x")
    f = rs.Func("f", shape=[B, H, W])
    f[b, y, x] = img[b, y, x] * 2
    g = rs.Func("g", shape=[B, H, W])
    g[b, y, x] = f[b, rs.min(y + 1, x), x] + f[b, y, rs.min(x, hs[y % 2] - 1)]
    (info,) = (i for i in analyze(rs.Pipeline([g]).program(), lambda dt: 16) if i.name == "f")
    assert info.reads[0].offsets is None and info.reads[0].data  # (hs read at a row: a lookup)


def test_the_rules_schedule_a_batch_of_images():
    out, mean = _box_blur()
    sizes = [(37, 53), (0, 5), (64, 17), (9, 90)]
    ims = _images(sizes, 3)
    args = {"img": rs.RaggedArray.from_list(ims, ragged_axes=[0, 1]),
            "hs": np.array([h for h, _ in sizes], np.int32), "ws": np.array([w for _, w in sizes], np.int32)}
    rs.autoschedule([out, mean], trials=0, inputs=args).apply([out, mean])
    got_blur, got_mean = rs.Pipeline([out, mean]).compile(threads=2)(**args)
    for g, im in zip(got_blur.to_list(), ims, strict=True):
        np.testing.assert_allclose(g, _numpy_box_blur(im), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_mean, [im.sum() / max(im.size, 1) for im in ims], rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------------- checks
def _row_sums():
    B, hs, ws, H, _, img = _batch()
    b, y = rs.vars("b y")
    rows = rs.Func("rows", shape=[B, H])
    rows[b, y] = rs.sum(img[b, y, rs.RDom(0, ws[b])])
    return rows


def test_a_second_ragged_dimension_is_checked_before_running():
    """Images given with one length per entry for both axes (heights), where the widths differ: the
    kernel had checked the first ragged dimension only and read past the buffer."""
    hs, ws = np.array([3, 5, 2], np.int32), np.array([4, 7, 6], np.int32)
    square = rs.RaggedArray.from_list([np.ones((h, h), np.float32) for h in hs])
    rows = _row_sums()
    with pytest.raises(ValueError, match=r"argument img: entry 0 has length 3 in dimension 2, but its shape says"):
        rows.compile()(img=square, hs=hs, ws=ws)
    with pytest.raises(ValueError, match=r"argument img: entry 0 has length 3 in dimension 2, but its shape says"):
        run(rows, img=square, hs=hs, ws=ws)
    right = rs.RaggedArray.from_list([np.ones((h, w), np.float32) for h, w in zip(hs, ws, strict=True)])
    assert [r.tolist() for r in rows.compile()(img=right, hs=hs, ws=ws).to_list()] == \
        [[float(w)] * h for h, w in zip(hs, ws, strict=True)]


def test_a_read_past_an_images_edge_is_refused():
    """A clamp to the image's own edge reads index -1 only in an empty image, whose loops run nothing
    (accepted above); a read one row past the edge is refused, whatever the schedule."""
    B, hs, ws, H, W, img = _batch()
    b, y, x = rs.vars("b y x")
    down = rs.Func("down", shape=[B, H, W])
    down[b, y, x] = img[b, rs.min(y + 1, hs[b]), x]
    with pytest.raises(ValueError, match="Input img is ragged: dimension 1 is read over"):
        down.compile()


def test_the_rules_schedule_of_the_bundled_image_batch_compiles_and_matches():
    """pipelines/image_batch.py reads each image's middle tap unclamped: in a tile of the output, its
    last column is the tile's (``64 x + max(min(ws[b] - 64 x, 64), 0) - 1``), within the image only by the
    tile loop's range; the check had refused the rules' schedule for it."""
    from ragsched.pipeline_file import load
    from tests import ROOT

    pf = load(ROOT / "pipelines" / "image_batch.py")
    outs = list(pf.outputs())
    rs.autoschedule(outs, trials=0, inputs=pf.inputs("full"), threads=2).apply(outs)
    assert any(isinstance(d, S.ComputeAt) and d.func == "blur_x" for d in rs.Pipeline(outs).schedule())
    small = pf.inputs("small")
    got = rs.Pipeline(outs).compile(threads=2)(**small)
    want = pf.reference(small)
    assert got.lengths.tolist() == want.lengths.tolist()
    np.testing.assert_allclose(got.values, want.values, rtol=1e-5, atol=1e-6)


def test_a_ragged_output_that_another_output_reads():
    """A ragged output read by another output (a transposed batch and its column sums): computed into its
    padded box (the other output's reads are not proven inside the caller's array), then copied out entry
    by entry. It was refused; a copy of it as the output, the way around, gives the same values."""
    B, hs, ws, H, W, img = _batch()
    b, y, x = rs.vars("b y x")

    def pipeline(copy: bool):
        t = rs.Func("t", shape=[B, W, H])
        t[b, x, y] = img[b, y, x]
        cols = rs.Func("cols", shape=[B, W])
        cols[b, x] = rs.sum(t[b, x, rs.RDom(0, hs[b])])
        if not copy:
            return [t, cols]
        out = rs.Func("transposed", shape=[B, W, H])
        out[b, x, y] = t[b, x, y]
        return [out, cols]

    sizes = [(3, 5), (0, 2), (4, 0), (7, 1), (2, 9)]
    ims = _images(sizes, 2)
    args = {"img": rs.RaggedArray.from_list(ims, ragged_axes=[0, 1]),
            "hs": np.array([h for h, _ in sizes], np.int32), "ws": np.array([w for _, w in sizes], np.int32)}
    for copy in (False, True):
        outs = pipeline(copy)
        got, cols = rs.Pipeline(outs).compile()(**args)
        assert got.lengths.tolist() == [[w, h] for h, w in sizes]
        for g, c, im in zip(got.to_list(), cols.to_list(), ims, strict=True):
            np.testing.assert_array_equal(g, im.T)
            np.testing.assert_allclose(c, im.sum(axis=0), rtol=1e-5, atol=1e-6)
        want, want_cols = run(outs, **args)
        np.testing.assert_array_equal(got.values, want.values)
