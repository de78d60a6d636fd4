"""Short innermost loops unrolled without a schedule asking (``passes/unroll_short``): a window sum of a
few taps inside a vectorized loop loses its loop and still computes the reference, over tap counts,
widths, types and sizes; longer loops, loops with loops inside and large bodies stay loops."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.lower import lower
from ragsched.codegen.passes.unroll_short import MAX_ITERATIONS, MAX_NODES, unroll_short_loops
from ragsched.reference import run

from .helpers import c64, load, v64

F32 = T.float32
SER, UNR = ir.ForKind.SERIAL, ir.ForKind.UNROLLED


def _window_sum(taps: int, dtype, width: int):
    """out[y, x] = sum over t < taps of a[y, x + t], the taps innermost inside the vectorized columns."""
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    a = rs.Input("a", dtype, [H, W])
    t = rs.RDom(0, taps, name="t")
    total = rs.Func("total", dtype=dtype)
    total[y, x] = rs.cast(dtype, 0)
    total[y, x] += a[y, rs.min(x + t, W - 1)]
    out = rs.Func("out", shape=[H, W])
    out[y, x] = total[y, x]
    total.compute_at(out, "y")
    total.update().split("x", "xo", "xi", width, tail="guard").reorder("xo", "xi", "t.0").vectorize("xi")
    return out


def _loops_over(kernel: ir.LoweredKernel, name: str) -> list[ir.For]:
    return [s for s in ir.walk_stmts(kernel.body) if isinstance(s, ir.For) and s.var.endswith(name)]


@settings(deadline=None, max_examples=20)
@given(taps=st.integers(1, MAX_ITERATIONS + 3), width=st.sampled_from([4, 8, 16]),
       dtype=st.sampled_from(["float32", "float64", "int32"]), h=st.integers(1, 5), w=st.integers(1, 40),
       seed=st.integers(0, 2**16))
def test_short_window_sums_lose_their_loop_and_compute_the_reference(taps, width, dtype, h, w, seed):
    out = _window_sum(taps, getattr(rs, dtype), width)
    pipe = rs.Pipeline([out])
    kernel = lower(pipe.program(), pipe.schedule())
    assert bool(_loops_over(kernel, ".t.0")) == (taps > MAX_ITERATIONS or taps == 1)  # one: a loop LLVM folds
    rng = np.random.default_rng(seed)
    a = rng.integers(-50, 50, (h, w)).astype(dtype)
    np.testing.assert_array_equal(pipe.compile()(a=a), run(out, a=a))


def _store(i: str) -> ir.Stmt:
    return ir.Store("out", v64(i), E.Add(load("out", v64(i), F32), load("a", v64(i), F32)))


def test_what_stays_a_loop():
    short = ir.For("i", c64(0), c64(3), SER, _store("i"))
    assert unroll_short_loops(short).kind is UNR
    # one iteration, a symbolic extent, more than MAX_ITERATIONS, a loop inside, a parallel loop
    for loop in (ir.For("i", c64(0), c64(1), SER, _store("i")),
                 ir.For("i", c64(0), v64("n"), SER, _store("i")),
                 ir.For("i", c64(0), c64(MAX_ITERATIONS + 1), SER, _store("i")),
                 ir.For("i", c64(0), c64(3), SER, ir.For("j", c64(0), c64(2), SER, _store("j"))),
                 ir.For("i", c64(0), c64(3), ir.ForKind.PARALLEL, _store("i"))):
        assert unroll_short_loops(loop) == ir.For(loop.var, loop.min, loop.extent, loop.kind,
                                                   unroll_short_loops(loop.body))
    # a body whose copies would pass MAX_NODES
    big = E.Var("a0", F32)
    for k in range(MAX_NODES // 4):
        big = E.Add(big, E.const(float(k), F32))
    loop = ir.For("i", c64(0), c64(4), SER, ir.Store("out", v64("i"), big))
    assert unroll_short_loops(loop).kind is SER
    # the inner of two nested short loops is unrolled, the outer stays
    nested = unroll_short_loops(ir.For("i", c64(0), c64(3), SER, ir.For("j", c64(0), c64(2), SER, _store("j"))))
    assert nested.kind is SER and nested.body.kind is UNR
