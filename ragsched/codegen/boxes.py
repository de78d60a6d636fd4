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
from ..algebra.bounds import Interval, bounds_of, free_names, hull
from ..algebra.simplify import simplify
from . import ir
from .flat_loops import position_span

Box = tuple[Interval, ...]


def box_touched(s: ir.Stmt, name: str, reads: bool = True, writes: bool = False, facts=None,
                env: dict | None = None) -> Box | None:
    """Hull of the points of ``name`` that ``s`` reads (``FuncRef``) and/or writes (``Provide``); None
    when it touches none."""
    acc: list[Box | None] = [None]
    env = dict(env or {})
    _walk(s, env, name, reads, writes, facts or {}, acc)
    box = acc[0]
    if box is None:
        return None
    if env:
        box = _relax(box, env, facts or {})
    return tuple(Interval(None if iv.lo is None else simplify(iv.lo, facts),
                          None if iv.hi is None else simplify(iv.hi, facts)) for iv in box)


def _names_under(s: ir.Stmt, own, cache: dict) -> frozenset:
    """The names ``own(t)`` gives for ``s`` and every statement inside it, remembered per statement in
    ``cache`` (id -> (the statement, the names)): walks ask it of the same sub-trees again and again."""
    hit = cache.get(id(s))
    if hit is not None and hit[0] is s:
        return hit[1]
    names = set(own(s))
    if isinstance(s, ir.Block):
        for t in s.stmts:
            names |= _names_under(t, own, cache)
    elif isinstance(s, ir.IfThenElse):
        names |= _names_under(s.then, own, cache)
        if s.otherwise is not None:
            names |= _names_under(s.otherwise, own, cache)
    elif hasattr(s, "body"):
        names |= _names_under(s.body, own, cache)
    out = frozenset(names)
    if len(cache) > 200_000:
        cache.clear()
    cache[id(s)] = (s, out)
    return out


def _touched_here(s: ir.Stmt) -> set:
    names = set()
    for e in ir.exprs_of(s):
        names.update(E.func_refs_by_name(e))
    if isinstance(s, ir.Provide):
        names.add(s.func)
    return names


_REFS: dict[int, tuple[ir.Stmt, frozenset]] = {}


def touched_names(s: ir.Stmt) -> frozenset:
    """The Funcs and Inputs that ``s`` reads or writes (walks skip sub-trees that touch none)."""
    return _names_under(s, _touched_here, _REFS)


def _merge(acc: list, box: Box, facts) -> None:
    if acc[0] is None:
        acc[0] = box
    else:
        acc[0] = tuple(hull(a, b, facts) for a, b in zip(acc[0], box, strict=True))


def _expr(e: E.Expr, name, facts, acc) -> None:
    for n in E.func_refs_by_name(e).get(name, ()):
        _merge(acc, tuple(Interval(a, a) for a in n.args), facts)


def _loop_interval(s: ir.For, facts) -> Interval:
    """The range of loop ``s``'s variable, remembered per loop statement and facts: walks through the loop
    ask it again and again, and its end built anew each time was a simplification and a structural
    comparison with the memo's key."""
    key = (id(s), id(facts))
    hit = _INTERVALS.get(key)
    if hit is not None and hit[0] is s and hit[1] is facts:
        return hit[2]
    iv = Interval(s.min, simplify(E.sub(E.add(s.min, s.extent), 1), facts))
    if len(_INTERVALS) > 100_000:
        _INTERVALS.clear()
    _INTERVALS[key] = (s, facts, iv)
    return iv


_INTERVALS: dict[tuple[int, int], tuple] = {}  # (loop's id, facts' id) -> (loop, facts, interval)


def _narrowed(cond: E.Expr, env: dict) -> dict:
    """The loop variables that ``if cond`` narrows, with their intervals inside it: ``v <= e`` (or ``<``,
    ``>=``, ``>``, ``&&``) narrows ``v``."""
    out = {}
    stack = [cond]
    while stack:
        c = stack.pop()
        if isinstance(c, E.And):
            stack += [c.a, c.b]
            continue
        if not isinstance(c, (E.LT, E.LE)):
            continue
        strict = isinstance(c, E.LT)
        if isinstance(c.a, E.Var) and c.a.name in env and c.a.name not in E.free_vars(c.b):  # v < e, v <= e
            hi = E.sub(c.b, 1) if strict else c.b
            iv = out.get(c.a.name, env[c.a.name])
            out[c.a.name] = Interval(iv.lo, hi if iv.hi is None else E.minimum(iv.hi, hi))
        elif isinstance(c.b, E.Var) and c.b.name in env and c.b.name not in E.free_vars(c.a):  # e < v, e <= v
            lo = E.add(c.a, 1) if strict else c.a
            iv = out.get(c.b.name, env[c.b.name])
            out[c.b.name] = Interval(lo if iv.lo is None else E.maximum(iv.lo, lo), iv.hi)
    return out


def _relax(box: Box | None, scope: dict, facts) -> Box | None:
    """``box`` with the variables of ``scope`` (name -> Interval) bounded over their intervals."""
    if box is None or not scope:
        return box
    out = []
    for iv in box:
        # (an end that names none of them stays: most of a box does not move with the innermost loop)
        lo = iv.lo if iv.lo is None or not scope.keys() & free_names(iv.lo) else bounds_of(iv.lo, scope, facts).lo
        hi = iv.hi if iv.hi is None or not scope.keys() & free_names(iv.hi) else bounds_of(iv.hi, scope, facts).hi
        out.append(Interval(None if lo is None else simplify(lo, facts), None if hi is None else simplify(hi, facts)))
    return tuple(out)


