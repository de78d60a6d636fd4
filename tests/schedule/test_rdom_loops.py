"""A one-dimensional RDom is its RVar wherever a schedule takes a loop (as in Halide), and unnamed RDoms
get names a person can read: the variable they are assigned to, else ``r``."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched import reference


def _matmul():
    i, j = rs.vars("i j")
    N, K = rs.Size("N"), rs.Size("K")
    A, B = rs.Input("A", rs.float32, [N, K]), rs.Input("B", rs.float32, [K, N])
    r = rs.RDom(0, K)
    C = rs.Func("C", shape=[N, N])
    C[i, j] = 0.0
    C[i, j] = C[i, j] + A[i, r] * B[r, j]
    return C, r, i, j


def test_a_one_dimensional_rdom_names_its_loop_in_a_schedule():
    C, r, i, j = _matmul()
    C.update(0).tile(i, j, "io", "jo", "ii", "ji", 4, 16).reorder("ji", "ii", r, "jo", "io")
    C.update(0).unroll("ii")
    assert "for C.s1.r.0 in" in C.lowered()
    rng = np.random.default_rng(0)
    a, b = rng.random((10, 7), dtype=np.float32), rng.random((7, 10), dtype=np.float32)
    want = reference.run([_matmul()[0]], A=a, B=b)[0]
    np.testing.assert_allclose(C.compile()(A=a, B=b), want, rtol=1e-5)


def test_unnamed_rdoms_are_named_after_their_variable_or_r():
    k = rs.RDom(0, 8)
    assert k.name == "k" and k[0].name == "k.0"
    assert rs.RDom(0, 8, name="red").x.name == "red.0"
    assert rs.sum(rs.RDom(0, 4)).node is not None  # used inline: no variable
    ry, rx = rs.RDom((0, 3), (0, 4))  # unpacked: no single variable
    assert (ry.name, rx.name) == ("r.0", "r.1")
    with pytest.raises(TypeError, match="RDom needs a non-empty string name"):
        rs.RDom(0, 4, name=3)


def test_a_loop_name_error_lists_readable_rvar_loops():
    C, r, i, j = _matmul()
    with pytest.raises(ValueError, match=r"cannot reorder 'q': no loop of that name; its loops are i, j, r\.0"):
        C.update(0).reorder("q", "i")


def test_a_multidimensional_rdom_is_not_one_loop():
    i = rs.Var("i")
    img = rs.Input("img", rs.float32, 2)
    r = rs.RDom((0, 3), (0, 3))
    f = rs.Func("f")
    f[i] = 0.0
    f[i] = f[i] + img[r[0], r[1] + i]
    with pytest.raises(TypeError, match=r"RDom r has 2 dimensions.*r\[0\], r\[1\], loops r\.0, r\.1"):
        f.update(0).reorder(r, i)
    f.update(0).reorder(r[0], i)  # its RVars name loops
    assert "for f.s1.r.0" in f.lowered().split("for f.s1.i")[0]
