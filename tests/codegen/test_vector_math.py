"""Math functions in vector instructions, held to their stated accuracy: the error in units in the last
place (ulp) of the float32 result against float64 NumPy, over every binade of float32 (subnormals
included) and the special values (0, -0, inf, -inf, NaN, negatives); the same for float64 results against
np.longdouble (80-bit on x86-64) over every binade of float64; the vectorized loop gives the scalar loop's
bits. Bounds as docs/language.md states them."""

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
    small = rng.uniform(-2, 2, 50_000).astype(np.float32)  # tanh's two formulas meet at 0.7
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


def _kernel(name: str, lanes: int | None, dtype=rs.float32, arity: int = 1):
    """``f[x] = rs.<name>(a[x], ...)`` over inputs a (and b) of ``dtype``, vectorized by ``lanes``."""
    N = rs.Size("N")
    x = rs.Var("x")
    args = [rs.Input(n, dtype, [N]) for n in "ab"[:arity]]
    f = rs.Func("f", shape=[N])
    f[x] = getattr(rs, name)(*(a[x] for a in args))
    if lanes:
        f.vectorize(x, lanes)
    return f.compile()


def _assert_within(name: str, x, got, want, err, bound: float) -> None:
    worst = int(np.argmax(err))
    assert err.max() <= bound, f"{name}({x[worst]!r}) = {got[worst]!r}, want {want[worst]!r}: {err.max():.2f} ulp"


