"""Every operator and type in vector form: the vectorized kernel must give, bit for bit, what the
scalar code gives for the same loop (and NumPy where their semantics agree)."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
import ragsched.reference
from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir

from .helpers import Compiled, c64, has_vectors, load

rng = np.random.default_rng(3)
N = 45  # not a multiple of the widths: the last vector is predicated
VEC, SER = ir.ForKind.VECTORIZED, ir.ForKind.SERIAL


def _data(t: T.DType, n: int) -> tuple[np.ndarray, np.ndarray]:
    if t.is_bool:
        return rng.random(n) < 0.5, rng.random(n) < 0.5
    if t.is_int:
        lo, hi = t.min, t.max
        edge = [0, 1, lo, hi, 3, 7] + ([-1, -3] if t.is_signed else [2, hi - 1])
        a = rng.integers(lo, hi, n, dtype=t.np, endpoint=True)
        b = rng.integers(lo, hi, n, dtype=t.np, endpoint=True)
        b[: n // 3] = rng.integers(-9 if t.is_signed else 0, 9, n // 3)  # small divisors and shift amounts
        m = len(edge)
        a[-m:] = edge
        b[-m:] = edge[::-1]
        a[:m], b[:m] = edge, [0] * m  # division and modulo by zero
        return a, b
    big = 6e4 if t.name == "float16" else 1e30
    edge = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -np.inf, big, -big, 0.5, 2.5, -2.5, 1e-3, 0.1]
    a = (rng.standard_normal(n) * 10).astype(t.np)
    b = (rng.standard_normal(n) * 3).astype(t.np)
    m = len(edge)
    a[:m] = edge
    b[:m] = [0.0, 0.0, 0.1, -0.1, 2.0, 3.0, 3.0, -0.0, 7.0, 0.0, -1.0, 1.0, 0.0, 0.1]
    a[-m:] = edge[::-1]
    b[-m:] = edge
    return a, b


def _ops(t: T.DType) -> dict:
    """name -> function of (a, b) expressions."""
    ops: dict = {}
    if not t.is_bool:
        ops.update(add=E.add, sub=E.sub, mul=E.mul, floordiv=E.floordiv, mod=E.mod, min=E.minimum,
                   max=E.maximum, neg=lambda a, b: E.neg(a),
                   floordiv_c=lambda a, b: E.floordiv(a, E.const(3, t)),
                   mod_c=lambda a, b: E.mod(a, E.const(-3 if t.kind != "u" else 5, t)))
    if t.is_float:
        ops.update(div=E.truediv, pow=lambda a, b: E.call("pow", a, b), abs=lambda a, b: E.call("abs", a))
        for name, c in _FLOAT_CONSTANTS.items():  # min and max with a constant have code of their own
            ops[f"max_{name}"] = lambda a, b, c=c: E.maximum(a, E.const(c, t))
            ops[f"min_{name}"] = lambda a, b, c=c: E.minimum(E.const(c, t), a)
        for u, lo, hi in _CLAMPED_CASTS:  # a float clamped inside an int's range converts without saturating
            ops[f"clamped_{u.name}"] = lambda a, b, u=u, lo=lo, hi=hi: E.cast(
                u, E.minimum(E.maximum(a, E.const(lo, t)), E.const(hi, t)))
        for f in ("exp", "log", "exp2", "log2", "sqrt", "rsqrt", "floor", "ceil", "round", "erf", "tanh", "sin", "cos"):
            ops[f] = lambda a, b, f=f: E.call(f, a)
    if t.is_int:
        ops.update(bitand=E.bit_and, bitor=E.bit_or, bitxor=E.bit_xor, invert=lambda a, b: E.invert(a),
                   shl=lambda a, b: E.shift(E.Shl, a, b), shr=lambda a, b: E.shift(E.Shr, a, b))
        if t.is_signed:
            ops["abs"] = lambda a, b: E.call("abs", a)
    if t.is_bool:
        ops.update(and_=E.bit_and, or_=E.bit_or, xor=E.bit_xor, not_=lambda a, b: E.invert(a),
                   min=E.minimum, max=E.maximum)
    ops.update(lt=E.lt, le=E.le, eq=E.eq, ne=E.ne, select=lambda a, b: E.select(E.lt(a, b), a, b),
               select_scalar_cond=lambda a, b: E.select(E.Var("flag", T.bool_), a, b))
    for u in T.ALL_TYPES:
        ops[f"cast_{u.name}"] = lambda a, b, u=u: E.cast(u, a)
    return ops


_FLOAT_CONSTANTS = {"zero": 0.0, "negzero": -0.0, "c": 2.5, "negc": -1.0, "inf": np.inf}
_CLAMPED_CASTS = [(T.uint8, 0.0, 255.0), (T.int8, -128.0, 127.0), (T.int16, -0.75, 300.5), (T.uint16, -0.5, 9.0)]


def _same(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise identity: equal bits, or both NaN."""
    if x.dtype.kind == "f":
        u = np.dtype(f"u{x.dtype.itemsize}")
        return (x.view(u) == y.view(u)) | (np.isnan(x) & np.isnan(y))
    return x == y


