"""bounds_of() must be sound (the value always lies inside) and tight where it is cheap; prove() must
never claim a false statement."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.algebra.bounds import Interval, bounds_of, constant_upper_bound, hull, intersect, prove
from ragsched.algebra.expr import Const, Var
from ragsched.algebra.simplify import simplify

from .strategies import Overflow, bool_exprs, evaluate, in_range, int_exprs, op_exprs, points

x, y, z, W, H = (Var(n) for n in "xyzWH")
xo, xi = Var("xo"), Var("xi")
X = Var("X", T.int64)


def c32(v):
    return Const(v, T.int32)


# Intervals for the ranging variables: ends are expressions of the free Sizes W and H, or unbounded
_INTERVALS = [
    (0, 31), (-5, 5), (3, 3), (0, E.sub(W, 1)), (1, W), (E.neg(W), W), (W, E.add(W, 3)), (E.sub(H, 1), H),
    (0, E.floordiv(W, 2)), (0, E.minimum(W, H)), (E.sub(0, H), E.mul(W, 4)), (None, 7), (0, None),
    (None, E.add(W, 1)), (None, None), (-100, 100),
]
_SIZE_FACTS = [(None, (-40, 60)), (Interval(1, None), (1, 200)), (Interval(0, 64), (0, 64))]


@st.composite
def env_facts_points(draw, names=("x", "y", "z", "X")):
    """Intervals for some variables, facts about W and H, and points inside both."""
    env = {}
    for n in names:
        if draw(st.integers(0, 3)):
            env[n] = Interval(*draw(st.sampled_from(_INTERVALS)))
    size = {n: draw(st.sampled_from(range(len(_SIZE_FACTS)))) for n in "WH"}
    facts = {n: _SIZE_FACTS[i][0] for n, i in size.items() if _SIZE_FACTS[i][0] is not None}
    pts = []
    rnd = draw(st.randoms(use_true_random=False))
    for k, base in enumerate(draw(st.lists(points(), min_size=2, max_size=6))):
        p = dict(base)
        for j, (n, i) in enumerate(size.items()):
            p[n] = in_range(rnd, *_SIZE_FACTS[i][1], k + j + 2)
        ok = True
        for j, (n, iv) in enumerate(env.items()):
            lo = None if iv.lo is None else evaluate(iv.lo, p)
            hi = None if iv.hi is None else evaluate(iv.hi, p)
            lo = (hi if hi is not None else 0) - 100 if lo is None else lo
            hi = lo + 100 if hi is None else hi
            if lo > hi:
                ok = False
                break
            p[n] = in_range(rnd, lo, hi, k + j)
        if ok:
            pts.append(p)
    return env, facts, pts


def inside(iv: Interval, v, p) -> bool:
    lo = None if iv.lo is None else evaluate(iv.lo, p, strict=False)
    hi = None if iv.hi is None else evaluate(iv.hi, p, strict=False)
    return (lo is None or lo <= v) and (hi is None or v <= hi)


def value(e, p):
    try:
        return evaluate(e, p)
    except Overflow:
        return None


# ------------------------------------------------------------------------------------------ properties
@settings(max_examples=120, deadline=None)
@given(data=st.data(), t=st.sampled_from([T.int32, T.int64, T.int8, T.uint8]))
def test_bounds_contain_the_value(data, t):
    env, facts, pts = data.draw(env_facts_points())
    root = data.draw(int_exprs(t, depth=4))
    for e in E.walk(root):  # every sub-expression: small ones reach the ends of their bounds more often
        iv = bounds_of(e, env, facts)
        for end in (iv.lo, iv.hi):
            assert end is None or end.dtype == e.dtype
            assert end is None or not (E.free_vars(end) & env.keys())
        for p in pts:
            v = value(e, p)
            if v is not None and not e.dtype.is_float:
                assert inside(iv, int(v), p), f"{e} in {iv} at {p}, value {v}; env {env}"


@settings(max_examples=200, deadline=None)
@given(data=st.data(), t=st.sampled_from([T.int32, T.int64, T.int8, T.uint8]))
def test_bounds_of_single_operations(data, t):
    """One operation on simple operands: every rule meets the ends of its operands' ranges."""
    env, facts, pts = data.draw(env_facts_points())
    e = data.draw(op_exprs(t))
    iv = bounds_of(e, env, facts)
    for p in pts:
        v = value(e, p)
        if v is not None:
            assert inside(iv, int(v), p), f"{e} in {iv} at {p}, value {v}; env {env}, facts {facts}"


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_bounds_of_conditions(data):
    env, facts, pts = data.draw(env_facts_points())
    e = data.draw(bool_exprs(T.int32, depth=2))
    iv = bounds_of(e, env, facts)
    for p in pts:
        v = value(e, p)
        if v is not None:
            assert inside(iv, v, p), f"{e} in {iv} at {p}"


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_prove_never_claims_a_false_statement(data):
    env, facts, pts = data.draw(env_facts_points())
    e = data.draw(int_exprs(T.int32, depth=3))
    kind = data.draw(st.integers(0, 2))
    if kind == 0:
        cond = data.draw(bool_exprs(T.int32, depth=2))
    else:  # comparisons against an end of e's bounds, shifted: often provable, sometimes false
        iv = bounds_of(e, env, facts)
        end = iv.hi if kind == 1 else iv.lo
        if end is None:
            return
        shift = c32(data.draw(st.integers(-2, 2)))
        cond = E.le(e, E.add(end, shift)) if kind == 1 else E.ge(e, E.add(end, shift))
    if not prove(cond, env, facts):
        return
    for p in pts:
        v = value(cond, p)
        assert v is None or v, f"proved {cond} under {env}, {facts}, false at {p}"


