"""simplify() must be exact: random expressions keep their value at random points (with and without
facts), and the rewrites the compiler relies on actually happen."""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.algebra.bounds import Interval
from ragsched.algebra.expr import Const, Var
from ragsched.algebra.simplify import clear_memos, simplify

from .strategies import (
    INT_TYPES,
    Overflow,
    affine_div_mod,
    bool_exprs,
    evaluate,
    in_range,
    int_exprs,
    op_exprs,
    points,
    simple_operands,
)

x, y, z, W, H = (Var(n) for n in "xyzWH")
xo, xi, ymin = Var("xo"), Var("xi"), Var("ymin")
f = Var("f", T.float32)


def same_value(e, s, env) -> bool:
    """Whether ``s`` evaluates like ``e`` at ``env`` (vacuous where ``e`` overflows a no-wrap type)."""
    try:
        want = evaluate(e, env)
    except Overflow:
        return True
    got = evaluate(s, env, strict=False)
    return want == got


# ------------------------------------------------------------------------------------------ properties
@settings(max_examples=200, deadline=None)
@given(t=st.sampled_from(INT_TYPES), data=st.data())
def test_simplify_keeps_the_value(t, data):
    root = data.draw(int_exprs(t, depth=4))
    pts = data.draw(st.lists(points(), min_size=1, max_size=5))
    for e in E.walk(root):  # sub-expressions too: an error at the root can be masked (min, * 0, ...)
        s = simplify(e)
        assert s.dtype == e.dtype
        for env in pts:
            assert same_value(e, s, env), f"{e}  ->  {s}  at {env}"


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_simplify_keeps_the_value_of_conditions(data):
    e = data.draw(bool_exprs(T.int32, depth=3))
    s = simplify(e)
    assert s.dtype == e.dtype
    for env in data.draw(st.lists(points(), min_size=1, max_size=5)):
        assert same_value(e, s, env), f"{e}  ->  {s}  at {env}"


# facts about Sizes, with the values that satisfy them
_SIZE_FACTS = [
    (None, (-60, 60)),
    (Interval(0, None), (0, 200)),
    (Interval(1, None), (1, 200)),
    (Interval(1, 64), (1, 64)),
]
_VAR_FACTS = [
    None,
    Interval(0, 31),
    Interval(-4, 4),
    Interval(0, E.sub(W, 1)),
    Interval(1, W),
    Interval(W, E.add(W, 31)),
    Interval(0, E.minimum(W, H)),
    Interval(E.neg(H), 0),
    Interval(0, None),
    Interval(None, E.add(H, 1)),
    Interval(3, 3),
    Interval(3, E.add(W, 3)),
]


@st.composite
def facts_and_points(draw):
    """Facts about x, y, z, W, H and a few points where they all hold."""
    size = {n: draw(st.sampled_from(range(len(_SIZE_FACTS)))) for n in "WH"}
    var = {n: draw(st.sampled_from(_VAR_FACTS)) for n in "xyz"}
    facts = {n: _SIZE_FACTS[i][0] for n, i in size.items() if _SIZE_FACTS[i][0] is not None}
    facts.update({n: iv for n, iv in var.items() if iv is not None})
    pts = []
    rnd = draw(st.randoms(use_true_random=False))
    for k, base in enumerate(draw(st.lists(points(), min_size=2, max_size=5))):
        env = dict(base)
        for j, (n, i) in enumerate(size.items()):
            env[n] = in_range(rnd, *_SIZE_FACTS[i][1], k + j + 2)
        ok = True
        for j, (n, iv) in enumerate(var.items()):
            if iv is None:
                continue
            lo = -100 if iv.lo is None else evaluate(iv.lo, env, strict=False)
            hi = lo + 100 if iv.hi is None else evaluate(iv.hi, env, strict=False)
            if iv.lo is None:
                lo = hi - 100
            if lo > hi:
                ok = False
                break
            env[n] = in_range(rnd, lo, hi, k + j)
        if ok:
            pts.append(env)
    return facts, pts


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_simplify_with_facts_keeps_the_value_where_facts_hold(data):
    facts, pts = data.draw(facts_and_points())
    root = data.draw(st.one_of(int_exprs(T.int32, depth=4), bool_exprs(T.int32, depth=2)))
    for e in E.walk(root):
        s = simplify(e, facts)
        assert s.dtype == e.dtype
        for env in pts:
            assert same_value(e, s, env), f"{e}  ->  {s}  at {env} with {facts}"