def _run_ops(t: T.DType, width: int, n: int = N):
    ops = _ops(t)
    exprs = {k: f(E.Var("_a", t), E.Var("_b", t)) for k, f in ops.items()}

    def body(kind):
        def store_all(x):
            env = {"_a": load("a", x, t), "_b": load("b", x, t)}
            return ir.block(*(ir.Store(f"o_{k}", x, E.substitute(e, env)) for k, e in exprs.items()))
        return _split(n, width, kind, store_all)

    buffers = {"a": t, "b": t, **{f"o_{k}": e.dtype for k, e in exprs.items()}}
    a, b = _data(t, n)
    results = []
    for kind in (VEC, SER):
        k = Compiled(body(kind), buffers, {"flag": T.bool_})
        if kind is VEC:
            assert has_vectors(k.body), "the loop was not vectorized"
        outs = {f"o_{name}": np.zeros(n, e.dtype.np) for name, e in exprs.items()}
        assert k(a=a, b=b, flag=1, **outs) == 0
        results.append(outs)
    for name in exprs:
        v, s = results[0][f"o_{name}"], results[1][f"o_{name}"]
        bad = ~_same(v, s)
        assert not bad.any(), f"{t} {name}: vector {v[bad][:5]} != scalar {s[bad][:5]} at a={a[bad][:5]} b={b[bad][:5]}"
    return a, b, results[0]


