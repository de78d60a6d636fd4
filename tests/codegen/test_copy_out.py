"""An output computed into storage of its own (its bound() along a dimension) and copied into the caller's
array: on the CPU the rows are copied in parallel (every dimension but the last as one loop), each row's
index taken apart by division; whatever the extents, the caller's array gets the reference's values."""

import numpy as np
import pytest

import ragsched as rs


def _channels(rank: int):
    """An output of ``rank`` dimensions whose first is bound to [0, 3): each channel scales the image."""
    sizes = [rs.Size(n) for n in "HWD"[: rank - 1]]
    vs = rs.vars("c y x z")[:rank]
    img = rs.Input("img", rs.float32, sizes)
    f = rs.Func("f", shape=[3, *sizes])
    f[vs] = img[vs[1:]] * rs.cast(rs.float32, vs[0] + 1)
    f.bound("c", 0, 3).unroll("c")
    return f


@pytest.mark.parametrize("shape", [(2, 5, 7), (3, 1, 9), (1, 4, 1), (3, 3, 2, 5), (2, 2, 3, 1)])
def test_copied_rows_in_parallel_hold_the_reference(shape):
    f = _channels(len(shape))
    kern = f.compile(threads=2)
    assert "parallel f.copy.rows" in kern.loop_nest()
    img = np.arange(1, 1 + int(np.prod(shape[1:])), dtype=np.float32).reshape(shape[1:])
    out = np.full(shape, -1.0, np.float32)
    kern(img=img, out=out)
    want = np.stack([img * (c + 1) for c in range(shape[0])])
    np.testing.assert_array_equal(out, want)


def test_a_one_dimensional_copy_stays_serial():
    N = rs.Size("N")
    c = rs.Var("c")
    a = rs.Input("a", rs.float32, [N])
    f = rs.Func("f", shape=[N])
    f[c] = rs.clamp_edge(a)[c] + 1  # (the bound computes past a's end)
    f.bound("c", 0, 8)
    kern = f.compile()
    assert "(copy out)" in kern.loop_nest() and "parallel" not in kern.loop_nest()
    np.testing.assert_array_equal(kern(a=np.arange(5, dtype=np.float32)), np.arange(1, 6, dtype=np.float32))
