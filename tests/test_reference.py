"""The NumPy reference evaluator: the semantics every compiled kernel is checked against."""

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.algebra import expr as E
from ragsched.lang import to_program
from ragsched.program import Function, InputSpec, Program
from ragsched.reference import evaluate, run

rng = np.random.default_rng(1234)


def pointwise(dtype, fn, values, out_dtype=None):
    """Evaluate ``out[i] = fn(inp[i])`` over a 1-D input holding ``values``."""
    n = rs.Size("N")
    i = rs.Var("i")
    inp = rs.Input("inp", dtype, [n])
    f = rs.Func("f", shape=[n])
    f[i] = fn(inp[i])
    out = run(f, inp=np.asarray(values, dtype=np.dtype(dtype.name)))
    if out_dtype is not None:
        assert out.dtype == np.dtype(out_dtype)
    return out


def binary(dtype, fn, a, b):
    """Evaluate ``out[i] = fn(p[i], q[i])`` elementwise."""
    n = rs.Size("N")
    i = rs.Var("i")
    p, q = rs.Input("p", dtype, [n]), rs.Input("q", dtype, [n])
    f = rs.Func("f", shape=[n])
    f[i] = fn(p[i], q[i])
    dt = np.dtype(dtype.name)
    return run(f, p=np.asarray(a, dt), q=np.asarray(b, dt))


# ------------------------------------------------------------------------------------- expressions
def test_integer_arithmetic_wraps():
    out = binary(rs.int8, lambda a, b: a + b, [127, -128, 100], [1, -1, 100])
    np.testing.assert_array_equal(out, np.array([-128, 127, -56], np.int8))
    out = binary(rs.uint8, lambda a, b: a - b, [0, 5], [1, 3])
    np.testing.assert_array_equal(out, np.array([255, 2], np.uint8))
    out = binary(rs.int32, lambda a, b: a * b, [2**20, -7], [2**12, 3])
    np.testing.assert_array_equal(out, np.array([0, -21], np.int32))