def _split(n, width, kind, body_of):
    o, i = "x.o", "x.i"
    idx = E.Add(E.Mul(E.Var(o, T.ADDRESS), c64(width)), E.Var(i, T.ADDRESS))
    body = ir.IfThenElse(E.LT(idx, c64(n)), body_of(idx))
    return ir.For(o, c64(0), c64(-(-n // width)), SER, ir.For(i, c64(0), c64(width), kind, body))


@pytest.mark.parametrize("t", T.ALL_TYPES, ids=str)
def test_every_operator_vector_equals_scalar(t):
    a, b, out = _run_ops(t, 8)
    # anchor a few against NumPy
    with np.errstate(all="ignore"):
        if t.is_int:
            np.testing.assert_array_equal(out["o_add"], a + b)
            nz = b != 0
            ok = nz & ~((a == t.min) & (b == -1)) if t.is_signed else nz
            np.testing.assert_array_equal(out["o_floordiv"][ok], a[ok] // b[ok])
            np.testing.assert_array_equal(out["o_mod"][ok], a[ok] % b[ok])
            assert (out["o_floordiv"][~nz] == 0).all() and (out["o_mod"][~nz] == 0).all()
        if t.is_float:
            np.testing.assert_array_equal(out["o_add"], a + b)
            np.testing.assert_array_equal(out["o_floordiv"], np.floor_divide(a, b))
            np.testing.assert_array_equal(out["o_mod"], np.mod(a, b))
            np.testing.assert_array_equal(out["o_lt"], a < b)
            # NumPy's maximum and minimum: NaN from either operand; equal values otherwise (the sign of a
            # zero from +0 and -0 is not NumPy's order: docs/language.md)
            np.testing.assert_array_equal(out["o_max"], np.maximum(a, b))
            np.testing.assert_array_equal(out["o_min"], np.minimum(a, b))
            assert np.isnan(out["o_max"][np.isnan(a) | np.isnan(b)]).all()
            big = np.isinf(a) | (np.abs(a) > 2**31)
            c = out["o_cast_int32"]
            assert (c[np.isnan(a)] == 0).all()
            np.testing.assert_array_equal(c[big & (a > 0)], 2**31 - 1)  # saturating
            np.testing.assert_array_equal(c[big & (a < 0)], -(2**31))
            ok = ~big & ~np.isnan(a)
            np.testing.assert_array_equal(c[ok], a[ok].astype(np.int32))
            assert (out["o_cast_uint8"][a < 0] == 0).all()
            for name, c in _FLOAT_CONSTANTS.items():
                for op, f in (("max", np.maximum), ("min", np.minimum)):
                    got, want = out[f"o_{op}_{name}"], f(a, t.np.type(c))
                    np.testing.assert_array_equal(got, want, err_msg=f"{op}(a, {c})")
                    zeros = (a == 0) & (c == 0)  # a tie of zeros is -0 unless both are +0, as for two operands
                    neg = np.signbit(a[zeros]) | bool(np.signbit(c))
                    np.testing.assert_array_equal(np.signbit(got[zeros]), neg, err_msg=f"{op}(a, {c})")
            for u, lo, hi in _CLAMPED_CASTS:
                clamped = np.clip(a, t.np.type(lo), t.np.type(hi))
                want = np.where(np.isnan(clamped), 0, np.trunc(np.nan_to_num(clamped))).astype(u.np)
                np.testing.assert_array_equal(out[f"o_clamped_{u.name}"], want, err_msg=f"{u}(clamp(a, {lo}, {hi}))")
        if t.is_bool:
            np.testing.assert_array_equal(out["o_xor"], a ^ b)
        np.testing.assert_array_equal(out["o_select"], np.where(a < b, a, b))


@pytest.mark.parametrize("width", [3, 16])
@pytest.mark.parametrize("t", [T.int16, T.float32, T.uint64], ids=str)
def test_odd_and_wide_vectors(t, width):
    _run_ops(t, width, n=47)


@pytest.mark.parametrize("src", [rs.float32, rs.float64], ids=str)
@pytest.mark.parametrize("dst", [t for t in T.ALL_TYPES if t.is_int], ids=str)
def test_vector_float_to_int_casts_saturate_at_the_exact_ends(src, dst):
    """Values at and around each end of the int range, where a clamp-then-convert could be off by one."""
    lo, hi = dst.min, dst.max
    ft = np.float32 if src == rs.float32 else np.float64
    ends = [float(lo), float(hi), float(hi) + 1.0, 2.0 * (float(hi) + 1.0)]
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.99, -1.99]
    for e in ends:
        vals += [float(np.nextafter(ft(e), ft(-np.inf))), e, float(np.nextafter(ft(e), ft(np.inf)))]
    a = np.array(vals + vals[:16 - len(vals) % 16], dtype=ft)
    x = rs.Var("x")
    inp = rs.Input("a", src, 1)
    f = rs.Func("f", shape=[inp.shape[0]])
    f[x] = rs.cast(dst, inp[x])
    f.vectorize(x, 8)
    got = f.compile()(a=a)
    np.testing.assert_array_equal(got, rs.reference.run(f, a=a), err_msg=f"{a}")


def test_float32_exp_is_within_one_ulp_and_right_at_the_ends():
    """exp(float32) is computed in vector instructions (not libm lane by lane): within 1 ulp of the exact
    value over the whole range, subnormal results included, and inf, 0 and NaN where expf gives them."""
    ends = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, 88.7228, 88.73, -87.33, -103.9, -104.5, 1e-30],
                    np.float32)
    a = np.concatenate([np.linspace(-110, 95, 40001, dtype=np.float32), ends])
    x = E.Var("x", T.ADDRESS)
    body = ir.For("x", c64(0), c64(len(a)), SER, ir.Store("o", x, E.call("exp", load("a", x, T.float32))))
    out = np.zeros_like(a)
    assert Compiled(body, {"a": T.float32, "o": T.float32}, {})(a=a, o=out) == 0
    exact = np.exp(a.astype(np.float64))
    finite = np.isfinite(exact) & (exact < np.finfo(np.float32).max)
    ulp = np.abs(out[finite] - exact[finite]) / np.spacing(exact[finite].astype(np.float32)).astype(np.float64)
    assert ulp.max() <= 1.0, a[finite][np.argmax(ulp)]
    with np.errstate(over="ignore"):
        want_ends = np.exp(ends)
    np.testing.assert_array_equal(np.isnan(out[-len(ends):]), np.isnan(want_ends))
    assert out[len(a) - len(ends) + 1] == np.inf and out[len(a) - len(ends) + 2] == 0.0
    assert out[len(a) - len(ends) + 7] == np.inf and out[len(a) - len(ends) + 10] == 0.0


@pytest.mark.parametrize("t", [T.int8, T.int16, T.int32, T.int64, T.uint8, T.uint32])
@pytest.mark.parametrize("lanes", [1, 8])
def test_floor_division_and_modulus_by_positive_constants_are_numpys(t, lanes):
    """A positive constant divisor takes shorter code (a shift and a mask for powers of two, no checks
    for 0 and -1): NumPy's // and % for every value class, scalar and vector."""
    lo, hi = t.min, t.max
    a = np.concatenate([rng.integers(lo, hi, 200, dtype=t.np, endpoint=True),
                        np.array([lo, lo + 1, hi, hi - 1, 0, 1, 2, 3, 7, 8, 9], dtype=t.np),
                        np.array([-1, -2, -7, -8, -9, -16, -17] if t.is_signed else [], dtype=t.np)])
    for c in (1, 2, 3, 4, 7, 8, 9, 16, 100):
        if c > hi:
            continue
        for op, want in ((E.FloorDiv, np.floor_divide), (E.Mod, np.mod)):
            def store(x, op=op, c=c):
                value = op(load("a", x, t), E.const(c, t))
                assert isinstance(value, op), value  # not folded away before the emitter sees it
                return ir.Store("out", x, value)
            k = Compiled(_split(len(a), lanes, VEC if lanes > 1 else SER, store), {"a": t, "out": t})
            if lanes > 1:
                assert has_vectors(k.body), "the loop was not vectorized"
            out = np.zeros_like(a)
            k(a=a, out=out)
            np.testing.assert_array_equal(out, want(a, t.np.type(c)), err_msg=f"{op.__name__} by {c}")


@pytest.mark.parametrize("width", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("dtype", [rs.float32, rs.float64], ids=str)
def test_float_max_and_min_propagate_nan_at_every_vector_width(dtype, width):
    """x86 targets compute these with maxps/minps (the pd forms), split into the widest registers that
    divide the vector: every width, with or without such a split, is NumPy's maximum and minimum."""
    x = rs.Var("x")
    n = rs.Size("N")
    a, b = rs.Input("a", dtype, [n]), rs.Input("b", dtype, [n])
    hi, lo = rs.Func("hi", shape=[n]), rs.Func("lo", shape=[n])
    hi[x] = rs.max(a[x], b[x])
    lo[x] = rs.min(rs.max(a[x] * 2, b[x]), a[x])  # a max feeding a min
    for f in (hi, lo):
        f.vectorize(x, width)
    kernel = rs.Pipeline([hi, lo]).compile(threads=1)
    edge = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5]
    pairs = np.array([(p, q) for p in edge for q in edge]).T.astype(dtype.np)
    got_hi, got_lo = kernel(a=pairs[0], b=pairs[1])
    want_hi = np.maximum(pairs[0], pairs[1])
    want_lo = np.minimum(np.maximum(pairs[0] * 2, pairs[1]), pairs[0])
    for got, want in ((got_hi, want_hi), (got_lo, want_lo)):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(got[ok], want[ok])  # equal values (a zero's sign aside)
