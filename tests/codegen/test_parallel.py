"""Parallel loops: outlined, run by libgomp, identical to the serial loop; scratch memory inside the
parallel body; allocation failure inside it; nested parallel loops; parallel and vectorized."""

from __future__ import annotations

import numpy as np
import pytest

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir

from .helpers import Compiled, c64, has_vectors, load, split_loop, v64

F32, I64 = T.float32, T.int64
PAR, SER, VEC = ir.ForKind.PARALLEL, ir.ForKind.SERIAL, ir.ForKind.VECTORIZED
rng = np.random.default_rng(2)


def add(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = E.Add(out, x)
    return out


def rows(kind, inner_kind=SER, size=None):
    """parallel y: allocate tmp[W]; tmp[x] = 2 a[y, x]; out[y, x] = tmp[x] + tmp[W - 1 - x]."""
    y, x, W = v64("y"), v64("x"), v64("W")
    fill = ir.For("x", c64(0), W, SER, ir.Store("tmp", x, E.mul(load("a", add(E.Mul(y, W), x), F32),
                                                                  E.const(2.0, F32))))
    use = ir.For("x", c64(0), W, inner_kind, ir.Store("out", add(E.Mul(y, W), x), E.add(
        load("tmp", x, F32), load("tmp", E.Sub(E.Sub(W, c64(1)), x), F32))))
    size = W if size is None else v64(size) if isinstance(size, str) else c64(size)
    body = ir.Allocate("tmp", F32, size, ir.Block((fill, use)))
    return ir.For("y", c64(0), v64("H"), kind, body)


@pytest.mark.parametrize("threads", [1, 2, None])
def test_parallel_rows_with_scratch_equal_serial(threads):
    H, W = 37, 23
    a = rng.random((H, W), dtype=np.float32)
    k = Compiled(rows(PAR), {"a": F32, "out": F32}, {"H": I64, "W": I64}, threads=threads)
    assert ("GOMP_parallel" in k.source) == (threads != 1)
    want = 2 * a + 2 * a[:, ::-1]
    for _ in range(3):  # scratch blocks are reused across calls and threads
        out = np.zeros((H, W), np.float32)
        assert k(a=a, out=out, H=H, W=W) == 0
        np.testing.assert_array_equal(out, want)
    out = np.zeros((1, W), np.float32)  # fewer rows than threads
    assert k(a=a, out=out, H=1, W=W) == 0
    np.testing.assert_array_equal(out, want[:1])
    assert k(a=a, out=out, H=0, W=W) == 0


@pytest.mark.parametrize("threads", [1, 2])
def test_small_constant_scratch_is_on_the_stack_and_large_on_the_heap(threads):
    """A buffer of a constant size that fits the stack budget is an alloca of the thread's function (no
    call, no atomic exchange); a larger one is still a cached heap block. Both compute the same."""
    H, W = 13, 23
    a = rng.random((H, W), dtype=np.float32)
    want = 2 * a + 2 * a[:, ::-1]
    from ragsched.codegen.llvm.scratch import _STACK_BYTES
    for size, on_stack in ((W, True), (_STACK_BYTES // 4 + 1, False)):
        k = Compiled(rows(PAR, size=size), {"a": F32, "out": F32}, {"H": I64, "W": I64}, threads=threads)
        assert ('call ptr @"scratch.get"' in k.source) != on_stack
        assert (f"alloca [{4 * size} x i8]" in k.source) == on_stack, k.source[:3000]
        for _ in range(2):
            out = np.zeros((H, W), np.float32)
            assert k(a=a, out=out, H=H, W=W) == 0
            np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_allocation_failure_inside_parallel_body_returns_1(threads):
    H, W = 8, 5
    k = Compiled(rows(PAR, size="n"), {"a": F32, "out": F32}, {"H": I64, "W": I64, "n": I64}, threads=threads)
    a = np.zeros((H, W), np.float32)
    out = np.zeros((H, W), np.float32)
    assert k(a=a, out=out, H=H, W=W, n=1 << 58) == 1
    assert k(a=a, out=out, H=H, W=W, n=W) == 0  # and the kernel still works afterwards


def test_nested_parallel_and_vectorized_inside():
    H, W = 9, 29
    a = rng.random((H, W), dtype=np.float32)
    y, W_ = v64("y"), v64("W")

    def inner(x):
        return ir.Store("out", add(E.Mul(y, W_), x), E.add(load("a", add(E.Mul(y, W_), x), F32), E.Cast(y, F32)))

    # parallel y: parallel x.o: vectorized x.i (the inner parallel loop runs serially in each thread)
    loop = split_loop(W, "x", 8, VEC, inner)
    loop = ir.For(loop.var, loop.min, loop.extent, PAR, loop.body)
    k = Compiled(ir.For("y", c64(0), v64("H"), PAR, loop), {"a": F32, "out": F32}, {"H": I64, "W": I64},
                 threads=2)
    assert has_vectors(k.body) and k.source.count("call void @\"GOMP_parallel\"") == 1
    out = np.zeros((H, W), np.float32)
    assert k(a=a, out=out, H=H, W=W) == 0
    np.testing.assert_array_equal(out, a + np.arange(H, dtype=np.float32)[:, None])
