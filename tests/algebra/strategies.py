"""Hypothesis strategies for random index expressions, and an evaluator that shares no code with the
simplifier (Python integers with floor division, wrap-around for narrow types, NumPy float scalars)."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from hypothesis import strategies as st

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.algebra.expr import Const, Var

# Symbols by type: loop variables, Sizes (W, H) and a few narrow ones.
VARS = {
    T.int32: ("x", "y", "z", "W", "H"),
    T.int64: ("X", "Y"),
    T.int8: ("a",),
    T.uint8: ("b",),
    T.int16: ("s",),
    T.uint32: ("u",),
}
INT_TYPES = tuple(VARS)
NAME_TYPE = {n: t for t, names in VARS.items() for n in names}


# ------------------------------------------------------------------------------------- evaluation
class Overflow(Exception):
    """A signed 32/64-bit operation left its type: the expression's value is undefined there."""


def _nowrap(t) -> bool:
    return t.kind == "i" and t.bits >= 32


def _wrap(v: int, t) -> int:
    bits = t.bits
    v %= 1 << bits
    if t.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


def _int(v: int, t, strict: bool) -> int:
    if _nowrap(t):
        if strict and not t.min <= v <= t.max:
            raise Overflow
        return v
    return _wrap(v, t)


def _floordiv(a, b):
    return 0 if b == 0 else a // b


def _mod(a, b):
    return 0 if b == 0 else a % b


def _funcref(name, args, t):
    h = sum(map(ord, name))
    for a in args:
        h = (h * 1000003 + int(a)) % (1 << 61)
    return _wrap(h, t)


def _cast(v, src, t, strict):
    if t.is_bool:
        return bool(v != 0)
    if t.is_int:
        if src.is_float:
            f = float(v)
            if math.isnan(f):
                return 0
            return int(t.max) if f >= t.max else int(t.min) if f <= t.min else int(f)
        v = int(v)
        if not strict and src.is_int and t.min <= src.min and src.max <= t.max:
            return v  # widening keeps the mathematical value of a no-wrap intermediate
        return _wrap(v, t)
    with np.errstate(all="ignore"):
        if src.is_float:
            return np.asarray(v, dtype=src.np).astype(t.np)[()]
        v = int(v)
        if src.is_int and not src.min <= v <= src.max:
            return t.np.type(float(v))
        return np.asarray(v, dtype=src.np).astype(t.np)[()]


_INT_OPS = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.FloorDiv: _floordiv, E.Mod: _mod, E.Min: min, E.Max: max,
    E.BitAnd: lambda a, b: a & b, E.BitOr: lambda a, b: a | b, E.BitXor: lambda a, b: a ^ b,
    E.Shl: lambda a, b: a << b, E.Shr: lambda a, b: a >> b,
}
_FLOAT_OPS = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: np.true_divide,
    E.FloorDiv: np.floor_divide, E.Mod: np.mod, E.Min: np.minimum, E.Max: np.maximum,
}
_CMP = {E.LT: lambda a, b: a < b, E.LE: lambda a, b: a <= b, E.EQ: lambda a, b: a == b,
        E.NE: lambda a, b: a != b}


def evaluate(e: E.Expr, env: dict, strict: bool = True):
    """The value of ``e``; ``strict`` raises Overflow when a signed 32/64-bit operation leaves its type
    (otherwise such values are kept as mathematical integers, Halide's no-overflow reading)."""
    tp, t = type(e), e.dtype
    if tp is Const:
        return t.np.type(e.value) if t.is_float else (bool(e.value) if t.is_bool else int(e.value))
    if tp is Var:
        v = env[e.name]
        return t.np.type(v) if t.is_float else v
    if tp is E.Let:
        return evaluate(e.body, {**env, e.name: evaluate(e.value, env, strict)}, strict)
    if tp is E.Select:
        return evaluate(e.t if evaluate(e.cond, env, strict) else e.f, env, strict)
    if tp is E.Cast:
        return _cast(evaluate(e.value, env, strict), e.value.dtype, t, strict)
    if tp is E.FuncRef:
        return _funcref(e.name, [evaluate(a, env, strict) for a in e.args], t)
    if tp is E.Neg:
        a = evaluate(e.a, env, strict)
        return -a if t.is_float else _int(-a, t, strict)
    if tp is E.Not:
        a = evaluate(e.a, env, strict)
        return (not a) if t.is_bool else _int(~a, t, strict)
    if tp is E.And:
        return bool(evaluate(e.a, env, strict)) and bool(evaluate(e.b, env, strict))
    if tp is E.Or:
        return bool(evaluate(e.a, env, strict)) or bool(evaluate(e.b, env, strict))
    a, b = evaluate(e.a, env, strict), evaluate(e.b, env, strict)
    if tp in _CMP:
        return bool(_CMP[tp](a, b))
    if t.is_float:
        with np.errstate(all="ignore"):
            return _FLOAT_OPS[tp](a, b)
    if t.is_bool:
        return bool(_INT_OPS[tp](a, b))
    return _int(_INT_OPS[tp](a, b), t, strict)