@settings(max_examples=150, deadline=None)
@given(data=st.data(), t=st.sampled_from([T.int32, T.int32, T.int64, T.int8, T.uint8]))
def test_decisions_at_the_ends_of_ranges(data, t):
    """Compare, min, max, // and % against the smallest and largest values an expression takes at the
    sampled points: where a wrong proof (an unsound range) shows."""
    facts, pts = data.draw(facts_and_points())
    e = data.draw(st.one_of(simple_operands(t), op_exprs(t), int_exprs(t, depth=2)))
    vals = []
    for env in pts:
        try:
            vals.append(evaluate(e, env))
        except Overflow:
            pass
    if not vals:
        return
    lo, hi = (Const(v, t) for v in (min(vals), max(vals)))
    conds = [E.LT(e, hi), E.LE(e, lo), E.LT(lo, e), E.LE(hi, e), E.EQ(e, hi), E.NE(e, lo), E.Min(e, lo),
             E.Max(e, hi), E.Min(e, hi), E.Max(e, lo)]
    for c in (hi, lo):
        if 1 < c.value <= 64:
            conds += [E.FloorDiv(e, c), E.Mod(e, c)]
    for cond in conds:
        for facts_used in (facts, None):
            s = simplify(cond, facts_used)
            for env in pts:
                assert same_value(cond, s, env), f"{cond}  ->  {s}  at {env} with {facts_used}"


@settings(max_examples=150, deadline=None)
@given(data=st.data(), t=st.sampled_from([T.int32, T.int64, T.int16]))
def test_affine_division_and_modulo(data, t):
    """Pulling multiples out of ``//`` and ``%``, gcd reduction, nesting: exact with and without facts."""
    e = data.draw(affine_div_mod(t))
    facts, pts = data.draw(facts_and_points())
    for facts_used in (None, facts):
        s = simplify(e, facts_used)
        for env in pts:
            assert same_value(e, s, env), f"{e}  ->  {s}  at {env} with {facts_used}"


@settings(max_examples=150, deadline=None)
@given(e=int_exprs(T.int32, depth=4), data=st.data())
def test_simplify_is_idempotent(e, data):
    """The rules' result is a fixed point of the rules, with and without facts (the memo is emptied between
    the two, since it remembers each result as its own simplification)."""
    facts, _ = data.draw(facts_and_points())
    for facts_used in (None, facts):
        s = simplify(e, facts_used)
        clear_memos()
        again = simplify(s, facts_used)
        assert again == s, f"{e} -> {s} -> {again} with {facts_used}"


# ------------------------------------------------------------------------------- constant folding
_F_OPS = [(E.Add, np.add), (E.Sub, np.subtract), (E.Mul, np.multiply), (E.Div, np.true_divide),
          (E.Min, np.minimum), (E.Max, np.maximum)]


def _bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.tobytes() == b.tobytes() or (np.isnan(a) and np.isnan(b))


@settings(max_examples=200, deadline=None)
@given(a=st.floats(width=32), b=st.floats(width=32), op=st.sampled_from(_F_OPS),
       t=st.sampled_from([T.float32, T.float16, T.float64]))
def test_float_folding_matches_numpy(a, b, op, t):
    cls, uf = op
    s = simplify(cls(Const(a, t), Const(b, t)))
    with np.errstate(all="ignore"):
        want = uf(t.np.type(a), t.np.type(b))
    assert type(s) is Const and s.dtype == t
    assert _bits_equal(t.np.type(s.value), want)


