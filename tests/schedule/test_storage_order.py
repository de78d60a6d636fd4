"""``reorder_storage``: a Func's buffer laid out in another dimension order computes the same values,
round-trips through a saved schedule, and is refused where it cannot apply (outputs, wrong Vars)."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.reference import run as reference_run
from ragsched.schedule import Schedule


def pipeline():
    k, y, x = rs.vars("k y x")
    img = rs.Input("img", rs.float32, 2)
    levels = rs.Func("levels")
    levels[k, y, x] = img[y, x] * rs.cast(rs.float32, k + 1)
    pick = rs.cast(rs.int32, img[y, x] * 3.0) % 4  # a data-dependent level, as local_laplacian reads
    out = rs.Func("out", shape=[img.shape[0], img.shape[1]])
    out[y, x] = levels[pick, y, x] + levels[3, y, x]
    return out, levels


def test_reordered_storage_computes_the_reference():
    img = np.random.default_rng(0).uniform(0, 1, (11, 13)).astype(np.float32)
    out, levels = pipeline()
    levels.compute_root().reorder_storage("y", "k", "x").vectorize("x", 4)
    nest = rs.Pipeline([out]).lowered()
    np.testing.assert_array_equal(out.compile()(img=img), reference_run(out, img=img))
    again, _ = pipeline()
    Schedule.from_json(rs.Pipeline([out]).schedule().to_json()).apply(again)
    np.testing.assert_array_equal(again.compile()(img=img), reference_run(out, img=img))
    # y outermost (stride: k's extent times x's), k in the middle (stride: x's extent), x contiguous
    assert "let levels.stride.1 = levels.extent.0 * levels.extent.2" in nest
    assert "levels.extent.2 * (3 - levels.min.0)" in nest


def test_reorder_storage_is_refused_on_outputs_and_wrong_vars():
    out, levels = pipeline()
    with pytest.raises(ValueError, match=r"Func levels: reorder_storage\(y, x\) must name each of its pure Vars"):
        levels.reorder_storage("y", "x")
    out.reorder_storage("x", "y")
    with pytest.raises(ValueError, match="Func out is an output of the pipeline"):
        out.compile()
