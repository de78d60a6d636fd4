"""An integer expression's value at one point of its symbols.

A proof that an expression is bounded by a constant (``bounds.constant_upper_bound``) walks min/max arms
and simplifies each variant: tens of milliseconds on a pyramid's storage sizes, DAGs of thousands of
nodes, where nearly every answer is "no constant bound". One point where the value passes the limit
asked about settles that answer at the cost of one walk. Integers follow the bounds' model: signed
32/64-bit arithmetic does not overflow (so values are Python's integers); other types are not evaluated.
"""

from __future__ import annotations

from . import expr as E
from .simplify import no_overflow


class _Unknown(Exception):
    """The value cannot be told exactly at this point."""


_ARITH = {
    E.Add: lambda a, b: a + b,
    E.Sub: lambda a, b: a - b,
    E.Mul: lambda a, b: a * b,
    E.Min: min,
    E.Max: max,
    E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b,
    E.EQ: lambda a, b: a == b,
    E.NE: lambda a, b: a != b,
    E.And: lambda a, b: bool(a and b),
    E.Or: lambda a, b: bool(a or b),
}


def int_value(e: E.Expr, point: dict[str, int]) -> int | None:
    """``e``'s value with each Var named in ``point`` at its value, or None: a Var without one, a node
    other than integer arithmetic, comparisons and selects, a type that may wrap, a cast of a value its type
    does not hold, a division by a non-positive number."""
    try:
        with E.deep_recursion():
            return int(_value(e, point, {}))
    except _Unknown:
        return None


def _value(e: E.Expr, point: dict, memo: dict):
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    tp = type(e)
    t = e.dtype
    if t.lanes != 1 or not (t.kind == "b" or no_overflow(t)):
        raise _Unknown
    if tp is E.Const:
        v = e.value
    elif tp is E.Var:
        if e.name not in point:
            raise _Unknown
        v = point[e.name]
    elif tp is E.Cast:
        if not (e.value.dtype.kind == "b" or no_overflow(e.value.dtype)):
            raise _Unknown
        v = int(_value(e.value, point, memo))
        if t.kind == "b":
            v = v != 0
        elif not t.min <= v <= t.max:  # a narrowing cast that would wrap: outside the model
            raise _Unknown
    elif tp in _ARITH:
        v = _ARITH[tp](_value(e.a, point, memo), _value(e.b, point, memo))
    elif tp is E.FloorDiv or tp is E.Mod:
        a, b = _value(e.a, point, memo), _value(e.b, point, memo)
        if b <= 0:
            raise _Unknown
        v = a // b if tp is E.FloorDiv else a % b
    elif tp is E.Neg:
        v = -_value(e.a, point, memo)
    elif tp is E.Not:
        v = not _value(e.a, point, memo)
    elif tp is E.Select:
        v = _value(e.t if _value(e.cond, point, memo) else e.f, point, memo)
    else:
        raise _Unknown
    memo[id(e)] = (e, v)  # the node is kept alive with its value: its id is not reused while memo lives
    return v