def test_floor_division_and_modulo():
    a = [7, -7, 7, -7, 5, 0, -2**31]
    b = [2, 2, -2, -2, 0, 0, -1]
    q = binary(rs.int32, lambda x, y: x // y, a, b)
    m = binary(rs.int32, lambda x, y: x % y, a, b)
    np.testing.assert_array_equal(q, [3, -4, -4, 3, 0, 0, -2**31])
    np.testing.assert_array_equal(m, [1, 1, -1, -1, 0, 0, 0])
    assert q.dtype == np.int32 and m.dtype == np.int32


def test_float_division_and_modulo():
    a = np.array([7.5, -7.5, 1.0, -1.0, 0.0], np.float32)
    b = np.array([2.0, 2.0, 0.0, 0.0, 0.0], np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(binary(rs.float32, lambda x, y: x / y, a, b), a / b)
        np.testing.assert_array_equal(binary(rs.float32, lambda x, y: x % y, a, b), np.remainder(a, b))
        np.testing.assert_array_equal(binary(rs.float32, lambda x, y: x // y, a, b), np.floor(a / b))


def test_integer_true_division_is_float64():
    out = binary(rs.int32, lambda x, y: x / y, [7, 1], [2, 0])
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [3.5, np.inf])


def test_weak_scalars_keep_the_type():
    out = pointwise(rs.float32, lambda v: v * 0.1 + 1, [1.0, 2.0], out_dtype=np.float32)
    np.testing.assert_array_equal(out, np.array([1.0, 2.0], np.float32) * 0.1 + 1)
    out = pointwise(rs.uint8, lambda v: v + 200, [100, 1], out_dtype=np.uint8)
    np.testing.assert_array_equal(out, [44, 201])


@pytest.mark.parametrize("dst, expected", [
    (rs.int8, [1, -1, 127, -128, 0, 127, -128, 0]),
    (rs.uint8, [1, 0, 255, 0, 0, 255, 0, 0]),
    (rs.int32, [1, -1, 300, -300, 0, 2**31 - 1, -2**31, 0]),
    (rs.int64, [1, -1, 300, -300, 0, 2**63 - 1, -2**63, 0]),
    (rs.uint64, [1, 0, 300, 0, 0, 2**64 - 1, 0, 0]),
])
def test_float_to_int_cast_truncates_and_saturates(dst, expected):
    values = [1.7, -1.7, 300.0, -300.0, np.nan, np.inf, -np.inf, -0.5]
    for src in (rs.float32, rs.float64):
        out = pointwise(src, lambda v, dst=dst: rs.cast(dst, v), values, out_dtype=dst.name)
        np.testing.assert_array_equal(out, np.array(expected, dtype=dst.name))


def test_float_to_int_cast_at_the_limits():
    out = pointwise(rs.float64, lambda v: rs.cast(rs.int64, v), [2.0**63, 2.0**62, -2.0**63])
    np.testing.assert_array_equal(out, [2**63 - 1, 2**62, -2**63])
    out = pointwise(rs.float32, lambda v: rs.cast(rs.int32, v), [2.0**31, 2.0**30, -2.0**31])
    np.testing.assert_array_equal(out, [2**31 - 1, 2**30, -2**31])


def test_int_casts_wrap_and_bool_casts():
    out = pointwise(rs.int32, lambda v: rs.cast(rs.int8, v), [127, 128, 255, -129, 256])
    np.testing.assert_array_equal(out, [127, -128, -1, 127, 0])
    out = pointwise(rs.int32, lambda v: rs.cast(rs.uint16, v), [-1, 65536 + 3])
    np.testing.assert_array_equal(out, [65535, 3])
    out = pointwise(rs.float32, lambda v: rs.cast(rs.bool, v), [0.0, -0.0, 0.5, np.nan], out_dtype=bool)
    np.testing.assert_array_equal(out, [False, False, True, True])
    out = pointwise(rs.bool, lambda v: rs.cast(rs.int32, v), [True, False], out_dtype=np.int32)
    np.testing.assert_array_equal(out, [1, 0])


def test_min_max_propagate_nan():
    a = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    b = np.array([np.nan, 2.0, 1.0, np.nan], np.float32)
    np.testing.assert_array_equal(binary(rs.float32, rs.min, a, b), np.minimum(a, b))
    np.testing.assert_array_equal(binary(rs.float32, rs.max, a, b), np.maximum(a, b))
    np.testing.assert_array_equal(binary(rs.int16, rs.max, [3, -4], [-5, 2]), [3, 2])


def test_clamp_and_abs():
    out = pointwise(rs.int32, lambda v: rs.clamp(v, -2, 5), [-10, 0, 10])
    np.testing.assert_array_equal(out, [-2, 0, 5])
    out = pointwise(rs.int8, rs.abs, [-128, -3, 4], out_dtype=np.int8)
    np.testing.assert_array_equal(out, [-128, 3, 4])  # wraps, as np.abs
    out = pointwise(rs.float32, rs.abs, [-1.5, -0.0, np.inf], out_dtype=np.float32)
    np.testing.assert_array_equal(out, [1.5, 0.0, np.inf])


def test_select_and_comparisons():
    a = np.array([1, 5, 3, 3], np.int32)
    b = np.array([4, 2, 3, 9], np.int32)
    out = binary(rs.int32, lambda x, y: rs.select(x < y, x * 10, y), a, b)
    np.testing.assert_array_equal(out, np.where(a < b, a * 10, b))
    for op in ("lt", "le", "gt", "ge", "eq", "ne"):
        fn = getattr(np, {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
                          "eq": "equal", "ne": "not_equal"}[op])
        out = binary(rs.int32, lambda x, y, op=op: getattr(x, f"__{op}__")(y), a, b)
        assert out.dtype == bool
        np.testing.assert_array_equal(out, fn(a, b))
    nan = np.array([np.nan, 1.0], np.float32)
    np.testing.assert_array_equal(binary(rs.float32, lambda x, y: x == y, nan, nan), [False, True])
    np.testing.assert_array_equal(binary(rs.float32, lambda x, y: x != y, nan, nan), [True, False])


def test_multiway_select_first_true_wins():
    out = pointwise(rs.int32, lambda v: rs.select(v < 0, -1, v < 10, 0, 1), [-5, 5, 50, 10])
    np.testing.assert_array_equal(out, [-1, 0, 1, 1])


def test_bool_and_bit_operations():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    np.testing.assert_array_equal(binary(rs.bool, lambda x, y: x & y, a, b), a & b)
    np.testing.assert_array_equal(binary(rs.bool, lambda x, y: x | y, a, b), a | b)
    np.testing.assert_array_equal(binary(rs.bool, lambda x, y: x ^ y, a, b), a ^ b)
    np.testing.assert_array_equal(pointwise(rs.bool, lambda v: ~v, a), ~a)
    i = np.array([0, 5, -1, 12], np.int32)
    j = np.array([3, 6, 7, 1], np.int32)
    np.testing.assert_array_equal(pointwise(rs.int32, lambda v: ~v, i), ~i)
    np.testing.assert_array_equal(binary(rs.int32, lambda x, y: x & y, i, j), i & j)
    np.testing.assert_array_equal(binary(rs.int32, lambda x, y: x | y, i, j), i | j)
    np.testing.assert_array_equal(binary(rs.int32, lambda x, y: x ^ y, i, j), i ^ j)
    np.testing.assert_array_equal(binary(rs.int32, lambda x, y: x << y, i, j), i << j)
    np.testing.assert_array_equal(binary(rs.int32, lambda x, y: x >> y, i, j), i >> j)  # arithmetic
    u = np.array([0xF0, 0x81], np.uint8)
    np.testing.assert_array_equal(pointwise(rs.uint8, lambda v: v >> 4, u), u >> 4)  # logical


def test_negation():
    np.testing.assert_array_equal(pointwise(rs.int8, lambda v: -v, [-128, 5]), [-128, -5])
    np.testing.assert_array_equal(pointwise(rs.float32, lambda v: -v, [0.0, 2.5]), [-0.0, -2.5])


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sin", "cos", "floor", "ceil", "round"])
def test_math_functions_float32(name):
    values = np.array([0.5, 1.5, 2.5, -0.5, 3.7, 10.0, 0.0], np.float32)
    if name in ("log", "sqrt"):
        values = np.abs(values)
    out = pointwise(rs.float32, getattr(rs, name), values, out_dtype=np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(out, getattr(np, name)(values))


def test_round_is_half_to_even():
    out = pointwise(rs.float64, rs.round, [0.5, 1.5, 2.5, -0.5, -1.5, 2.4999])
    np.testing.assert_array_equal(out, [0.0, 2.0, 2.0, -0.0, -2.0, 2.0])


def test_rsqrt_erf_pow():
    v = np.array([0.25, 1.0, 4.0, 0.0], np.float32)
    out = pointwise(rs.float32, rs.rsqrt, v, out_dtype=np.float32)
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(out, 1 / np.sqrt(v), rtol=1e-6)
    e = np.array([-3.0, -0.5, 0.0, 0.3, 2.0, np.inf, np.nan])
    np.testing.assert_allclose(pointwise(rs.float64, rs.erf, e), [math.erf(t) for t in e], rtol=1e-15)
    a = np.array([2.0, 9.0, -8.0, 0.0], np.float32)
    b = np.array([10.0, 0.5, 1 / 3, 0.0], np.float32)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(binary(rs.float32, rs.pow, a, b), np.power(a, b))
        np.testing.assert_array_equal(binary(rs.float32, lambda x, y: x ** y, a, b), np.power(a, b))


def test_math_on_ints_is_float64_and_float16_stays():
    out = pointwise(rs.int32, rs.sqrt, [4, 2], out_dtype=np.float64)
    np.testing.assert_array_equal(out, np.sqrt([4.0, 2.0]))
    h = np.array([0.5, 1.0, 2.0], np.float16)
    out = pointwise(rs.float16, rs.exp, h, out_dtype=np.float16)
    np.testing.assert_array_equal(out, np.exp(h.astype(np.float32)).astype(np.float16))


def test_float16_arithmetic_rounds_each_operation():
    a = np.array([1.0, 2048.0, 0.1, 65504.0], np.float16)
    b = np.array([1e-3, 1.0, 0.2, 65504.0], np.float16)
    out = binary(rs.float16, lambda x, y: x + y * 2, a, b)
    assert out.dtype == np.float16
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, a + b * 2)


def test_integer_power_by_constant():
    np.testing.assert_array_equal(pointwise(rs.int32, lambda v: v ** 3, [2, -3, 0]), [8, -27, 0])


def test_params_and_sizes_in_expressions():
    n = rs.Size("N")
    i = rs.Var("i")
    alpha = rs.Param("alpha", rs.float32)
    k = rs.Param("k", rs.int32)
    a = rs.Input("a", rs.float32, [n])
    f = rs.Func("f", shape=[n])
    f[i] = a[i] * alpha + rs.cast(rs.float32, k + n - i)
    av = np.arange(5, dtype=np.float32)
    out = run(f, a=av, alpha=np.float32(0.5), k=3)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, av * np.float32(0.5) + (3 + 5 - np.arange(5)).astype(np.float32))
    with pytest.raises(TypeError, match="alpha"):
        run(f, a=av, alpha="x", k=3)
    with pytest.raises(TypeError, match="k"):
        run(f, a=av, alpha=0.5, k=1.5)
    with pytest.raises(TypeError, match="alpha"):
        run(f, a=av, alpha=np.float64(0.5), k=3)  # would lose precision


def test_shared_subexpressions_and_offsets():
    h, w = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [h, w])
    t = img[y, x + 1] * 2
    f = rs.Func("f", shape=[h - 1, w - 1])
    f[y, x] = t + t * img[y + 1, x]
    a = rng.random((7, 9), dtype=np.float32)
    u = a[:-1, 1:] * 2
    np.testing.assert_array_equal(run(f, img=a), u + u * a[1:, :-1])


def test_transposed_and_strided_reads():
    h, w = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.int32, [h, w])
    t = rs.Func("t")
    t[y, x] = img[x, y]
    s = rs.Func("s")
    s[y, x] = img[2 * y, w - 1 - x]
    a = np.arange(6 * 8, dtype=np.int32).reshape(6, 8)
    np.testing.assert_array_equal(run(t, out_shape=(8, 6), img=a), a.T)
    np.testing.assert_array_equal(run(s, out_shape=(3, 8), img=a), a[::2, ::-1])


