"""Accumulators that a serial loop updates in place, moved into a buffer of their own for the loop.

A reduction blocked over its RVar (a GEMM's sum split into blocks of k outside a tile's columns) updates,
in its innermost loop, a few vectors of a stored tile at indices the loop does not change:
``acc[base + 16 nt + 64 r] += ...`` for the rows r of a register tile. LLVM keeps such a vector in a
register across the loop only when it can tell every such address from every other; with a symbolic
column offset (``nt``) in each it cannot, and each step loads and stores every accumulator. Here the
indices are told apart symbolically (their differences are constants at least a vector apart), and the
loop runs on a copy of them in a small buffer of its own, read before the loop and written back after,
addressed by constants, which LLVM turns into registers. Nothing else in the loop may read or write
the tile (then it is left alone), the buffer must be one of the kernel's own allocations (an Input or
output could share memory with another argument), and the copies run only when the loop runs.

A loop under a condition that differs between vector lanes (a vectorized tail's ``ramp(x) <= x16(end)``)
or whose whole body runs under one the loop does not change runs masked loads and stores, which LLVM
never keeps in registers: its accumulators move too, a single one as well, the copies under the same
condition; the backend reads and writes the new buffer, whose every lane exists, without a mask.
"""

from __future__ import annotations

from ...algebra import expr as E
from ...algebra import types as T
from ...algebra.simplify import simplify
from .. import ir

#: At most this many accumulators (vectors or scalars) of one buffer per loop are moved: a register tile
#: is 12 of AVX2's 16 registers, 24 of AVX-512's 32; past that they would spill anyway.
_MAX_SLOTS = 32


def register_accumulators(s: ir.Stmt) -> ir.Stmt:
    """``s`` with each innermost serial loop's in-place accumulators (see the module) in a buffer of
    their own while it runs."""
    return _walk(s, {}, {}, False)


def _walk(s: ir.Stmt, lets: dict, allocated: dict, masked: bool) -> ir.Stmt:
    if isinstance(s, ir.LetStmt):
        return ir.LetStmt(s.name, s.value, _walk(s.body, {**lets, s.name: s.value}, allocated, masked))
    if isinstance(s, ir.Allocate):
        return ir.Allocate(s.buffer, s.dtype, s.size, _walk(s.body, lets, {**allocated, s.buffer: s.dtype}, masked))
    if isinstance(s, ir.Block):
        return ir.block(*(_walk(t, lets, allocated, masked) for t in s.stmts))
    if isinstance(s, ir.IfThenElse):
        inner = masked or s.cond.dtype.lanes > 1
        return ir.IfThenElse(s.cond, _walk(s.then, lets, allocated, inner),
                             None if s.otherwise is None else _walk(s.otherwise, lets, allocated, inner))
    if isinstance(s, ir.Produce):
        return ir.Produce(s.name, _walk(s.body, lets, allocated, masked))
    if isinstance(s, ir.For):
        if s.kind == ir.ForKind.SERIAL and not any(isinstance(t, ir.For) for t in ir.walk_stmts(s.body)):
            return _promoted(s, lets, allocated, masked)
        return ir.For(s.var, s.min, s.extent, s.kind, _walk(s.body, lets, allocated, masked), s.owns)
    return s