def _put_back(box: Box | None, name: str, value: E.Expr, facts) -> Box | None:
    """``box`` with the let-bound ``name`` replaced by its value: exact, so lets used together (a region's
    min and max) stay correlated."""
    if box is None:
        return None
    m = {name: value}

    def sub(x):
        if x is None or name not in free_names(x):
            return x
        return simplify(E.substitute(x, m), facts)

    return tuple(Interval(sub(iv.lo), sub(iv.hi)) for iv in box)


_LOOP_BOXES: dict[tuple, tuple] = {}  # (loop's id, name, reads, writes, facts' id, narrowing) -> (loop, facts, box)


def _loop_box(s: ir.For, env: dict, name, reads, writes, facts) -> Box | None:
    """What loop ``s``'s body touches of ``name``, relaxed over the loop: remembered per loop statement,
    since placing a Func asks it of the same sub-trees several times (what the consumers read, what the
    Func's storage must hold) and rebuilds only the path to its own loop. Outer loops and lets reach the
    result only through the guards inside that narrow them, so those of their intervals are in the key."""
    guarded = guard_names(s.body)
    narrowing = tuple((n, env[n]) for n in sorted(guarded & env.keys())) if guarded else ()
    key = (id(s), name, reads, writes, id(facts), narrowing)
    hit = _LOOP_BOXES.get(key)
    if hit is not None and hit[0] is s and hit[1] is facts:
        return hit[2]
    iv = _loop_interval(s, facts)
    sub: list[Box | None] = [None]
    _walk(s.body, {**env, s.var: iv}, name, reads, writes, facts, sub)
    box = None if sub[0] is None else _relax(sub[0], {s.var: iv}, facts)
    if len(_LOOP_BOXES) > 100_000:
        _LOOP_BOXES.clear()
    _LOOP_BOXES[key] = (s, facts, box)
    return box


_GUARDS: dict[int, tuple[ir.Stmt, frozenset]] = {}


def guard_names(s: ir.Stmt) -> frozenset:
    """The symbols the ``if`` conditions inside ``s`` name."""
    return _names_under(s, lambda t: free_names(t.cond) if isinstance(t, ir.IfThenElse) else (), _GUARDS)


_LOOPS: dict[int, tuple[ir.Stmt, frozenset]] = {}


def loop_names(s: ir.Stmt) -> frozenset:
    """The variables of the loops in ``s`` (``s`` included): placement looks for one loop by name in the
    whole nest once per Func, and the sub-trees without it are skipped."""
    return _names_under(s, lambda t: (t.var,) if isinstance(t, ir.For) else (), _LOOPS)


def _walk(s: ir.Stmt, env: dict, name, reads, writes, facts, acc) -> None:
    """Accumulate into ``acc`` the box ``s`` touches, in terms of the symbols free in ``s``: bottom-up, as
    Halide does, each loop relaxes its own variable and each let puts its value back on the way out."""
    if name not in touched_names(s):
        return
    if isinstance(s, ir.Block):
        for t in s.stmts:
            _walk(t, env, name, reads, writes, facts, acc)
    elif isinstance(s, ir.For):
        if reads:
            _expr(s.min, name, facts, acc)
            _expr(s.extent, name, facts, acc)
        box = _loop_box(s, env, name, reads, writes, facts)
        if box is not None:
            _merge(acc, box, facts)
    elif isinstance(s, ir.LetStmt):
        if reads:
            _expr(s.value, name, facts, acc)
        sub = [None]
        inner = {**env, s.name: Interval(s.value, s.value)}  # (for guards on it to narrow it)
        _walk(s.body, inner, name, reads, writes, facts, sub)
        if sub[0] is not None:
            span = position_span(s.value)  # a flat ragged loop's position: relaxed like a loop variable
            _merge(acc, _put_back(sub[0], s.name, s.value, facts) if span is None
                   else _relax(sub[0], {s.name: span}, facts), facts)
    elif isinstance(s, ir.IfThenElse):
        if reads:
            _expr(s.cond, name, facts, acc)
        scope = _narrowed(s.cond, env)
        sub = [None]
        _walk(s.then, {**env, **scope}, name, reads, writes, facts, sub)
        if sub[0] is not None:
            _merge(acc, _relax(sub[0], scope, facts), facts)
        if s.otherwise is not None:
            _walk(s.otherwise, env, name, reads, writes, facts, acc)
    elif isinstance(s, ir.Provide):
        if reads:
            for e in (*s.args, s.value):
                _expr(e, name, facts, acc)
        if writes and s.func == name:
            _merge(acc, tuple(Interval(a, a) for a in s.args), facts)
    elif isinstance(s, (ir.Produce, ir.Allocate)):
        if isinstance(s, ir.Allocate) and reads:
            _expr(s.size, name, facts, acc)
        _walk(s.body, env, name, reads, writes, facts, acc)
    elif isinstance(s, ir.Realize):
        if reads:
            for m, e in s.bounds:
                _expr(m, name, facts, acc)
                _expr(e, name, facts, acc)
        _walk(s.body, env, name, reads, writes, facts, acc)
    elif isinstance(s, ir.Store):
        if reads:
            _expr(s.index, name, facts, acc)
            _expr(s.value, name, facts, acc)
    else:
        raise TypeError(f"box_touched: unknown statement {type(s).__name__}")