def test_producer_consumer_chain_and_pipeline():
    n = rs.Size("N")
    i = rs.Var("i")
    a = rs.Input("a", rs.float64, [n])
    g = rs.Func("g")
    g[i] = a[i] * a[i]
    f1 = rs.Func("f1", shape=[n - 2])
    f1[i] = g[i] + g[i + 2]
    f2 = rs.Func("f2", shape=[n - 1])
    f2[i] = g[i + 1] - f1[rs.min(i, n - 3)]
    av = rng.random(10)
    sq = av * av
    o1, o2 = run(rs.Pipeline([f1, f2]), a=av)
    np.testing.assert_allclose(o1, sq[:-2] + sq[2:])
    np.testing.assert_allclose(o2, sq[1:] - o1[np.minimum(np.arange(9), 7)])
    assert isinstance(run([f1], a=av), tuple)
    (only,) = run(rs.Pipeline([f1]), out_shape=(3,), a=av)
    np.testing.assert_allclose(only, o1[:3])
    d1, d2 = run([f1, f2], out_shape={"f2": (2,)}, a=av)
    np.testing.assert_allclose(d2, o2[:2])


# --------------------------------------------------------------------------------- boundary conditions
@pytest.mark.parametrize("kind, mode", [
    ("clamp_edge", "edge"), ("repeat_image", "wrap"), ("mirror_image", "symmetric")])
