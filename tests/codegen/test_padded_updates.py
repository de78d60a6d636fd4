"""Loop padding (``pad``) of a dense Func's update, the Func computed per tile of its consumer: the update's
loops run past the region its consumer reads, to a multiple, so that a split by a divisor of it has no
tail (a producer's slice of 38 columns in vectors of 8 or 16, as a denoiser's per-offset producers are).
The padded points read and write only padded points (an update reads its Func at its pure Vars' own
positions) and no consumer reads them. Lowering used to stop at "the region its updates write keeps
growing" (the region was grown to the padded points and rounded up again at each pass). Checked against
the NumPy reference over sizes, tiles, multiples and splits."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.reference import run

TAPS = 5


def _box_sum():
    """out[y, x] = 2 * s[y, x], s[y, x] = 1 + sum over r of img[y, x + r] (img clamped at its edges)."""
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    clamped = rs.clamp_edge(img)
    r = rs.RDom(0, TAPS, name="r")
    s = rs.Func("s", dtype=rs.float32)
    s[y, x] = 1.0
    s[y, x] += clamped[y, x + r]
    out = rs.Func("out", shape=[H, W])
    out[y, x] = s[y, x] * 2.0
    return out, s


def _schedule(out, s, tile: int, multiple: int, split: int, pure_too: bool):
    out.split("x", "xo", "xi", tile, tail="split").reorder("y", "xo", "xi")
    s.compute_at(out, "xo")
    if pure_too:
        s.pad("x", multiple)
    s.update().pad("x", multiple).split("x", "xo", "xi", split, tail="split").reorder("y", "xo", "r.0", "xi")


@settings(deadline=None, max_examples=30)
@given(h=st.integers(1, 9), w=st.integers(1, 75), tile=st.sampled_from([3, 8, 13, 32]),
       multiple=st.sampled_from([2, 8, 16]), split=st.sampled_from([1, 2, 8, 16]), pure_too=st.booleans(),
       seed=st.integers(0, 2**16))
def test_padded_updates_of_a_func_per_tile_compute_the_reference(h, w, tile, multiple, split, pure_too, seed):
    img = np.random.default_rng(seed).uniform(-1, 1, (h, w)).astype(np.float32)
    out, s = _box_sum()
    want = run(out, img=img)
    _schedule(out, s, tile, multiple, split, pure_too)
    got = rs.Pipeline([out]).compile()(img=img)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_padded_update_runs_whole_vectors():
    """Padded to a multiple of the vector split, the update's column loop has no tail: no loop of the
    split's rest."""
    out, s = _box_sum()
    vec = rs.natural_vector_size(rs.float32)
    out.split("x", "xo", "xi", 3 * vec + 5, tail="split")
    s.compute_at(out, "xo")
    s.update().pad("x", vec).split("x", "xo", "xi", vec, tail="split").vectorize("xi")
    text = rs.Pipeline([out]).lowered()
    assert "s.s1.xo" in text
    assert not any("for s.s1.xi" in line for line in text.splitlines())  # vectorized whole, no scalar rest
