"""Loops split with tail="split". compute_at at such a loop: the remainder has its own copy of the loop, and the
producer must be computed there too (it used to be a let, and such schedules were refused)."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs


@pytest.mark.parametrize("at", ["x", "xi"])
@pytest.mark.parametrize("width", [8, 7, 3])
def test_producer_at_a_split_tail_loop(at, width):
    x, y = rs.Var("x"), rs.Var("y")
    a = rs.Input("a", rs.float32, [rs.Size("H"), rs.Size("W")])
    f = rs.Func("f")
    f[y, x] = a[y, x] * 2
    g = rs.Func("g")
    g[y, x] = f[y, x] + f[y, x + 1] + 1  # a stencil: each copy of the loop needs its own region of f
    g.split(x, x, "xi", 4, tail="split")
    f.compute_at(g, at)
    data = np.random.default_rng(0).random((5, width + 1), dtype=np.float32)
    got = rs.Pipeline([g]).compile()(a=data, out_shape=(5, width))
    np.testing.assert_allclose(got, data[:, :width] * 2 + data[:, 1:] * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("tail", ["guard", "split"])
def test_a_loop_whose_bounds_use_a_var_cannot_move_outside_it(tail):
    """The triangular RDom k < i + 1, split (whatever the tail) and reordered outside i: refused with the
    loop names, not compiled with an unbound i (tail="split" used to slip past the check)."""
    i, j = rs.vars("i j")
    n = rs.Size("N")
    A = rs.Input("A", rs.float32, [n, n])
    k = rs.RDom(0, i + 1, name="k")
    prod = rs.Func("prod", dtype=rs.float32)
    prod[i, j] = 0.0
    prod[i, j] += A[i, k] * A[k, j]
    prod.update().split("k.0", "k.0", "ki", 4, tail=tail).reorder("k.0", "i", "ki", "j")
    with pytest.raises(ValueError, match="loop 'k.0' cannot be outside loop 'i'"):
        rs.Pipeline([prod]).compile()
