"""Loops driven by tables that generated code builds: the positions of a flat ragged loop (``fuse(b, i,
bi)`` with i ragged inside b), how they are written and how bounds inference reads them; and the
visiting order of a sorted batch loop (``sort_by_length``).

The flat loop runs over the valid (b, i) pairs; b and i are lets computed from tables (the entry of each
position, each entry's first position). Their values are clamped to their ranges, which they never leave,
so that bounds inference sees a range. For i, an exact range cannot be stated for an empty entry (whose
range is empty), so bounds inference relaxes a position over [lo, hi] as it would a loop's variable: the
flat loop enumerates exactly those positions of each non-empty entry.
"""

from __future__ import annotations

from ..algebra import expr as E
from ..algebra import types as T
from ..algebra.bounds import Interval
from . import ir

I32 = T.int32

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


def sorted_order(order: str, stem: str, entries: E.Expr, longest: E.Expr, length, body: ir.Stmt) -> ir.Stmt:
    """``body`` inside the allocation of table ``order`` [entries]: the entries 0.. by decreasing
    ``length(entry)`` (an Expr in [0, longest]), equal lengths in their own order. A counting sort: one
    pass to count each length, a prefix sum, one pass to place (O(entries + longest)). ``longest`` may
    be negative (a region computed per tile of a consumer is empty where the tile lies past an entry's
    end): the table still has room for length 0."""
    longest = E.maximum(longest, 0)
    entry, v = E.Var(f"{stem}.entry", I32), E.Var(f"{stem}.len", I32)
    count = f"{stem}.count"
    key = E.sub(longest, length(entry))  # 0 for the longest
    at = E.Load(count, key, I32)
    zero = ir.For(v.name, E.const(0, I32), E.add(longest, 2), ir.ForKind.SERIAL, ir.Store(count, v, E.const(0, I32)))
    tally = ir.For(entry.name, E.const(0, I32), entries, ir.ForKind.SERIAL,
                   ir.Store(count, E.add(key, 1), E.add(E.Load(count, E.add(key, 1), I32), 1)))
    prefix = ir.For(v.name, E.const(1, I32), E.add(longest, 1), ir.ForKind.SERIAL,
                    ir.Store(count, v, E.add(E.Load(count, v, I32), E.Load(count, E.sub(v, 1), I32))))
    place = ir.For(entry.name, E.const(0, I32), entries, ir.ForKind.SERIAL,
                   ir.block(ir.Store(order, at, entry), ir.Store(count, key, E.add(at, 1))))
    tables = ir.Allocate(count, I32, E.add(longest, 2), ir.block(zero, tally, prefix, place))
    return ir.Allocate(order, I32, E.maximum(entries, 1), ir.block(tables, body))
