"""Loops versioned where their boundary conditions do nothing (Halide partitions loops around ``likely``
clamps for the same reason).

A read through ``clamp_edge`` vectorizes to ``img[clamp(ramp(x, 1, 8), 0, W - 1)]``. The backend tests
each such load (a dense load where the ramp lies inside, a gather where not), but a tile that reads a
few dozen of them is then a few dozen branches, which keep LLVM from scheduling the tile's arithmetic
as one block (a denoiser's small tiles per search offset: 99 ms, against 52 with the clamped image
staged per tile). So the body of a loop is versioned once per iteration::

    for t: body                 ->  for t: if <every clamped ramp of body lies inside its clamp>:
                                               body with those clamps dropped
                                           else: body

The condition bounds each ramp over the loops inside ``body`` (bounds inference, lets put in), so it is
a handful of scalar compares per iteration of ``t``. It is placed at the outermost loop whose iterations
it tells apart (it names the loop's variable) and whose body is not too large to copy; a condition
that holds everywhere drops the clamps without a copy, one that never holds (a loop over whole rows
reads the border) sends the search to the loops inside.
"""

from __future__ import annotations

from ...algebra import expr as E
from ...algebra.bounds import Interval, bounds_of
from ...algebra.simplify import simplify
from .. import ir
from .partition import widen_index

SIZE_PER_LOAD = 16  # statements copied per clamped load they drop, at most: code size is compile time
_LOOPS = (ir.ForKind.SERIAL, ir.ForKind.PARALLEL)


def version_clamped_loads(stmt: ir.Stmt) -> ir.Stmt:
    """``stmt`` with each loop whose iterations mostly read inside their clamps versioned (above)."""
    with E.deep_recursion():
        return _walk(stmt, {})


def _walk(s: ir.Stmt, memo: dict) -> ir.Stmt:
    if not _has_clamps(s, memo):
        return s
    if isinstance(s, ir.For) and s.kind in _LOOPS:
        found = _inside(s.body, memo)
        if found is not None:
            cond, clamps, sites = found
            if isinstance(cond, E.Const) and cond.value:
                return ir.For(s.var, s.min, s.extent, s.kind, _unclamped(s.body, clamps), s.owns)
            if s.var in E.free_vars(cond) and _worth_copying(s.body, sites):
                body = ir.IfThenElse(cond, _unclamped(s.body, clamps), s.body)
                return ir.For(s.var, s.min, s.extent, s.kind, body, s.owns)
        return ir.For(s.var, s.min, s.extent, s.kind, _walk(s.body, memo), s.owns)
    if isinstance(s, ir.Block):
        return ir.block(*(_walk(t, memo) for t in s.stmts))
    if isinstance(s, ir.IfThenElse):
        return ir.IfThenElse(s.cond, _walk(s.then, memo), None if s.otherwise is None else _walk(s.otherwise, memo))
    if isinstance(s, (ir.For, ir.LetStmt, ir.Allocate, ir.Produce, ir.Realize)):
        from dataclasses import replace

        return replace(s, body=_walk(s.body, memo))
    return s


def _has_clamps(s: ir.Stmt, memo: dict) -> bool:
    """Whether a load in ``s`` reads through a clamped ramp (remembered per statement: each loop asks)."""
    key = id(s)
    if key not in memo:
        own = any(_clamp(c) is not None for e in ir.exprs_of(s) for n in E.walk(e) if isinstance(n, E.Load)
                  for c in E.walk(n.index))
        memo[key] = (own or any(_has_clamps(t, memo) for t in ir.children(s)), s)  # (s kept: ids stay unique)
    return memo[key][0]


def _clamp(e: E.Expr):
    """(ramp, lo, hi) when ``e`` is ``min(max(ramp, lo), hi)`` or ``max(min(ramp, hi), lo)`` with a
    constant stride and scalar bounds, else None."""
    if isinstance(e, E.Min) and isinstance(e.a, E.Max):
        ramp, lo, hi = e.a.a, e.a.b, e.b
    elif isinstance(e, E.Max) and isinstance(e.a, E.Min):
        ramp, lo, hi = e.a.a, e.b, e.a.b
    else:
        return None
    if not (isinstance(ramp, E.Ramp) and isinstance(ramp.stride, E.Const) and isinstance(lo, E.Broadcast)
            and isinstance(hi, E.Broadcast) and ramp.dtype.is_int and ramp.dtype.is_signed):
        return None
    return ramp, lo.value, hi.value