_I_OPS = [(E.Add, np.add), (E.Sub, np.subtract), (E.Mul, np.multiply), (E.FloorDiv, np.floor_divide),
          (E.Mod, np.mod), (E.Min, np.minimum), (E.Max, np.maximum), (E.BitAnd, np.bitwise_and),
          (E.BitOr, np.bitwise_or), (E.BitXor, np.bitwise_xor)]


@settings(max_examples=200, deadline=None)
@given(t=st.sampled_from([T.int8, T.uint8, T.int16, T.uint32]), data=st.data(), op=st.sampled_from(_I_OPS))
def test_narrow_integer_folding_wraps_like_numpy(t, data, op):
    a = data.draw(st.integers(int(t.min), int(t.max)))
    b = data.draw(st.integers(int(t.min), int(t.max)))
    cls, uf = op
    s = simplify(cls(Const(a, t), Const(b, t)))
    with np.errstate(all="ignore"):
        want = uf(np.array([a], dtype=t.np), np.array([b], dtype=t.np))[0]
    assert type(s) is Const and s.dtype == t and s.value == int(want)


@settings(max_examples=200, deadline=None)
@given(t=st.sampled_from([T.int8, T.uint8, T.int16]), data=st.data())
def test_narrow_ring_identities_wrap(t, data):
    """Reassociation in a wrapping type is exact modulo 2**bits, whatever the values."""
    v = Var(data.draw(st.sampled_from(["a", "b", "s"])), t)
    c1, c2 = (Const(data.draw(st.integers(int(t.min), int(t.max))), t) for _ in range(2))
    e = E.Sub(E.Mul(E.Add(v, c1), c2), E.Mul(v, c2))  # == c1*c2 (mod 2**bits)
    s = simplify(e)
    assert type(s) is Const
    for value in data.draw(st.lists(st.integers(int(t.min), int(t.max)), min_size=1, max_size=5)):
        assert evaluate(e, {v.name: value}) == s.value


@settings(max_examples=200, deadline=None)
@given(v=st.one_of(st.floats(width=32), st.floats()), t=st.sampled_from([T.int8, T.uint8, T.int32, T.int64]),
       src=st.sampled_from([T.float32, T.float64]))
def test_float_to_int_casts_truncate_and_saturate(v, t, src):
    s = simplify(E.Cast(Const(v, src), t))
    with np.errstate(over="ignore"):
        fv = float(src.np.type(v))
    want = 0 if math.isnan(fv) else int(max(min(fv, t.max), t.min)) if math.isinf(fv) else \
        max(min(math.trunc(fv), int(t.max)), int(t.min))
    assert s == Const(want, t)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), src=st.sampled_from(INT_TYPES + (T.bool_,)),
       t=st.sampled_from(INT_TYPES + (T.float16, T.float32, T.float64, T.bool_)))
def test_integer_casts_fold_like_numpy(data, src, t):
    v = data.draw(st.integers(int(src.min), int(src.max)))
    s = simplify(E.Cast(Const(src.np.type(v).item(), src), t))
    with np.errstate(all="ignore"):
        want = np.array([v], dtype=src.np).astype(t.np)[0]
    assert type(s) is Const and s.dtype == t
    assert _bits_equal(t.np.type(s.value), want)


# --------------------------------------------------------------------------------- targeted rewrites
def iv(lo, hi):
    return Interval(lo, hi)


