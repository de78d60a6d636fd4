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


_SHIFTED_PRODUCER = """
import numpy as np
import ragsched as rs
x, y = rs.Var("x"), rs.Var("y")
a = rs.Input("a", rs.float32, [rs.Size("H"), rs.Size("W")])
f = rs.Func("f")
f[y, x] = a[y, x] * 2
g = rs.Func("g")
g[y, x] = f[y, x] + f[y, x + 1]
g.split(x, x, "xi", 128, tail="split")
f.compute_at(g, x).split(x, x, "xi", 128)  # shifted inwards: the rest's tile starts before its region
k = rs.Pipeline([g]).compile(threads=1)
data = np.random.default_rng(0).random((6, 131), dtype=np.float32)
for _ in range(20):
    got = k(a=data, out_shape=(6, 130))
np.testing.assert_allclose(got, data[:, :130] * 2 + data[:, 1:] * 2, rtol=1e-6)
import gc; gc.collect()
print("done")
"""


def test_storage_of_each_copy_of_a_split_loop_covers_its_shifted_tile():
    """Found by the autoscheduler (a harris candidate aborted with heap corruption): a producer computed at
    a loop that tail="split" repeats got storage sized by the whole tiles' copy, while in the rest's copy
    its own tile, shifted inwards from a region shorter than the factor, starts before that storage. Each
    copy now sizes its own storage. In a subprocess: the write out of bounds showed as an abort of the
    process (glibc's heap checks), later than the call."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", _SHIFTED_PRODUCER], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "done" in p.stdout, p.stderr[-2000:]


@pytest.mark.parametrize("tail", ["pad", "shift", "guard"])
def test_a_sliding_window_along_a_padded_or_shifted_dim_is_not_folded(tail):
    """f computed per column x of g and stored at root slides along x: each column computes only its new
    point. Split by 2 with tail="pad", it also writes the next column; with storage folded to one column
    that point overwrote the one g was about to read (a silent wrong answer, found by the random schedule
    test on unsharp). Folding is now only along dims whose loops stay inside the region."""
    x, y = rs.Var("x"), rs.Var("y")
    H, W = rs.Size("H"), rs.Size("W")
    a = rs.Input("a", rs.float32, [H, W])
    f = rs.Func("f")
    f[y, x] = rs.clamp_edge(a)[y, x] * 2 + 1  # a padded or shifted tile reads past the image
    g = rs.Func("g", shape=[H, W])
    g[y, x] = f[y, x] * 3
    g.reorder(x, y)
    f.split(x, x, "xi", 2, tail=tail).compute_at(g, x).store_root()
    data = np.random.default_rng(1).random((6, 9), dtype=np.float32)
    got = rs.Pipeline([g]).compile()(a=data)
    np.testing.assert_allclose(got, (data * 2 + 1) * 3, rtol=1e-6)