@settings(max_examples=150, deadline=None)
@given(data=st.data(), t=st.sampled_from([T.int32, T.int64, T.int8, T.uint8]))
def test_a_constant_upper_bound_is_never_exceeded(data, t):
    """Over random expressions (half of them a tile's clipped extent, a min beside the terms it shares)
    and points where the facts hold, the value never exceeds the bound claimed."""
    _, facts, pts = data.draw(env_facts_points())
    e = data.draw(int_exprs(t, depth=3))
    if data.draw(st.booleans()) and t in (T.int32, T.int64):
        k = E.const(data.draw(st.integers(0, 40)), t)
        e = E.add(E.sub(E.minimum(e, E.add(data.draw(int_exprs(t, depth=2)), k)), e), E.const(1, t))
    bound = constant_upper_bound(e, facts)
    if bound is None:
        return
    for p in pts:
        v = value(e, p)
        assert v is None or int(v) <= bound, f"{e} <= {bound} claimed, {v} at {p}; facts {facts}"


def test_a_clipped_tiles_extent_is_bounded_by_the_tile():
    """``min(n, 16 t + m + 15) - 16 t - m + 1`` (a tile of 16 clipped at n) is at most 16, which interval
    arithmetic alone does not see; the storage of two such tiles (a product of non-negative extents) at
    most 16 x 5; an extent that nothing clips has no bound."""
    n, t, m = Var("n", T.int64), Var("t", T.int64), Var("m", T.int64)

    def c(v):
        return E.const(v, T.int64)

    start = E.add(E.mul(c(16), t), m)
    tile = E.maximum(E.add(E.sub(E.minimum(n, E.add(start, c(15))), start), c(1)), c(0))
    assert not isinstance(bounds_of(tile, {}).hi, Const)
    assert constant_upper_bound(tile) == 16
    rows = E.maximum(E.sub(E.minimum(E.add(m, c(4)), n), m), c(0))
    assert constant_upper_bound(E.mul(tile, E.add(rows, c(1)))) == 80
    assert constant_upper_bound(E.sub(n, m)) is None
    assert constant_upper_bound(E.sub(E.minimum(n, E.add(m, c(3))), E.minimum(n, m))) is None  # not monotone