def test_boundary_conditions_match_np_pad(kind, mode):
    h, w = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [h, w])
    bc = getattr(rs, kind)(img)
    f = rs.Func("f")
    f[y, x] = bc[y - 11, x - 11]
    a = rng.random((5, 4), dtype=np.float32)
    np.testing.assert_array_equal(run(f, out_shape=(27, 26), img=a), np.pad(a, 11, mode=mode))


def test_constant_exterior_matches_np_pad():
    h, w = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.int16, [h, w])
    bc = rs.constant_exterior(img, 7)
    f = rs.Func("f")
    f[y, x] = bc[y - 3, x - 2]
    a = rng.integers(-100, 100, (4, 6)).astype(np.int16)
    out = run(f, out_shape=(10, 10), img=a)
    assert out.dtype == np.int16
    np.testing.assert_array_equal(out, np.pad(a, ((3, 3), (2, 2)), constant_values=7))


# ------------------------------------------------------------------------------------------ updates
def test_histogram_scatter():
    h, w = rs.Size("H"), rs.Size("W")
    x = rs.Var("x")
    img = rs.Input("img", rs.uint8, [h, w])
    r = rs.RDom((0, h), (0, w))
    hist = rs.Func("hist", shape=[256])
    hist[x] = rs.cast(rs.int32, 0)
    hist[rs.cast(rs.int32, img[r[0], r[1]])] += 1
    a = rng.integers(0, 256, (61, 37), dtype=np.uint8)
    out = run(hist, img=a)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, np.bincount(a.ravel(), minlength=256))


def test_scatter_outside_the_requested_region_grows_the_buffer():
    n = rs.Size("N")
    x = rs.Var("x")
    idx = rs.Input("idx", rs.int32, [n])
    r = rs.RDom(0, n)
    f = rs.Func("f")
    f[x] = x * 10
    f[idx[r]] = f[idx[r]] + 1
    out = run(f, out_shape=(4,), idx=np.array([-3, 1, 1, 9, 2], np.int32))
    np.testing.assert_array_equal(out, [0, 12, 21, 30])


def test_update_whose_target_depends_on_the_func_itself():
    # f[f[idx[r]]] += 1: where it writes is only known while running, and the buffer grows then
    n = rs.Size("N")
    x = rs.Var("x")
    idx = rs.Input("idx", rs.int32, [n])
    r = rs.RDom(0, n)
    f = rs.Func("f")
    f[x] = x * 2
    f[f[idx[r]]] = f[f[idx[r]]] + 1
    g = rs.Func("g", shape=[12])
    g[x] = f[x]
    expect = np.arange(12) * 2
    for i in (0, 1, 5):
        expect[expect[i]] += 1
    np.testing.assert_array_equal(run(g, idx=np.array([0, 1, 5], np.int32)), expect)


def test_prefix_sum_is_sequential():
    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [n])
    f = rs.Func("f", shape=[n])
    f[x] = a[x]
    r = rs.RDom(1, n - 1)
    f[r] = f[r - 1] + f[r]
    av = rng.random(300, dtype=np.float32)
    np.testing.assert_array_equal(run(f, a=av), np.cumsum(av, dtype=np.float32))


def test_recurrence_reading_before_the_region():
    # f[-1] is read, so the pure definition is computed there too
    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.int32, [n])
    f = rs.Func("f", shape=[n])
    f[x] = x
    r = rs.RDom(0, n)
    f[r] = f[r - 1] * 2 + a[r]
    av = np.array([1, 2, 3, 4], np.int32)
    expect, prev = [], -1
    for v in av:
        prev = prev * 2 + int(v)
        expect.append(prev)
    np.testing.assert_array_equal(run(f, a=av), expect)


