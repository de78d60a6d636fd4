"""A module's outlined parallel loops optimised in a second module on a second thread
(codegen/llvm/split.py): both parts are valid modules, the kernel computes what it computes unsplit,
scratch memory shared by the parts is one definition, and a part that does not parse falls back."""

from __future__ import annotations

import llvmlite.binding as llvm
import llvmlite.ir as lir
import numpy as np
import pytest

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen import llvm as backend
from ragsched.codegen.llvm import load as load_mod
from ragsched.codegen.llvm import split
from ragsched.codegen.llvm.emit import _straight_line

from .helpers import Compiled, c64, load, v64
from .test_parallel import PAR, SER, VEC, rows

F32, I64 = T.float32, T.int64


def nest(src: str, tmp: str, dst: str, inner_kind=SER, outer_kind=PAR):
    """parallel y: allocate tmp[W]; tmp[x] = 2 src[y, x]; dst[y, x] = tmp[x] + tmp[W - 1 - x]."""
    y, x, W = v64("y"), v64("x"), v64("W")
    fill = ir.For("x", c64(0), W, SER, ir.Store(tmp, x, E.mul(load(src, E.Add(E.Mul(y, W), x), F32),
                                                              E.const(2.0, F32))))
    use = ir.For("x", c64(0), W, inner_kind, ir.Store(dst, E.Add(E.Mul(y, W), x), E.add(
        load(tmp, x, F32), load(tmp, E.Sub(E.Sub(W, c64(1)), x), F32))))
    return ir.For("y", c64(0), v64("H"), outer_kind, ir.Allocate(tmp, F32, W, ir.Block((fill, use))))


def two_nests(outer_kind=PAR):
    """Two row loops (parallel: two outlined bodies; serial: the kernel's two outermost loops, outlined
    too), each with its own cached scratch row."""
    return ir.Block((nest("a", "tmp", "out", VEC, outer_kind), nest("out", "tmp2", "out2", SER, outer_kind)))


def test_the_parts_parse_and_the_bodies_move(monkeypatch):
    monkeypatch.setattr(split, "MIN_COST", 0)
    k = Compiled(two_nests(), {"a": F32, "out": F32, "out2": F32}, {"H": I64, "W": I64}, threads=2)
    parts = split.split_outlined(k.source)
    assert parts is not None
    first, second = parts
    for text in parts:
        llvm.parse_assembly(text, context=llvm.create_context()).verify()
    moved = [line for line in second.split("\n") if line.startswith("define void") and ".par" in line]
    assert moved and all(f"declare {line[len('define '):].split(')')[0]})" in first for line in moved)
    assert "scratch.get" in second  # the helper is copied: it is internal
    shared = [line for line in second.split("\n") if "= external global" in line]
    assert shared and all(line.split(" =")[0] + " = global" in first for line in shared)
    assert split.split_outlined(k.source, min_cost=10**9) is None


@pytest.mark.parametrize("threads,outer", [(2, PAR), (None, PAR), (2, SER), (1, PAR)])
def test_a_split_kernel_computes_what_the_whole_one_does(monkeypatch, threads, outer):
    """Forced to split (and, where this machine has one core, made to think it has two): same results,
    calls repeated (the shared scratch sites are reused across calls)."""
    monkeypatch.setattr(split, "MIN_COST", 0)
    monkeypatch.setattr(load_mod, "_spare_core", lambda: True)
    calls = []
    real = load_mod._optimized_in_two
    monkeypatch.setattr(load_mod, "_optimized_in_two", lambda *a: calls.append(1) or real(*a))
    H, W = 29, 37
    rng = np.random.default_rng(5)
    a = rng.random((H, W), dtype=np.float32)
    k = Compiled(two_nests(outer), {"a": F32, "out": F32, "out2": F32}, {"H": I64, "W": I64}, threads=threads)
    assert calls == [1]
    assert (".ser" in k.source) == (outer is SER or threads == 1)
    assert len(load_mod.unpack_objects(backend.optimize_to_object(k.source))) == 2  # each part its own object
    want = 2 * a + 2 * a[:, ::-1]
    want2 = 2 * want + 2 * want[:, ::-1]
    for _ in range(3):
        out, out2 = np.zeros((H, W), np.float32), np.zeros((H, W), np.float32)
        assert k(a=a, out=out, out2=out2, H=H, W=W) == 0
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(out2, want2)


def test_a_part_that_does_not_parse_falls_back_to_one_module(monkeypatch):
    monkeypatch.setattr(load_mod, "_spare_core", lambda: True)
    monkeypatch.setattr(load_mod, "split_outlined", lambda text: (text, "this is not LLVM IR"))
    k = Compiled(rows(PAR), {"a": F32, "out": F32}, {"H": I64, "W": I64}, threads=2)
    H, W = 5, 7
    a = np.arange(H * W, dtype=np.float32).reshape(H, W)
    out = np.zeros((H, W), np.float32)
    assert k(a=a, out=out, H=H, W=W) == 0
    np.testing.assert_array_equal(out, 2 * a + 2 * a[:, ::-1])
    assert backend.optimize_to_object(k.source)  # and again, through the public entry