def test_affine_sums_are_canonical():
    assert simplify(E.sub(E.add(x, 1), E.mul(E.sub(x, 2), 3))) == E.sub(7, E.mul(2, x))
    assert str(simplify(E.sub(E.add(x, 1), E.mul(E.sub(x, 2), 3)))) == "7 - 2 * x"
    a = E.add(E.add(E.mul(32, xo), xi), E.sub(y, 3))
    b = E.sub(E.add(y, E.add(xi, E.mul(xo, 32))), 3)
    assert simplify(a) == simplify(b)
    assert str(simplify(a)) == "32 * xo + xi + y - 3"
    assert simplify(E.sub(E.add(x, y), y)) == x
    assert simplify(E.mul(E.add(x, 1), 0)) == Const(0, T.int32)
    assert simplify(E.sub(E.mul(x, y), E.mul(y, x))) == Const(0, T.int32)
    assert simplify(E.mul(E.mul(2, x), E.mul(y, 3))) == simplify(E.mul(6, E.mul(y, x)))


def test_floor_division_and_modulo():
    tile = E.add(E.mul(32, xo), xi)
    assert simplify(E.floordiv(tile, 32)) == E.add(xo, E.floordiv(xi, 32))
    assert simplify(E.floordiv(tile, 32), {"xi": iv(0, 31)}) == xo
    assert simplify(E.mod(tile, 32)) == E.mod(xi, 32)
    assert simplify(E.mod(tile, 32), {"xi": iv(0, 31)}) == xi
    assert simplify(E.floordiv(E.mul(x, 8), 8)) == x
    assert simplify(E.mod(E.mul(x, 8), 8)) == Const(0, T.int32)
    assert simplify(E.mod(E.add(E.mul(x, 8), y), 8)) == E.mod(y, 8)
    assert simplify(E.floordiv(E.floordiv(x, 4), 8)) == E.floordiv(x, 32)
    assert simplify(E.floordiv(E.add(E.floordiv(x, 2), 16), 2)) == E.add(E.floordiv(x, 4), 8)
    assert simplify(E.floordiv(E.add(E.mul(x, 4), 3), 8)) == E.floordiv(x, 2)
    assert simplify(E.floordiv(E.add(E.mul(x, 4), 7), 8)) == E.floordiv(E.add(x, 1), 2)
    assert simplify(E.floordiv(E.add(x, 33), 32)) == E.add(E.floordiv(E.add(x, 1), 32), 1)
    assert simplify(E.mod(E.mod(x, 32), 8)) == E.mod(x, 8)
    assert simplify(E.add(E.mul(E.floordiv(x, 16), 16), E.mod(x, 16))) == x
    assert simplify(E.floordiv(x, 0)) == Const(0, T.int32)
    assert simplify(E.mod(x, 0)) == Const(0, T.int32)
    assert simplify(E.floordiv(-7, 2)) == Const(-4, T.int64)
    assert simplify(E.mod(-7, 2)) == Const(1, T.int64)
    assert simplify(E.mod(7, -2)) == Const(-1, T.int64)
    assert simplify(E.floordiv(E.const(7, T.int32), E.const(0, T.int32))) == Const(0, T.int32)
    assert simplify(E.mod(x, W), {"x": iv(0, E.sub(W, 1))}) == x
    # narrow types: no pulling terms out of a sum that may wrap
    a8 = Var("a", T.int8)
    s = simplify(E.floordiv(E.add(E.mul(a8, 4), E.const(1, T.int8)), E.const(4, T.int8)))
    assert type(s) is E.FloorDiv and s.b == Const(4, T.int8)


def test_min_max():
    assert simplify(E.minimum(x, x)) == x
    assert simplify(E.minimum(E.add(x, 3), E.add(x, 5))) == E.add(x, 3)
    assert simplify(E.maximum(E.add(x, 3), E.add(x, 5))) == E.add(x, 5)
    assert simplify(E.maximum(H, 0), {"H": iv(0, None)}) == H
    assert simplify(E.maximum(H, 0)) == E.Max(H, Const(0, T.int32))
    assert simplify(E.minimum(E.minimum(x, 5), 3)) == E.Min(x, Const(3, T.int32))
    assert simplify(E.minimum(x, E.maximum(x, y))) == x
    assert simplify(E.minimum(E.sub(W, 1), x), {"x": iv(0, E.sub(W, 1))}) == x
    assert simplify(E.minimum(E.add(x, 1), E.add(y, 1))) == E.add(E.minimum(x, y), 1)
    assert simplify(E.minimum(y, x)) == simplify(E.minimum(x, y))