def test_reverse_and_strided_recurrence_order():
    # each point reads the value its predecessor in RDom order just wrote
    n = rs.Size("N")
    x = rs.Var("x")
    f = rs.Func("f")
    f[x] = rs.cast(rs.int64, 1)
    r = rs.RDom(0, n)
    f[n - 1 - r] = f[n - r] + f[n - 1 - r]
    a = rs.Input("a", rs.int32, [n])
    g = rs.Func("g", shape=[n])
    g[x] = f[x] + rs.cast(rs.int64, a[x]) * 0
    np.testing.assert_array_equal(run(g, a=np.zeros(6, np.int32)), [7, 6, 5, 4, 3, 2])


def test_two_dimensional_rdom_order_first_rvar_outermost():
    # a running counter over an RDom: the order of the points is visible in the result
    h, w = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    a = rs.Input("a", rs.int32, [h, w])
    f = rs.Func("f", shape=[h, w])
    f[y, x] = a[y, x] * 0
    c = rs.Func("c")
    c[x] = rs.cast(rs.int32, 0)
    r = rs.RDom((0, h), (0, w))
    c[0] = c[0] + 1
    f[r[0], r[1]] = c[0] * 0 + r[0] * w + r[1]
    np.testing.assert_array_equal(run(f, a=np.zeros((3, 4), np.int32)), np.arange(12).reshape(3, 4))

    seq = rs.Func("seq")
    seq[x] = rs.cast(rs.int32, 0)
    seq[0] = seq[0] * 7 + r[0] * 3 + r[1]  # depends on the visiting order
    g = rs.Func("g", shape=[1])
    g[x] = seq[x] + a[0, 0] * 0
    want = 0
    for i in range(3):
        for j in range(4):
            want = (want * 7 + i * 3 + j) % 2**32
    want = np.array(want, np.uint32).astype(np.int32)
    np.testing.assert_array_equal(run(g, a=np.zeros((3, 4), np.int32)), [want])


def test_triangular_rdom():
    n = rs.Size("N")
    i = rs.Var("i")
    a = rs.Input("a", rs.float32, [n, n])
    r = rs.RDom(0, i + 1)
    f = rs.Func("f", shape=[n])
    f[i] = rs.sum(a[i, r])
    av = rng.random((33, 33), dtype=np.float32)
    expect = [np.cumsum(av[k, :k + 1], dtype=np.float32)[-1] for k in range(33)]
    np.testing.assert_array_equal(run(f, a=av), expect)


def test_ragged_rdom_reads_only_inside_the_lengths():
    b, l = rs.Size("B"), rs.Size("L")
    i = rs.Var("i")
    lens = rs.Input("lens", rs.int32, [b])
    a = rs.Input("a", rs.float64, [b, l])
    r = rs.RDom(0, lens[i])
    f = rs.Func("f", shape=[b])
    f[i] = rs.sum(a[i, r])
    av = rng.random((5, 6))
    ln = np.array([6, 0, 3, 1, 5], np.int32)
    np.testing.assert_allclose(run(f, lens=ln, a=av), [av[k, :ln[k]].sum() for k in range(5)])
    with pytest.raises(ValueError, match="Input a .*dimension 1"):
        run(f, lens=np.array([6, 0, 7, 1, 5], np.int32), a=av)


def test_rdom_where():
    n = rs.Size("N")
    i = rs.Var("i")
    a = rs.Input("a", rs.int32, [n, n])
    r = rs.RDom(0, n)
    r.where((r % 3 == 0) & (r != i))
    f = rs.Func("f", shape=[n])
    f[i] = rs.sum(a[i, r])
    av = rng.integers(-50, 50, (10, 10)).astype(np.int32)
    expect = [sum(int(av[k, j]) for j in range(10) if j % 3 == 0 and j != k) for k in range(10)]
    np.testing.assert_array_equal(run(f, a=av), expect)


def test_where_guards_reads():
    # the predicate runs first: points it rejects read nothing
    n = rs.Size("N")
    a = rs.Input("a", rs.float32, [n])
    r = rs.RDom(0, n + 5)
    r.where(r < n)
    f = rs.Func("f", shape=[])
    f[()] = rs.sum(a[r])
    av = rng.random(9, dtype=np.float32)
    np.testing.assert_allclose(run(f, a=av), av.sum(), rtol=1e-6)


@pytest.mark.parametrize("rows", [1, 300])
def test_float_sum_is_sequential_in_rdom_order(rows):
    n, m = rs.Size("N"), rs.Size("M")
    i = rs.Var("i")
    a = rs.Input("a", rs.float32, [n, m])
    r = rs.RDom(0, m)
    f = rs.Func("f", shape=[n])
    f[i] = rs.sum(a[i, r])
    av = (rng.random((rows, 2000)) * 10.0 ** rng.integers(-4, 5, (rows, 2000))).astype(np.float32)
    np.testing.assert_array_equal(run(f, a=av), np.cumsum(av, axis=1, dtype=np.float32)[:, -1])


