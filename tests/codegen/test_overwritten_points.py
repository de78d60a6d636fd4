"""Points of a pure definition that the first update overwrites before any read are not computed
(``codegen/overwritten_points.py``): a scan's pure stage runs at its first point only, a table of slices
built from the slice before computes its first slice; updates that read a point before writing it keep
their pure values."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.codegen.overwritten_points import overwritten_box
from ragsched.schedule.resolve import resolve_schedule


def _scan():
    """f[x] = a[x], then f[r] = 2 f[r - 1] + b[r] for r in [1, N): only f[0] of the pure stage is read."""
    n = rs.Size("N")
    x = rs.Var("x")
    a, b = rs.Input("a", rs.float32, [n]), rs.Input("b", rs.float32, [n])
    f = rs.Func("f", shape=[n])
    f[x] = a[x]
    r = rs.RDom(1, n - 1, name="r")
    f[r] = f[r - 1] * 2 + b[r]
    return f


def _scan_reference(a0, b):
    out = np.empty_like(b)
    out[0] = a0
    for k in range(1, len(b)):
        out[k] = out[k - 1] * np.float32(2) + b[k]
    return out


@pytest.mark.parametrize("split", [None, 4, 16])
def test_a_scans_pure_stage_computes_only_the_point_the_scan_reads(split):
    f = _scan()
    program = rs.Pipeline([f]).program()
    plans = resolve_schedule(program, rs.Pipeline([f]).schedule())["f"].plans
    (lo, hi), = overwritten_box(program.func("f"), plans[1]).values()
    assert (str(lo), str(hi)) == ("1", "N - 1")
    if split:
        f.split("x", "x", "x.i", split, tail="shift").vectorize("x.i")
    pipeline = rs.Pipeline([f])
    pure = pipeline.lowered().split("produce f")[1].split("f.s1")[0]
    assert "if !(" in pure and "N - 1" in pure  # stores outside the scan's rows [1, N - 1] only
    kernel = pipeline.compile(threads=1)
    for n in (1, 2, 37) if not split else (split, 37):  # (a shifted tile needs a region at least as long)
        a, b = (np.random.default_rng(n).random(n, dtype=np.float32) for _ in range(2))
        np.testing.assert_allclose(kernel(a=a, b=b), _scan_reference(a[0], b), rtol=1e-5)


def test_a_table_of_slices_computes_its_first_slice_and_the_rows_the_update_leaves():
    """Slice t from slice t - 1 at rows y and y + 2^(t-1) (a max filter's windows) for rows [0, H): slices
    t >= 1 keep their pure values below and above those rows, which the update reads."""
    h, w = rs.Size("H"), rs.Size("W")
    t, y, x = rs.vars("t y x")
    img = rs.Input("img", rs.float32, [h, w])
    edge = rs.clamp_edge(img)
    one = rs.cast(rs.int32, 1)
    v = rs.Func("v")
    v[t, y, x] = edge[y, x]
    r = rs.RDom((1, 3), (0, h), name="r")
    v[r[0], r[1], x] = rs.max(v[r[0] - 1, r[1], x], v[r[0] - 1, r[1] + rs.clamp(one << (r[0] - 1), 0, 4), x])
    out = rs.Func("out", shape=[h, w])
    out[y, x] = v[3, y, x] + v[2, y + 2, x]
    v.compute_root().split("y", "y", "y.i", 8, tail="shift").vectorize("x", 8)
    v.update(0).vectorize("x", 8)
    img_v = np.random.default_rng(1).random((21, 19), dtype=np.float32)
    got = rs.Pipeline([out]).compile(threads=2)(img=img_v)

    pad = np.pad(img_v, ((0, 12), (0, 0)), mode="edge")
    slices = [pad]
    for k in range(1, 4):
        prev = slices[-1]
        off = min(1 << (k - 1), 4)
        cur = prev.copy()
        cur[:21] = np.maximum(prev[:21], prev[off:21 + off])
        slices.append(cur)
    np.testing.assert_array_equal(got, slices[3][:21] + slices[2][2:23])


def test_updates_that_read_before_they_write_keep_the_pure_values():
    """f[r] = f[r + 1] + 1 reads the next point, not yet written; a sum f[x] += g[r] reads its own point;
    an update whose reads step back along a split reduction loop proves nothing (not worth the proof)."""
    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [n])
    f = rs.Func("f", shape=[n])
    f[x] = a[x]
    r = rs.RDom(0, n - 1, name="r")
    f[r] = f[r + 1] + 1
    av = np.arange(9, dtype=np.float32)
    want = av.copy()
    for k in range(8):
        want[k] = want[k + 1] + 1
    np.testing.assert_array_equal(rs.Pipeline([f]).compile(threads=1)(a=av), want)

    g = rs.Func("g", shape=[n])
    g[x] = a[x]
    s = rs.RDom(0, 3, name="s")
    g[x] += a[s]
    np.testing.assert_allclose(rs.Pipeline([g]).compile(threads=1)(a=av), av + av[:3].sum())

    h, w = rs.Size("H"), rs.Size("W")
    t, y = rs.vars("t y")
    img = rs.Input("img", rs.float32, [h, w])
    v = rs.Func("v", shape=[h, w])
    v[t, y] = img[t, y]
    q = rs.RDom((1, h - 1), (0, w), name="q")
    v[q[0], q[1]] = v[q[0] - 1, q[1]] * 2
    program = rs.Pipeline([v]).program()
    fn = program.func("v")
    rows_first = resolve_schedule(program, rs.Pipeline([v]).schedule())["v"].plans[1]
    assert overwritten_box(fn, rows_first) is not None
    v.update(0).split("q.0", "q.0", "q.0.i", 2)  # the loop its reads step back along is split
    split = resolve_schedule(program, rs.Pipeline([v]).schedule())["v"].plans[1]
    assert overwritten_box(fn, split) is None