# --------------------------------------------------------------------------------- targeted results
def test_a_shifted_tiles_region_keeps_its_ends_together():
    """``a + min(4 y, b - a - 3)`` (a tile of 4 shifted inwards at the end of [a, b]) is at least min(a, b -
    3): bounded term by term it was lo(a) + lo(b) - hi(a) - 3, the first tile's b with the last one's a.
    A fixed a is exact either way. The start of a split loop's rest, ``4 ((b - a) // 4) + a``, alike."""
    a, b, yy = Var("a", T.int64), Var("b", T.int64), Var("yy", T.int64)
    region = E.add(a, E.minimum(E.mul(E.const(4, T.int64), yy), E.sub(E.sub(b, a), E.const(3, T.int64))))
    env = {"a": Interval(0, 1000), "b": Interval(50, 1100), "yy": Interval(0, 20)}
    iv = bounds_of(region, env)
    assert iv.lo == E.const(0, T.int64)
    assert iv.hi == E.const(1080, T.int64)
    less = E.sub(a, E.maximum(E.mul(E.const(4, T.int64), yy), E.sub(E.add(b, a), E.const(3, T.int64))))
    assert bounds_of(less, env).hi == E.const(-47, T.int64)  # min(a - 4 y, 3 - b): term by term 953
    fixed = bounds_of(region, {"yy": Interval(0, 20)})
    assert str(fixed.lo) == "a + min(b - a - 3, 0)"
    four = E.const(4, T.int64)
    rest = E.add(E.mul(four, E.floordiv(E.sub(b, a), four)), a)  # where a split loop's rest starts
    assert bounds_of(rest, env).lo == E.const(47, T.int64)  # b - (b - a) % 4: term by term -1000
    assert bounds_of(rest, env).hi == E.const(1100, T.int64)


def test_affine_bounds_are_tight_and_compact():
    assert bounds_of(E.add(x, 1), {"x": Interval(0, E.sub(W, 1))}) == Interval(c32(1), W)
    tile = E.add(E.mul(32, xo), xi)
    env = {"xo": Interval(0, E.floordiv(E.sub(W, 1), 32)), "xi": Interval(0, 31)}
    iv = bounds_of(tile, env)
    assert iv.lo == c32(0)
    assert str(iv.hi) == "32 * ((W + 31) // 32) - 1"
    assert bounds_of(E.sub(x, x), {"x": Interval(None, 3)}) == Interval.point(c32(0))
    assert bounds_of(E.sub(y, x), {"x": Interval(0, 10)}) == Interval(E.sub(y, 10), y)
    assert bounds_of(E.mul(x, -3), {"x": Interval(-1, 2)}) == Interval(c32(-6), c32(3))


def test_unbounded_ends_propagate():
    iv = bounds_of(E.add(x, y), {"x": Interval(None, 3), "y": Interval(0, 5)})
    assert iv == Interval(None, c32(8))
    assert not iv.is_bounded
    assert bounds_of(E.minimum(x, 7), {"x": Interval(0, None)}) == Interval(c32(0), c32(7))
    assert bounds_of(E.maximum(x, 7), {"x": Interval(0, None)}) == Interval(c32(7), None)
    assert bounds_of(E.neg(x), {"x": Interval(2, None)}) == Interval(None, c32(-2))
    assert bounds_of(E.mul(x, y), {"x": Interval(None, 3), "y": Interval(-1, 5)}) == Interval.everything()


def test_products():
    env = {"x": Interval(0, W), "y": Interval(0, H)}
    assert bounds_of(E.mul(x, y), env) == Interval(c32(0), E.mul(H, W))
    iv = bounds_of(E.mul(x, y), {"x": Interval(-2, 3), "y": Interval(-5, 7)})
    assert iv == Interval(c32(-15), c32(21))
    # a fixed symbol of unknown sign: both corners
    iv = bounds_of(E.mul(x, W), {"x": Interval(0, 10)})
    assert iv.is_bounded and prove(E.le(iv.lo, E.mul(x, W)), {"x": Interval(0, 10)})
    # a fixed symbol known to be >= 0
    assert bounds_of(E.mul(x, W), {"x": Interval(0, 10)}, {"W": Interval(0, None)}) == \
        Interval(c32(0), E.mul(10, W))


