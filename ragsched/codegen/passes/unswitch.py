"""Loop unswitching: a guard that no iteration of a loop changes is tested once, outside the loop.

``constant_loop_extents`` versions a tile loop whose extent is ``min(c, the rest of an entry)``: ``if c <=
rest`` runs the copy with c iterations (unrolled, vectorized), else a serial one. Placed inside a
reduction loop (a GEMM tile's k), those guards give the same answer at every step, but they split the
step's body into blocks, and the tile's accumulators can then not stay in registers across the steps.
LLVM hoists such guards only with its non-trivial unswitching, which weighs each loop against a cost
limit (a batched GEMM's 6 x 2-vector tile stayed guarded, 1.28x slower). Here a serial or unrolled loop
whose whole body is decided by a scalar condition that none of its iterations change is copied once per
answer, each copy with the branch taken: ``for k: if c: A else: B`` becomes ``if c: for k: A else: for k:
B``. Run again after vectorizing, it hoists a vector tail's guard the same way where one scalar comparison
decides every lane (``algebra/lanes.py``): ``if every lane: for k: A (unmasked) else: for k: if v: A``.
LLVM's own non-trivial unswitching, which copied such loop nests at a large part of the optimiser's time,
is then all but off (``llvm/load.UNSWITCH_THRESHOLD``).
"""

from __future__ import annotations

from dataclasses import replace

from ...algebra import expr as E
from ...algebra.lanes import lanes_test
from .. import ir

#: stores a loop's body may hold (counting unrolled copies) to be copied: a register tile's step, not a
#: whole stage (copying large loops doubles the code LLVM compiles for little)
MAX_STORES = 64
#: guards hoisted out of one loop (each doubles its code)
MAX_GUARDS = 2

_UNSWITCHED = (ir.ForKind.SERIAL, ir.ForKind.UNROLLED)


def unswitch_loops(stmt: ir.Stmt) -> ir.Stmt:
    """``stmt`` with loop-invariant guards hoisted out of small serial and unrolled loops, innermost
    loops first (so a guard hoisted out of an inner loop can leave the outer one too)."""
    with E.deep_recursion():
        return _walk(stmt)


def _walk(s: ir.Stmt) -> ir.Stmt:
    if isinstance(s, ir.Block):
        return ir.block(*(_walk(t) for t in s.stmts))
    if isinstance(s, ir.IfThenElse):
        return ir.IfThenElse(s.cond, _walk(s.then), None if s.otherwise is None else _walk(s.otherwise))
    body = getattr(s, "body", None)
    if body is None:
        return s
    s = replace(s, body=_walk(body))
    if isinstance(s, ir.For) and s.kind in _UNSWITCHED:
        return _unswitch(s, MAX_GUARDS)
    return s


def _unswitch(loop: ir.For, budget: int) -> ir.Stmt:
    if budget == 0 or _stores(loop.body) > MAX_STORES:
        return loop
    cond = _invariant_guard(loop.body, {loop.var}, _stored(loop.body))
    if cond is None:
        return loop
    names = set(E.free_vars(cond))
    taken = _unswitch(replace(loop, body=_decided(loop.body, cond, True, names)), budget - 1)
    if cond.dtype.lanes > 1:  # every lane true: the plain body; else the loop as it was, its guard tested in it
        return ir.IfThenElse(lanes_test(cond, "every"), taken, loop)
    other = _decided(loop.body, cond, False, names)
    if isinstance(other, ir.Block) and not other.stmts:
        return ir.IfThenElse(cond, taken)
    return ir.IfThenElse(cond, taken, _unswitch(replace(loop, body=other), budget - 1))


def _invariant_guard(s: ir.Stmt, bound: set, stored: set) -> E.Expr | None:
    """The condition that decides the whole of ``s`` (``s`` is ``if c``, or a block of ``if c``
    statements, under lets), when it names none of the ``bound`` variables (the loop's own and the lets
    inside it) and reads no buffer the loop stores to: a scalar, or a vector tail's guard whose every lane
    one scalar comparison decides (``algebra/lanes.py``). A guard that decides only part of a body (a rest
    tile after a loop of whole ones) is left: copying the rest of the body for it would add code, not
    take a branch out of a register tile's step."""
    while isinstance(s, ir.LetStmt):
        bound = bound | {s.name}
        s = s.body
    ifs = s.stmts if isinstance(s, ir.Block) else (s,)
    if not ifs or not all(isinstance(t, ir.IfThenElse) for t in ifs):
        return None
    c = ifs[0].cond
    if (c.dtype.lanes != 1 and lanes_test(c, "every") is None) or E.free_vars(c) & bound or _loads(c) & stored:
        return None
    return c if all(t.cond == c for t in ifs[1:]) else None


def _decided(s: ir.Stmt, cond: E.Expr, value: bool, names: set) -> ir.Stmt:
    """``s`` with each ``if cond`` that ``_invariant_guard`` can reach replaced by the branch ``value``
    takes (not where a let inside rebinds a name the condition reads)."""
    if isinstance(s, ir.Block):
        return ir.block(*(_decided(t, cond, value, names) for t in s.stmts))
    if isinstance(s, ir.IfThenElse):
        if s.cond == cond and (value or cond.dtype.lanes == 1):  # (some lanes false: the guard stays)
            taken = s.then if value else s.otherwise
            return ir.block() if taken is None else _decided(taken, cond, value, names)
        return ir.IfThenElse(s.cond, _decided(s.then, cond, value, names),
                             None if s.otherwise is None else _decided(s.otherwise, cond, value, names))
    if isinstance(s, ir.LetStmt):
        return s if s.name in names else replace(s, body=_decided(s.body, cond, value, names))
    if isinstance(s, (ir.Allocate, ir.Produce)):
        return replace(s, body=_decided(s.body, cond, value, names))
    return s


def _stores(s: ir.Stmt) -> int:
    """Stores in ``s``, an unrolled loop of constant extent counting each of its copies."""
    if isinstance(s, ir.Store):
        return 1
    if isinstance(s, ir.Block):
        return sum(_stores(t) for t in s.stmts)
    if isinstance(s, ir.IfThenElse):
        return _stores(s.then) + (0 if s.otherwise is None else _stores(s.otherwise))
    body = getattr(s, "body", None)
    if body is None:
        return 0
    copies = int(s.extent.value) if isinstance(s, ir.For) and s.kind is ir.ForKind.UNROLLED \
        and isinstance(s.extent, E.Const) else 1
    return copies * _stores(body)


def _stored(s: ir.Stmt) -> set:
    return {t.buffer for t in ir.walk_stmts(s) if isinstance(t, ir.Store)}


def _loads(e: E.Expr) -> set:
    return {n.buffer for n in E.walk(e) if isinstance(n, E.Load)}
