"""Positions of a flat ragged loop (``fuse(b, i, bi)`` with i ragged inside b): how they are written and
how bounds inference reads them.

The flat loop runs over the valid (b, i) pairs; b and i are lets computed from tables (the entry of each
position, each entry's first position). Their values are clamped to their ranges, which they never leave,
so that bounds inference sees a range. For i, an exact range cannot be stated for an empty entry (whose
range is empty), so bounds inference relaxes a position over [lo, hi] as it would a loop's variable: the
flat loop enumerates exactly those positions of each non-empty entry.
"""

from __future__ import annotations

from ..algebra import expr as E
from ..algebra.bounds import Interval

TABLE = ".flat"  # the tables' names: f"{func}.flat{stage}.{loop}.start" and ".row"


def clamped(value: E.Expr, lo: E.Expr, hi: E.Expr) -> E.Expr:
    return E.maximum(E.minimum(value, hi), lo)


def position_span(value: E.Expr) -> Interval | None:
    """[lo, hi] when ``value`` is a flat loop's position inside its entry (``clamped`` around a read of
    a start table), else None."""
    if not (isinstance(value, E.Max) and isinstance(value.a, E.Min)):
        return None
    if not any(isinstance(n, E.Load) and TABLE in n.buffer and n.buffer.endswith(".start") for n in E.walk(value.a.a)):
        return None
    return Interval(value.b, value.a.b)