def _accesses(s: ir.Stmt, env: dict, guarded: bool, found: list, of: set, stores_only: bool = False) -> None:
    """(buffer, index, is_store, guarded) of every load and store of the buffers ``of`` in ``s`` (its
    stores only, with ``stores_only``), each index with the lets of the loop's body substituted (so that
    it names only the loop's variable and what is bound outside; substituted for those buffers only: in a
    large unrolled body, substituting every load's index took a third of the time of code generation)."""
    def loads(e):
        if stores_only:
            return
        for n in E.walk(e):
            if isinstance(n, E.Load) and n.buffer in of:
                found.append((n.buffer, E.substitute(n.index, env), False, guarded))

    if isinstance(s, ir.LetStmt):
        loads(s.value)
        _accesses(s.body, {**env, s.name: E.substitute(s.value, env)}, guarded, found, of, stores_only)
    elif isinstance(s, ir.Block):
        for t in s.stmts:
            _accesses(t, env, guarded, found, of, stores_only)
    elif isinstance(s, ir.Store):
        loads(s.index)
        loads(s.value)
        if s.buffer in of:
            found.append((s.buffer, E.substitute(s.index, env), True, guarded))
    elif isinstance(s, ir.IfThenElse):
        loads(s.cond)
        for t in (s.then, s.otherwise):
            if t is not None:
                _accesses(t, env, True, found, of, stores_only)
    elif isinstance(s, (ir.Allocate, ir.Produce)):
        if isinstance(s, ir.Allocate):
            loads(s.size)
        _accesses(s.body, env, guarded, found, of, stores_only)
    else:  # anything else (a loop: not in an innermost loop's body) keeps every buffer where it is
        found.append(("", E.const(0, T.INDEX), True, True))


def _span(index: E.Expr):
    """(first element, element count) of a scalar index or a unit-stride ramp; None for other vectors."""
    if index.dtype.lanes == 1:
        return index, 1
    if isinstance(index, E.Ramp) and isinstance(index.stride, E.Const) and index.stride.value == 1:
        return index.base, index.lanes
    return None


def _distance(a: E.Expr, b: E.Expr, lets: dict) -> int | None:
    """``b - a`` as a constant, seeing through the lets around the loop; None where it is not one."""
    d = simplify(E.sub(b, a))
    for _ in range(4):
        if isinstance(d, E.Const):
            return int(d.value)
        names = E.free_vars(d) & lets.keys()
        if not names:
            return None
        d = simplify(E.substitute(d, {n: lets[n] for n in names}))
    return int(d.value) if isinstance(d, E.Const) else None


def _slots(indices: list, lets: dict):
    """The distinct element ranges of ``indices`` as (index, first, count), and the one each index
    addresses; None unless every two indices are the same range or provably disjoint ones."""
    out, of = [], {}
    for index in indices:
        span = _span(index)
        if span is None:
            return None
        base, count = span
        for other, obase, ocount in out:
            d = 0 if index == other else _distance(obase, base, lets)
            if d is None:
                return None
            if d == 0 and count == ocount:
                of[index] = other
                break
            if not (d >= ocount or -d >= count):
                return None
        else:
            out.append((index, base, count))
            of[index] = index
    return out, of


def _promoted(loop: ir.For, lets: dict, allocated: dict, masked: bool) -> ir.Stmt:
    guard = loop.body
    guarded = isinstance(guard, ir.IfThenElse) and guard.otherwise is None and \
        loop.var not in E.free_vars(guard.cond) and \
        not _reads(guard.cond, {t.buffer for t in ir.walk_stmts(guard.then) if isinstance(t, ir.Store)})
    moved = _moved(loop.var, guard.then if guarded else loop.body, lets, allocated,
                   least=1 if guarded or masked else 2)
    if moved is None:
        return loop
    before, body, after, fresh = moved

    def under(s: ir.Stmt) -> ir.Stmt:  # the loop's own condition, kept around its copies too
        return ir.IfThenElse(guard.cond, s) if guarded else s

    out = ir.block(under(ir.block(*before)), ir.For(loop.var, loop.min, loop.extent, loop.kind, under(body), loop.owns),
                   under(ir.block(*after)))
    for name, dtype, size in fresh:
        out = ir.Allocate(name, dtype, E.const(size, T.INDEX), out)
    return ir.IfThenElse(simplify(E.gt(loop.extent, E.const(0, loop.extent.dtype))), out, None)