def _inside(body: ir.Stmt, memo: dict):
    """(condition, clamps, reads): the condition under which every clamp of a load in ``body`` whose
    ramp can be bounded there keeps its ramp inside (so it does nothing), those clamps, and how many
    loads read through them; None when there are none. Clamps that appear somewhere unbounded are left
    out (they stay, tested per load)."""
    inner: set[str] = set()  # names bound inside the body on the way to a clamp
    parts: dict[E.Expr, list] = {}  # clamp -> [(lo, first lane's least value, last lane's greatest, hi)]
    unbounded: set = set()

    def visit_expr(e: E.Expr, lets: dict, env: dict) -> None:
        for n in E.walk(e):
            if isinstance(n, E.Let):
                inner.add(n.name)
            if not isinstance(n, E.Load):
                continue
            for c in E.walk(n.index):
                got = _clamp(c)
                if got is None or c in unbounded:
                    continue
                span = _span(*got, lets, env)
                if span is None:
                    unbounded.add(c)
                    parts.pop(c, None)
                else:
                    parts.setdefault(c, []).append(span)

    def visit(s: ir.Stmt, lets: dict, env: dict) -> None:
        if not _has_clamps(s, memo):
            return
        for e in ir.exprs_of(s):
            visit_expr(e, lets, env)
        if isinstance(s, ir.LetStmt):
            inner.add(s.name)
            visit(s.body, {**lets, s.name: _resolved(s.value, lets)}, env)
        elif isinstance(s, ir.For):
            inner.add(s.var)
            lo = widen_index(_resolved(s.min, lets))
            hi = simplify(E.Sub(E.Add(lo, widen_index(_resolved(s.extent, lets))), E.const(1, lo.dtype)))
            # in the names outside the body: an inner loop's range may name the loops around it
            span = Interval(bounds_of(lo, env).lo, bounds_of(hi, env).hi) if env else Interval(lo, hi)
            visit(s.body, {k: v for k, v in lets.items() if k != s.var}, {**env, s.var: span})
        else:
            for t in ir.children(s):
                visit(t, lets, env)

    visit(body, {}, {})
    for c in [c for c, spans in parts.items() if any(E.free_vars(x) & inner for span in spans for x in span)]:
        del parts[c]  # a bound named inside the body is not known before it runs
    if not parts:
        return None
    least: dict[E.Expr, E.Expr] = {}  # per lower end of a clamp: the least lane read; per upper: the greatest
    most: dict[E.Expr, E.Expr] = {}
    for spans in parts.values():
        for lo, low, high, hi in spans:
            least[lo] = simplify(E.Min(least[lo], low)) if lo in least else low
            most[hi] = simplify(E.Max(most[hi], high)) if hi in most else high
    conds = [E.LE(lo, low) for lo, low in least.items()] + [E.LE(high, hi) for hi, high in most.items()]
    cond = conds[0]
    for c in conds[1:]:
        cond = E.And(cond, c)
    return simplify(cond), set(parts), sum(len(spans) for spans in parts.values())


def _span(ramp: E.Ramp, lo: E.Expr, hi: E.Expr, lets: dict, env: dict):
    """(lo, the least lane, the greatest lane, hi) over the loops ``env`` inside the body; None where that
    cannot be said."""
    step = int(ramp.stride.value) * (ramp.lanes - 1)
    base = widen_index(_resolved(ramp.base, lets))
    first, last = (base, E.Add(base, E.const(step, base.dtype))) if step >= 0 else \
        (E.Add(base, E.const(step, base.dtype)), base)
    low = bounds_of(first, env).lo
    high = bounds_of(last, env).hi
    lo, hi = widen_index(_resolved(lo, lets)), widen_index(_resolved(hi, lets))
    if low is None or high is None:
        return None
    out = (lo, low, high, hi)
    # a load in the test would run before the body (which may store there, or guard the read)
    if any(isinstance(n, (E.Let, E.Load)) for c in out for n in E.walk(c)):
        return None
    return out


def _resolved(e: E.Expr, lets: dict) -> E.Expr:
    """``e`` with the lets of the body around it put in (their values resolved already)."""
    names = E.free_vars(e) & lets.keys()
    if not names:
        return e
    types = {n.name: n.dtype for n in E.walk(e) if isinstance(n, E.Var) and n.name in names}
    return simplify(E.substitute(e, {n: lets[n] if lets[n].dtype == t else E.Cast(lets[n], t)
                                     for n, t in types.items()}))


def _worth_copying(body: ir.Stmt, sites: int) -> bool:
    """Whether the clamped loads of ``body`` (``sites`` of them) pay for a second copy of it: at least one
    per SIZE_PER_LOAD statements (a denoiser's output tile of 132 statements with 3 such loads is not
    copied: 1.6 s more for LLVM, 4% faster; its producers inside it are, one by one)."""
    return sum(1 for _ in ir.walk_stmts(body)) <= SIZE_PER_LOAD * sites


def _unclamped(s: ir.Stmt, clamps: set) -> ir.Stmt:
    """``s`` with each of ``clamps`` in a load's index replaced by its ramp (the condition it sits under
    keeps the ramp inside the clamp; the same clamp elsewhere, as a value, was not bounded)."""
    def drop(n: E.Expr) -> E.Expr:
        if n in clamps:
            return _clamp(n)[0]
        if isinstance(n, (E.Add, E.Sub)):  # ramp + broadcast, as the clamp had hidden it: one ramp, which
            return _one_ramp(n)  # the backend loads densely
        return n

    def in_loads(n: E.Expr) -> E.Expr:
        if isinstance(n, E.Load) and any(c in clamps for c in E.walk(n.index)):
            return E.Load(n.buffer, E.transform(n.index, drop), n.dtype)
        return n

    return ir.map_stmt(s, lambda e: E.transform(e, in_loads))


def _one_ramp(n: E.Expr) -> E.Expr:
    a, b = n.a, n.b
    if isinstance(a, E.Ramp) and isinstance(b, E.Broadcast):
        return E.Ramp(simplify(type(n)(a.base, b.value)), a.stride, a.lanes)
    if isinstance(a, E.Broadcast) and isinstance(b, E.Ramp):
        if isinstance(n, E.Add):
            return E.Ramp(simplify(E.Add(a.value, b.base)), b.stride, b.lanes)
        return E.Ramp(simplify(E.Sub(a.value, b.base)), simplify(E.Neg(b.stride)), b.lanes)
    return n
