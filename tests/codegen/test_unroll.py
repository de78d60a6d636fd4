"""The unroll pass: copies of the body with the loop variable folded in, alone and with vectorize."""

from __future__ import annotations

import numpy as np
import pytest

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.passes.unroll import unroll_loops

from .helpers import Compiled, c64, has_vectors, kinds, load, split_loop, v64

F32, I64 = T.float32, T.int64
UNR, VEC, SER = ir.ForKind.UNROLLED, ir.ForKind.VECTORIZED, ir.ForKind.SERIAL
rng = np.random.default_rng(5)


def test_unrolled_copies_fold_the_index():
    body = ir.For("x", c64(2), c64(3), UNR, ir.Store("out", E.Mul(v64("x"), c64(2)), E.Cast(v64("x"), F32)))
    out = unroll_loops(body)
    assert kinds(out) == []
    assert [s.index for s in ir.walk_stmts(out) if isinstance(s, ir.Store)] == [c64(4), c64(6), c64(8)]
    k = Compiled(body, {"out": F32})
    o = np.zeros(9, np.float32)
    assert k(out=o) == 0
    np.testing.assert_array_equal(o[4::2], [2, 3, 4])


def test_nested_and_empty_unrolled_loops():
    body = ir.For("y", c64(0), c64(2), UNR, ir.Block((
        ir.For("x", c64(0), c64(3), UNR, ir.Store("out", E.Add(E.Mul(v64("y"), c64(3)), v64("x")),
                                                  load("a", E.Add(E.Mul(v64("x"), c64(2)), v64("y")), F32))),
        ir.For("z", c64(0), c64(0), UNR, ir.Store("out", c64(0), E.const(7.0, F32))))))
    out = unroll_loops(body)
    assert kinds(out) == [] and sum(isinstance(s, ir.Store) for s in ir.walk_stmts(out)) == 6
    a = rng.random(6, dtype=np.float32)
    o = np.zeros(6, np.float32)
    assert Compiled(body, {"a": F32, "out": F32})(a=a, out=o) == 0
    np.testing.assert_array_equal(o, a.reshape(3, 2).T.ravel())


def test_non_constant_extent_is_an_error_naming_the_loop():
    body = ir.For("f.s0.x.inner", c64(0), v64("n"), UNR, ir.Store("out", v64("f.s0.x.inner"), E.const(1.0, F32)))
    with pytest.raises(ValueError, match=r"f\.s0\.x\.inner.*not a constant"):
        unroll_loops(body)


def test_unrolling_past_the_code_size_limit_is_refused_naming_the_loop():
    """Nested unrolled loops multiply: 64 x 64 copies of a 9-node body is past MAX_UNROLLED_NODES; the outer
    loop (whose copies would hold them all) is refused, before any LLVM runs."""
    from ragsched.codegen.passes.unroll import MAX_UNROLLED_NODES

    def nest(n):
        return ir.For("f.s0.y.u", c64(0), c64(n), UNR, ir.For("f.s0.x.u", c64(0), c64(n), UNR, ir.Store(
            "out", E.Add(E.Mul(v64("f.s0.y.u"), c64(n)), v64("f.s0.x.u")), load("a", v64("f.s0.x.u"), F32))))

    assert 9 * 8 * 8 < MAX_UNROLLED_NODES < 9 * 64 * 64
    unroll_loops(nest(8))
    with pytest.raises(ValueError, match=r"unrolling loop f\.s0\.y\.u would make 64 copies"):
        unroll_loops(nest(64))


def test_unroll_outside_and_inside_vectorized_loops():
    """for x.o: for u in [0, 2) unrolled: for x.i in [0, 8) vectorized; and a vectorized loop whose
    body holds an unrolled loop over a small filter."""
    n, taps = 64, 3
    a = rng.random(n + taps, dtype=np.float32)

    outer = ir.For("x.o", c64(0), c64(n // 16), SER, ir.For("u", c64(0), c64(2), UNR, ir.For(
        "x.i", c64(0), c64(8), VEC, ir.Store("out", E.Add(E.Add(E.Mul(v64("x.o"), c64(16)), E.Mul(v64("u"), c64(8))),
                                                          v64("x.i")),
                                         load("a", E.Add(E.Add(E.Mul(v64("x.o"), c64(16)), E.Mul(v64("u"), c64(8))),
                                                         v64("x.i")), F32)))))
    k = Compiled(outer, {"a": F32, "out": F32})
    assert has_vectors(k.body) and kinds(k.body) == [SER]
    o = np.zeros(n, np.float32)
    assert k(a=a, out=o) == 0
    np.testing.assert_array_equal(o, a[:n])

    def conv(x):  # out[x] += a[x + t] for t in an unrolled loop
        return ir.For("t", c64(0), c64(taps), UNR, ir.Store(
            "out", x, E.add(load("out", x, F32), load("a", E.Add(x, v64("t")), F32))))

    k = Compiled(split_loop(n, "x", 8, VEC, conv, guard=False), {"a": F32, "out": F32})
    assert has_vectors(k.body) and kinds(k.body) == [SER]
    o = np.zeros(n, np.float32)
    assert k(a=a, out=o) == 0
    np.testing.assert_allclose(o, a[:n] + a[1:n + 1] + a[2:n + 2], rtol=1e-6)