# ------------------------------------------------------------------------------------- strategies
@cache
def small_ints(t):
    """Mostly small values, sometimes the ends of the type."""
    lo, hi = int(t.min), int(t.max)
    return st.one_of(
        st.integers(max(lo, -40), min(hi, 40)),
        st.sampled_from([lo, hi, lo + 1, hi - 1, 0]),
        st.integers(lo, hi),
    )


@cache
def consts(t):
    return st.one_of(st.integers(max(int(t.min), -9), min(int(t.max), 9)),
                     st.sampled_from([16, 31, 32, 64, 100])).map(lambda v: Const(_wrap(v, t), t))


@cache
def divisors(t):
    return st.sampled_from([2, 3, 4, 8, 32, -3, 0, 1, -1]).map(lambda v: Const(_wrap(v, t), t))


@cache
def int_exprs(t=T.int32, depth: int = 3):
    return _int_exprs(t, depth)


@cache
def bool_exprs(t=T.int32, depth: int = 2):
    return _bool_exprs(t, depth)


@st.composite
def _int_exprs(draw, t, depth: int) -> E.Expr:
    """A random integer expression of type ``t``: + - * // % min max select comparisons casts."""
    if depth <= 0 or draw(st.integers(0, 9)) < 2:
        if draw(st.booleans()):
            return Var(draw(st.sampled_from(VARS[t])), t)
        return draw(consts(t))
    sub = int_exprs(t, depth - 1)
    op = draw(st.integers(0, 13))
    a = draw(sub)
    if op <= 1:
        return E.Add(a, draw(sub))
    if op == 2:
        return E.Sub(a, draw(sub))
    if op == 3:  # mostly by a constant, which keeps sums affine
        b = draw(consts(t)) if draw(st.booleans()) else draw(sub)
        return E.Mul(b, a) if draw(st.booleans()) else E.Mul(a, b)
    if op == 4:
        return E.FloorDiv(a, draw(st.one_of(divisors(t), sub)))
    if op == 5:
        return E.Mod(a, draw(st.one_of(divisors(t), sub)))
    if op == 6:
        return E.Min(a, draw(sub))
    if op == 7:
        return E.Max(a, draw(sub))
    if op == 8:
        return E.Select(draw(bool_exprs(t, depth - 1)), a, draw(sub))
    if op == 9:
        return E.Neg(a)
    if op == 10:  # a cast from another integer type (or from a comparison)
        src = draw(st.sampled_from(INT_TYPES))
        if src == t:
            return E.Cast(draw(bool_exprs(t, depth - 1)), t)
        return E.Cast(draw(int_exprs(src, depth - 1)), t)
    if op == 11:
        return E.FuncRef("f", (a,), t)
    if op == 12:  # x // c * c + x % c and friends
        c = Const(draw(st.sampled_from([4, 8, 16])), t)
        return E.Add(E.Mul(E.FloorDiv(a, c), c), E.Mod(a, c))
    return E.Add(E.Mul(Const(_wrap(32, t), t), a), draw(sub))


@st.composite
def _bool_exprs(draw, t, depth: int) -> E.Expr:
    op = draw(st.integers(0, 6))
    if depth <= 0 or op <= 3:
        cls = (E.LT, E.LE, E.EQ, E.NE)[op % 4]
        return cls(draw(int_exprs(t, max(depth, 1) - 1)), draw(int_exprs(t, max(depth, 1) - 1)))
    if op == 4:
        return E.And(draw(bool_exprs(t, depth - 1)), draw(bool_exprs(t, depth - 1)))
    if op == 5:
        return E.Or(draw(bool_exprs(t, depth - 1)), draw(bool_exprs(t, depth - 1)))
    return E.Not(draw(bool_exprs(t, depth - 1)))


