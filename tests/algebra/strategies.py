"""Hypothesis strategies for random index expressions, and an evaluator that shares no code with the
simplifier (Python integers with floor division, wrap-around for narrow types, NumPy float scalars)."""

from __future__ import annotations

import math

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
def small_ints(t):
    """Mostly small values, sometimes the ends of the type."""
    lo, hi = int(t.min), int(t.max)
    return st.one_of(
        st.integers(max(lo, -40), min(hi, 40)),
        st.sampled_from([lo, hi, lo + 1, hi - 1, 0]),
        st.integers(lo, hi),
    )


def consts(t):
    return st.one_of(st.integers(max(int(t.min), -9), min(int(t.max), 9)),
                     st.sampled_from([16, 31, 32, 64, 100])).map(lambda v: Const(_wrap(v, t), t))


@st.composite
def int_exprs(draw, t=T.int32, depth: int = 3) -> E.Expr:
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
        b = draw(st.one_of(st.sampled_from([2, 3, 4, 8, 32, -3, 0, 1, -1]).map(lambda v: Const(_wrap(v, t), t)),
                           sub))
        return E.FloorDiv(a, b)
    if op == 5:
        b = draw(st.one_of(st.sampled_from([2, 3, 4, 8, 32, -3, 0, 1, -1]).map(lambda v: Const(_wrap(v, t), t)),
                           sub))
        return E.Mod(a, b)
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
def bool_exprs(draw, t=T.int32, depth: int = 2) -> E.Expr:
    op = draw(st.integers(0, 6))
    if depth <= 0 or op <= 3:
        cls = (E.LT, E.LE, E.EQ, E.NE)[op % 4]
        return cls(draw(int_exprs(t, max(depth, 1) - 1)), draw(int_exprs(t, max(depth, 1) - 1)))
    if op == 4:
        return E.And(draw(bool_exprs(t, depth - 1)), draw(bool_exprs(t, depth - 1)))
    if op == 5:
        return E.Or(draw(bool_exprs(t, depth - 1)), draw(bool_exprs(t, depth - 1)))
    return E.Not(draw(bool_exprs(t, depth - 1)))


def points():
    """Values for every symbol, most of them small."""
    return st.fixed_dictionaries({n: small_ints(t) for n, t in NAME_TYPE.items()})