def test_division_and_modulo():
    assert bounds_of(E.floordiv(x, 8), {"x": Interval(-5, 100)}) == Interval(c32(-1), c32(12))
    assert bounds_of(E.floordiv(x, -8), {"x": Interval(-5, 100)}) == Interval(c32(-13), c32(0))
    assert bounds_of(E.mod(x, 8), {"x": Interval(-5, 100)}) == Interval(c32(0), c32(7))
    assert bounds_of(E.mod(x, 8), {"x": Interval(17, 20)}) == Interval(c32(1), c32(4))
    assert bounds_of(E.mod(x, 32), {"x": Interval(0, 5)}) == Interval(c32(0), c32(5))
    assert bounds_of(E.mod(x, -8), {"x": Interval(-5, 100)}) == Interval(c32(-7), c32(0))
    assert bounds_of(E.mod(x, W), {"x": Interval(None, None)}, {"W": Interval(1, None)}) == \
        Interval(c32(0), E.sub(W, 1))
    # the divisor may be 0 (x % 0 == 0) or negative
    iv = bounds_of(E.mod(x, y), {"y": Interval(-3, 5)})
    assert iv == Interval(c32(-2), c32(4))
    iv = bounds_of(E.mod(x, y), {"y": Interval(0, 5)})
    assert iv == Interval(c32(0), c32(4))
    iv = bounds_of(E.floordiv(x, y), {"x": Interval(0, 100), "y": Interval(1, 10)})
    assert iv == Interval(c32(0), c32(100))
    iv = bounds_of(E.floordiv(x, y), {"x": Interval(-50, 100), "y": Interval(-10, 10)})
    assert iv == Interval(c32(-100), c32(100))
    # a divisor that is a Size (0 or more): x // 0 == 0, else as a positive divisor; never below 0 here
    iv = bounds_of(E.floordiv(x, y), {"x": Interval(0, 100), "y": Interval(0, 10)})
    assert iv == Interval(c32(0), c32(100))
    iv = bounds_of(E.floordiv(x, y), {"x": Interval(-50, 100), "y": Interval(0, 10)})
    assert iv == Interval(c32(-50), c32(100))


def test_min_max_select_clamp():
    env = {"x": Interval(E.neg(W), E.mul(W, 2))}
    clamp = E.minimum(E.maximum(x, 0), E.sub(W, 1))
    assert bounds_of(clamp, env, {"W": Interval(1, None)}) == Interval(c32(0), E.sub(W, 1))
    sel = E.select(E.lt(x, 3), E.add(x, 1), c32(0))
    assert bounds_of(sel, {"x": Interval(0, 10)}) == Interval(c32(0), c32(11))


def test_casts_and_opaque_values():
    assert bounds_of(E.cast(T.int64, x), {"x": Interval(0, W)}) == \
        Interval(Const(0, T.int64), E.cast(T.int64, W))
    assert bounds_of(E.cast(T.int8, x), {"x": Interval(0, 10)}) == Interval(Const(0, T.int8), Const(10, T.int8))
    assert bounds_of(E.cast(T.int8, x), {"x": Interval(0, 1000)}) == \
        Interval(Const(-128, T.int8), Const(127, T.int8))
    f = Var("f", T.float32)
    assert bounds_of(E.cast(T.uint8, E.add(f, x)), {"x": Interval(0, 1)}) == \
        Interval(Const(0, T.uint8), Const(255, T.uint8))
    assert bounds_of(E.add(f, E.cast(T.float32, x)), {"x": Interval(0, 1)}) == Interval.everything()
    ref = E.FuncRef("g", (x,), T.int16)
    assert bounds_of(ref, {"x": Interval(0, 1)}) == Interval(Const(-32768, T.int16), Const(32767, T.int16))
    assert bounds_of(E.lt(x, 5), {"x": Interval(0, 10)}) == Interval(Const(False, T.bool_), Const(True, T.bool_))
    assert bounds_of(E.lt(x, 5), {"x": Interval(0, 4)}) == Interval.point(Const(True, T.bool_))
    # without the ranging variables, an expression is its own (exact) interval
    assert bounds_of(E.add(W, 1), {"x": Interval(0, 4)}) == Interval.point(E.add(W, 1))


