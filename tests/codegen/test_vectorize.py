"""The vectorize pass and the backend's vector memory accesses: dense, strided, gathered and
scattered, predicated tails (against unreadable pages), lane independence, loops inside vectorized
loops, widths that are not powers of two."""

from __future__ import annotations

import numpy as np
import pytest

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.passes.vectorize import vectorize_loops

from .helpers import Compiled, c64, elementwise, guarded, has_vectors, kinds, load, split_loop, v64

VEC, SER = ir.ForKind.VECTORIZED, ir.ForKind.SERIAL
F32, I64, I32 = T.float32, T.int64, T.int32
rng = np.random.default_rng(11)


def add(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = E.Add(out, x)
    return out


def mul(a, b):
    return E.Mul(a, b)


# ------------------------------------------------------------------------------------------ dense
def test_dense_float32_uses_the_targets_widest_vector_registers(cpu_target):
    """A vector of the target's natural width is one register: xmm, ymm or zmm for 128, 256 and 512 bits
    (so code pinned to AVX2 on an AVX-512 host uses ymm)."""
    n, lanes = 64, cpu_target.natural_vector_size(F32)
    body = elementwise(n, lanes, VEC, lambda x: E.add(E.mul(load("a", x, F32), load("b", x, F32)),
                                                      E.const(1.0, F32)), guard=False)
    k = Compiled(body, {"a": F32, "b": F32, "out": F32})
    assert f"<{lanes} x float>" in k.source and "masked.gather" not in k.source
    register = {128: "xmm", 256: "ymm", 512: "zmm"}[cpu_target.vector_bits]
    assert register in k.assembly
    wider = [r for bits, r in ((256, "ymm"), (512, "zmm")) if bits > cpu_target.vector_bits]
    assert not any(r in k.assembly for r in wider)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    assert k(a=a, b=b, out=out) == 0
    np.testing.assert_allclose(out, a * b + np.float32(1), rtol=1e-6)  # an FMA rounds once


@pytest.mark.parametrize("width", [1, 3, 4, 8, 16])
def test_widths(width):
    n = 50
    body = elementwise(n, width, VEC, lambda x: E.add(load("a", x, I32), E.Cast(x, I32)))
    k = Compiled(body, {"a": I32, "out": I32})
    assert has_vectors(k.body) == (width > 1)
    assert VEC not in kinds(k.body)
    a = guarded(rng.integers(-100, 100, n, dtype=np.int32))
    out = guarded(np.zeros(n, np.int32))
    assert k(a=a, out=out) == 0
    np.testing.assert_array_equal(out, a + np.arange(n, dtype=np.int32))


# ---------------------------------------------------------------------------------------- strided
@pytest.mark.parametrize("stride", [2, 3, -1, -2, 5, 17, "symbolic"])
def test_strided_loads_read_nothing_past_the_end(stride):
    n, w = 40, 8  # no tail: every load is unmasked, the last one ends at the last element
    s = 3 if stride == "symbolic" else stride
    length = (n - 1) * abs(s) + 1
    base = 0 if s > 0 else length - 1
    step = v64("s") if stride == "symbolic" else c64(s)
    body = elementwise(n, w, VEC, lambda x: load("a", add(c64(base), mul(x, step)), F32), guard=False)
    k = Compiled(body, {"a": F32, "out": F32}, {"s": I64})
    assert has_vectors(k.body)
    a = guarded(rng.random(length, dtype=np.float32))
    out = np.zeros(n, np.float32)
    assert k(a=a, out=out, s=s) == 0
    np.testing.assert_array_equal(out, a[base::s][:n])
    if stride in (2, 3):
        assert "shufflevector" in k.source  # one wide load and a shuffle


def _periodic_index(kind, x, o):
    """Lane indices of an upsampling and its relatives, ``x`` plus a symbolic offset ``o``."""
    v = add(x, o)
    half, rest = E.FloorDiv(v, c64(2)), E.Mod(v, c64(2))
    return {"x//2": half, "x//2+x%2": add(half, rest), "x//4-x%4+3": E.Sub(add(E.FloorDiv(v, c64(4)), c64(3)),
                                                                             E.Mod(v, c64(4))),
            "x//3+x": add(E.FloorDiv(v, c64(3)), v)}[kind]


@pytest.mark.parametrize("kind", ["x//2", "x//2+x%2", "x//4-x%4+3", "x//3+x"])
def test_periodic_loads_are_dense_loads_and_shuffles(kind):
    """A vector index made of x // c and x % c (an upsampling reads x // 2) is one dense load of the run
    of elements the lanes read and a shuffle per residue of x, not a gather; every offset (so every
    residue), against the buffer's end (an unreadable page)."""
    n, w = 48, 8  # no tail: every load is unmasked
    k = Compiled(elementwise(n, w, VEC, lambda x: load("a", _periodic_index(kind, x, v64("o")), F32), guard=False),
                 {"a": F32, "out": F32}, {"o": I64})
    assert "masked.gather" not in k.source and "shufflevector" in k.source
    index = {"x//2": lambda v: v // 2, "x//2+x%2": lambda v: v // 2 + v % 2,
             "x//4-x%4+3": lambda v: v // 4 - v % 4 + 3, "x//3+x": lambda v: v // 3 + v}[kind]
    for o in range(0, 13):
        idx = index(np.arange(n) + o)
        a = guarded(rng.random(idx.max() + 1, dtype=np.float32))  # the largest index is the last element
        out = np.zeros(n, np.float32)
        assert k(a=a, out=out, o=o) == 0
        np.testing.assert_array_equal(out, a[idx])


@pytest.mark.parametrize("dtype", [T.float64, T.uint8, T.int16])
def test_periodic_loads_of_other_types(dtype):
    n, w = 32, 8
    body = elementwise(n, w, VEC, lambda x: load("a", _periodic_index("x//2+x%2", x, v64("o")), dtype), guard=False)
    k = Compiled(body, {"a": dtype, "out": dtype}, {"o": I64})
    assert "masked.gather" not in k.source
    for o in range(3):
        idx = (np.arange(n) + o) // 2 + (np.arange(n) + o) % 2
        a = guarded(rng.integers(0, 100, idx.max() + 1).astype(dtype.np))
        out = np.zeros(n, dtype.np)
        assert k(a=a, out=out, o=o) == 0
        np.testing.assert_array_equal(out, a[idx])


def test_transposed_read():
    """out[y, x] = inp[x, y]: the vector over x reads inp with the symbolic stride H."""
    H, W, w = 13, 21, 8
    y = v64("y")
    body = ir.For("y", c64(0), v64("H"), SER, split_loop(W, "x", w, VEC, lambda x: ir.Store(
        "out", add(x, mul(y, v64("W"))), load("inp", add(y, mul(x, v64("H"))), F32))))
    k = Compiled(body, {"inp": F32, "out": F32}, {"H": I64, "W": I64})
    assert has_vectors(k.body)
    inp = rng.random((W, H), dtype=np.float32)
    out = np.zeros((H, W), np.float32)
    assert k(inp=guarded(inp.ravel()), out=out, H=H, W=W) == 0
    np.testing.assert_array_equal(out, inp.T)


def test_gather_and_uniform_loads():
    n, w = 45, 8
    idx = guarded(rng.integers(0, 30, n).astype(np.int64))
    a = guarded(rng.random(30, dtype=np.float32))
    body = elementwise(n, w, VEC, lambda x: E.add(load("a", load("idx", x, I64), F32), load("a", c64(2), F32)))
    k = Compiled(body, {"a": F32, "idx": I64, "out": F32})
    assert "masked.gather" in k.source
    out = guarded(np.zeros(n, np.float32))
    assert k(a=a, idx=idx, out=out) == 0
    np.testing.assert_array_equal(out, a[idx] + a[2])


# ----------------------------------------------------------------------------------------- stores
def test_strided_and_scattered_stores():
    n, w = 27, 8
    perm = rng.permutation(n).astype(np.int64)
    body = ir.block(
        split_loop(n, "x", w, VEC, lambda x: ir.Store("strided", add(mul(x, c64(2)), c64(1)), load("a", x, F32))),
        split_loop(n, "z", w, VEC, lambda x: ir.Store("scattered", load("perm", x, I64), load("a", x, F32))),
    )
    k = Compiled(body, {"a": F32, "perm": I64, "strided": F32, "scattered": F32})
    assert has_vectors(k.body) and "masked.scatter" in k.source
    a = rng.random(n, dtype=np.float32)
    strided = guarded(np.zeros(2 * n, np.float32))
    scattered = guarded(np.zeros(n, np.float32))
    assert k(a=a, perm=perm, strided=strided, scattered=scattered) == 0
    np.testing.assert_array_equal(strided[1::2], a)
    assert (strided[::2] == 0).all()
    want = np.zeros(n, np.float32)
    want[perm] = a
    np.testing.assert_array_equal(scattered, want)


def test_colliding_scatter_keeps_serial_order():
    """out[idx[x]] = x with repeated indices: the last iteration wins, as in the serial loop."""
    n = 45
    idx = rng.integers(0, 6, n).astype(np.int64)
    outs = []
    for kind in (VEC, SER):
        body = elementwise(n, 8, kind, lambda x: E.Cast(x, I32), out="o")
        body = ir.map_stmt(body, lambda e: e, lambda s: ir.Store("o", load("idx", s.index, I64), s.value)
                           if isinstance(s, ir.Store) else s)
        k = Compiled(body, {"idx": I64, "o": I32})
        assert has_vectors(k.body) == (kind is VEC)
        o = np.full(6, -1, np.int32)
        assert k(idx=idx, o=o) == 0
        outs.append(o)
    np.testing.assert_array_equal(outs[0], outs[1])
    want = np.full(6, -1, np.int32)
    for x in range(n):
        want[idx[x]] = x
    np.testing.assert_array_equal(outs[0], want)


def test_bool_vectors_in_memory():
    n = 29
    body = elementwise(n, 8, VEC, lambda x: E.Or(E.lt(load("a", x, F32), E.const(0.5, F32)), load("m", x, T.bool_)))
    k = Compiled(body, {"a": F32, "m": T.bool_, "out": T.bool_})
    assert "<8 x i8>" in k.source
    a, m = rng.random(n, dtype=np.float32), rng.random(n) < 0.3
    out = guarded(np.zeros(n, np.bool_))
    assert k(a=a, m=guarded(m), out=out) == 0
    np.testing.assert_array_equal(out, (a < 0.5) | m)


# ------------------------------------------------------------------------------------ predication
def test_lane_dependent_if_else_is_predicated():
    """A guard on the data and a tail: masked loads (dense, strided, gathered) must not touch the
    unreadable page after each input."""
    n, w = 43, 8
    a = guarded(rng.standard_normal(n).astype(np.float32))
    s2 = guarded(rng.standard_normal(2 * n - 1).astype(np.float32))
    idx = guarded(rng.integers(0, n, n).astype(np.int64))

    def body_of(x):
        ax = load("a", x, F32)
        pos = ir.Store("out", x, E.add(ax, load("s2", mul(x, c64(2)), F32)))
        neg = ir.IfThenElse(E.lt(ax, E.const(-1.0, F32)), ir.Store("out", x, load("a", load("idx", x, I64), F32)),
                            ir.Store("out", x, E.neg(ax)))
        return ir.IfThenElse(E.lt(E.const(0.0, F32), ax), pos, neg)

    k = Compiled(split_loop(n, "x", w, VEC, body_of), {"a": F32, "s2": F32, "idx": I64, "out": F32})
    assert has_vectors(k.body)
    assert "masked.load" in k.source and "masked.store" in k.source and "masked.gather" in k.source
    out = guarded(np.zeros(n, np.float32))
    assert k(a=a, s2=s2, idx=idx, out=out) == 0
    want = np.where(a > 0, a + s2[::2], np.where(a < -1, a[idx], -a))
    np.testing.assert_array_equal(out, want)


def test_lets_with_vector_values():
    n = 37

    def body_of(x):
        t = E.Var("t", F32)
        inner = E.Let("u", E.mul(t, t), E.add(E.Var("u", F32), t))
        return ir.LetStmt("t", E.add(load("a", x, F32), E.const(1.0, F32)), ir.LetStmt(
            "i", add(x, c64(1)), ir.Store("out", x, E.add(inner, load("a", E.Sub(v64("i"), c64(1)), F32)))))

    k = Compiled(split_loop(n, "x", 8, VEC, body_of), {"a": F32, "out": F32})
    assert has_vectors(k.body)
    assert "masked.gather" not in k.source  # the let-bound ramp stays a ramp: dense loads
    a = guarded(rng.random(n, dtype=np.float32))
    out = np.zeros(n, np.float32)
    assert k(a=a, out=out) == 0
    t = a + np.float32(1)
    np.testing.assert_allclose(out, t * t + t + a, rtol=1e-6)


# -------------------------------------------------------------------------------- lane independence
def _both(body, buffers, scalars=None, **arrays):
    """Run ``body`` vectorized and serial; return the pass output and the two results."""
    results = []
    for passes in (True, False):
        k = Compiled(body, buffers, scalars, passes=passes)
        arrs = {name: a.copy() if isinstance(a, np.ndarray) else a for name, a in arrays.items()}
        assert k(**arrs) == 0
        results.append(arrs)
    for name in (n for n, a in arrays.items() if isinstance(a, np.ndarray)):
        np.testing.assert_array_equal(results[0][name], results[1][name], err_msg=name)
    return vectorize_loops(body), results[0]


def test_scan_and_histogram_stay_serial_and_a_reduction_into_one_element_combines_lanes():
    """A sum into s[0] is ``s[0] = s[0] + add over lanes(a[ramp])`` (the schedule layer vectorizes an
    RDom only for such updates); a scan and a histogram have lanes that depend on each other."""
    n = 40
    a = rng.integers(0, 9, n).astype(np.int32)
    total = elementwise(n, 8, VEC, lambda x: E.add(load("s", c64(0), I32), load("a", x, I32)), out="s")
    total = ir.map_stmt(total, lambda e: e, lambda s: ir.Store("s", c64(0), s.value) if isinstance(s, ir.Store) else s)
    scan = elementwise(n - 1, 8, VEC, lambda x: E.add(load("c", x, I32), load("a", add(x, c64(1)), I32)), out="c")
    scan = ir.map_stmt(scan, lambda e: e, lambda s: ir.Store("c", add(s.index, c64(1)), s.value)
                       if isinstance(s, ir.Store) else s)
    hist = elementwise(n, 8, VEC, lambda x: x, out="h")
    hist = ir.map_stmt(hist, lambda e: e, lambda s: ir.Store("h", E.Cast(load("a", s.index, I32), I64), E.add(
        load("h", E.Cast(load("a", s.index, I32), I64), I32), E.const(1, I32))) if isinstance(s, ir.Store) else s)
    for body, buf in ((total, "s"), (scan, "c"), (hist, "h")):
        out, res = _both(body, {"a": I32, buf: I32}, a=a, **{buf: np.zeros(n, np.int32)})
        assert has_vectors(out) == (buf == "s") and VEC not in kinds(out), buf
        if buf == "s":
            assert any(isinstance(x, E.VectorReduce) for t in ir.walk_stmts(out) for e in ir.exprs_of(t)
                       for x in E.walk(e))
            assert res["s"][0] == a.sum()
    np.testing.assert_array_equal(res["h"][:9], np.bincount(a, minlength=9))


def test_in_place_update_is_vectorized():
    n = 30
    body = elementwise(n, 8, VEC, lambda x: E.mul(load("out", x, F32), E.const(2.0, F32)))
    out, res = _both(body, {"out": F32}, out=rng.random(n, dtype=np.float32))
    assert has_vectors(out)


def test_vectorized_across_inner_loop():
    """out[x] += a[k, x] for k in an inner loop: the inner loop stays, its body works on vectors.
    out[x + k] would make lanes overlap across k: that loop stays serial."""
    n, K = 21, 5

    def acc(offset):
        def body_of(x):
            idx = add(x, v64("k")) if offset else x
            return ir.For("k", c64(0), c64(K), SER, ir.Store("out", idx, E.add(
                load("out", idx, F32), load("a", add(mul(v64("k"), c64(n)), x), F32))))
        return split_loop(n, "x", 8, VEC, body_of)

    a = rng.random(K * n, dtype=np.float32)
    out, _ = _both(acc(False), {"a": F32, "out": F32}, a=a, out=np.zeros(n, np.float32))
    assert has_vectors(out) and kinds(out).count(SER) == 2
    out, _ = _both(acc(True), {"a": F32, "out": F32}, a=a, out=np.zeros(n + K, np.float32))
    assert not has_vectors(out)


def test_fallbacks_to_serial():
    n = 20
    plain = lambda x: load("a", x, F32)  # noqa: E731
    a = rng.random(n, dtype=np.float32)
    # a non-constant extent
    body = ir.For("x", c64(0), v64("n"), VEC, ir.Store("out", v64("x"), plain(v64("x"))))
    out, _ = _both(body, {"a": F32, "out": F32}, {"n": I64}, a=a, out=np.zeros(n, np.float32), n=n)
    assert kinds(out) == [SER]
    # an allocation inside
    inner = ir.Allocate("tmp", F32, c64(1), ir.Block((ir.Store("tmp", c64(0), plain(v64("x.i"))),
                                                       ir.Store("out", v64("x.i"), load("tmp", c64(0), F32)))))
    body = ir.For("x.i", c64(0), c64(8), VEC, inner)
    out, _ = _both(body, {"a": F32, "out": F32}, a=a, out=np.zeros(n, np.float32))
    assert kinds(out) == [SER]
    # nested vectorized loops: the inner one is vectorized, the outer one runs serially
    body = ir.For("y", c64(0), c64(2), VEC, ir.For("x", c64(0), c64(8), VEC, ir.Store(
        "out", add(mul(v64("y"), c64(8)), v64("x")), plain(add(mul(v64("y"), c64(8)), v64("x"))))))
    out, res = _both(body, {"a": F32, "out": F32}, a=a, out=np.zeros(n, np.float32))
    assert kinds(out) == [SER] and has_vectors(out)
    np.testing.assert_array_equal(res["out"][:16], a[:16])


@pytest.mark.parametrize("lanes", [16, 32])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_a_gather_whose_lanes_read_near_each_other_is_a_load_and_a_permute(cpu_target, lanes, dtype):
    """out[c, x] = a[c, i(x)] vectorized along x, with i(x) computed through a float (as a resampling's
    taps are: no pattern of constant lanes): where a vector's lanes read within a permute instruction's
    width (16 lanes with AVX-512, 8 with AVX2) of each other, one masked load and a permute; in the
    chunks where i(x) spreads wide (every third width of x), the gather. Both give NumPy's values. The
    input ends where an unreadable page begins and the last lanes read its last element: the masked
    load reads nothing past the lanes' highest index. An index read from data stays a gather."""
    import ragsched as rs

    from .helpers import guarded

    n, rows, m = 200, 3, 97
    width = cpu_target.natural_vector_size(rs.float32)
    C, N, M = rs.Size("C"), rs.Size("N"), rs.Size("M")
    c, x = rs.vars("c x")
    a = rs.Input("a", rs.float32 if dtype == np.float32 else rs.int32, [C, M])
    near = rs.cast(rs.int32, rs.floor(rs.cast(rs.float32, x) * 0.49 + 0.25))
    spread = (x * 37) % M
    out = rs.Func("out", shape=[C, N])
    out[c, x] = a[c, rs.clamp(rs.select((x // width) % 3 == 1, spread, near), 0, M - 1)]
    out.split("x", "x", "xv", lanes, tail="guard")
    out.vectorize("xv")
    k = out.compile(threads=1)
    source = k._code.source
    assert "llvm.masked.gather" in source and ("permvar.sf.512" if width == 16 else "avx2.permps") in source
    values = (rng.random((rows, m)) * 1000).astype(dtype)
    xs = np.arange(n)
    ids = np.where((xs // width) % 3 == 1, (xs * 37) % m,
                   np.floor(xs.astype(np.float32) * np.float32(0.49) + np.float32(0.25)).astype(np.int64))
    ids = np.clip(ids, 0, m - 1)
    assert ids.max() == m - 1
    got = k(a=guarded(values.ravel()).reshape(rows, m), out=np.zeros((rows, n), dtype))
    np.testing.assert_array_equal(got, values[:, ids])

    looked_up = rs.Func("looked_up", shape=[C, N])
    idx = rs.Input("idx", rs.int32, [N])
    looked_up[c, x] = a[c, rs.clamp(idx[x], 0, M - 1)]
    looked_up.split("x", "x", "xv", lanes, tail="guard")
    looked_up.vectorize("xv")
    lk = looked_up.compile(threads=1)
    assert "permvar.sf.512" not in lk._code.source and "avx2.permps" not in lk._code.source
    np.testing.assert_array_equal(lk(a=values, idx=ids.astype(np.int32)), values[:, ids])
