"""Unrolling: a loop of kind UNROLLED becomes its body repeated once per iteration.

Each copy gets the loop variable replaced by its constant value (``min + k``) and its expressions
simplified again, so that index arithmetic folds (``x*4 + 2``), which lets the vectorizer and LLVM see
constant offsets. Nested unrolled loops unroll from the inside out.

A loop whose copies would hold more than ``MAX_UNROLLED_NODES`` expression nodes is refused: LLVM's
time grows faster than the code (a random point of the search space, unrolled loop nests inside
unrolled loops, made 728 KB of IR and 150 s of LLVM); the largest unrolled loop of the bundled and
held-out schedules makes about 2,000.
"""

from __future__ import annotations

from ...algebra import expr as E
from ...algebra import types as T
from ...algebra.simplify import simplify
from .. import ir

MAX_UNROLLED_NODES = 20_000


def unroll_loops(stmt: ir.Stmt) -> ir.Stmt:
    """``stmt`` with every UNROLLED loop replaced by copies of its body."""

    def on_stmt(s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.For) and s.kind is ir.ForKind.UNROLLED:
            return _unroll(s)
        return s

    return ir.map_stmt(stmt, lambda e: e, on_stmt)


def _unroll(loop: ir.For) -> ir.Stmt:
    extent = simplify(loop.extent)
    if not isinstance(extent, E.Const):
        raise ValueError(f"cannot unroll loop {loop.var}: its extent {extent} is not a constant; unroll "
                         "needs a loop of constant extent (split the loop by a constant factor and unroll "
                         "the inner loop)")
    nodes = sum(sum(1 for _ in E.walk(e)) for t in ir.walk_stmts(loop.body) for e in ir.exprs_of(t))
    if nodes * int(extent.value) > MAX_UNROLLED_NODES:
        raise ValueError(f"unrolling loop {loop.var} would make {int(extent.value)} copies of a body of {nodes} "
                         f"expression nodes, more than {MAX_UNROLLED_NODES} in all (LLVM would take minutes); "
                         "unroll a shorter loop, or fewer nested loops")
    lo = loop.min if loop.min.dtype == T.ADDRESS else E.Cast(loop.min, T.ADDRESS)
    shadowed = _binds(loop.body, loop.var)
    copies = []
    for k in range(max(int(extent.value), 0)):
        value = simplify(E.Add(lo, E.Const(k, T.ADDRESS)))
        if shadowed:  # the body rebinds the name: keep the scoping rules, let the backend bind it
            copies.append(ir.LetStmt(loop.var, value, loop.body))
        else:
            copies.append(substitute_stmt(loop.body, loop.var, value))
    return ir.block(*copies) if copies else ir.Block(())


def substitute_stmt(s: ir.Stmt, name: str, value: E.Expr) -> ir.Stmt:
    """``s`` with Var ``name`` replaced by ``value`` (cast to the Var's type where they differ), and the
    expressions that changed simplified."""

    def on_expr(e: E.Expr) -> E.Expr:
        if name not in E.free_vars(e):
            return e
        replaced = E.transform(e, lambda n: _as(value, n.dtype) if isinstance(n, E.Var) and n.name == name else n)
        return simplify(replaced)

    return ir.map_stmt(s, on_expr)


def _as(value: E.Expr, t) -> E.Expr:
    return value if value.dtype == t else E.Cast(value, t)


def _binds(s: ir.Stmt, name: str) -> bool:
    """Whether ``name`` is bound again inside ``s`` (a loop, a LetStmt or a Let)."""
    for t in ir.walk_stmts(s):
        if (isinstance(t, ir.For) and t.var == name) or (isinstance(t, ir.LetStmt) and t.name == name):
            return True
        for e in ir.exprs_of(t):
            if any(isinstance(n, E.Let) and n.name == name for n in E.walk(e)):
                return True
    return False