def test_a_min_is_bounded_by_its_operand_while_other_terms_stay():
    """``x + min(W - x, 8) <= W`` for x in [0, W - 1]: the min's bound ``W - x`` cancels ``x`` only if x
    is kept (replacing x by its own bound as well loses it). This kept a ragged read of a guarded tile,
    ``[i, i + min(lens[b] - i, 8) - 1]``, from being proven inside its entry."""
    facts = {"x": iv(0, E.sub(W, 1)), "W": iv(0, None)}
    top = E.add(x, E.minimum(E.sub(W, x), 8))
    assert simplify(E.le(top, W), facts) == Const(True, T.bool_)
    assert simplify(E.lt(top, W), facts) != Const(True, T.bool_)  # false at x = W - 1


def test_a_bound_that_brings_back_a_replaced_term_is_not_lost():
    """``4 * q - min(y, 4 * q - 8) - 11 >= 0`` with ``q = (x - min(x - 8, 0) + 3) // 4`` is false (it is
    -3 where y is large). The proof replaced ``-min`` by ``-(4 * q - 8)``, which cancels ``4 * q``, and
    then replaced ``4 * q`` by its bound ``x - min(x - 8, 0)`` as if it were still there: it "proved" the
    claim, and a max of two row bounds lost its larger operand (unsharp's gray three rows short, written
    past by a split tail: heap corruption)."""
    q = E.floordiv(E.add(E.sub(x, E.minimum(E.sub(x, 8), 0)), 3), 4)
    claim = E.le(E.add(E.minimum(y, E.sub(E.mul(q, 4), 8)), 11), E.mul(q, 4))
    assert simplify(claim, {"x": iv(0, None), "y": iv(0, None)}) != Const(True, T.bool_)
    big = E.maximum(E.sub(E.mul(q, 4), 1), E.add(E.minimum(y, E.sub(E.mul(q, 4), 8)), 10))
    s = simplify(big, {"x": iv(0, None), "y": iv(0, None)})
    assert evaluate(s, {"x": 97, "y": 10**6}) == evaluate(big, {"x": 97, "y": 10**6}) == 102


@settings(max_examples=300, deadline=None)
@given(d=st.integers(1, 8), a=st.integers(-9, 9), b=st.integers(-9, 9), k=st.integers(-20, 20),
       c1=st.integers(-9, 9), c2=st.integers(-3, 3), is_min=st.booleans(), strict=st.booleans())
def test_proofs_over_sums_of_mins_and_quotients_that_share_terms_hold(d, a, b, k, c1, c2, is_min, strict):
    """A comparison folded to a constant holds at every point: sums of ``c1 * (x + a) // d`` and
    ``c2 * min/max(y, d * q + b)`` (the min's bound contains the quotient that is replaced too)."""
    q = E.floordiv(E.add(x, a), d)
    inner = E.add(E.mul(q, d), b)
    m = E.minimum(y, inner) if is_min else E.maximum(y, inner)
    lhs = E.add(E.add(E.mul(q, c1), E.mul(m, c2)), k)
    claim = E.lt(lhs, 0) if strict else E.le(lhs, 0)
    facts = {"x": iv(0, None), "y": iv(0, None)}
    s = simplify(claim, facts)
    if type(s) is Const:
        for px, py in itertools.product(range(0, 40), range(0, 60, 3)):
            assert evaluate(claim, {"x": px, "y": py}) == s.value, (px, py)


