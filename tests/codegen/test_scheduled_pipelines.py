"""Whole pipelines through the runtime (Kernel: checks, slots, cache) with their lowered loops
rewritten the way a schedule would: every innermost loop split by 8 with a vectorized inner loop and a
tail guard, and the outer loop of pure stages parallel. Compared with ``ragsched.reference``."""

from __future__ import annotations

import dataclasses
import importlib
import time
from unittest import mock

import numpy as np
import pytest

import ragsched as rs
from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen import lower as lowering
from ragsched.codegen.passes.partition import partition_vector_tails
from ragsched.codegen.passes.unroll import unroll_loops
from ragsched.codegen.passes.vectorize import vectorize_loops
from ragsched.reference import run
from ragsched.runtime import compiler as runtime

from .helpers import has_vectors

I64 = T.ADDRESS


def _c(v: int) -> E.Const:
    return E.Const(v, I64)


def schedule_like(body: ir.Stmt, width: int, parallel: bool, only_vectorizable: bool = False) -> ir.Stmt:
    """Split every innermost serial loop into ``x.o`` and a VECTORIZED ``x.i`` of ``width`` lanes
    (GuardWithIf tail), or only those the vectorizer accepts; make the outermost loop of each pure
    stage PARALLEL."""

    def split(s: ir.Stmt) -> ir.Stmt:
        if not (isinstance(s, ir.For) and s.kind is ir.ForKind.SERIAL):
            return s
        if any(isinstance(t, ir.For) for t in ir.walk_stmts(s.body)):
            return s
        o, i = E.Var(f"{s.var}.o", I64), E.Var(f"{s.var}.i", I64)
        idx = E.Add(E.Mul(o, _c(width)), i)
        body = ir.IfThenElse(E.LT(idx, s.extent), ir.LetStmt(s.var, E.Add(s.min, idx), s.body))
        outer = E.FloorDiv(E.Add(s.extent, _c(width - 1)), _c(width))
        out = ir.For(o.name, _c(0), outer, ir.ForKind.SERIAL,
                     ir.For(i.name, _c(0), _c(width), ir.ForKind.VECTORIZED, body))
        if only_vectorizable and not has_vectors(vectorize_loops(out)):
            return s  # a reduction, a scan: Halide would not vectorize it either
        return out

    def par(s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.Produce):
            stages = s.body.stmts if isinstance(s.body, ir.Block) else (s.body,)
            return ir.Produce(s.name, ir.block(*(_parallel_if_pure(t) for t in stages)))
        return s

    out = ir.map_stmt(body, lambda e: e, split)
    if parallel:
        out = ir.map_stmt(out, lambda e: e, par)
    return partition_vector_tails(vectorize_loops(unroll_loops(out)))


def _parallel_if_pure(s: ir.Stmt) -> ir.Stmt:
    """A loop nest that stores one buffer and never reads it writes each element once per outer
    iteration: its outer loop can run in parallel."""
    if not isinstance(s, ir.For):
        return s
    stored = {t.buffer for t in ir.walk_stmts(s) if isinstance(t, ir.Store)}
    read = {n.buffer for t in ir.walk_stmts(s) for e in ir.exprs_of(t) for n in E.walk(e) if isinstance(n, E.Load)}
    if len(stored) != 1 or stored & read:
        return s
    return ir.For(s.var, s.min, s.extent, ir.ForKind.PARALLEL, s.body)


def compile_scheduled(outputs, width=8, parallel=False, threads=None, only_vectorizable=False):
    real = lowering.lower

    def lower(program, *args, **kwargs):
        k = real(program, *args, **kwargs)
        return dataclasses.replace(k, body=schedule_like(k.body, width, parallel, only_vectorizable))

    with mock.patch.object(runtime, "lower", lower):
        return rs.Pipeline(outputs if isinstance(outputs, (list, tuple)) else [outputs]).compile(threads=threads)


# local_laplacian is left out: lowering it alone takes about 15 s at present
TOLERANCES = {"blur": (1e-6, 1e-7), "unsharp": (1e-5, 1e-6), "harris": (1e-4, 1e-6), "matmul": (1e-4, 1e-5),
              "softmax": (1e-5, 1e-7), "bilateral_grid": (1e-5, 1e-6), "conv_layer": (1e-4, 1e-5)}


@pytest.mark.parametrize("name", sorted(TOLERANCES))
def test_bundled_pipeline_vectorized_and_parallel(name):
    mod = importlib.import_module(f"pipelines.{name}")
    inputs = mod.example_inputs("small")
    outputs = mod.build()
    k = compile_scheduled(outputs, parallel=True, threads=2)
    assert has_vectors(k.kernel.body)
    got = k(**inputs)
    want = run(outputs, **inputs)
    if not isinstance(got, tuple):
        got, want = (got,), (want,) if not isinstance(want, tuple) else want
    rtol, atol = TOLERANCES[name]
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * float(np.abs(w).max()))


def test_integer_pipeline_with_scatter_and_boundary():
    """uint8 image: a clamped (gathered) read, integer arithmetic with casts, a histogram update
    (its vectorized loop must stay serial) and a transposed read."""
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.uint8, [H, W])
    f = rs.Func("f", shape=[H, W])
    f[y, x] = rs.cast(rs.uint8, rs.min(rs.cast(rs.int32, rs.clamp_edge(img)[y, x - 1]) * 3 // 2, 255))
    t = rs.Func("t", shape=[W, H])
    t[x, y] = img[y, x]
    r = rs.RDom((0, H), (0, W))
    hist = rs.Func("hist", shape=[256])
    hist[x] = rs.cast(rs.int32, 0)
    hist[rs.cast(rs.int32, img[r[0], r[1]])] += 1
    a = np.random.default_rng(1).integers(0, 256, (37, 29), dtype=np.uint8)
    k = compile_scheduled([f, t, hist])
    got = k(img=a)
    want = run([f, t, hist], img=a)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[2], np.bincount(a.ravel(), minlength=256))


def test_thread_count_is_part_of_the_cache_key():
    mod = importlib.import_module("pipelines.blur")
    inputs = mod.example_inputs("small")
    outputs = mod.build()
    k1 = compile_scheduled(outputs, parallel=True, threads=1)
    k2 = compile_scheduled(outputs, parallel=True, threads=2)
    assert k1._code.key != k2._code.key
    assert "GOMP_parallel" not in k1.source and "GOMP_parallel" in k2.source
    np.testing.assert_array_equal(k1(**inputs), k2(**inputs))


def _best(fn, reps=5):
    fn()
    best = 1e9
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def test_timing_blur_printout(capsys):
    """Not an assertion: serial vs vectorized vs vectorized+parallel on a 1536x2560 blur."""
    mod = importlib.import_module("pipelines.blur")
    img = mod.example_inputs("full")["img"]
    outputs = mod.build()
    serial = rs.Pipeline([outputs]).compile()
    vec = compile_scheduled(outputs, parallel=False)
    par = compile_scheduled(outputs, parallel=True, threads=2)
    want = serial(img=img)
    np.testing.assert_allclose(vec(img=img), want, rtol=1e-6)
    np.testing.assert_allclose(par(img=img), want, rtol=1e-6)
    t = {name: _best(lambda k=k: k(img=img)) for name, k in
         (("serial", serial), ("vectorized", vec), ("vectorized+parallel(2)", par))}
    with capsys.disabled():
        print("\nblur 1536x2560 float32: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in t.items()))