def test_a_split_kernel_is_cached_and_loaded_again(monkeypatch, tmp_path):
    """Through the compiler and its disk cache: the packed objects are stored, and a fresh load of the
    entry (the in-memory caches emptied) runs as the first did."""
    import ragsched as rs
    from ragsched.runtime import compiler

    monkeypatch.setenv("RAGSCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(split, "MIN_COST", 0)
    monkeypatch.setattr(load_mod, "_spare_core", lambda: True)
    calls = []
    real = load_mod._optimized_in_two
    monkeypatch.setattr(load_mod, "_optimized_in_two", lambda *a: calls.append(1) or real(*a))
    y, x = rs.vars("y x")
    H, W = rs.Size("H"), rs.Size("W")
    a = rs.Input("a", rs.float32, [H, W])
    f, g = rs.Func("f"), rs.Func("g", shape=[H, W])
    f[y, x] = a[y, x] * 2.0
    g[y, x] = f[y, x] + f[y, rs.clamp(x + 1, 0, W - 1)]
    f.compute_root().parallel("y")
    g.parallel("y").vectorize("x", 8)
    img = np.random.default_rng(1).random((19, 45), dtype=np.float32)
    want = 2 * img + 2 * img[:, np.minimum(np.arange(45) + 1, 44)]
    k = g.compile(threads=2)
    np.testing.assert_allclose(k(a=img), want, rtol=1e-6)
    assert k.stats.cache == "miss" and calls == [1]
    compiler.forget_loaded()
    again = g.compile(threads=2)
    assert again.stats.cache == "disk"
    np.testing.assert_allclose(again(a=img), want, rtol=1e-6)


def test_no_second_thread_without_a_spare_core(monkeypatch):
    monkeypatch.setattr(split, "MIN_COST", 0)
    monkeypatch.setattr(load_mod, "_spare_core", lambda: False)
    calls = []
    monkeypatch.setattr(load_mod, "_optimized_in_two", lambda *a: calls.append(1))
    Compiled(two_nests(), {"a": F32, "out": F32, "out2": F32}, {"H": I64, "W": I64}, threads=2)
    assert calls == []


def test_objects_are_packed_and_unpacked_whole():
    """Several object files as one cache entry and back; one object file is itself; a damaged entry is
    refused (the compiler then compiles again)."""
    objs = [b"\x7fELF first", b"", b"\x7fELF the third"]
    blob = load_mod.pack_objects(objs)
    assert load_mod.unpack_objects(blob) == objs
    assert load_mod.unpack_objects(b"\x7fELF alone") == [b"\x7fELF alone"]
    with pytest.raises(ValueError, match="do not add up"):
        load_mod.unpack_objects(blob[:-1])


def test_the_kernels_own_function_is_left_unoptimised_where_its_loops_are_outlined():
    """Parallel and outermost serial loops are outlined, so the kernel's function is straight-line code
    (bounds, allocations, calls) and is marked optnone, the loops' functions not; the results are
    NumPy's. A function with a loop (a phi) is not straight-line."""
    k = Compiled(two_nests(), {"a": F32, "out": F32, "out2": F32}, {"H": I64, "W": I64}, threads=2)
    impl = next(line for line in k.source.split("\n") if line.startswith("define") and '.impl"(' in line)
    assert "optnone" in impl and "noinline" in impl
    loop = next(line for line in k.source.split("\n") if line.startswith("define") and ".loop\"(" in line)
    assert "optnone" not in loop
    a = np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32)
    out, out2 = np.zeros_like(a), np.zeros_like(a)
    k(a=a, out=out, out2=out2, H=5, W=7)
    want = 2 * a + 2 * a[:, ::-1]
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(out2, 2 * want + 2 * want[:, ::-1])

    fn = lir.Function(lir.Module(), lir.FunctionType(lir.IntType(64), [lir.IntType(64)]), "f")
    b = lir.IRBuilder(fn.append_basic_block("entry"))
    head = fn.append_basic_block("head")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(lir.IntType(64))
    i.add_incoming(lir.Constant(lir.IntType(64), 0), fn.blocks[0])
    nxt = b.add(i, lir.Constant(lir.IntType(64), 1))
    i.add_incoming(nxt, head)
    b.cbranch(b.icmp_signed("<", nxt, fn.args[0]), head, fn.append_basic_block("done"))
    b.position_at_end(fn.blocks[-1])
    b.ret(nxt)
    assert not _straight_line(fn)
