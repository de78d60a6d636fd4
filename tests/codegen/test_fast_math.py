"""``compile(fast_math=True)``: float32 exp, exp2, log, log2 and pow by shorter code, each held to the
looser bound docs/language.md states for it, with the special values still NumPy's (but results below
float32's normal range, which are flushed to 0, and subnormal arguments of log, read as 0); the flag is
only ever what the caller asked for."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.codegen import target as targets

from .test_vector_math import _table_edges, ulp_error

#: function -> (its float64 counterpart, the stated bound in float32 ulps, arguments that test it)
FAST_BOUNDS = {"exp": (np.exp, 2.0, (-90.0, 90.0)), "exp2": (np.exp2, 2.0, (-130.0, 130.0)),
               "log": (np.log, 2.0, None), "log2": (np.log2, 2.0, None)}
NORMAL = np.float32(1.17549435e-38)


def _kernel(name: str, lanes: int | None, arity: int = 1, fast_math: bool = True):
    N = rs.Size("N")
    x = rs.Var("x")
    args = [rs.Input(n, rs.float32, [N]) for n in "ab"[:arity]]
    f = rs.Func("f", shape=[N])
    f[x] = getattr(rs, name)(*(a[x] for a in args))
    if lanes:
        f.vectorize(x, lanes)
    return f.compile(fast_math=fast_math)


def _every_positive_normal(n: int, seed: int = 0) -> np.ndarray:
    bits = np.random.default_rng(seed).integers(0x00800000, 0x7F800000, n, dtype=np.int64).astype(np.int32)
    return bits.view(np.float32)


@pytest.mark.parametrize("name", sorted(FAST_BOUNDS))
def test_fast_math_is_within_its_stated_ulps(name):
    ref, bound, span = FAST_BOUNDS[name]
    rng = np.random.default_rng(1)
    if span is None:  # log and log2: every positive normal float, and near 1
        x = np.concatenate([_every_positive_normal(200_000), (1 + rng.uniform(-0.3, 0.42, 50_000)).astype(np.float32)])
    else:
        x = rng.uniform(*span, 200_000).astype(np.float32)
    lanes = rs.natural_vector_size(rs.float32)
    got = _kernel(name, lanes)(a=x)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    normal = ~(np.abs(want) < NORMAL)  # below the normal range the result is flushed to 0
    assert (got[~normal] == 0).all()
    err = ulp_error(got[normal], want[normal])
    worst = int(np.argmax(err))
    assert err.max() <= bound, f"{name}({x[normal][worst]!r}) = {got[normal][worst]!r}: {err.max():.2f} ulp"
    np.testing.assert_array_equal(got.view(np.int32), _kernel(name, None)(a=x).view(np.int32))
    # the special values as NumPy has them; a positive subnormal argument of log is read as 0
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, 2.0, 0.5, 1e-40, -1e-40], np.float32)
    got = _kernel(name, lanes)(a=np.tile(special, 2))[:len(special)]
    with np.errstate(all="ignore"):
        read = np.where((special > 0) & (special < NORMAL), np.float32(0), special)
        want = ref(read.astype(np.float64)).astype(np.float32)
    want = np.where(np.abs(want) < NORMAL, np.float32(0), want)
    np.testing.assert_array_equal(got, want)


def test_fast_pow_is_within_its_stated_ulps_and_keeps_c99s_special_cases(cpu_target):
    """Within 2 + 1.5 |y log2 x| ulp (the error of log2 x in float32, times y), 2 + 2 |y log2 x| where
    the target takes the table code (AVX2: checked to be the code that ran), over every positive normal x
    and y up to where the result leaves float32's range, near 1 and near the edges of the table's
    intervals too; with AVX-512 (vgetexp) the accurate pow, within 2 ulp; C99's special values."""
    from ragsched.codegen.llvm.emit import avx512_instructions, pow_table_size

    rng = np.random.default_rng(2)
    n = 150_000
    edges = np.concatenate([_table_edges(rng, n // 2, size, 40) for size in (32, 8)])
    xs = np.concatenate([_every_positive_normal(n, 3), (1 + rng.uniform(-0.01, 0.01, n)).astype(np.float32), edges,
                         rng.uniform(0, 4, n).astype(np.float32), -rng.uniform(0, 4, n).astype(np.float32)])
    lx = np.log2(np.abs(xs.astype(np.float64)))
    ys = (rng.uniform(-1, 1, len(xs)) * 127 / np.maximum(np.abs(lx), 1e-3)).astype(np.float32)
    ys[-n:] = np.round(ys[-n:])  # negative x: integer powers
    lanes = cpu_target.natural_vector_size(rs.float32)
    kernel = _kernel("pow", lanes, 2)
    table = pow_table_size(cpu_target)
    assert ("llvm.x86.avx512.vpermi2var.ps.512" in kernel.source) == (table == 32)
    assert ("llvm.x86.avx2.permps" in kernel.source) == (table == 8)
    got = kernel(a=xs, b=ys)
    with np.errstate(all="ignore"):
        want = np.power(xs.astype(np.float64), ys.astype(np.float64))
    if "getexp" in avx512_instructions(cpu_target):  # the accurate pow, faster there than fast math's
        err = ulp_error(got, want)
        assert err.max() <= 2, f"pow({xs[np.argmax(err)]!r}, {ys[np.argmax(err)]!r}): {err.max():.2f} ulp"
    else:
        normal = ~(np.abs(want) < NORMAL)
        assert (got[~normal] == 0).all()
        err = ulp_error(got[normal], want[normal])
        t = np.abs(ys.astype(np.float64) * lx)[normal]
        over = err - (2 + (2.0 if table else 1.5) * t)
        worst = int(np.argmax(over))
        assert over.max() <= 0, \
            f"pow({xs[normal][worst]!r}, {ys[normal][worst]!r}): {err[worst]:.2f} ulp at |y log2 x| {t[worst]:.1f}"
    special = np.array([0, -0.0, 1, -1, np.inf, -np.inf, np.nan, 2, -2, 0.5, 1e-40], np.float32)
    powers = np.array([0, -0.0, 1, -1, 2, -2, 3, -3, 0.5, -0.5, np.inf, -np.inf, np.nan, 1e30], np.float32)
    sx, sy = (v.ravel() for v in np.meshgrid(special, powers))
    with np.errstate(all="ignore"):  # float64's power rounded once: NumPy's float32 power is not correctly
        # rounded everywhere (on AVX-512 hosts its SIMD powf gives 1e-40 ** -0.5 one ulp off)
        want_special = np.power(sx.astype(np.float64), sy.astype(np.float64))
        want_special32 = want_special.astype(np.float32)
        got_special = _kernel("pow", lanes, 2)(a=sx, b=sy)
    if "getexp" in avx512_instructions(cpu_target):  # the accurate pow takes a subnormal x itself: 2 ulp
        assert ulp_error(got_special, want_special).max() <= 2
        assert np.array_equal(np.isnan(got_special), np.isnan(want_special))
    else:
        np.testing.assert_array_equal(got_special, want_special32)
    scalar = _kernel("pow", None, 2)(a=xs, b=ys)
    np.testing.assert_array_equal(got.view(np.int32), scalar.view(np.int32))


def test_fast_math_only_when_asked():
    """The default is the accurate code; fast_math=True (or the target cpu:host+fast_math) the fast code,
    a different kernel (not a cached one of the other); CUDA targets and non-bool flags are refused."""
    x = _every_positive_normal(4096, 5)
    accurate, fast = _kernel("log", 8, fast_math=False), _kernel("log", 8, fast_math=True)
    assert accurate.target.fast_math is False and fast.target.fast_math is True
    assert "+fast_math" in fast.target.text and "+fast_math" not in accurate.target.text
    a, f = accurate(a=x), fast(a=x)
    assert not np.array_equal(a.view(np.int32), f.view(np.int32))  # two codes: they round differently somewhere
    N = rs.Size("N")
    v = rs.Var("x")
    inp = rs.Input("a", rs.float32, [N])
    g = rs.Func("g", shape=[N])
    g[v] = rs.log(inp[v])
    g.vectorize(v, 8)
    np.testing.assert_array_equal(g.compile(target="cpu:host+fast_math")(a=x).view(np.int32), f.view(np.int32))
    assert targets.parse("cpu:x86-64-v3+fast_math").fast_math
    with pytest.raises(ValueError, match="CPU targets only"):
        g.compile(target="cuda", device="emulate", fast_math=True)
    with pytest.raises(TypeError, match="fast_math"):
        g.compile(fast_math="yes")
    float64 = rs.Func("h", shape=[N])
    d = rs.Input("d", rs.float64, [N])
    float64[v] = rs.log(d[v])
    xd = x.astype(np.float64)
    np.testing.assert_array_equal(float64.compile(fast_math=True)(d=xd), float64.compile()(d=xd))  # float32 only