def _small(rnd, t) -> int:
    lo, hi = int(t.min), int(t.max)
    r = rnd.random()
    if r < 0.8:
        return rnd.randint(max(lo, -40), min(hi, 40))
    if r < 0.9:
        return rnd.choice([lo, hi, lo + 1, hi - 1, 0])
    return rnd.randint(lo, hi)


@cache
def points():
    """Values for every symbol, most of them small (drawn through a seeded Random: many values, cheap
    to generate; Hypothesis still replays them)."""
    return st.randoms(use_true_random=False).map(lambda rnd: {n: _small(rnd, t) for n, t in NAME_TYPE.items()})


@cache
def simple_operands(t=T.int32):
    """Symbols, small constants and small affine combinations: the operands of ``op_exprs``."""
    names = VARS[t]
    var = st.sampled_from(names).map(lambda n: Var(n, t))
    const = st.integers(max(int(t.min), -6), min(int(t.max), 40)).map(lambda v: Const(v, t))
    pair = st.tuples(var, var, st.sampled_from([-3, -1, 1, 2, 32])).map(
        lambda p: E.Add(p[0], E.Mul(Const(_wrap(p[2], t), t), p[1])))
    shifted = st.tuples(var, const).map(lambda p: E.Add(p[0], p[1]))
    return st.one_of(var, var, const, pair, shifted)


@cache
def op_exprs(t=T.int32):
    return _op_exprs(t)


@st.composite
def _op_exprs(draw, t) -> E.Expr:
    """One operation on simple operands, so that each rule meets the ends of its operands' ranges."""
    a, b = draw(simple_operands(t)), draw(simple_operands(t))
    op = draw(st.integers(0, 16))
    binary = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.Mod, E.Min, E.Max, E.BitAnd, E.BitOr, E.BitXor)
    if op < len(binary):
        return binary[op](a, b)
    if op == 10:
        return E.Neg(a)
    if op == 11:
        return E.Not(a)
    if op == 12:
        s = Const(draw(st.integers(0, min(t.bits - 1, 6))), t)
        return (E.Shl if draw(st.booleans()) else E.Shr)(a, s)
    if op == 13:
        return E.Cast(a, draw(st.sampled_from(INT_TYPES)))
    if op == 14:
        c = Const(_wrap(draw(st.sampled_from([2, 3, 8, 32, -4])), t), t)
        return (E.FloorDiv if draw(st.booleans()) else E.Mod)(a, c)
    if op == 15:
        cmp = draw(st.sampled_from([E.LT, E.LE, E.EQ, E.NE]))
        return E.Select(cmp(a, b), a, b)
    return draw(st.sampled_from([E.LT, E.LE, E.EQ, E.NE]))(a, b)



def in_range(rnd, lo: int, hi: int, k: int) -> int:
    """The k-th value taken from [lo, hi]: the ends in turn, and inside values in between."""
    return (lo, hi, rnd.randint(lo, hi), min(lo + 1, hi), rnd.randint(lo, hi))[k % 5]


@cache
def affine_div_mod(t=T.int32):
    return _affine_div_mod(t)


@st.composite
def _affine_div_mod(draw, t) -> E.Expr:
    """``(c1*u + c2*v + k) // d`` or ``% d`` (u, v symbols or divisions), possibly nested once more."""
    def atom():
        v = Var(draw(st.sampled_from(("x", "y", "z"))), t)
        if draw(st.integers(0, 3)) == 0:
            return E.FloorDiv(v, Const(draw(st.sampled_from([2, 4, 3])), t))
        return v

    coef = st.sampled_from([1, 2, 3, 4, 6, 8, 16, 32, -1, -2, -4, -8, 0])
    num = E.Add(E.Add(E.Mul(Const(draw(coef), t), atom()), E.Mul(Const(draw(coef), t), atom())),
                Const(draw(st.integers(-40, 40)), t))
    d = Const(draw(st.sampled_from([2, 3, 4, 8, 16, 32])), t)
    e = (E.FloorDiv if draw(st.booleans()) else E.Mod)(num, d)
    if draw(st.booleans()):
        e2 = E.Add(e, Const(draw(st.integers(-40, 40)), t))
        e = (E.FloorDiv if draw(st.booleans()) else E.Mod)(e2, Const(draw(st.sampled_from([2, 3, 4, 8])), t))
    return e
