"""Vectors of a buffer stored in F2 layout tiles (``f.layout``): where a vector loop starts at multiples of
the tile's width (tails "guard" or "split"; the tiles start at multiples of their size whatever the
region's min), each vector is a dense load of one tile's row, or dense loads of several tiles laid end to
end; elsewhere (a shifted tail, a read one column over) a gather. Either way the result is the
reference's, for random tile shapes, vector widths, tails, offsets and storage orders."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched import reference
from ragsched.algebra import expr as E
from ragsched.algebra import f2
from ragsched.codegen import ir
from ragsched.codegen.llvm.vector_memory import _dense_runs
from ragsched.codegen.lower import lower


def _pipeline(tile_rows, tile_cols, lanes, tail, offset=0, storage_swapped=False):
    x, y = rs.Var("x"), rs.Var("y")
    height = rs.Size("H")
    a = rs.Input("a", rs.float32, [height, rs.Size("W")])
    g = rs.Func("g")
    g[y, x] = a[y, x] * 2 + 1
    h = rs.Func("h")
    # (two columns apart: a vector misplaced by one of the reads, and not by the other or by the stores,
    # reads another element)
    h[y, x] = g[y, x + offset] + g[rs.min(y + 1, height - 1), x] * 0.5
    h.split("x", "x", "xv", lanes, tail=tail).vectorize("xv").parallel("y")
    g.compute_root().split("x", "x", "xv", lanes, tail=tail).vectorize("xv")
    g.layout(f2.row_major({"y": tile_rows, "x": tile_cols}))
    if storage_swapped:
        g.reorder_storage("x", "y")
    return h


def _vector_loads(h, buffer):
    """The vector loads of ``buffer`` but those under a lane mask (a guarded tail's last vector: runs of
    tiles are not split there, its lanes gather)."""
    pipe = rs.Pipeline([h])
    out = []

    def visit(s):
        if isinstance(s, ir.IfThenElse) and s.cond.dtype.lanes > 1:
            return
        out.extend(n for e in ir.exprs_of(s) for n in E.walk(e)
                   if isinstance(n, E.Load) and n.buffer == buffer and n.dtype.lanes > 1)
        for t in ir.children(s):
            visit(t)

    visit(lower(pipe.program(), pipe.schedule()).body)
    return out


def _dense(load) -> bool:
    """One ramp, or ramps laid end to end (one dense access each)."""
    return _dense_runs(load.index) is not None


def _check(h, shape, offset):
    image = np.random.default_rng(5).random((shape[0], shape[1] + offset), dtype=np.float32)
    got = h.compile()(a=image, out_shape=shape)
    (want,) = reference.evaluate(rs.Pipeline([h]).program(), {"a": image}, {"h": shape})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("tail", ["guard", "split"])
@pytest.mark.parametrize("tiles_per_vector", [0.5, 1, 2, 4])  # tile width over the vector's
def test_an_aligned_vector_of_a_layout_tile_is_dense_loads(tail, tiles_per_vector, cpu_target):
    lanes = cpu_target.natural_vector_size(rs.float32)
    h = _pipeline(2, int(lanes / tiles_per_vector), lanes, tail)
    loads = _vector_loads(h, "g")
    assert loads and all(_dense(n) for n in loads), [str(n.index) for n in loads if not _dense(n)]
    # a run per tile, laid end to end
    assert all(len(_dense_runs(n.index)) == max(1, tiles_per_vector) for n in loads)
    _check(h, (13, 5 * lanes + 3), 0)


def test_a_vector_across_a_tile_boundary_is_gathered(cpu_target):
    """One column over, each vector straddles two tiles of its width: not provably one run."""
    lanes = cpu_target.natural_vector_size(rs.float32)
    h = _pipeline(2, lanes, lanes, "guard", offset=1)
    assert any(not _dense(n) for n in _vector_loads(h, "g"))
    _check(h, (9, 3 * lanes + 1), 1)


@settings(max_examples=25, deadline=None)
@given(rows=st.sampled_from([1, 2, 4]), cols=st.sampled_from([2, 4, 8, 16, 32, 64]),
       lanes=st.sampled_from([4, 8, 16]), tail=st.sampled_from(["guard", "split", "auto"]),
       offset=st.integers(0, 3), swapped=st.booleans(),
       shape=st.tuples(st.integers(1, 40), st.integers(1, 90)))
def test_layout_tiles_read_by_vectors_compute_the_reference(rows, cols, lanes, tail, offset, swapped, shape):
    if tail == "auto":  # a shifted vector needs a row at least as wide (refused otherwise)
        shape = (shape[0], max(shape[1], lanes))
    _check(_pipeline(rows, cols, lanes, tail, offset, swapped), shape, offset)
