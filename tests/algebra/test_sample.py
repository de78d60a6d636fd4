"""One point's value of an integer expression (algebra.sample), and the bound it refutes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.algebra.bounds import constant_upper_bound
from ragsched.algebra.expr import Var
from ragsched.algebra.sample import int_value

from .strategies import Overflow, evaluate, int_exprs, points
from .test_bounds import env_facts_points


@settings(max_examples=200, deadline=None)
@given(e=int_exprs(T.int32, depth=4), p=points(), t=st.sampled_from([T.int32, T.int64, T.int8, T.uint8]))
def test_the_value_at_a_point_is_the_expressions_value(e, p, t):
    """Where it answers, the sampler agrees with the tests' own evaluator (no-overflow reading of signed
    32/64-bit integers); types that wrap are not its to tell."""
    e = E.cast(t, e) if t != T.int32 else e
    got = int_value(e, p)
    if t in (T.int8, T.uint8):
        assert got is None
    if got is None:
        return
    try:
        assert got == int(evaluate(e, p, strict=False))
    except (Overflow, ZeroDivisionError):
        pass


def test_what_the_sampler_does_not_tell():
    x = Var("x", T.int64)
    assert int_value(E.add(x, E.const(2, T.int64)), {}) is None  # x has no value
    assert int_value(E.floordiv(E.const(7, T.int64), x), {"x": 0}) is None  # not NumPy's x // 0 == 0
    assert int_value(E.floordiv(E.const(-7, T.int64), x), {"x": 2}) == -4  # floor division
    assert int_value(E.mod(E.const(-7, T.int64), x), {"x": 2}) == 1
    assert int_value(E.select(E.lt(x, E.const(3, T.int64)), x, E.const(9, T.int64)), {"x": 5}) == 9


@settings(max_examples=150, deadline=None)
@given(data=st.data(), t=st.sampled_from([T.int32, T.int64]), limit=st.integers(0, 200))
def test_a_limit_only_drops_bounds_above_it(data, t, limit):
    """``at_most`` answers as the full proof does wherever the bound is within the limit, and never
    keeps a bound above it: the corner points only refute."""
    _, facts, _ = data.draw(env_facts_points())
    e = data.draw(int_exprs(t, depth=3))
    if data.draw(st.booleans()):  # a tile's clipped extent: a min beside the terms it shares
        k = E.const(data.draw(st.integers(0, 40)), t)
        e = E.add(E.sub(E.minimum(e, E.add(data.draw(int_exprs(t, depth=2)), k)), e), E.const(1, t))
    full = constant_upper_bound(e, facts)
    limited = constant_upper_bound(e, facts, at_most=limit)
    if full is not None and full <= limit:
        assert limited == full
    else:
        assert limited is None or limited == full


def test_a_storage_size_of_a_whole_image_is_refuted_at_a_corner():
    """A root stage's storage (the image grown by a border, times a tile clipped at its edge) passes any
    stack-sized limit at the corner where the image is large; the clipped tile alone keeps its bound."""
    n, t, m = Var("n", T.int64), Var("t", T.int64), Var("m", T.int64)

    def c(v):
        return E.const(v, T.int64)

    start = E.add(E.mul(c(16), t), m)
    tile = E.maximum(E.add(E.sub(E.minimum(n, E.add(start, c(15))), start), c(1)), c(0))
    assert constant_upper_bound(tile, at_most=16) == 16
    assert constant_upper_bound(tile, at_most=15) is None
    rows = E.add(n, c(4))
    assert constant_upper_bound(E.mul(tile, rows), at_most=1 << 14) is None


def test_a_cast_that_would_wrap_is_not_told():
    """Found by Hypothesis: an int64 at -2^63 cast to int32 wraps to 0 in NumPy; the sampler's model has no
    wrapping, so it does not answer (it answered -2^63). A cast that fits, and one to bool, it tells."""
    x = Var("X", T.int64)
    assert int_value(E.cast(T.int32, x), {"X": -(1 << 63)}) is None
    assert int_value(E.cast(T.int32, x), {"X": 1 << 31}) is None
    assert int_value(E.cast(T.int32, x), {"X": -7}) == -7
    assert int_value(E.cast(T.bool_, x), {"X": 5}) == 1
