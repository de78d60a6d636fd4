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


_COUNT_FREES = """
import ctypes, sys
import numpy as np
from ragsched.codegen.llvm import load as load_module
from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from tests.codegen.helpers import Compiled, c64, load, v64

libc = ctypes.CDLL(None)
libc.aligned_alloc.restype, libc.aligned_alloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
count = {"alloc": 0, "free": 0}

@ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
def counted_alloc(align, n):
    count["alloc"] += 1
    return libc.aligned_alloc(align, n)

@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def counted_free(p):
    count["free"] += 1
    libc.free(p)

load_module.imported_symbols.update(aligned_alloc=ctypes.cast(counted_alloc, ctypes.c_void_p).value,
                                   free=ctypes.cast(counted_free, ctypes.c_void_p).value)
F32, I64 = T.float32, T.int64
H, W = 64, 100_000
fill = ir.For("x", c64(0), v64("W"), ir.ForKind.SERIAL, ir.Store("tmp", v64("x"), load("a", v64("y"), F32)))
use = ir.Store("out", v64("y"), load("tmp", E.Sub(v64("W"), c64(1)), F32))
body = ir.For("y", c64(0), v64("H"), ir.ForKind.PARALLEL, ir.Allocate("tmp", F32, v64("W"), ir.Block((fill, use))))
k = Compiled(body, {"a": F32, "out": F32}, {"H": I64, "W": I64}, threads=2)
a, out = np.arange(H, dtype=np.float32)[:, None], np.zeros(H, np.float32)
for _ in range(3):
    assert k(a=a, out=out, H=H, W=W) == 0
assert (out == a[:, 0]).all()
k.obj._release()
print(count["alloc"], count["free"])
"""


def test_release_frees_every_threads_cached_scratch_block():
    """The kernel's release function frees the scratch block each thread keeps cached (a loop over the
    site's slots): in a fresh process whose generated code calls counting aligned_alloc and free, every
    block allocated is freed once the kernel is released."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _COUNT_FREES], cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    allocs, frees = map(int, done.stdout.split()[-2:])
    assert allocs >= 1 and frees == allocs, f"{allocs} blocks allocated, {frees} freed"


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