def test_sum_widens_integers_like_np_sum():
    n = rs.Size("N")
    a = rs.Input("a", rs.int8, [n])
    u = rs.Input("u", rs.uint16, [n])
    r = rs.RDom(0, n)
    s, t = rs.Func("s", shape=[]), rs.Func("t", shape=[])
    s[()] = rs.sum(a[r])
    t[()] = rs.sum(u[r])
    av = np.full(1000, 100, np.int8)
    uv = np.full(1000, 65535, np.uint16)
    os_, ot = run([s, t], a=av, u=uv)
    assert os_.dtype == np.sum(av).dtype == np.int64 and int(os_) == 100000
    assert ot.dtype == np.sum(uv).dtype == np.uint64 and int(ot) == 65535000


def test_product_maximum_minimum():
    n, m = rs.Size("N"), rs.Size("M")
    i = rs.Var("i")
    a = rs.Input("a", rs.float64, [n, m])
    r = rs.RDom(0, m)
    p, mx, mn = rs.Func("p", shape=[n]), rs.Func("mx", shape=[n]), rs.Func("mn", shape=[n])
    p[i] = rs.product(a[i, r])
    mx[i] = rs.maximum(a[i, r])
    mn[i] = rs.minimum(a[i, r])
    av = rng.random((6, 7)) + 0.5
    av[2, 3] = np.nan
    op, omx, omn = run([p, mx, mn], a=av)
    np.testing.assert_allclose(op, np.prod(av, axis=1))
    np.testing.assert_array_equal(omx, np.max(av, axis=1))
    np.testing.assert_array_equal(omn, np.min(av, axis=1))


def test_argmax_argmin_first_tie_and_nan():
    n = rs.Size("N")
    a = rs.Input("a", rs.float32, [n])
    r = rs.RDom(0, n)
    amax, amin = rs.Func("amax", shape=[]), rs.Func("amin", shape=[])
    amax[()] = rs.argmax(a[r])
    amin[()] = rs.argmin(a[r])
    for values in ([1, 3, 3, 0, 0, 2], [5, 5, 5], [1, np.nan, 7, np.nan, -1], [-np.inf, -np.inf]):
        av = np.array(values, np.float32)
        omax, omin = run([amax, amin], a=av)
        assert (int(omax), int(omin)) == (np.argmax(av), np.argmin(av)), values


def test_argmax_over_a_2d_rdom_with_offset():
    b, h, w = rs.Size("B"), rs.Size("H"), rs.Size("W")
    i = rs.Var("i")
    a = rs.Input("a", rs.int32, [b, h, w])
    r = rs.RDom((1, h - 1), (0, w))
    ry, rx = rs.argmax(a[i, r[0], r[1]])
    fy, fx = rs.Func("fy", shape=[b]), rs.Func("fx", shape=[b])
    fy[i] = ry
    fx[i] = rx
    av = rng.integers(0, 4, (20, 5, 4)).astype(np.int32)  # many ties
    oy, ox = run([fy, fx], a=av)
    flat = np.array([np.argmax(av[k, 1:]) for k in range(20)])
    np.testing.assert_array_equal(oy, flat // 4 + 1)
    np.testing.assert_array_equal(ox, flat % 4)


def test_multiple_updates_run_in_order():
    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.int32, [n])
    f = rs.Func("f", shape=[n])
    f[x] = a[x]
    f[x] = f[x] * 2
    f[0] = f[0] + 100
    r = rs.RDom(0, n)
    f[x] = f[x] + a[r]
    av = np.array([1, 2, 3], np.int32)
    np.testing.assert_array_equal(run(f, a=av), (av * 2 + np.array([100, 0, 0])) + av.sum())


def test_parallel_update_over_rvars():
    h, w = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    a = rs.Input("a", rs.float32, [h, w])
    f = rs.Func("f")
    f[y, x] = rs.cast(rs.float32, 0)
    r = rs.RDom((0, h), (0, w))
    f[r[1], r[0]] = f[r[1], r[0]] + a[r[0], r[1]]
    av = rng.random((5, 7), dtype=np.float32)
    np.testing.assert_array_equal(run(f, out_shape=(7, 5), a=av), av.T)


def test_update_with_pure_var_and_rvar():
    n, m = rs.Size("N"), rs.Size("M")
    i = rs.Var("i")
    a = rs.Input("a", rs.int32, [n, m])
    f = rs.Func("f", shape=[n, m])
    j = rs.Var("j")
    f[i, j] = a[i, j]
    r = rs.RDom(1, m - 1)
    f[i, r] = f[i, r] + f[i, r - 1]  # row-wise prefix sums
    av = rng.integers(-9, 9, (4, 6)).astype(np.int32)
    np.testing.assert_array_equal(run(f, a=av), np.cumsum(av, axis=1))