def test_narrow_types_may_wrap():
    a8 = Var("a", T.int8)
    assert bounds_of(E.add(a8, Const(1, T.int8)), {"a": Interval(Const(0, T.int8), Const(10, T.int8))}) == \
        Interval(Const(1, T.int8), Const(11, T.int8))
    assert bounds_of(E.add(a8, Const(100, T.int8)), {"a": Interval(Const(0, T.int8), Const(100, T.int8))}) == \
        Interval(Const(-128, T.int8), Const(127, T.int8))


def test_facts_are_used_for_proofs_only():
    facts = {"W": Interval(1, None)}
    iv = bounds_of(E.maximum(x, 0), {"x": Interval(E.sub(W, 1), W)}, facts)
    assert iv == Interval(E.sub(W, 1), W)  # W - 1 >= 0 from the fact, but W is not replaced
    assert prove(E.ge(W, 1), {}, facts)
    assert not prove(E.ge(W, 2), {}, facts)


def test_prove():
    env = {"x": Interval(0, E.sub(W, 1))}
    assert prove(E.lt(x, W), env)
    assert not prove(E.lt(x, E.sub(W, 1)), env)
    tile = E.add(E.mul(32, xo), xi)
    env = {"xo": Interval(0, E.floordiv(E.sub(W, 1), 32)), "xi": Interval(0, 31)}
    assert prove(E.ge(E.mul(E.floordiv(x, 32), 32), E.sub(x, 31)), {})
    assert not prove(E.ge(E.mul(E.floordiv(x, 32), 32), E.sub(x, 30)), {})
    assert prove(E.le(E.mul(E.floordiv(x, 32), 32), x), {})
    assert not prove(E.le(E.mul(E.floordiv(x, 32), 32), E.sub(x, 1)), {})
    assert prove(E.le(tile, E.add(W, 30)), env)
    assert not prove(E.le(tile, E.add(W, 29)), env)
    assert prove(E.bit_and(E.ge(x, -1), E.le(x, W)), {"x": Interval(0, W)})
    assert prove(E.bit_or(E.ge(x, 5), E.le(x, 10)), {"x": Interval(0, 10)})
    assert not prove(E.eq(x, 3), {"x": Interval(0, 10)})
    assert prove(E.ne(x, 11), {"x": Interval(0, 10)})
    assert prove(E.invert(E.bit_and(E.ge(x, 11), E.ge(y, 0))), {"x": Interval(0, 10)})


def test_hull_and_intersect():
    a, b = Interval(c32(0), E.sub(W, 1)), Interval(c32(1), W)
    assert hull(a, b) == Interval(c32(0), W)
    assert intersect(a, b) == Interval(c32(1), E.sub(W, 1))
    assert hull(a, Interval(None, c32(3))) == Interval(None, E.maximum(E.sub(W, 1), 3))
    assert intersect(a, Interval(None, c32(3))) == Interval(c32(0), E.minimum(E.sub(W, 1), 3))
    assert Interval.point(x).is_point and Interval.everything() == Interval(None, None)
    assert Interval(0, 5) == Interval(c32(0), c32(5))


_ENDS_SMALL = (-5, -3, -1, 0, 1, 2, 5)
_SMALL = [(lo, hi) for lo in _ENDS_SMALL for hi in _ENDS_SMALL if lo <= hi]
_OPS = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.Mod, E.Min, E.Max)