def test_comparisons_and_logic():
    t, f_ = Const(True, T.bool_), Const(False, T.bool_)
    assert simplify(E.lt(x, E.add(x, 1))) == t
    assert simplify(E.lt(x, W), {"x": iv(0, E.sub(W, 1))}) == t
    assert simplify(E.ge(x, W), {"x": iv(0, E.sub(W, 1))}) == f_
    assert simplify(E.eq(E.add(x, 3), E.add(y, 5))) == simplify(E.eq(E.add(y, 5), E.add(x, 3)))
    assert simplify(E.lt(E.add(x, 3), E.add(y, 5))) == E.lt(x, E.add(y, 2))
    assert simplify(E.bit_and(E.lt(x, 3), t)) == E.lt(x, 3)
    assert simplify(E.bit_or(E.lt(x, 3), t)) == t
    assert simplify(E.invert(E.lt(x, y))) == E.le(y, x)
    assert simplify(E.invert(E.invert(E.lt(x, y)))) == E.lt(x, y)
    assert simplify(E.select(E.lt(x, 3), y, y)) == y
    assert simplify(E.select(t, x, y)) == x
    c = Var("c", T.bool_)
    assert simplify(E.select(E.invert(c), y, z)) == E.select(c, z, y)
    fl = E.lt(f, E.const(1.0, T.float32))
    assert simplify(E.invert(fl)) == E.invert(fl)  # !(f < 1) is not f >= 1 for NaN


def test_casts():
    x64 = E.cast(T.int64, x)
    assert simplify(E.cast(T.int32, x64)) == x
    assert simplify(E.cast(T.int64, E.cast(T.int32, x64))) == x64
    assert simplify(x64) == x64  # a real widening stays
    assert simplify(E.cast(T.int8, E.cast(T.int16, x))) == E.cast(T.int8, x)
    assert simplify(E.cast(T.int8, E.const(300))) == Const(44, T.int8)
    assert simplify(E.cast(T.int8, E.const(1e10))) == Const(127, T.int8)
    assert simplify(E.cast(T.int32, E.const(-2.7))) == Const(-2, T.int32)
    assert simplify(E.cast(T.int32, E.const(float("nan")))) == Const(0, T.int32)
    assert simplify(E.cast(T.bool_, E.const(float("nan")))) == Const(True, T.bool_)
    assert simplify(E.cast(T.float32, E.const(0.1))).value == float(np.float32(0.1))
    # float -> int saturates but int -> int wraps: int8(float32(x16)) is not int8(x16)
    s16 = Var("s", T.int16)
    e = E.cast(T.int8, E.cast(T.float32, s16))
    assert simplify(e) == e


def test_wrapping_types_get_ring_identities_only():
    a8, b8 = Var("a", T.int8), Var("b", T.int8)
    c100 = Const(100, T.int8)
    e = E.Min(E.Add(a8, c100), E.Add(b8, c100))  # not min(a, b) + 100: the sums may wrap
    s = simplify(e)
    for va, vb in itertools.product((-128, 0, 27, 28, 127), repeat=2):
        assert same_value(e, s, {"a": va, "b": vb})
    u = Var("b", T.uint8)
    four, three = Const(4, T.uint8), Const(3, T.uint8)
    e = E.Add(E.Mul(E.FloorDiv(u, four), three), E.Mod(u, four))  # 3*(u//4) + u%4 is not u
    s = simplify(e)
    assert all(same_value(e, s, {"b": v}) for v in range(256))
    e = E.Add(E.Mul(E.FloorDiv(u, four), four), E.Mod(u, four))
    assert simplify(e) == u
    assert simplify(E.lt(E.add(a8, Const(1, T.int8)), a8)) == E.lt(E.add(a8, Const(1, T.int8)), a8)
    assert simplify(E.eq(E.add(a8, Const(1, T.int8)), E.add(a8, Const(1, T.int8)))) == Const(True, T.bool_)
    assert simplify(E.eq(E.add(a8, Const(1, T.int8)), a8)) == Const(False, T.bool_)