def test_empty_rdom_does_nothing():
    n = rs.Size("N")
    a = rs.Input("a", rs.float32, [n])
    r = rs.RDom(0, n)
    f = rs.Func("f", shape=[])
    f[()] = rs.sum(a[r])
    assert float(run(f, a=np.zeros(0, np.float32))) == 0.0


def test_matmul_is_fast():
    m, k, n = rs.Size("M"), rs.Size("K"), rs.Size("N")
    i, j = rs.vars("i j")
    a, b = rs.Input("A", rs.float32, [m, k]), rs.Input("B", rs.float32, [k, n])
    r = rs.RDom(0, k)
    c = rs.Func("C", shape=[m, n])
    c[i, j] = rs.sum(a[i, r] * b[r, j])
    av = rng.uniform(-1, 1, (256, 256)).astype(np.float32)
    bv = rng.uniform(-1, 1, (256, 256)).astype(np.float32)
    t = time.perf_counter()
    out = run(c, A=av, B=bv)
    assert time.perf_counter() - t < 3.0
    np.testing.assert_allclose(out, av @ bv, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------- errors
def _blur():
    h, w = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [h, w])
    mask = rs.Input("mask", rs.float32, [h, w])
    f = rs.Func("f", shape=[h, w - 1])
    f[y, x] = img[y, x + 1] * mask[y, x]
    return f


def test_missing_and_unexpected_arguments():
    f = _blur()
    a = np.zeros((3, 4), np.float32)
    with pytest.raises((TypeError, ValueError), match="mask"):
        run(f, img=a)
    with pytest.raises((TypeError, ValueError), match="extra"):
        run(f, img=a, mask=a, extra=a)


def test_wrong_dtype_and_rank():
    f = _blur()
    a = np.zeros((3, 4), np.float32)
    with pytest.raises(TypeError, match="mask.*float32.*float64"):
        run(f, img=a, mask=a.astype(np.float64))
    with pytest.raises(ValueError, match="img.*2 dimension"):
        run(f, img=np.zeros((3, 4, 1), np.float32), mask=a)
    with pytest.raises(TypeError, match="img"):
        run(f, img=a.tolist(), mask=a)


def test_sizes_that_disagree():
    f = _blur()
    with pytest.raises(ValueError, match=r"Size W .*img \(dimension 1\).*mask \(dimension 1\)"):
        run(f, img=np.zeros((3, 4), np.float32), mask=np.zeros((3, 5), np.float32))


def test_shape_expressions_are_checked():
    n = rs.Size("N")
    i = rs.Var("i")
    a = rs.Input("a", rs.float32, [n])
    b = rs.Input("b", rs.float32, [n - 1, 2])
    f = rs.Func("f", shape=[n - 1])
    f[i] = a[i] + b[i, 1]
    run(f, a=np.zeros(4, np.float32), b=np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="b: dimension 0"):
        run(f, a=np.zeros(4, np.float32), b=np.zeros((4, 2), np.float32))
    with pytest.raises(ValueError, match="b: dimension 1"):
        run(f, a=np.zeros(4, np.float32), b=np.zeros((3, 3), np.float32))


def test_out_of_bounds_read_names_input_dimension_and_range():
    h, w = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [h, w])
    f = rs.Func("f", shape=[h, w])
    f[y, x] = img[y, x + 2]
    with pytest.raises(ValueError, match=r"Input img.*dimension 1 over \[2, 6\].*extent is 5"):
        run(f, img=np.zeros((3, 5), np.float32))


def test_unused_select_branch_reads_are_checked():
    n = rs.Size("N")
    i = rs.Var("i")
    a = rs.Input("a", rs.float32, [n])
    f = rs.Func("f", shape=[n])
    f[i] = rs.select(i > 0, a[i - 1], 0.0)
    with pytest.raises(ValueError, match="Input a"):
        run(f, a=np.zeros(3, np.float32))


def test_output_region():
    n = rs.Size("N")
    i = rs.Var("i")
    a = rs.Input("a", rs.int32, [n])
    g = rs.Func("g")
    g[i] = a[i] + 1
    with pytest.raises(ValueError, match="out_shape"):
        run(g, a=np.zeros(3, np.int32))
    np.testing.assert_array_equal(run(g, out_shape=(2,), a=np.arange(3, dtype=np.int32)), [1, 2])
    assert run(g, out_shape=(0,), a=np.arange(3, dtype=np.int32)).shape == (0,)
    with pytest.raises(ValueError, match="dimension"):
        run(g, out_shape=(2, 2), a=np.arange(3, dtype=np.int32))


