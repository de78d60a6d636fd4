"""The symbolic cost model (sympy): each stage's points as expressions of Sizes and of the moments of
ragged lengths, checked against counts made here by plain loops over the domains, for dense, triangular
and ragged pipelines and random lengths; regions the model cannot express are None, never a guess."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.autosched.cost import pipeline_cost, sizes_from


def _stage(cost, func, stage):
    return next(s for s in cost.stages if s.func == func and s.stage == stage)


def test_dense_stencil_points_are_its_regions():
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    bx = rs.Func("bx")
    bx[y, x] = img[y, x] + img[y, x + 1] + img[y, x + 2]
    by = rs.Func("by", shape=[H - 2, W - 2])
    by[y, x] = bx[y, x] + bx[y + 1, x] + bx[y + 2, x]
    program = rs.Pipeline([by]).program()
    cost = pipeline_cost(program)
    h, w = sp.symbols("H W", integer=True, positive=True)
    assert sp.expand(_stage(cost, "bx", 0).points - h * (w - 2)) == 0  # the rows by reads: 2 more
    assert sp.expand(_stage(cost, "by", 0).points - (h - 2) * (w - 2)) == 0
    inputs = {"img": np.zeros((17, 23), np.float32)}
    assert cost.evaluate(cost.total_work, inputs, sizes_from(program, inputs)) == 2 * 17 * 21 + 2 * 15 * 21


def _ragged_program(triangular: bool):
    """Scores S[b, h, i, j] over j < lens[b] (or j <= i), a sum over k of 16, and a row sum over j."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    Q = rs.Input("Q", rs.float32, [B, L, 2, 16])
    b, h, i, j = rs.vars("b h i j")
    k = rs.RDom(0, 16)
    cols = rs.Ragged("T", lambda b, h, i: i + 1) if triangular else L
    S = rs.Func("S", shape=[B, 2, L, cols])
    S[b, h, i, j] = rs.sum(Q[b, i, h, k] * Q[b, j, h, k])
    rj = rs.RDom(0, i + 1) if triangular else rs.RDom(0, lens[b])
    R = rs.Func("R", shape=[B, 2, L])
    R[b, h, i] = rs.sum(S[b, h, i, rj])
    return rs.Pipeline([R]).program()


@settings(max_examples=20, deadline=None)
@given(lens=st.lists(st.integers(1, 9), min_size=1, max_size=6), triangular=st.booleans())
def test_ragged_points_are_sums_over_the_lengths(lens, triangular):
    program = _ragged_program(triangular)
    cost = pipeline_cost(program)
    lens = np.array(lens, np.int32)
    inputs = {"lens": lens}
    sizes = sizes_from(program, inputs)
    assert sizes == {"B": len(lens)}
    # counted here, by loops over the domain
    scores = sum(2 * sum((i + 1) if triangular else n for i in range(n)) for n in lens)
    rows = sum(2 * n for n in lens)
    assert cost.evaluate(_stage(cost, "S", 0).points, inputs, sizes) == scores
    assert cost.evaluate(_stage(cost, "R", 0).points, inputs, sizes) == rows
    sums = sorted((s for s in cost.stages if s.func not in ("S", "R") and s.stage == 1), key=lambda s: s.ops)
    assert cost.evaluate(sums[0].points, inputs, sizes) == scores  # the row sum visits each score
    assert cost.evaluate(sums[1].points, inputs, sizes) == 16 * scores  # the sum over k, 16 a score
    # the moments it names are the only data it needs
    assert {name for name, _ in cost.moments} == {"lens"}


def test_unexpressible_regions_are_unknown_not_guessed():
    """A lookup table without a declared shape read at data (a pixel's value): its region, and so the
    pipeline's total, is None; the stage that reads it is still counted."""
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.uint8, [H, W])
    lut = rs.Func("lut")
    lut[x] = rs.cast(rs.float32, x) * 0.5
    out = rs.Func("out", shape=[H, W])
    out[y, x] = lut[rs.cast(rs.int32, img[y, x])]
    cost = pipeline_cost(rs.Pipeline([out]).program())
    assert _stage(cost, "lut", 0).points is None
    assert cost.total_work is None
    h, w = sp.symbols("H W", integer=True, positive=True)
    assert sp.expand(_stage(cost, "out", 0).points - h * w) == 0


@pytest.mark.parametrize("name", ["matmul", "trimatmul", "attention"])
def test_bundled_pipelines_work_is_the_known_formula(name):
    from pathlib import Path

    from ragsched.pipeline_file import load

    pf = load(Path(__file__).resolve().parents[2] / "pipelines" / f"{name}.py")
    program = pf.pipeline().program()
    cost = pipeline_cost(program)
    inputs = pf.inputs("small")
    work = cost.evaluate(cost.total_work, inputs, sizes_from(program, inputs))
    if name == "matmul":  # a multiply and an add per (i, j, k)
        (M, K), N = inputs["A"].shape, inputs["B"].shape[1]
        assert work == 2 * M * N * K
    elif name == "trimatmul":  # C[i, j] = sum over k <= i of A[i, k] B[k, j]: (i + 1) terms a row
        n, m = inputs["B"].shape
        assert work == 2 * m * n * (n + 1) / 2 + 0 * m
    else:
        lens = np.asarray(inputs["lens"], np.float64)
        assert work == 520 * lens.sum() + 2088 * (lens ** 2).sum()
