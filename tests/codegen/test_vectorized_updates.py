"""An update vectorized along one of its pure Vars: a scan down the rows (``f[ry, x] = f[ry - 1, x] ...``)
reads another element of its own buffer than it writes, which the vectorizer cannot tell apart from a
dependence between lanes by the indices, but the language can (every self-reference keeps each pure Var
in its own position): the lanes are vector code, and compute what the reference does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.codegen import ir
from ragsched.codegen.lower import lower
from ragsched.reference import run

from .helpers import has_vectors


def _scan(reverse: bool = False):
    """Column scans of a [H, W] image: down the rows (then up them, when ``reverse``)."""
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    f = rs.Func("f")
    f[y, x] = img[y, x]
    ry = rs.RDom(1, H - 1, name="ry")
    f[ry, x] = f[ry - 1, x] * 0.5 + f[ry, x]
    if reverse:
        up = H - 1 - ry  # rows H - 2 down to 0
        f[up, x] = f[up + 1, x] * 0.25 + f[up, x]
    out = rs.Func("out", shape=[H, W])
    out[y, x] = f[y, x] * 2.0
    return out, f


def _update_loops(pipe, func: str, stage: int) -> list[ir.Stmt]:
    body = lower(pipe.program(), pipe.schedule()).body
    prefix = f"{func}.s{stage}."
    return [s for s in ir.walk_stmts(body) if isinstance(s, ir.For) and s.var.startswith(prefix)]


ORDERS = {
    "rows outside": lambda f, u: f.update(u).split("x", "xo", "xi", 8, tail="guard").reorder("ry.0", "xo", "xi")
    .vectorize("xi"),
    "rows inside": lambda f, u: f.update(u).split("x", "xo", "xi", 8, tail="guard").reorder("xo", "xi", "ry.0")
    .vectorize("xi"),
    "whole row": lambda f, u: f.update(u).split("x", "xo", "xi", 4, tail="split").reorder("ry.0", "xo", "xi")
    .vectorize("xi"),
}


@pytest.mark.parametrize("order", ORDERS)
def test_scan_vectorized_along_its_pure_var_is_vector_code(order):
    out, f = _scan()
    f.compute_root()
    ORDERS[order](f, 0)
    pipe = rs.Pipeline([out])
    loops = _update_loops(pipe, "f", 1)
    assert loops and any(has_vectors(s) for s in loops)
    assert not any(s.kind is ir.ForKind.VECTORIZED for s in loops)  # none left to run serially


@settings(deadline=None, max_examples=12)
@given(h=st.integers(1, 13), w=st.integers(1, 37), order=st.sampled_from(sorted(ORDERS)),
       reverse=st.booleans(), seed=st.integers(0, 2**16))
def test_scan_vectorized_along_its_pure_var_computes_the_reference(h, w, order, reverse, seed):
    img = np.random.default_rng(seed).random((h, w), dtype=np.float32)
    out, f = _scan(reverse)
    want = run(out, img=img)
    f.compute_root()
    for u in range(2 if reverse else 1):
        ORDERS[order](f, u)
    got = out.compile()(img=img)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_scan_along_the_vectorized_var_itself_is_refused():
    """The RDom's own loop is the dependence: it cannot be vectorized, and says so."""
    out, f = _scan()
    f.compute_root()
    with pytest.raises(ValueError, match="cannot be vectorized"):
        f.update(0).vectorize("ry.0")
        rs.Pipeline([out]).compile()