def test_floats_are_not_reassociated():
    one, two = E.const(1.0, T.float32), E.const(2.0, T.float32)
    e = E.add(E.add(f, one), two)
    assert simplify(e) == e
    assert simplify(E.add(f, E.const(0.0, T.float32))) == E.add(f, E.const(0.0, T.float32))
    assert simplify(E.mul(f, E.const(0.0, T.float32))) == E.mul(f, E.const(0.0, T.float32))
    assert simplify(E.mul(f, one)) == f
    assert simplify(E.truediv(f, one)) == f
    assert simplify(E.sub(f, E.const(0.0, T.float32))) == f
    assert simplify(E.add(f, E.const(-0.0, T.float32))) == f
    assert simplify(E.add(E.const(0.1, T.float32), E.const(0.2, T.float32))).value == \
        float(np.float32(0.1) + np.float32(0.2))


def test_negative_zero_is_not_confused_with_zero():
    z32, nz32 = Const(0.0, T.float32), Const(-0.0, T.float32)
    assert simplify(E.Sub(f, z32)) == f
    assert simplify(E.Sub(f, nz32)) != f  # f - (-0.0) is f + 0.0, which turns -0.0 into 0.0
    assert math.copysign(1, simplify(E.Neg(z32)).value) == -1
    assert math.copysign(1, simplify(E.Neg(nz32)).value) == 1
    sel = E.Select(E.lt(x, 0), z32, nz32)
    assert simplify(sel) == sel


def test_let_and_funcref_arguments():
    ref = E.FuncRef("g", (E.sub(E.add(x, 1), 1), y), T.float32)
    assert simplify(ref) == E.FuncRef("g", (x, y), T.float32)
    let = E.Let("t", E.add(x, 1), E.add(Var("t"), E.sub(y, y)))
    assert simplify(let) == E.Let("t", E.add(x, 1), Var("t"))
    # facts about a name do not apply where a Let rebinds it
    inner = E.Let("x", E.add(y, 100), E.lt(x, 32))
    assert simplify(inner, {"x": iv(0, 31)}) == E.Let("x", E.add(y, 100), E.lt(x, 32))


def test_dtype_is_kept():
    x64 = Var("X", T.int64)
    for e in (E.add(x64, 1), E.mul(x64, 0), E.lt(x64, x64), E.cast(T.uint8, E.const(3))):
        assert simplify(e).dtype == e.dtype


def test_big_coefficients_stay_exact():
    """A coefficient that does not fit int32 is not wrapped (that would change the value)."""
    big = E.mul(E.mul(x, 65536), 65536)
    e = E.Add(big, E.const(1, T.int32))
    s = simplify(e)
    for v in (0, 1, -1):
        assert same_value(e, s, {"x": v})


_ENDS = (-5, -1, 0, 1, 3, 5)
_SMALL = [(lo, hi) for lo in _ENDS for hi in _ENDS if lo <= hi]
_OPS = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.Mod, E.Min, E.Max)


@pytest.mark.parametrize("op", _OPS, ids=lambda c: c.__name__)
def test_range_decisions_exhaustively(op):
    """Every pair of small ranges for x and y: decisions taken from ranges never exclude a value that
    occurs, and the simplified operation is exact at every point."""
    for (x0, x1), (y0, y1) in itertools.product(_SMALL, _SMALL):
        facts = {"x": iv(x0, x1), "y": iv(y0, y1)}
        e = op(x, y)
        values = {evaluate(e, {"x": a, "y": b}) for a in range(x0, x1 + 1) for b in range(y0, y1 + 1)}
        lo, hi = min(values), max(values)
        s = simplify(e, facts)
        for a, b in itertools.product(range(x0, x1 + 1), range(y0, y1 + 1)):
            assert evaluate(s, {"x": a, "y": b}, strict=False) == evaluate(e, {"x": a, "y": b}), (e, facts)
        if op is not E.Mod:  # ranges of the others are exact for constant operand ranges
            assert simplify(E.le(e, hi), facts) == Const(True, T.bool_), (e, facts)
            assert simplify(E.ge(e, lo), facts) == Const(True, T.bool_), (e, facts)
        assert simplify(E.le(e, hi - 1), facts) != Const(True, T.bool_), (e, facts)
        assert simplify(E.ge(e, lo + 1), facts) != Const(True, T.bool_), (e, facts)