def _moved(var: str, body: ir.Stmt, lets: dict, allocated: dict, least: int):
    """(copies in, ``body`` on the new buffers, copies out, the new buffers) for the accumulators of a
    loop over ``var`` running ``body``, at least ``least`` of a buffer; None if there are none."""
    written = {t.buffer for t in ir.walk_stmts(body) if isinstance(t, ir.Store)}
    candidates = written & allocated.keys()  # (the only buffers whose accumulators may move)
    if candidates:  # those stored only unguarded and at indices the loop does not change (see below)
        stored: list = []
        _accesses(body, {}, False, stored, candidates, stores_only=True)
        candidates -= {b for b, index, _, guarded in stored if guarded or var in E.free_vars(index)}
    if not candidates:
        return None
    found: list = []
    _accesses(body, {}, False, found, candidates)
    by_buffer: dict[str, list] = {}
    for buffer, index, is_store, guarded in found:
        by_buffer.setdefault(buffer, []).append((index, is_store, guarded))
    before, after, fresh = [], [], []
    for buffer, uses in by_buffer.items():
        if not any(st for _, st, _ in uses) or any(g for _, _, g in uses):
            continue  # (an access under a condition: its element may lie outside the buffer otherwise)
        if any(var in E.free_vars(index) or _binds(index) or _reads(index, written) for index, _, _ in uses):
            continue
        indices = list(dict.fromkeys(index for index, _, _ in uses))
        found_slots = _slots(indices, lets)
        if found_slots is None or not least <= len(found_slots[0]) <= _MAX_SLOTS:
            continue
        slots, of = found_slots
        dtype = allocated[buffer]
        name = f"{buffer}.acc{len(fresh)}"
        where, offset = {}, 0
        for index, _, count in slots:
            where[index] = (E.const(offset, T.INDEX) if count == 1
                            else E.Ramp(E.const(offset, T.INDEX), E.const(1, T.INDEX), count), count)
            offset += count
        body = _renamed(body, buffer, name, {i: where[of[i]][0] for i in indices})
        for index, (w, count) in where.items():
            vt = dtype.with_lanes(count)
            before.append(ir.Store(name, w, E.Load(buffer, index, vt)))
            after.append(ir.Store(buffer, index, E.Load(name, w, vt)))
        fresh.append((name, dtype, offset))
    return (before, body, after, fresh) if fresh else None


def _binds(e: E.Expr) -> bool:
    return any(isinstance(n, E.Let) for n in E.walk(e))


def _reads(e: E.Expr, buffers: set) -> bool:
    return any(isinstance(n, E.Load) and n.buffer in buffers for n in E.walk(e))


def _renamed(s: ir.Stmt, buffer: str, name: str, where: dict, env: dict | None = None) -> ir.Stmt:
    """``s`` with ``buffer``'s loads and stores addressed to ``name`` at the slots ``where`` gives their
    indices (with the lets around them substituted, as ``_accesses`` saw them)."""
    env = env or {}

    def slot(index):
        return where[E.substitute(index, env)]

    def on_expr(e):
        return E.transform(e, lambda n: E.Load(name, slot(n.index), n.dtype)
                           if isinstance(n, E.Load) and n.buffer == buffer else n)

    if isinstance(s, ir.LetStmt):
        inner = {**env, s.name: E.substitute(s.value, env)}
        return ir.LetStmt(s.name, on_expr(s.value), _renamed(s.body, buffer, name, where, inner))
    if isinstance(s, ir.Block):
        return ir.block(*(_renamed(t, buffer, name, where, env) for t in s.stmts))
    if isinstance(s, ir.Store):
        index = slot(s.index) if s.buffer == buffer else on_expr(s.index)
        return ir.Store(name if s.buffer == buffer else s.buffer, index, on_expr(s.value), s.point)
    if isinstance(s, ir.IfThenElse):
        return ir.IfThenElse(on_expr(s.cond), _renamed(s.then, buffer, name, where, env),
                             None if s.otherwise is None else _renamed(s.otherwise, buffer, name, where, env))
    if isinstance(s, ir.Allocate):
        return ir.Allocate(s.buffer, s.dtype, on_expr(s.size), _renamed(s.body, buffer, name, where, env))
    if isinstance(s, ir.Produce):
        return ir.Produce(s.name, _renamed(s.body, buffer, name, where, env))
    raise TypeError(f"register_accumulators: unexpected {type(s).__name__} in an innermost loop")


__all__ = ["register_accumulators"]
