"""The GPU emulator's own checks, on kernels written by hand in the loop IR: a shared-memory race between
two thread nests with no barrier, the same kernel with the barrier that ``insert_barriers`` places, a read
past a buffer, threads of one block meeting different numbers of barriers, a race between blocks, and
shared memory that starts as NaN (a read of something never written shows)."""

from __future__ import annotations

import numpy as np
import pytest

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.gpu.barriers import insert_barriers
from ragsched.codegen.gpu.emulate import DivergentBarrierError, OutOfBoundsError, RaceError, compile_kernel, run_kernel
from ragsched.codegen.gpu.kernels import DeviceKernel, block_index

I64, F32 = T.ADDRESS, T.float32
N = 8


def c(v):
    return E.const(v, I64)


def t():
    return E.Var("t", I64)


def threads(body, var="t", n=N):
    return ir.For(var, c(0), c(n), ir.ForKind.GPU_THREAD, body)


def kernel(body, shared=(("s", F32, N),), buffers=(("a", F32), ("out", F32)), dims=(N, 1, 1)) -> DeviceKernel:
    axes = tuple(sorted({(s.var, 0) for s in ir.walk_stmts(body) if isinstance(s, ir.For)}))
    return DeviceKernel("k", body, dims, axes, buffers, (), shared, ())


def reverse_through_shared(barrier: bool):
    """Each thread stores a[t] into shared s[t], then reads s[N-1-t]: another thread's element."""
    write = threads(ir.Store("s", t(), E.Load("a", t(), F32), True), "t")
    read = threads(ir.Store("out", t(), E.Load("s", E.sub(c(N - 1), t()), F32), True), "t")
    body = ir.block(write, read)
    return insert_barriers(body) if barrier else body


def test_a_read_of_another_threads_shared_write_without_a_barrier_is_a_race():
    k = kernel(reverse_through_shared(barrier=False))
    a, out = np.arange(N, dtype=np.float32), np.zeros(N, np.float32)
    with pytest.raises(RaceError, match=r"s\[\d\], which block \(0, 0, 0\) thread .* with no barrier between them"):
        run_kernel(k, compile_kernel(k), (1, 1, 1), [a, out], {})


def test_the_barrier_that_insert_barriers_places_orders_the_two_nests():
    body = reverse_through_shared(barrier=True)
    assert sum(isinstance(s, ir.Barrier) for s in ir.walk_stmts(body)) == 1
    k = kernel(body)
    a, out = np.arange(N, dtype=np.float32), np.zeros(N, np.float32)
    run_kernel(k, compile_kernel(k), (1, 1, 1), [a, out], {})
    np.testing.assert_array_equal(out, a[::-1])


def test_no_barrier_between_nests_that_share_nothing():
    body = insert_barriers(ir.block(threads(ir.Store("out", t(), E.Load("a", t(), F32), True)),
                                    threads(ir.Store("s", t(), E.Load("a", t(), F32), True))))
    assert not any(isinstance(s, ir.Barrier) for s in ir.walk_stmts(body))


def test_a_read_past_a_buffer_is_caught_naming_it():
    body = threads(ir.Store("out", t(), E.Load("a", E.add(t(), c(1)), F32), True))
    k = kernel(body, shared=())
    a, out = np.arange(N, dtype=np.float32), np.zeros(N, np.float32)
    with pytest.raises(OutOfBoundsError, match=r"thread \(7, 0, 0\) reads a\[8\], outside its 8 elements"):
        run_kernel(k, compile_kernel(k), (1, 1, 1), [a, out], {})


def test_threads_that_meet_different_numbers_of_barriers_are_caught():
    body = threads(ir.IfThenElse(E.lt(t(), c(4)), ir.Barrier()))
    k = kernel(body, shared=())
    with pytest.raises(DivergentBarrierError):
        run_kernel(k, compile_kernel(k), (1, 1, 1), [np.zeros(N, np.float32), np.zeros(N, np.float32)], {})


def test_blocks_that_update_one_address_race_whatever_the_barriers():
    """out[0] += a[t] by thread 0 of every block: blocks never synchronise."""
    acc = ir.Store("out", c(0), E.add(E.Load("out", c(0), F32), E.Load("a", block_index(0), F32)), False)
    body = ir.block(ir.Barrier(), threads(acc, "t", 1))
    k = kernel(body, shared=(), dims=(1, 1, 1))
    with pytest.raises(RaceError, match=r"block \(1, 0, 0\).*out\[0\]"):
        run_kernel(k, compile_kernel(k), (2, 1, 1), [np.ones(N, np.float32), np.zeros(N, np.float32)], {})


def test_the_same_value_written_twice_by_a_pure_definition_is_not_a_race():
    """Overlapping tiles (tail="shift") write the same values twice, as a GPU does too."""
    body = threads(ir.Store("out", c(0), E.Load("a", c(0), F32), True))
    k = kernel(body, shared=())
    out = np.zeros(N, np.float32)
    run_kernel(k, compile_kernel(k), (3, 1, 1), [np.full(N, 5, np.float32), out], {})
    assert out[0] == 5


def test_shared_memory_never_written_reads_as_nan():
    body = threads(ir.Store("out", t(), E.Load("s", t(), F32), True))
    k = kernel(body)
    out = np.zeros(N, np.float32)
    run_kernel(k, compile_kernel(k), (1, 1, 1), [np.zeros(N, np.float32), out], {})
    assert np.isnan(out).all()