def test_deep_trees():
    """Long sums and chains (a reduction unrolled in Python) must not hit the recursion limit."""
    n = 800
    env = {"x": 3, **{f"v{i}": i - 2 for i in range(7)}}
    total, chain, fsum = x, x, f
    want_total = want_chain = 3
    for i in range(n):
        v = Var(f"v{i % 7}")
        total = E.add(total, E.mul(v, i % 5))
        chain = E.minimum(E.add(chain, 1), v)
        fsum = E.add(fsum, E.mul(Var(f"g{i % 7}", T.float32), E.const(0.5, T.float32)))
        want_total += env[v.name] * (i % 5)
        want_chain = min(want_chain + 1, env[v.name])
    assert evaluate(simplify(total), env) == want_total
    assert evaluate(simplify(E.floordiv(E.add(E.mul(total, 6), 1), 3)), env) == (6 * want_total + 1) // 3
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10 * n)  # for the recursive evaluator only
    try:
        assert evaluate(simplify(chain), env) == want_chain
    finally:
        sys.setrecursionlimit(limit)
    assert simplify(fsum).dtype == T.float32


def test_equal_trees_built_apart_compare_in_linear_time():
    """A lowering's lets put into each other make trees whose subtrees are shared: 2**60 nodes as a
    tree, 60 as a graph. Two such trees built apart (two compilations in one process, meeting in the
    simplifier's memo) must compare by their graphs, not node by node down every path."""

    def tower(leaf):
        e = Var("x")
        for i in range(60):
            e = E.Min(E.Add(e, Var(f"y{i % 3}")), E.Mul(e, leaf))
        return e

    a, b, c = tower(Var("z")), tower(Var("z")), tower(Var("w"))
    assert a is not b and hash(a) == hash(b)
    assert a == b and {a: 1}[b] == 1
    assert a != c and not (a == E.Min(a.a, a.a))


def test_known_residue_reads_affine_forms_min_max_select_and_the_lets_a_name_is_bound_to():
    t, u, c = E.Var("t", T.int64), E.Var("u", T.int64), E.Var("c", T.bool_)
    k = lambda v: E.Const(v, T.int64)  # noqa: E731
    assert E.known_residue(E.add(E.mul(k(16), t), k(3)), 16) == 3
    assert E.known_residue(E.add(E.mul(k(16), t), k(3)), 8) == 3
    assert E.known_residue(E.add(E.mul(k(16), t), k(19)), 16) == 3
    assert E.known_residue(E.add(E.mul(k(8), t), k(3)), 16) is None  # 3 or 11
    assert E.known_residue(E.add(t, k(3)), 16) is None
    assert E.known_residue(E.Min(E.mul(k(32), t), E.mul(k(16), u)), 16) == 0
    assert E.known_residue(E.Max(E.mul(k(32), t), E.add(E.mul(k(16), u), k(1))), 16) is None
    assert E.known_residue(E.Select(c, E.mul(k(64), t), k(128)), 64) == 0
    # a name bound (anywhere) to values of one residue; of two residues, not decided
    assert E.known_residue(E.add(t, k(2)), 16, {"t": [E.mul(k(16), u)]}) == 2
    assert E.known_residue(t, 16, {"t": [E.mul(k(16), u), E.add(E.mul(k(16), u), k(4))]}) is None
    assert E.known_residue(t, 16, {"t": [E.mul(k(16), u)], "u": [t]}) == 0
    assert E.known_residue(t, 16, {"t": [E.add(t, k(16))]}) is None  # bound in terms of itself
