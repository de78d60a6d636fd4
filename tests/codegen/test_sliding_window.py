"""Chains of producers slid down the same loop (Halide's sliding window, ``codegen/sliding_window.py``):
each stage stored per tile of rows and computed per row block, so each block computes only the rows the
earlier blocks did not. A stage's region start is a select on the loop's first iteration, and the stage
before it slides around that select: results against NumPy, and the lowered code's size, which grew as
2^stages while each level held its consumer's start in both branches of its own select."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.codegen.lower import lower


def _chain(stages: int, block: int):
    y, x = rs.vars("y x")
    H, W = rs.Size("H"), rs.Size("W")
    img = rs.Input("img", rs.int32, [H, W])
    edge = rs.clamp_edge(img)
    prev = rs.Func("s0")
    prev[y, x] = edge[y, x]
    funcs = [prev]
    for s in range(1, stages + 1):
        f = rs.Func(f"s{s}")
        f[y, x] = prev[y - 1, x] + 2 * prev[y, x] + prev[y + 1, x] + prev[y, x + 1]
        funcs.append(f)
        prev = f
    out = rs.Func("out", shape=[H, W])
    out[y, x] = prev[y, x]
    out.split("y", "yo", "yi", 16, tail="auto").split("yi", "yi", "yb", block, tail="auto").parallel("yo")
    for f in funcs:
        f.store_at(out, "yo").compute_at(out, "yi")
    return rs.Pipeline([out])


def _ref(img: np.ndarray, stages: int) -> np.ndarray:
    """Each stage over the image grown by what later stages read: rows by 1 on each side per stage, columns
    by 1 on the right; the input extended by its edge."""
    h, w = img.shape
    ys = np.clip(np.arange(-stages, h + stages), 0, h - 1)
    xs = np.clip(np.arange(0, w + stages), 0, w - 1)
    a = img.astype(np.int64)[np.ix_(ys, xs)]
    for _ in range(stages):
        a = a[:-2, :-1] + 2 * a[1:-1, :-1] + a[2:, :-1] + a[1:-1, 1:]
    return a.astype(np.int32)


@pytest.mark.parametrize(("stages", "block", "shape"), [(1, 1, (37, 9)), (3, 4, (50, 13)), (12, 4, (41, 7)),
                                                        (12, 1, (33, 20))])
def test_slid_chains_compute_the_reference(stages, block, shape):
    img = np.random.default_rng(stages).integers(-50, 50, shape, dtype=np.int32)
    got = _chain(stages, block).compile(threads=2)(img=img)
    np.testing.assert_array_equal(got, _ref(img, stages))


def test_a_slid_chains_lowered_code_grows_with_its_length_not_exponentially():
    def size(stages):
        p = _chain(stages, 4)
        return len(str(lower(p.program(), p.schedule()).body))

    six, twelve = size(6), size(12)
    assert twelve < 3 * six, (six, twelve)  # each stage's code is about the same size; 2^6 = 64x before
