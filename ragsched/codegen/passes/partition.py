"""Loop partitioning for tail guards (Halide's PartitionLoops, narrowed).

A split with a guard on the tail (``for o: if ramp(8*o, 1, 8) < n: ...``) leaves a lane-dependent
condition in every iteration. The backend tests it cheaply, but the branch still keeps LLVM from
unrolling the loop and from hoisting loads out of it (measured: matmul 28 ms guarded, 12 ms not).
So a serial loop whose body holds such a guard is split in two: a steady state, where every lane
passes (the guard is dropped), and the rest, guarded as before::

    let o.steady = clamp(floor((n - 8) / 8) + 1, min, min + extent)
    for o in [min, o.steady): ...            (no guard)
    for o in [o.steady, min + extent): ...   (guarded)

A guard qualifies when it is ``ramp < x`` or ``ramp <= x`` (or a conjunction holding one) with a
positive constant stride, whose last lane is an affine function of the loop variable with a positive
coefficient and whose bound does not depend on the loop; or the same with a scalar ``i < x`` (a
guarded split that is not vectorized: an unrolled reduction, whose guards would otherwise keep its
accumulators in memory). Lets around the guard are seen through. An unrolled body holds one guard per
copy, the same bound at offsets 0, 1, ...: the loop is split at the strictest, whose steady state drops
every guard it implies, and partitioned again for guards it does not imply (another dimension's). Index
arithmetic in 32 bits is read in 64 (no overflow, Halide's rule). Anything else is left as it is: the
guard is always correct.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...algebra import expr as E
from ...algebra import types as T
from ...algebra.simplify import simplify
from .. import ir

I64 = T.ADDRESS


def partition_vector_tails(stmt: ir.Stmt) -> ir.Stmt:
    """``stmt`` with each serial loop around a vectorized tail guard split into steady state and rest."""

    def on_stmt(s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.For) and s.kind is ir.ForKind.SERIAL:
            return _partition(s)
        return s

    with E.deep_recursion():
        return ir.map_stmt(stmt, lambda e: e, on_stmt)


def _partition(loop: ir.For, depth: int = 0) -> ir.Stmt:
    inside = _bound_names(loop.body)
    stored = {t.buffer for t in ir.walk_stmts(loop.body) if isinstance(t, (ir.Store, ir.Allocate))}
    # loads the loop's bounds make already (so made before it even when it runs no iteration)
    bounds = {n for e in (loop.min, loop.extent) for n in E.walk(e) if isinstance(n, E.Load) and n.buffer not in stored}
    found: list[tuple[E.Expr, _TailGuard]] = []
    for _, seen in _guards(loop.body, {}):
        for known in _conjuncts(seen):
            guard = _tail_guard(known, loop.var, bounds)
            if guard is not None and not E.free_vars(guard.end) & inside and all(known != k for k, _ in found):
                found.append((known, guard))
    if not found:
        return loop
    # the guard that implies the most others (the first such): an unrolled body's copies test one bound
    # at offsets 0, 1, ..., and the steady loop of the strictest drops them all, where one partition
    # per copy left as many full copies of the body, each in a loop that never runs
    _, first = max(found, key=lambda g: sum(g[1].implies(h) for _, h in found))
    lo = widen_index(loop.min)
    hi = simplify(E.Add(lo, widen_index(loop.extent)))
    name = _fresh(f"{loop.var}.steady", loop, inside)
    split = simplify(E.Min(E.Max(first.end, lo), hi))
    body = loop.body
    for known, guard in found:
        if first.implies(guard):
            body = _drop(body, known)
    steady = ir.For(loop.var, lo, simplify(E.Sub(E.Var(name, I64), lo)), ir.ForKind.SERIAL, body)
    if depth < _MAX_GUARDS:  # the next guard that this one does not imply
        steady = _partition(steady, depth + 1)
    mid = E.Var(name, I64)
    return ir.LetStmt(name, split, ir.block(
        steady, ir.For(loop.var, mid, simplify(E.Sub(hi, mid)), ir.ForKind.SERIAL, loop.body)))


_MAX_GUARDS = 8


def _fresh(stem: str, loop: ir.For, inside: set) -> str:
    """A name that nothing in or around ``loop`` uses (it may sit inside an earlier partition)."""
    used = set(inside)
    for e in (loop.min, loop.extent, *(x for t in ir.walk_stmts(loop.body) for x in ir.exprs_of(t))):
        used |= E.free_vars(e)
    k = 0
    while (stem + (str(k) if k else "")) in used:
        k += 1
    return stem + (str(k) if k else "")


def _bound_names(s: ir.Stmt) -> set[str]:
    out = set()
    for t in ir.walk_stmts(s):
        if isinstance(t, ir.For):
            out.add(t.var)
        elif isinstance(t, ir.LetStmt):
            out.add(t.name)
    return out


def _guards(s: ir.Stmt, lets: dict):
    """(condition, the same with the lets around it put in) of the IfThenElse statements of ``s`` that
    no inner loop encloses."""
    if isinstance(s, ir.Block):
        for t in s.stmts:
            yield from _guards(t, lets)
    elif isinstance(s, ir.LetStmt):
        yield from _guards(s.body, {**lets, s.name: _put_lets(s.value, lets)})
    elif isinstance(s, (ir.Produce, ir.Allocate)):
        yield from _guards(s.body, lets)
    elif isinstance(s, ir.IfThenElse):
        yield s.cond, _put_lets(s.cond, lets)
        yield from _guards(s.then, lets)
        if s.otherwise is not None:
            yield from _guards(s.otherwise, lets)


def _put_lets(e: E.Expr, lets: dict) -> E.Expr:
    names = E.free_vars(e) & lets.keys()
    if not names:
        return e
    return E.transform(e, lambda n: _cast(lets[n.name], n.dtype) if isinstance(n, E.Var) and n.name in names else n)


def _cast(e: E.Expr, t) -> E.Expr:
    return e if e.dtype == t else E.Cast(e, t)


def _conjuncts(e: E.Expr) -> list[E.Expr]:
    if isinstance(e, E.And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


@dataclass(frozen=True)
class _TailGuard:
    """A tail guard read as ``coef * var + at0 <= limit`` (int64), and ``end``: the first value of
    ``var`` from which it may fail."""

    coef: int
    at0: E.Expr
    limit: E.Expr
    end: E.Expr

    def implies(self, other: _TailGuard) -> bool:
        """Whether this guard holding means ``other`` holds, at every value of the loop variable (the
        same coefficient, and ``other``'s slack larger by a constant)."""
        if self.coef != other.coef:
            return False
        d = simplify(E.Sub(E.Sub(other.at0, other.limit), E.Sub(self.at0, self.limit)))
        return isinstance(d, E.Const) and d.value <= 0


def _tail_guard(part: E.Expr, var: str, loads: set[E.Load]) -> _TailGuard | None:
    """``part`` as a tail guard in ``var``, or None when it is not one. Its bound may make the ``loads``
    of the loop's own bounds (a ragged length, ``lens[b]``: from a buffer the loop does not store), and
    no other."""
    if not isinstance(part, (E.LT, E.LE)):
        return None
    if part.a.dtype.lanes == 1:  # a scalar guard: an unrolled or plain split's tail
        if not (part.a.dtype.is_signed and part.a.dtype.bits >= 32):
            return None
        last, bound = widen_index(part.a), part.b
    else:
        if not isinstance(part.a, E.Ramp) or not isinstance(part.b, E.Broadcast):
            return None
        ramp, bound = part.a, part.b.value
        if not (isinstance(ramp.stride, E.Const) and ramp.stride.value > 0 and ramp.dtype.is_signed
                and ramp.dtype.bits >= 32):
            return None
        last = widen_index(E.Add(ramp.base, E.Const((ramp.lanes - 1) * ramp.stride.value, ramp.base.dtype)))
    if var in E.free_vars(bound) or any(isinstance(n, E.Let) or isinstance(n, E.Load) and n not in loads
                                        for x in (bound, last) for n in E.walk(x)):
        return None  # the split point is computed before the loop: nothing the loop binds or stores
    o = E.Var(var, I64)
    at0 = simplify(E.substitute(last, {var: E.Const(0, I64)}))
    coef = simplify(E.Sub(simplify(E.substitute(last, {var: E.Const(1, I64)})), at0))
    if not (isinstance(coef, E.Const) and coef.value > 0 and var not in E.free_vars(at0)):
        return None
    rest = simplify(E.Sub(last, E.Add(E.Mul(coef, o), at0)))
    if not (isinstance(rest, E.Const) and rest.value == 0):
        return None  # not affine in var
    limit = widen_index(bound) if isinstance(part, E.LE) else E.Sub(widen_index(bound), E.Const(1, I64))
    # coef * o + at0 <= limit  <=>  o <= floor((limit - at0) / coef)
    end = simplify(E.Add(E.FloorDiv(E.Sub(limit, at0), coef), E.Const(1, I64)))
    return _TailGuard(int(coef.value), at0, limit, end)


def _known_true(s: ir.Stmt, conds: list[E.Expr]) -> ir.Stmt:
    """``s`` (the body of a guard whose conditions ``conds`` hold) with each ``select(c, a, b)`` whose
    ``c`` is one of them as ``a``: a vectorized reduction under a tail guard selects its lanes by the
    guard's own condition (``passes.vectorize``), which the steady loop need not test again."""
    names = set().union(*(E.free_vars(c) for c in conds))
    if any(isinstance(t, ir.For) and t.var in names or isinstance(t, ir.LetStmt) and t.name in names
           for t in ir.walk_stmts(s)):
        return s  # a name of the condition bound again inside: another value there

    def known(e: E.Expr) -> E.Expr:
        return e.t if isinstance(e, E.Select) and e.cond in conds else e

    return ir.map_stmt(s, lambda e: E.transform(e, known))


def widen_index(e: E.Expr) -> E.Expr:
    """A signed integer expression computed in int64, with its casts between 32 and 64 bits dropped
    (exact when nothing overflows, which is the rule for index arithmetic)."""
    t = e.dtype
    if isinstance(e, E.Const):
        return E.Const(int(e.value), I64)
    if isinstance(e, E.Cast) and t.is_signed and t.bits >= 32 and e.value.dtype.is_signed and e.value.dtype.bits >= 32:
        return widen_index(e.value)
    if isinstance(e, (E.Add, E.Sub, E.Mul, E.Min, E.Max, E.FloorDiv, E.Mod)) and t.is_signed and t.bits >= 32:
        return type(e)(widen_index(e.a), widen_index(e.b))
    if isinstance(e, E.Neg) and t.is_signed and t.bits >= 32:
        return E.Neg(widen_index(e.a))
    return e if t == I64 else E.Cast(e, I64)


def _drop(s: ir.Stmt, known: E.Expr, lets: dict | None = None) -> ir.Stmt:
    """``s`` with conjunct ``known`` (lets put in) known true in the guards that no inner loop encloses.
    Compared with the lets put in: the copies of an unrolled body spell their guards alike."""
    lets = lets or {}
    if isinstance(s, ir.Block):
        return ir.block(*(_drop(t, known, lets) for t in s.stmts))
    if isinstance(s, ir.LetStmt):
        return ir.LetStmt(s.name, s.value, _drop(s.body, known, {**lets, s.name: _put_lets(s.value, lets)}))
    if isinstance(s, ir.Produce):
        return ir.Produce(s.name, _drop(s.body, known, lets))
    if isinstance(s, ir.Allocate):
        return ir.Allocate(s.buffer, s.dtype, s.size, _drop(s.body, known, lets))
    if isinstance(s, ir.IfThenElse):
        then = _drop(s.then, known, lets)
        otherwise = None if s.otherwise is None else _drop(s.otherwise, known, lets)
        parts = _conjuncts(s.cond)
        rest = [c for c in parts if _put_lets(c, lets) != known]
        if len(rest) < len(parts):
            then = _known_true(then, [c for c in parts if _put_lets(c, lets) == known])
            if not rest:
                return then
            cond = rest[0]
            for c in rest[1:]:
                cond = E.And(cond, c)
            return ir.IfThenElse(cond, then, otherwise)
        return ir.IfThenElse(s.cond, then, otherwise)
    return s