def test_size_bound_from_out_shape():
    n = rs.Size("N")
    i = rs.Var("i")
    g = rs.Func("g", shape=[n])
    g[i] = i * n
    np.testing.assert_array_equal(run(g, out_shape=(3,)), [0, 3, 6])
    with pytest.raises(ValueError, match="Size.* N"):
        evaluate(to_program([g]), {})
    f = rs.Func("f", shape=[n * 2])  # only a bare Size is bound from a shape; N * 2 = 4 is not solved
    f[i] = i * n
    with pytest.raises(ValueError, match="Size.* N"):
        run(f, out_shape=(4,))


def test_declared_shape_of_an_intermediate_is_its_domain():
    n = rs.Size("N")
    i = rs.Var("i")
    a = rs.Input("a", rs.float32, [n])
    g = rs.Func("g", shape=[n])
    g[i] = a[i] * 2
    f = rs.Func("f", shape=[n])
    f[i] = g[i + 1]
    with pytest.raises(ValueError, match=r"Func g .*declared shape.*dimension 0 over \[1, 4\]"):
        run(f, a=np.zeros(4, np.float32))


def test_evaluate_on_a_hand_built_program():
    # The evaluator reads the IR alone: a program built without the language
    n = E.Var("N")
    x = E.Var("x")
    ref = E.FuncRef("a", (E.add(x, 1),), rs.int32)
    f = Function("f", rs.int32, ("x",), E.mul(ref, 3), shape=(E.sub(n, 1),))
    prog = Program(outputs=("f",), functions=(f,), inputs=(InputSpec("a", rs.int32, (n,)),),
                   params=(), sizes=("N",))
    (out,) = evaluate(prog, {"a": np.array([1, 2, 3], np.int32)}, {"f": (2,)})
    np.testing.assert_array_equal(out, [6, 9])


# ----------------------------------------------------------------------------------------- property
_INT_OPS = ["add", "sub", "mul", "min", "max", "floordiv", "mod", "select", "abs", "neg"]
_FLOAT_OPS = ["add", "sub", "mul", "min", "max", "div", "select", "abs", "neg"]


def _trees(ops):
    leaves = st.one_of(
        st.tuples(st.just("read"), st.integers(-3, 3)),
        st.tuples(st.just("const"), st.integers(-4, 4)),
    )

    def extend(children):
        return st.one_of(
            st.tuples(st.sampled_from([o for o in ops if o not in ("abs", "neg")]), children, children),
            st.tuples(st.sampled_from([o for o in ops if o in ("abs", "neg")]), children),
        )

    return st.recursive(leaves, extend, max_leaves=8)


def _build(tree, read, lib):
    """Interpret a tree twice: with ragsched (``lib`` = rs) and with NumPy (``lib`` = np)."""
    op = tree[0]
    if op == "read":
        return read(tree[1])
    if op == "const":
        return tree[1]
    args = [_build(t, read, lib) for t in tree[1:]]
    if op == "abs":
        return rs.abs(args[0]) if lib is rs else np.abs(args[0])
    if op == "neg":
        return -args[0]
    a, b = args
    if op in ("div", "floordiv", "mod") and not hasattr(b, "dtype") and b == 0:
        b = 1  # a constant zero divisor would be Python's ZeroDivisionError in both interpretations
    if op == "select":
        return rs.select(a < b, a, b * 2) if lib is rs else np.where(a < b, a, b * 2)
    if op in ("min", "max"):
        if lib is rs:
            return (rs.min if op == "min" else rs.max)(a, b)
        return (np.minimum if op == "min" else np.maximum)(a, b)
    return {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a / b,
            "floordiv": lambda: a // b, "mod": lambda: a % b}[op]()


@settings(max_examples=60, deadline=None)
@given(tree=_trees(_INT_OPS) | _trees(_FLOAT_OPS).map(lambda t: ("float", t)), data=st.data())
def test_random_pointwise_expressions_match_numpy(tree, data):
    is_float = tree[0] == "float"
    if is_float:
        tree = tree[1]
    dt = np.float32 if is_float else np.int32
    n = data.draw(st.integers(1, 12))
    if is_float:
        values = np.array(data.draw(st.lists(st.floats(-100, 100, width=32), min_size=n, max_size=n)), dt)
    else:
        values = np.array(data.draw(st.lists(st.integers(-1000, 1000), min_size=n, max_size=n)), dt)

    size = rs.Size("N")
    i = rs.Var("i")
    a = rs.Input("a", rs.float32 if is_float else rs.int32, [size])
    edge = rs.clamp_edge(a)
    f = rs.Func("f", shape=[size])
    f[i] = _build(tree, lambda d: edge[i + d], rs) + a[i] * 0  # "+ a[i] * 0": a is read even by constants
    with np.errstate(all="ignore"):
        ks = np.arange(n)
        expect = _build(tree, lambda d: values[np.clip(ks + d, 0, n - 1)], np) + values * 0
        got = run(f, a=values)
    assert got.dtype == expect.dtype
    np.testing.assert_array_equal(got, expect)
