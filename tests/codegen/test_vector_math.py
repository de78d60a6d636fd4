"""Math functions in vector instructions, held to their stated accuracy: the error in units in the last
place (ulp) of the float32 result against float64 NumPy, over every binade of float32 (subnormals
included) and the special values (0, -0, inf, -inf, NaN, negatives); the vectorized loop gives the scalar
loop's bits. Bounds as docs/language.md states them."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ragsched as rs


def _erf(x: np.ndarray) -> np.ndarray:
    """float64 erf (NumPy has none): the C library's, element by element."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


#: function -> (its float64 counterpart, the stated bound in float32 ulps)
BOUNDS = {"log": (np.log, 2.0), "exp": (np.exp, 2.0), "log2": (np.log2, 2.0), "exp2": (np.exp2, 2.0),
          "tanh": (np.tanh, 2.0), "sin": (np.sin, 1.0),
          "cos": (np.cos, 1.0), "erf": (_erf, 3.0)}


def _inputs(name: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 0x7F800000, 200_000, dtype=np.int64).astype(np.int32)  # every positive float32
    x = bits.view(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, 2.0, 0.5, np.float32(1e-45),
                         np.float32(1.17549435e-38), np.float32(3.4028235e38), -np.float32(1e-45)], np.float32)
    near_one = (1 + rng.uniform(-0.01, 0.01, 20_000)).astype(np.float32)
    moderate = rng.uniform(-110, 95, 50_000).astype(np.float32)  # exp's whole range, and past it
    small = rng.uniform(-2, 2, 50_000).astype(np.float32)  # tanh's two formulas meet at 0.625
    periodic = rng.uniform(-1e5, 1e5, 50_000).astype(np.float32)  # many periods of sin and cos
    return np.concatenate([x, -x[:1000], specials, near_one, moderate, small, periodic])


def ulp_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in ulps of float32 at ``want`` (float64); 0 where both are the same special value, or
    where ``want`` overflows float32 and ``got`` is that infinity."""
    with np.errstate(over="ignore"):
        w32 = want.astype(np.float32)
    spacing = np.spacing(np.abs(w32)).astype(np.float64)
    spacing[spacing == 0] = np.float64(np.float32(1e-45))
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite: handled by ``same``
        err = np.abs(got.astype(np.float64) - want) / spacing
    same = (got == want) | (np.isnan(got) & np.isnan(want)) | (np.isinf(w32) & (got == w32))
    return np.where(same, 0.0, err)


def _kernel(name: str, lanes: int | None):
    N = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [N])
    f = rs.Func("f", shape=[N])
    f[x] = getattr(rs, name)(a[x])
    if lanes:
        f.vectorize(x, lanes)
    return f.compile()


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_vector_math_is_within_its_stated_ulps(name):
    ref, bound = BOUNDS[name]
    x = _inputs(name)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64))
    got = _kernel(name, rs.natural_vector_size(rs.float32))(a=x)
    err = ulp_error(got, want)
    worst = int(np.argmax(err))
    assert err.max() <= bound, f"{name}({x[worst]!r}) = {got[worst]!r}, want {want[worst]!r}: {err.max():.2f} ulp"
    scalar = _kernel(name, None)(a=x)
    np.testing.assert_array_equal(got.view(np.int32), scalar.view(np.int32))


def _pow_kernel(lanes: int | None):
    N = rs.Size("N")
    x = rs.Var("x")
    a, b = rs.Input("a", rs.float32, [N]), rs.Input("b", rs.float32, [N])
    f = rs.Func("f", shape=[N])
    f[x] = rs.pow(a[x], b[x])
    if lanes:
        f.vectorize(x, lanes)
    return f.compile()


def test_pow_is_within_one_ulp_and_keeps_c99s_special_cases():
    rng = np.random.default_rng(0)
    n = 100_000
    xs = np.concatenate([rng.uniform(0, 4, n), rng.uniform(-4, 4, n), np.exp(rng.uniform(-80, 80, n)),
                         _inputs("pow")[:n]]).astype(np.float32)
    ys = np.concatenate([rng.uniform(-10, 10, n), np.round(rng.uniform(-7, 7, n)), rng.uniform(-1.2, 1.2, n),
                         rng.uniform(-2, 2, n)]).astype(np.float32)
    special = np.array([0, -0.0, 1, -1, np.inf, -np.inf, np.nan, 2, -2, 0.5], np.float32)
    powers = np.array([0, -0.0, 1, -1, 2, -2, 3, -3, 0.5, -0.5, np.inf, -np.inf, np.nan, 1e30], np.float32)
    sx, sy = (v.ravel() for v in np.meshgrid(special, powers))
    got = _pow_kernel(rs.natural_vector_size(rs.float32))(a=np.concatenate([xs, sx]), b=np.concatenate([ys, sy]))
    with np.errstate(all="ignore"):
        want = np.power(xs.astype(np.float64), ys.astype(np.float64))
        want_special = np.power(sx, sy)
    err = ulp_error(got[:len(xs)], want)
    assert err.max() <= 1.0, f"pow: {err.max():.2f} ulp"
    np.testing.assert_array_equal(got[len(xs):], want_special)  # NaN where NumPy's is, the same infinities
    scalar = _pow_kernel(None)(a=np.concatenate([xs, sx]), b=np.concatenate([ys, sy]))
    np.testing.assert_array_equal(got.view(np.int32), scalar.view(np.int32))
