"""Compiled kernels (default schedule) against the NumPy reference: updates, reductions, scatters,
recurrences, boundary conditions, several outputs, strided inputs, out=, specialize."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched import reference

rng = np.random.default_rng(7)


def check(outputs, out_shape=None, rtol=1e-5, atol=1e-6, **inputs):
    """Compile ``outputs`` and compare every result with the reference, bit-exact for integers."""
    pipe = rs.Pipeline(outputs if isinstance(outputs, (list, tuple)) else [outputs])
    got = pipe.compile()(out_shape=out_shape, **inputs)
    shapes = None
    if out_shape is not None:
        names = [f.name for f in pipe.outputs]
        shapes = dict(zip(names, [out_shape] if len(names) == 1 else out_shape, strict=True))
    want = reference.evaluate(pipe.program(), inputs, shapes)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return got[0] if len(got) == 1 else got


def test_blur_and_loop_nest_listing():
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    bx = rs.Func("blur_x")
    bx[y, x] = (img[y, x] + img[y, x + 1] + img[y, x + 2]) / 3
    by = rs.Func("blur_y", shape=[H - 2, W - 2])
    by[y, x] = (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3
    out = check(by, img=rng.random((37, 53), dtype=np.float32))
    assert out.shape == (35, 51)
    text = by.lowered()
    assert "produce blur_x" in text and "allocate blur_x" in text and "produce blur_y" in text
    assert text.index("produce blur_x") < text.index("produce blur_y")
    assert 'define i32 @"blur_y"(ptr' in by.compile().source


def test_histogram():
    h, w = rs.Size("H"), rs.Size("W")
    x = rs.Var("x")
    img = rs.Input("img", rs.uint8, [h, w])
    r = rs.RDom((0, h), (0, w))
    hist = rs.Func("hist", shape=[256])
    hist[x] = rs.cast(rs.int32, 0)
    hist[rs.cast(rs.int32, img[r[0], r[1]])] += 1
    a = rng.integers(0, 256, (61, 37), dtype=np.uint8)
    np.testing.assert_array_equal(check(hist, img=a), np.bincount(a.ravel(), minlength=256))


def test_implicit_init_histogram():
    n = rs.Size("N")
    img = rs.Input("img", rs.uint8, [n])
    r = rs.RDom(0, n)
    hist = rs.Func("hist", shape=[256])
    hist[img[r]] += 1
    a = rng.integers(0, 256, 1001, dtype=np.uint8)
    np.testing.assert_array_equal(check(hist, img=a), np.bincount(a, minlength=256))


def test_clamped_scatter_outside_the_output():
    n = rs.Size("N")
    x = rs.Var("x")
    idx = rs.Input("idx", rs.int32, [n])
    r = rs.RDom(0, n)
    f = rs.Func("f")
    f[x] = x * 10
    j = rs.clamp(idx[r], -5, 20)
    f[j] = f[j] + 1
    check(f, out_shape=(4,), idx=np.array([-3, 1, 1, 9, 2, 40], np.int32))


def test_prefix_sum_and_recurrences():
    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [n])
    f = rs.Func("f", shape=[n])
    f[x] = a[x]
    r = rs.RDom(1, n - 1)
    f[r] = f[r - 1] + f[r]
    av = rng.random(300, dtype=np.float32)
    np.testing.assert_array_equal(check(f, a=av), np.cumsum(av, dtype=np.float32))

    b = rs.Input("b", rs.int32, [n])
    g = rs.Func("g", shape=[n])
    g[x] = x
    s = rs.RDom(0, n)
    g[s] = g[s - 1] * 2 + b[s]  # reads g[-1]: the region grows below the output
    check(g, b=np.array([1, 2, 3, 4, 5], np.int32))


def test_two_dimensional_rdom_order():
    h, w = rs.Size("H"), rs.Size("W")
    x = rs.Var("x")
    a = rs.Input("a", rs.int32, [h, w])
    r = rs.RDom((0, h), (0, w))
    seq = rs.Func("seq", shape=[1])
    seq[x] = rs.cast(rs.int32, 0)
    seq[0] = seq[0] * 7 + r[0] * 3 + r[1] + a[r[0], r[1]]
    check(seq, a=rng.integers(-9, 9, (5, 6)).astype(np.int32))


def test_matmul_and_triangular_and_ragged_reductions():
    n = rs.Size("N")
    i, j = rs.vars("i j")
    A = rs.Input("A", rs.float32, [n, n])
    B = rs.Input("B", rs.float32, [n, n])
    k = rs.RDom(0, n)
    C = rs.Func("C", shape=[n, n])
    C[i, j] = rs.sum(A[i, k] * B[k, j])
    a, b = rng.random((31, 31), dtype=np.float32), rng.random((31, 31), dtype=np.float32)
    np.testing.assert_allclose(check(C, A=a, B=b), a @ b, rtol=1e-5)

    t = rs.RDom(0, i + 1)
    T = rs.Func("T", shape=[n])
    T[i] = rs.sum(A[i, t])
    check(T, A=a)

    lens = rs.Input("lens", rs.int32, [n])
    r = rs.RDom(0, lens[i])
    R = rs.Func("R", shape=[n])
    R[i] = rs.maximum(A[i, rs.clamp(r, 0, n - 1)])
    check(R, A=a, lens=rng.integers(0, 31, 31).astype(np.int32))


def test_reductions_and_arg_reductions():
    h, w = rs.Size("H"), rs.Size("W")
    y = rs.Var("y")
    a = rs.Input("a", rs.float32, [h, w])
    ai = rs.Input("ai", rs.int8, [h, w])
    r = rs.RDom(0, w)
    outs = []
    for name, fn, src in [("s", rs.sum, ai), ("p", rs.product, ai), ("mx", rs.maximum, a),
                          ("mn", rs.minimum, a), ("am", rs.argmax, a), ("an", rs.argmin, ai)]:
        f = rs.Func(name, shape=[h])
        f[y] = fn(src[y, r])
        outs.append(f)
    av = rng.random((9, 11), dtype=np.float32)
    av[2, 5] = np.nan
    av[3, 1] = av[3, 7] = 2.0  # ties: the first wins
    aiv = rng.integers(-3, 4, (9, 11)).astype(np.int8)
    got = check(outs, a=av, ai=aiv)
    np.testing.assert_array_equal(got[0], aiv.sum(axis=1))
    np.testing.assert_array_equal(got[4], np.argmax(av, axis=1))
    np.testing.assert_array_equal(got[5], np.argmin(aiv, axis=1))


def test_rdom_where_and_multiple_updates():
    n = rs.Size("N")
    i = rs.Var("i")
    a = rs.Input("a", rs.int32, [n, n])
    r = rs.RDom(0, n)
    r.where((r % 3 == 0) & (r != i))
    f = rs.Func("f", shape=[n])
    f[i] = rs.cast(rs.int32, 1)
    f[i] = f[i] + a[i, r]
    f[i] = f[i] * 2
    f[0] = f[1] + 100
    check(f, a=rng.integers(-50, 50, (13, 13)).astype(np.int32))


@pytest.mark.parametrize("bc", ["clamp_edge", "repeat_image", "mirror_image", "constant_exterior"])
def test_boundary_conditions(bc):
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.int16, [H, W])
    wrapped = rs.constant_exterior(img, -7) if bc == "constant_exterior" else getattr(rs, bc)(img)
    f = rs.Func("f", shape=[H + 6, W + 4])
    f[y, x] = wrapped[y - 3, x - 2] + wrapped[y - 11, x + 9]
    check(f, img=rng.integers(-100, 100, (5, 7)).astype(np.int16))


def test_several_outputs_one_reading_another():
    N = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float64, [N])
    f = rs.Func("f", shape=[N])
    f[x] = rs.clamp_edge(a)[x] * 2
    g = rs.Func("g", shape=[N - 2])
    g[x] = f[x] + f[x + 2]
    got = check([f, g], a=rng.random(20))
    assert got[0].shape == (20,) and got[1].shape == (18,)


def test_zero_dimensional_output_and_empty_inputs():
    n = rs.Size("N")
    a = rs.Input("a", rs.float64, [n])
    r = rs.RDom(0, n)
    total = rs.Func("total")
    total[()] = rs.sum(a[r])
    got = check(total, out_shape=(), a=rng.random(50))
    assert got.shape == ()
    check(total, out_shape=(), a=np.zeros(0))


def test_strided_and_transposed_inputs_and_out():
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    f = rs.Func("f", shape=[H, W])
    f[y, x] = img[y, x] * 2 + rs.cast(rs.float32, x)
    k = f.compile()
    base = rng.random((40, 60), dtype=np.float32)
    for view in (base[::2, 3:50], base.T, base[::-1, ::3], base[5:6]):
        want = view * 2 + np.arange(view.shape[1], dtype=np.float32)
        np.testing.assert_allclose(k(img=view), want, rtol=1e-6)
        out = np.zeros((view.shape[1], view.shape[0]), np.float32).T  # a non-contiguous out=
        assert k(img=view, out=out) is out
        np.testing.assert_allclose(out, want, rtol=1e-6)
    with pytest.raises(ValueError, match="overlaps the input img"):
        k(img=base, out=base)


def test_declared_shape_of_an_intermediate_is_its_domain():
    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [n])
    g = rs.Func("g", shape=[n])
    g[x] = a[x] + 1
    f = rs.Func("f", shape=[n])
    f[x] = g[x] + g[x + 1]
    k = f.compile()
    with pytest.raises(ValueError, match="reads Func g along dimension 0 .* declared shape"):
        k(a=np.zeros(5, np.float32))
    np.testing.assert_allclose(k(a=np.ones(5, np.float32), out_shape=(4,)), [4, 4, 4, 4])


def test_specialize_bakes_sizes_in():
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    f = rs.Func("f", shape=[H, W - 1])
    f[y, x] = img[y, x + 1] - img[y, x]
    k = f.compile(specialize={"W": 16})
    assert "W" not in {a.name for a in k.kernel.arguments}
    a = rng.random((5, 16), dtype=np.float32)
    np.testing.assert_allclose(k(img=a), np.diff(a, axis=1))


def test_params():
    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [n])
    alpha, shift, flag = rs.Param("alpha", rs.float32), rs.Param("shift", rs.int32), rs.Param("flag", rs.bool)
    f = rs.Func("f", shape=[n])
    f[x] = rs.select(flag, a[x] * alpha, a[x]) + rs.cast(rs.float32, shift)
    av = rng.random(9, dtype=np.float32)
    check(f, a=av, alpha=0.5, shift=-3, flag=True)
    check(f, a=av, alpha=2.5, shift=7, flag=False)


def test_integer_division_by_zero_and_overflow_do_not_crash():
    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.int32, [n])
    b = rs.Input("b", rs.int32, [n])
    f = rs.Func("f", shape=[n])
    f[x] = a[x] // b[x] + a[x] % b[x]
    imin = np.iinfo(np.int32).min
    check(f, a=np.array([7, -7, imin, imin, 5, 0], np.int32), b=np.array([0, 2, -1, 1, -3, 0], np.int32))


def test_float16_bool_and_wide_integer_types():
    n = rs.Size("N")
    x = rs.Var("x")
    h = rs.Input("h", rs.float16, [n])
    u = rs.Input("u", rs.uint64, [n])
    f = rs.Func("f", shape=[n])
    f[x] = h[x] * 3 + rs.sqrt(rs.abs(h[x]))
    g = rs.Func("g", shape=[n])
    g[x] = (h[x] > 0) | (u[x] % 3 == 0)
    m = rs.Func("m", shape=[n])
    m[x] = u[x] * u[x] + (u[x] >> 3)
    hv = rng.standard_normal(40).astype(np.float16)
    uv = rng.integers(0, 2**63, 40, dtype=np.uint64) * 2 + 1
    # h * 3 + sqrt(|h|) cancels near h = -1/9: float16 rounding (half an ulp of ~1) is absolute there
    got = check([f, g, m], rtol=2e-3, atol=2e-3, h=hv, u=uv)
    assert got[0].dtype == np.float16 and got[1].dtype == np.bool_ and got[2].dtype == np.uint64


def test_repeated_calls_take_the_fast_path_without_losing_checks():
    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [n])
    scale, shift = rs.Param("scale", rs.float32), rs.Param("shift", rs.int32)
    f = rs.Func("f", shape=[n - 1])
    f[x] = a[x + 1] * scale + rs.cast(rs.float32, shift)
    k = f.compile()
    for trial in range(4):  # same shapes each time: after the first call, the cached plan is used
        av = rng.random(33, dtype=np.float32)
        np.testing.assert_allclose(k(a=av, scale=trial * 0.5, shift=trial), av[1:] * trial * 0.5 + trial, rtol=1e-6)
    assert len(k._fast) == 4  # one entry per value of the integer Param
    with pytest.raises(TypeError, match="Param shift is int32, got float"):
        k(a=av, scale=1.0, shift=3.0)
    with pytest.raises(TypeError, match="Param scale is float32, got str"):
        k(a=av, scale="x", shift=3)
    out = np.empty(32, np.float32)
    for _ in range(3):
        assert k(a=av, scale=2.0, shift=1, out=out) is out
        np.testing.assert_allclose(out, av[1:] * 2 + 1, rtol=1e-6)
    with pytest.raises(ValueError, match="overlaps the input a"):
        k(a=av, scale=2.0, shift=1, out=av[1:])
    big = rng.random(66, dtype=np.float32)
    np.testing.assert_allclose(k(a=big[::2], scale=1.0, shift=0), big[2::2], rtol=1e-6)  # strided: no cache
    with pytest.raises(ValueError, match="argument a has 2 dimension"):
        k(a=np.zeros((3, 3), np.float32), scale=1.0, shift=0)


def test_debug_lower_prints_the_result_of_each_pass_in_order(monkeypatch, capsys):
    """``RAGSCHED_DEBUG_LOWER=1``: each pass of ``_lower`` prints what it made, Program passes (a Func's
    definitions) then loop-nest passes, in the order they run."""
    from ragsched.codegen.lower import lower

    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [rs.Size("n")])
    f = rs.Func("dbg_f")
    f[x] = a[x] * 2
    g = rs.Func("dbg_g")
    g[x] = f[x] + 1
    g.vectorize(x, 4)
    pipe = rs.Pipeline([g])
    monkeypatch.setenv("RAGSCHED_DEBUG_LOWER", "1")
    lower(pipe.program(), pipe.schedule())
    err = capsys.readouterr().err
    passes = [line.split("after ", 1)[1] for line in err.splitlines() if line.startswith("--- dbg_g: after ")]
    assert passes[:5] == ["specialize_program", "wrap_funcs", "inline_funcs", "infer_ragged_domains",
                          "bound_lengths"]
    assert passes[-8:] == ["constant_loop_extents", "unswitch_loops", "unroll_short_loops", "unroll_loops",
                           "vectorize_loops", "partition_vector_tails", "version_clamped_loads", "unswitch_loops"]
    assert "dbg_f[x] = a[x] * 2.0f" in err and "vectorized dbg_g.s0.x" in err
    monkeypatch.setenv("RAGSCHED_DEBUG_LOWER", "0")
    lower(pipe.program(), pipe.schedule())
    assert capsys.readouterr().err == ""



def test_a_func_read_at_indices_of_two_integer_types():
    """An integral image read at its clamped box corners (int32 indices) and at ``rs.clamp(-1, 0, H - 1)``
    (Python ints: an int64 index): the regions of the reads are joined in one type (they made a min of
    an int64 and an int32 end, which the LLVM backend refused)."""
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    a = rs.Input("a", rs.float32, [H, W])
    sx = rs.Func("sx")
    sx[y, x] = a[y, x]
    rx = rs.RDom(1, W - 1, name="rx")
    sx[y, rx] = sx[y, rx - 1] + a[y, rx]
    s = rs.Func("s")
    s[y, x] = sx[y, x]
    ry = rs.RDom(1, H - 1, name="ry")
    s[ry, x] = s[ry - 1, x] + sx[ry, x]

    def at(i, j):
        return s[rs.clamp(i, 0, H - 1), rs.clamp(j, 0, W - 1)]

    first = rs.clamp(-1, 0, H - 1)
    assert first.node.dtype == rs.int64
    out = rs.Func("out", shape=[H, W])
    out[y, x] = at(y + 2, x + 2) - at(y - 3, x + 2) - at(y + 2, x - 3) + at(y - 3, x - 3) + \
        s[first, rs.clamp(x, 0, W - 1)] * 0.5
    for shape in [(5, 7), (1, 3), (12, 9)]:
        check(out, rtol=1e-4, atol=1e-5, a=rng.random(shape, dtype=np.float32))