def _checked(name: str, x, dtype, ref, wide, ulps, bound: float):
    """The vectorized kernel's result on ``x``, held to ``bound`` ulps (``ulps``) of ``ref`` computed in
    the ``wide`` type."""
    with np.errstate(all="ignore"):
        want = ref(x.astype(wide))
    got = _kernel(name, rs.natural_vector_size(dtype), dtype)(a=x)
    _assert_within(name, x, got, want, ulps(got, want), bound)
    return got


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_vector_math_is_within_its_stated_ulps(name):
    ref, bound = BOUNDS[name]
    x = _inputs(name)
    got = _checked(name, x, rs.float32, ref, np.float64, ulp_error, bound)
    scalar = _kernel(name, None)(a=x)
    np.testing.assert_array_equal(got.view(np.int32), scalar.view(np.int32))
    # signed zeros as NumPy's float32 (sin(-0) is -0, cos(-0) is 1, log(-0) is -inf)
    zeros = np.array([0.0, -0.0] * 8, np.float32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.signbit(got_z := _kernel(name, rs.natural_vector_size(rs.float32))(a=zeros)),
                                      np.signbit(want_z := ref(zeros.astype(np.float64)).astype(np.float32)))
    np.testing.assert_array_equal(got_z, want_z)


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sin_and_cos_near_multiples_of_half_pi_within_their_bound(name):
    """The float32 reduction's hardest inputs: the float32s nearest k pi/2 (r = x - n pi/2 a few ulps of x
    at most, so that the parts of pi/2 must cancel exactly), and their neighbours, for every k below the
    bound where float32 reduction stops; beside lanes past that bound in the same vectors (the float64
    code, in a branch). Within 1 ulp, and the vector code's bits are the scalar code's."""
    from ragsched.codegen.llvm.math_calls import _Math

    limit = _Math._SINCOS_NEAR
    k = np.arange(1, int(limit / (np.pi / 2)) + 1, dtype=np.float64)
    x = (k * (np.pi / 2)).astype(np.float32)
    x = x[np.abs(x) < limit]
    near = np.concatenate([x, np.nextafter(x, np.float32(0)), np.nextafter(x, np.float32(np.inf))])
    past = np.float32(limit) * np.array([1.0, 1.0000001, 1.5, 3.0], np.float32)
    x = np.concatenate([near, -near[::7], np.resize(past, near.size // 50)])
    rng = np.random.default_rng(3)
    x = x[rng.permutation(x.size)]  # lanes of both kinds in each vector
    got = _checked(name, x, rs.float32, getattr(np, name), np.float64, ulp_error, 1.0)
    np.testing.assert_array_equal(got.view(np.int32), _kernel(name, None)(a=x).view(np.int32))


def _pow_kernel(lanes: int | None):
    return _kernel("pow", lanes, rs.float32, 2)


def _table_edges(rng, n: int, size: int, near: int, unit: bool = False) -> np.ndarray:
    """n float32s within ``near`` bit patterns of the edges of the intervals a pow table of ``size`` entries
    cuts the mantissa into, in the binades around 1: the two-float path's (``pow_tables.geometry``), or
    with ``unit`` the short path's ``size`` equal intervals of [1, 2) (``pow_tables.unit_table``)."""
    from ragsched.codegen.llvm import pow_tables

    g = pow_tables.geometry(size)
    bits = (0x3F800000 if unit else g.off) + (rng.integers(0, size, n) << g.bits) + rng.integers(-near, near + 1, n)
    return bits.astype(np.uint32).view(np.float32)


def _hard_pow_inputs(rng, n: int):
    """Where pow's error is largest: y ln x near float32's range (|y ln x| up to 88, down to -103) with x
    near 1 (y in the thousands scales the error of ln x), near powers of two, and at the edges of the
    intervals the tables of the AVX-512 and AVX2 code cut the mantissa into (``pow_tables``); and y from 2
    to 40, where the short path hands lanes to the two-float one."""
    t = rng.uniform(-103, 88, 3 * n)
    x = np.concatenate([1 + rng.uniform(-0.02, 0.02, n),
                        2.0 ** rng.integers(-60, 60, n) * (1 + rng.uniform(-0.02, 0.02, n)),
                        np.concatenate([_table_edges(rng, n // 4, size, 3, unit) for size in (32, 8)
                                        for unit in (False, True)])
                        .astype(np.float64) * 2.0 ** rng.integers(-3, 4, 4 * (n // 4))])
    with np.errstate(all="ignore"):
        y = t / np.log(x)
    keep = np.isfinite(y)
    switch_x = rng.uniform(0.05, 4, n)
    switch_y = rng.uniform(2, 40, n) * rng.choice([-1, 1], n)
    return (np.concatenate([x[keep], switch_x]).astype(np.float32),
            np.concatenate([y[keep], switch_y]).astype(np.float32))


def test_pow_is_within_its_bound_and_keeps_c99s_special_cases(cpu_target):
    """Bound: 2 ulp where the target looks up a table in one instruction (AVX-512, AVX2: float32 code,
    checked to be the code that ran), 1 ulp elsewhere (the float64 code); the scalar code gives the
    vector's bits."""
    from ragsched.codegen.llvm.emit import pow_table_size

    rng = np.random.default_rng(0)
    n = 100_000
    hard_x, hard_y = _hard_pow_inputs(rng, n)
    xs = np.concatenate([rng.uniform(0, 4, n), rng.uniform(-4, 4, n), np.exp(rng.uniform(-80, 80, n)),
                         _inputs("pow")[:n], hard_x]).astype(np.float32)
    ys = np.concatenate([rng.uniform(-10, 10, n), np.round(rng.uniform(-7, 7, n)), rng.uniform(-1.2, 1.2, n),
                         rng.uniform(-2, 2, n), hard_y]).astype(np.float32)
    special = np.array([0, -0.0, 1, -1, np.inf, -np.inf, np.nan, 2, -2, 0.5], np.float32)
    powers = np.array([0, -0.0, 1, -1, 2, -2, 3, -3, 0.5, -0.5, np.inf, -np.inf, np.nan, 1e30], np.float32)
    sx, sy = (v.ravel() for v in np.meshgrid(special, powers))
    kernel = _pow_kernel(cpu_target.natural_vector_size(rs.float32))
    tables = pow_table_size(cpu_target)
    assert ("llvm.x86.avx512.vpermi2var.ps.512" in kernel.source) == (tables == 32)
    assert ("llvm.x86.avx2.permps" in kernel.source) == (tables == 8)
    got = kernel(a=np.concatenate([xs, sx]), b=np.concatenate([ys, sy]))
    with np.errstate(all="ignore"):
        want = np.power(xs.astype(np.float64), ys.astype(np.float64))
        want_special = np.power(sx, sy)
    err = ulp_error(got[:len(xs)], want)
    _assert_within("pow", np.stack([xs, ys], 1), got, want, err, 2.0 if tables else 1.0)
    np.testing.assert_array_equal(got[len(xs):], want_special)  # NaN where NumPy's is, the same infinities
    scalar = _pow_kernel(None)(a=np.concatenate([xs, sx]), b=np.concatenate([ys, sy]))
    np.testing.assert_array_equal(got.view(np.int32), scalar.view(np.int32))


# ------------------------------------------------------------------------------------------ float64
#: function -> (its reference on np.longdouble, the stated bound in float64 ulps)
BOUNDS_F64 = {"exp": (np.exp, 1.0), "exp2": (np.exp2, 1.0), "log": (np.log, 1.0), "log2": (np.log2, 1.0),
              "tanh": (np.tanh, 1.0), "sin": (np.sin, 1.0), "cos": (np.cos, 1.0)}
_F64_MIN_NORMAL = np.finfo(np.float64).tiny
_F64_MAX = np.finfo(np.float64).max

precise_longdouble = pytest.mark.skipif(
    np.finfo(np.longdouble).nmant < 63, reason="the float64 reference is np.longdouble with 64 bits or more")


def _inputs_f64(name: str) -> np.ndarray:
    """Every binade of float64 (random bit patterns, subnormals on their own), both signs, the special
    values, and where each function is delicate: near 1 for log, the whole finite range of exp and exp2
    and their overflow and underflow thresholds, near multiples of pi/2 for sin and cos."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 0x7FF0000000000000, 100_000, dtype=np.int64).view(np.float64)
    subnormal = rng.integers(1, 1 << 52, 5_000, dtype=np.int64).view(np.float64)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, 2.0, 0.5, 5e-324, _F64_MIN_NORMAL,
                         _F64_MAX, -5e-324, np.nextafter(1, 0), np.nextafter(1, 2),
                         709.782712893384, 709.7827128933841, -708.3964185322641, -745.1332191019411,
                         -745.1332191019412, 1024.0, np.nextafter(1024, 0), -1022.0, -1074.0, -1075.0,
                         -1074.5, -1075.5], np.float64)
    near_one = 1 + rng.uniform(-0.3, 0.42, 20_000)  # the whole reduced range of log's m
    ulps_from_one = 1 + np.arange(-200, 200) * np.spacing(1.0) / 2
    exp_range = rng.uniform(-1080, 1030 if name == "exp2" else 712, 50_000)
    small = rng.uniform(-2, 2, 20_000)
    periodic = rng.uniform(-2.0 ** 31, 2.0 ** 31, 20_000)  # sin and cos reduced in vector code below 2^30
    near_pi_2 = np.round(rng.uniform(-7e8, 7e8, 20_000)) * (np.pi / 2)  # where x - n pi/2 cancels most
    return np.concatenate([x, -x[:1000], subnormal, specials, near_one, ulps_from_one, exp_range, small, periodic,
                           near_pi_2, np.nextafter(near_pi_2, np.inf)])


def ulp_error_f64(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in ulps of float64 at ``want`` (np.longdouble); 0 where got is ``want`` rounded to
    float64 (the same special value, or the infinity that ``want`` overflows to); inf where got is a NaN
    or an infinity that it is not."""
    with np.errstate(over="ignore"):
        w64 = want.astype(np.float64)
    spacing = np.spacing(np.abs(w64)).astype(np.longdouble)  # 2^-1074 for subnormals and 0
    with np.errstate(invalid="ignore"):
        err = (np.abs(got.astype(np.longdouble) - want) / spacing).astype(np.float64)
    same = (got == w64) | (np.isnan(got) & np.isnan(w64))
    return np.where(same, 0.0, np.where(np.isfinite(err), err, np.inf))


def _kernel_f64(name: str, lanes: int | None, arity: int = 1):
    return _kernel(name, lanes, rs.float64, arity)


@precise_longdouble
@pytest.mark.parametrize("name", sorted(BOUNDS_F64))
def test_float64_vector_math_is_within_its_stated_ulps(name):
    ref, bound = BOUNDS_F64[name]
    x = _inputs_f64(name)
    got = _checked(name, x, rs.float64, ref, np.longdouble, ulp_error_f64, bound)
    special = ~np.isfinite(x) | (x == 0) | ((x < 0) if name.startswith("log") else False)
    with np.errstate(all="ignore"):  # the special values exactly as NumPy has them, signed zeros included
        want_special = getattr(np, name)(x[special])
    np.testing.assert_array_equal(got[special], want_special)
    signed = ~np.isnan(want_special)
    np.testing.assert_array_equal(np.signbit(got[special][signed]), np.signbit(want_special[signed]))
    scalar = _kernel_f64(name, None)(a=x)
    np.testing.assert_array_equal(got.view(np.int64), scalar.view(np.int64))


@precise_longdouble
def test_float64_pow_is_within_two_ulps_and_keeps_c99s_special_cases():
    """Within 2 ulp (of the float64 result, against np.longdouble) also where |y ln x| is near 745, where
    ln x's error is multiplied by that much; C99's special values exactly as NumPy has them."""
    rng = np.random.default_rng(0)
    n = 50_000
    every_x = rng.integers(1, 0x7FF0000000000000, n, dtype=np.int64).view(np.float64)  # subnormals too
    near_one = 1 + rng.uniform(-0.3, 0.42, n)
    xs = np.concatenate([rng.uniform(0, 4, n), -rng.uniform(0, 4, n), every_x, near_one, near_one])
    with np.errstate(divide="ignore"):
        reach = 750 / np.abs(np.log(every_x))  # |y| up to where the result overflows or underflows
    ys = np.concatenate([rng.uniform(-10, 10, n), np.round(rng.uniform(-40, 40, n)), rng.uniform(-1, 1, n) * reach,
                         rng.uniform(-1, 1, n) * 745 / np.abs(np.log(near_one)), rng.uniform(-3, 3, n)])
    special = np.array([0, -0.0, 1, -1, np.inf, -np.inf, np.nan, 2, -2, 0.5, -0.5, 5e-324, -5e-324], np.float64)
    powers = np.array([0, -0.0, 1, -1, 2, -2, 3, -3, 0.5, -0.5, np.inf, -np.inf, np.nan, 1e300, -1e300,
                       2.0 ** 53 + 2, 2.0 ** 53 - 1, 1075, -1075], np.float64)
    sx, sy = (v.ravel() for v in np.meshgrid(special, powers))
    a, b = np.concatenate([xs, sx]), np.concatenate([ys, sy])
    got = _kernel_f64("pow", rs.natural_vector_size(rs.float64), 2)(a=a, b=b)
    with np.errstate(all="ignore"):
        want = np.power(xs.astype(np.longdouble), ys.astype(np.longdouble))
        want_special = np.power(sx, sy)
    err = ulp_error_f64(got[:len(xs)], want)
    worst = int(np.argmax(err))
    assert err.max() <= 2.0, \
        f"pow({xs[worst]!r}, {ys[worst]!r}) = {got[worst]!r}, want {want[worst]!r}: {err.max():.2f} ulp"
    np.testing.assert_array_equal(got[len(xs):], want_special)  # NaN where NumPy's is, the same infinities
    signed = ~np.isnan(want_special)  # the zeros' signs too (a NaN's sign means nothing)
    np.testing.assert_array_equal(np.signbit(got[len(xs):][signed]), np.signbit(want_special[signed]))
    scalar = _kernel_f64("pow", None, 2)(a=a, b=b)
    np.testing.assert_array_equal(got.view(np.int64), scalar.view(np.int64))


def _erf_longdouble(x: np.ndarray) -> np.ndarray:
    """erf to 30 digits (mpmath), as np.longdouble (read from its decimal text, so that results near the
    smallest normal keep their digits)."""
    import mpmath as mp

    with mp.workdps(30):
        return np.array([np.longdouble(mp.nstr(mp.erf(mp.mpf(float(v))), 30, min_fixed=1, max_fixed=0))
                         for v in x])


@precise_longdouble
def test_float64_erf_is_within_its_stated_ulps():
    """float64 erf within 1.5 ulp against mpmath: every binade (both signs), densely where its two
    formulas meet at 1 and where erfc's cancels least (near 1 from above), up to 6 where it rounds to 1,
    the special values and signed zeros exactly."""
    rng = np.random.default_rng(0)
    every = rng.integers(0, 0x7FF0000000000000, 8_000, dtype=np.int64).view(np.float64)
    x = np.concatenate([every, -every[:2_000], rng.uniform(-7, 7, 8_000), rng.uniform(0.9, 1.3, 8_000),
                        -rng.uniform(0.9, 1.3, 2_000), rng.integers(1, 1 << 52, 1_000, dtype=np.int64).view(np.float64),
                        np.array([1.0, np.nextafter(1, 0), np.nextafter(1, 2), 6.0, np.nextafter(6, 0), 5.9,
                                  5e-324, _F64_MIN_NORMAL, 2.0 ** -960, _F64_MAX])])
    got = _checked("erf", x, rs.float64, _erf_longdouble, np.float64, ulp_error_f64, 1.5)
    # repeated: at least one whole vector of the widest target (a shifted tail needs one)
    special = np.tile(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -5e-324], np.float64), 4)
    got_special = _kernel_f64("erf", rs.natural_vector_size(rs.float64))(a=special)
    want_special = _erf(special)
    np.testing.assert_array_equal(got_special, want_special)
    signed = ~np.isnan(want_special)
    np.testing.assert_array_equal(np.signbit(got_special[signed]), np.signbit(want_special[signed]))
    scalar = _kernel_f64("erf", None)(a=x)
    np.testing.assert_array_equal(got.view(np.int64), scalar.view(np.int64))


@pytest.mark.parametrize("fast_math", [False, True])
def test_float32_pow_gives_the_scalar_bits_at_every_vector_width(fast_math):
    """Widths that are not a whole number of 16-lane table lookups (4, 24, 48) and several of them (32,
    64) compute what the scalar code does, bit for bit: subnormal, zero, negative and special x too, and
    y large enough that some lanes take the two-float path."""
    rng = np.random.default_rng(3)
    subnormal = rng.integers(1, 0x00800000, 200).astype(np.int32).view(np.float32)
    special = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1, -1], np.float32)
    x = np.concatenate([rng.uniform(0, 4, 2000), rng.uniform(-3, 3, 100), subnormal, special]).astype(np.float32)
    y = np.concatenate([rng.uniform(-5, 5, 1900), rng.uniform(-40, 40, 100), np.round(rng.uniform(-4, 4, 100)),
                        rng.uniform(-1, 1, 200), np.float32([0.5, -2, 3, -1, 2, np.inf, np.nan])]).astype(np.float32)

    def run(lanes):
        N = rs.Size("N")
        v = rs.Var("v")
        a, b = rs.Input("a", rs.float32, [N]), rs.Input("b", rs.float32, [N])
        f = rs.Func("f", shape=[N])
        f[v] = rs.pow(a[v], b[v])
        if lanes:
            f.vectorize(v, lanes)
        return f.compile(fast_math=fast_math)(a=x, b=y).view(np.int32)

    scalar = run(None)
    for lanes in (4, 24, 32, 48, 64):
        np.testing.assert_array_equal(run(lanes), scalar, err_msg=f"{lanes} lanes")


@pytest.mark.parametrize("name, dtype, intrinsic", [
    ("exp", rs.float32, "scalef"), ("exp2", rs.float32, "scalef"), ("tanh", rs.float32, "scalef"),
    ("erf", rs.float32, "scalef"), ("exp", rs.float64, "scalef"), ("exp2", rs.float64, "scalef"),
    ("erf", rs.float64, "scalef"), ("log", rs.float32, "fpclass"), ("log2", rs.float32, "fpclass")])
def test_avx512_instructions_give_the_scalar_bits_at_every_width(name, dtype, intrinsic, cpu_target):
    """exp's 2^n (AVX-512: vscalef, one instruction per register, a scalar in a 128-bit one; elsewhere two
    multiplications) and log's test for lanes that are not positive normal numbers (AVX-512: one
    vfpclassps) at widths that are not a whole register (4, 24) and several (32, 48): the scalar code's
    bits, subnormal results, overflow and underflow, and the special values included."""
    np_t = np.float32 if dtype == rs.float32 else np.float64
    rng = np.random.default_rng(5)
    reach = 760 if dtype == rs.float64 else 110  # past both ends of exp's range
    x = np.concatenate([rng.uniform(-reach, reach, 3000), rng.uniform(-3, 3, 500), rng.uniform(0, 1e-38, 50),
                        np.array([0.0, -0.0, np.inf, -np.inf, np.nan])]).astype(np_t)
    from ragsched.codegen.llvm.emit import avx512_instructions

    bits = np.int64 if dtype == rs.float64 else np.int32

    def run(lanes):
        k = _kernel(name, lanes, dtype)
        return k, k(a=x).view(bits)

    _, scalar = run(None)
    for lanes in (4, 24, 32, 48):
        np.testing.assert_array_equal(run(lanes)[1], scalar, err_msg=f"{lanes} lanes")
    kernel, _ = run(cpu_target.natural_vector_size(dtype))
    assert (f"llvm.x86.avx512.{'mask.' if intrinsic == 'scalef' else ''}{intrinsic}" in kernel.source) == \
        (intrinsic in avx512_instructions(cpu_target)) == cpu_target.has("avx512vl")
    assert "ldexp" not in kernel.source  # no call of the C library per lane


def test_avx512_instructions_only_where_every_width_of_them_exists():
    """vscalef needs AVX512F, vfpclassps AVX512DQ, and both AVX512VL for their 256- and 128-bit forms (the
    math functions use every width): a target without VL (Knights Landing) takes neither."""
    from ragsched.codegen.llvm.emit import avx512_instructions

    class Target:
        def __init__(self, *features):
            self.features = features

        def has(self, feature):
            return feature in self.features

    assert avx512_instructions(Target("avx512f", "avx512dq", "avx512vl")) == {"scalef", "getexp", "fpclass"}
    assert avx512_instructions(Target("avx512f", "avx512vl")) == {"scalef", "getexp"}
    assert avx512_instructions(Target("avx512f", "avx512dq")) == set()
    assert avx512_instructions(Target("avx2", "fma")) == set()


@pytest.mark.parametrize("size", [32, 8])
def test_pow_short_path_table_has_what_its_error_bound_assumes(size):
    """``pow_tables.unit_table``: s a multiple of 2^-16 with k + s exact in float32 for every exponent k
    (subnormal x's too), log2(c) = s + d to float32's precision with |d| <= 2^-17, and |m/c - 1| at most
    1 / (2 size) (a little more: 1/c is rounded) over each interval of [1, 2), the range the polynomial
    was fitted on."""
    from ragsched.codegen.llvm import pow_tables

    inv, s, d = (np.array(v) for v in pow_tables.unit_table(size))
    assert len(inv) == size and np.all(inv.astype(np.float32) == inv)
    assert np.all(s * 65536 == np.round(s * 65536))
    k = np.arange(-149, 129, dtype=np.float64)[:, None]
    assert np.all((k + s).astype(np.float32).astype(np.float64) == k + s)
    assert np.all(np.abs(d) <= 2.0 ** -17)
    assert np.all(np.abs(-np.log2(inv) - (s + d)) <= 2.0 ** -40)
    lo, hi = 1 + np.arange(size) / size, 1 + (np.arange(size) + 1) / size
    z = np.concatenate([lo * inv - 1, hi * inv - 1])
    assert np.abs(z).max() <= 1 / (2 * size) * (1 + 2.0 ** -20)


@precise_longdouble
@pytest.mark.parametrize("dtype", [rs.float32, rs.float64])
@pytest.mark.parametrize("power", [0, 1, 2, 3, -1, 0.5, -0.5])
def test_pow_by_a_small_constant_is_arithmetic_with_c99s_values(power, dtype):
    """``x ** c`` and ``rs.pow(x, c)`` for c in 0, 1, 2, 3, -1, 1/2, -1/2 are multiplications, a division or
    a square root (no pow call left in the expression): within 1.5 ulp of the exact power (exact or
    correctly rounded but for 3 and -1/2), with C99's values (NumPy's for an array of exponents) at zeros,
    infinities, NaN and negatives, signs of zeros included; vector and scalar code alike."""
    from ragsched.algebra import expr as E

    np_t = np.float32 if dtype == rs.float32 else np.float64
    N, v = rs.Size("N"), rs.Var("v")
    a = rs.Input("a", dtype, [N])
    for node in ((a[v] ** power)._node, rs.pow(a[v], power)._node):
        assert not any(isinstance(n, E.Call) and n.name == "pow" for n in E.walk(node))
    rng = np.random.default_rng(4)
    tiny = np.finfo(np_t).tiny
    x = np.concatenate([rng.uniform(-4, 4, 20000), np.exp(rng.uniform(-80, 80, 20000)), tiny * rng.random(2000),
                        np.array([0, -0.0, 1, -1, np.inf, -np.inf, np.nan, tiny, -tiny])]).astype(np_t)

    def run(lanes):
        f = rs.Func("f", shape=[N])
        f[v] = a[v] ** power
        if lanes:
            f.vectorize(v, lanes)
        return f.compile()(a=x)

    got = run(rs.natural_vector_size(dtype))
    with np.errstate(all="ignore"):
        exact = np.power(x.astype(np.longdouble), np.longdouble(power))
        c99 = np.power(x, np.full_like(x, power))  # an array exponent: no fast path of NumPy's
    err = (ulp_error if np_t is np.float32 else ulp_error_f64)(got, exact.astype(np.float64) if np_t is np.float32
                                                               else exact)
    assert err.max() <= 1.5, f"{x[np.argmax(err)]!r} ** {power}: {err.max():.2f} ulp"
    special = ~np.isfinite(x) | (x == 0)
    np.testing.assert_array_equal(got[special], c99[special])
    np.testing.assert_array_equal(np.signbit(got[special]), np.signbit(c99[special]))
    negative = x < 0  # NaN where C99 has it (1/2), the sign of an odd power
    np.testing.assert_array_equal(np.isnan(got[negative]), np.isnan(c99[negative]))
    signed = negative & ~np.isnan(c99)
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(c99[signed]))
    np.testing.assert_array_equal(run(None).view(np.uint8), got.view(np.uint8))


@pytest.mark.parametrize("dtype", [rs.float32, rs.float64])
def test_two_to_a_power_is_exp2(dtype):
    """``2 ** y`` and ``rs.pow(2, y)`` are exp2(y): its bits, and C99's pow(2, y) at zeros, infinities and
    NaN."""
    from ragsched.algebra import expr as E

    np_t = np.float32 if dtype == rs.float32 else np.float64
    N, v = rs.Size("N"), rs.Var("v")
    b = rs.Input("b", dtype, [N])
    for node in ((2 ** b[v])._node, rs.pow(2.0, b[v])._node):
        assert isinstance(node, E.Call) and node.name == "exp2"
    y = np.concatenate([np.random.default_rng(6).uniform(-160, 140, 5000),
                        [0, -0.0, np.inf, -np.inf, np.nan, 1, -1, 0.5]]).astype(np_t)

    def run(make):
        f = rs.Func("f", shape=[N])
        f[v] = make(b[v])
        f.vectorize(v, rs.natural_vector_size(dtype))
        return f.compile()(b=y)

    got = run(lambda e: 2 ** e)
    np.testing.assert_array_equal(got.view(np.uint8), run(rs.exp2).view(np.uint8))
    special = ~np.isfinite(y) | (y == 0)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got[special], np.power(np.full_like(y, 2), y)[special])
