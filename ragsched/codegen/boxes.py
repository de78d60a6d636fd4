"""Boxes touched by a statement: the region of a Func (or Input) that a piece of loop IR reads or writes.

This is bounds inference on the loop nest itself (Halide's ``boxes_required``/``boxes_provided``):
walking down, every loop variable ranges over its loop's bounds and every let-bound variable over the
bounds of its value, so the result is expressed in the symbols that are free in the statement: the
loop variables of enclosing loops, Sizes and region symbols. That is what makes ``compute_at`` compute
one iteration's worth, and what lets a schedule's rounding (``tail="pad"``/``"shift"``) show up in the
regions its producers must provide. Inside ``if v <= e`` guards, ``v`` is narrowed accordingly.
"""

from __future__ import annotations

from ..algebra import expr as E
from ..algebra.bounds import Interval, bounds_of, hull
from ..algebra.simplify import simplify
from . import ir

Box = tuple[Interval, ...]


def box_touched(s: ir.Stmt, name: str, reads: bool = True, writes: bool = False, facts=None,
                env: dict | None = None) -> Box | None:
    """Hull of the points of ``name`` that ``s`` reads (``FuncRef``) and/or writes (``Provide``); None
    when it touches none."""
    acc: list[Box | None] = [None]
    _walk(s, dict(env or {}), name, reads, writes, facts or {}, acc)
    box = acc[0]
    if box is None:
        return None
    return tuple(Interval(None if iv.lo is None else simplify(iv.lo, facts),
                          None if iv.hi is None else simplify(iv.hi, facts)) for iv in box)


_REFS: dict[int, tuple[ir.Stmt, frozenset]] = {}  # id -> (the statement, the names it touches)


def touched_names(s: ir.Stmt) -> frozenset:
    """The Funcs and Inputs that ``s`` reads or writes (cached: walks skip sub-trees that touch none)."""
    hit = _REFS.get(id(s))
    if hit is not None and hit[0] is s:
        return hit[1]
    names = set()
    for e in ir.exprs_of(s):
        names.update(n.name for n in E.walk(e) if isinstance(n, E.FuncRef))
    if isinstance(s, ir.Provide):
        names.add(s.func)
    if isinstance(s, ir.Block):
        for t in s.stmts:
            names |= touched_names(t)
    elif isinstance(s, ir.IfThenElse):
        names |= touched_names(s.then)
        if s.otherwise is not None:
            names |= touched_names(s.otherwise)
    elif hasattr(s, "body"):
        names |= touched_names(s.body)
    out = frozenset(names)
    if len(_REFS) > 200_000:
        _REFS.clear()
    _REFS[id(s)] = (s, out)
    return out


def _merge(acc: list, box: Box, facts) -> None:
    if acc[0] is None:
        acc[0] = box
    else:
        acc[0] = tuple(hull(a, b, facts) for a, b in zip(acc[0], box, strict=True))


def _point_box(args, env, facts) -> Box:
    return tuple(bounds_of(a, env, facts) for a in args)


def _expr(e: E.Expr, env, name, facts, acc) -> None:
    for n in E.walk(e):
        if isinstance(n, E.FuncRef) and n.name == name:
            _merge(acc, _point_box(n.args, env, facts), facts)


def _loop_interval(s: ir.For, env, facts) -> Interval:
    lo = bounds_of(s.min, env, facts).lo
    hi = bounds_of(E.sub(E.add(s.min, s.extent), 1), env, facts).hi
    return Interval(lo, hi)


def _narrow(cond: E.Expr, env: dict, facts) -> dict:
    """``env`` inside ``if cond``: a condition ``v <= e`` (or ``<``, ``>=``, ``>``, ``&&``) narrows ``v``."""
    out = dict(env)
    stack = [cond]
    while stack:
        c = stack.pop()
        if isinstance(c, E.And):
            stack += [c.a, c.b]
            continue
        if not isinstance(c, (E.LT, E.LE)):
            continue
        strict = isinstance(c, E.LT)
        if isinstance(c.a, E.Var) and c.a.name in out:  # v < e  or  v <= e
            hi = bounds_of(c.b, env, facts).hi
            if hi is not None:
                hi = E.sub(hi, 1) if strict else hi
                iv = out[c.a.name]
                out[c.a.name] = Interval(iv.lo, hi if iv.hi is None else E.minimum(iv.hi, hi))
        elif isinstance(c.b, E.Var) and c.b.name in out:  # e < v  or  e <= v
            lo = bounds_of(c.a, env, facts).lo
            if lo is not None:
                lo = E.add(lo, 1) if strict else lo
                iv = out[c.b.name]
                out[c.b.name] = Interval(lo if iv.lo is None else E.maximum(iv.lo, lo), iv.hi)
    return out


def _walk(s: ir.Stmt, env: dict, name, reads, writes, facts, acc) -> None:
    if name not in touched_names(s):
        return
    if isinstance(s, ir.Block):
        for t in s.stmts:
            _walk(t, env, name, reads, writes, facts, acc)
    elif isinstance(s, ir.For):
        if reads:
            _expr(s.min, env, name, facts, acc)
            _expr(s.extent, env, name, facts, acc)
        inner = dict(env)
        inner[s.var] = _loop_interval(s, env, facts)
        _walk(s.body, inner, name, reads, writes, facts, acc)
    elif isinstance(s, ir.LetStmt):
        if reads:
            _expr(s.value, env, name, facts, acc)
        inner = dict(env)
        inner[s.name] = bounds_of(s.value, env, facts)
        _walk(s.body, inner, name, reads, writes, facts, acc)
    elif isinstance(s, ir.IfThenElse):
        if reads:
            _expr(s.cond, env, name, facts, acc)
        _walk(s.then, _narrow(s.cond, env, facts), name, reads, writes, facts, acc)
        if s.otherwise is not None:
            _walk(s.otherwise, env, name, reads, writes, facts, acc)
    elif isinstance(s, ir.Provide):
        if reads:
            for e in (*s.args, s.value):
                _expr(e, env, name, facts, acc)
        if writes and s.func == name:
            _merge(acc, _point_box(s.args, env, facts), facts)
    elif isinstance(s, (ir.Produce, ir.Allocate)):
        if isinstance(s, ir.Allocate) and reads:
            _expr(s.size, env, name, facts, acc)
        _walk(s.body, env, name, reads, writes, facts, acc)
    elif isinstance(s, ir.Realize):
        if reads:
            for m, e in s.bounds:
                _expr(m, env, name, facts, acc)
                _expr(e, env, name, facts, acc)
        _walk(s.body, env, name, reads, writes, facts, acc)
    elif isinstance(s, ir.Store):
        if reads:
            _expr(s.index, env, name, facts, acc)
            _expr(s.value, env, name, facts, acc)
    else:
        raise TypeError(f"box_touched: unknown statement {type(s).__name__}")