@pytest.mark.parametrize("op", _OPS, ids=lambda c: c.__name__)
def test_bounds_of_operations_exhaustively(op):
    """Every pair of small constant ranges: the bounds hold every value (and are exact for + - * min
    max, whose ends are attained)."""
    for (x0, x1), (y0, y1) in itertools.product(_SMALL, _SMALL):
        env = {"x": Interval(x0, x1), "y": Interval(y0, y1)}
        e = op(x, y)
        values = {evaluate(e, {"x": a, "y": b}) for a in range(x0, x1 + 1) for b in range(y0, y1 + 1)}
        iv = bounds_of(e, env)
        assert iv.lo.value <= min(values) and max(values) <= iv.hi.value, (e, env, iv)
        if op in (E.Add, E.Sub, E.Mul, E.Min, E.Max):
            assert (iv.lo.value, iv.hi.value) == (min(values), max(values)), (e, env, iv)


@pytest.mark.parametrize("op", _OPS, ids=lambda c: c.__name__)
def test_symbolic_bounds_of_operations_exhaustively(op):
    """Ranges whose ends are expressions of W, checked for every small W."""
    shapes = [(0, E.sub(W, 1)), (1, W), (E.neg(W), W), (E.sub(W, 3), 2), (3, 3)]
    facts = {"W": Interval(1, None)}
    for (xs, ys) in itertools.product(shapes, shapes):
        env = {"x": Interval(*xs), "y": Interval(*ys)}
        e = op(x, y)
        iv = bounds_of(e, env, facts)
        for w in range(1, 7):
            p = {"W": w}
            rx = range(evaluate(env["x"].lo, p), evaluate(env["x"].hi, p) + 1)
            ry = range(evaluate(env["y"].lo, p), evaluate(env["y"].hi, p) + 1)
            for a, b in itertools.product(rx, ry):
                q = {"W": w, "x": a, "y": b}
                assert inside(iv, evaluate(e, q), q), (e, env, iv, q)


def test_long_sums():
    total = x
    for i in range(1500):
        total = E.add(total, E.mul(Var(f"v{i % 7}"), i % 5))
    iv = bounds_of(total, {"x": Interval(0, 10), **{f"v{i}": Interval(0, W) for i in range(7)}})
    assert iv.lo == c32(0) and iv.hi == simplify(E.add(E.mul(W, 3000), 10))


def test_a_read_at_an_index_divided_by_a_size_is_not_refused():
    """``a[d // M]`` with M a Size reads a[0 .. C-1]: compiled code used to bound it as if M could be
    negative, and refused the call the reference runs."""
    import numpy as np

    import ragsched as rs
    from ragsched.reference import run

    C, M = rs.Size("C"), rs.Size("M")
    d = rs.Var("d")
    a, m = rs.Input("a", rs.float32, [C]), rs.Input("m", rs.float32, [M])
    f = rs.Func("f", shape=[C])
    f[d] = a[d // M] + m[0]
    kernel = f.compile()
    for n in (1, 2, 3):
        args = dict(a=np.arange(5, dtype=np.float32), m=np.ones(n, np.float32))
        np.testing.assert_array_equal(kernel(**args), run(f, **args))


def test_shifts_by_a_bounded_amount_are_bounded():
    """``1 << r`` over an RDom spans the powers of two of r's range (it used to be any int32, and the
    compiled kernel refused a read the reference runs)."""
    import numpy as np

    import ragsched as rs
    from ragsched.reference import run

    assert bounds_of(E.shift(E.Shl, c32(1), y), {"y": Interval(0, 3)}) == Interval(c32(1), c32(8))
    assert bounds_of(E.shift(E.Shr, x, y), {"x": Interval(0, 100), "y": Interval(1, 2)}) == \
        Interval(c32(0), c32(50))
    i = rs.Var("i")
    a = rs.Input("a", rs.float32, [8])
    r = rs.RDom(0, 3)
    f = rs.Func("f")
    f[i] = a[i]
    g = rs.Func("g", shape=[4])
    g[i] = rs.maximum(f[i + (1 << r)])
    x_ = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(g.compile()(a=x_), run(g, a=x_))
