"""Finding and replacing inside a loop nest by loop name: the body of a loop, the loops and lets on the
path between two loops, how often a Func is referenced. Placement uses these to put a Func's nest and
storage at a consumer's loop."""

from __future__ import annotations

from dataclasses import replace

from ..algebra import expr as E
from . import ir
from .boxes import loop_names, touched_names


def replace_loop_body(s: ir.Stmt, var: str, fn) -> ir.Stmt:
    """``s`` with the body of each loop ``var`` replaced by ``fn(body)``. Only the statements on the paths
    to those loops are rebuilt: the rest stay the same objects, so what placement caches by statement
    (the boxes a sub-tree touches, the names it reads) still holds for them after a Func is placed."""
    def go(t: ir.Stmt) -> ir.Stmt:
        if var not in loop_names(t):
            return t
        if isinstance(t, ir.For) and t.var == var:
            return ir.For(t.var, t.min, t.extent, t.kind, fn(t.body), t.owns)
        kids = ir.children(t)
        new = tuple(go(c) for c in kids)
        if all(a is b for a, b in zip(new, kids)):
            return t
        if isinstance(t, ir.Block):
            return ir.block(*new)
        if isinstance(t, ir.IfThenElse):
            return ir.IfThenElse(t.cond, new[0], new[1] if len(new) > 1 else None)
        return replace(t, body=new[0])
    try:
        return go(s)
    finally:
        go = None  # a closure that names itself is a cycle: emptied so that refcounting frees it


def loops_named(s: ir.Stmt, var: str) -> list[ir.For]:
    """The loops ``var`` in ``s`` (several where a split's tail repeats them), outermost first."""
    if var not in loop_names(s):
        return []
    if isinstance(s, ir.For) and s.var == var:
        return [s]
    return [t for c in ir.children(s) for t in loops_named(c, var)]


def loops_between(s: ir.Stmt, outer: str | None, inner: str) -> list[ir.For]:
    """The loops enclosing loop ``inner`` and enclosed by loop ``outer`` (None: the root), outermost
    first, ``inner`` included."""
    return [t for t in _path_between(s, outer, inner) if isinstance(t, ir.For)]


def lets_between(s: ir.Stmt, outer: str | None, inner: str) -> list[tuple[str, E.Expr]]:
    """The let bindings around loop ``inner``'s body that loop ``outer`` encloses, outermost first."""
    return [(t.name, t.value) for t in _path_between(s, outer, inner) if isinstance(t, ir.LetStmt)]


def _path_between(s: ir.Stmt, outer: str | None, inner: str) -> list[ir.Stmt]:
    def path(t, acc):
        if inner not in loop_names(t):
            return None
        if isinstance(t, (ir.For, ir.LetStmt)):
            acc = acc + [t]
            if isinstance(t, ir.For) and t.var == inner:
                return acc
        for c in ir.children(t):
            p = path(c, acc)
            if p is not None:
                return p
        return None

    chain = path(s, []) or []
    if outer is None:
        return chain
    at = [k for k, t in enumerate(chain) if isinstance(t, ir.For) and t.var == outer]
    return chain[at[0] + 1:] if at else []


def count_refs(s: ir.Stmt, name: str) -> int:
    """How many times ``s`` reads or defines ``name`` (the sub-trees that touch no such name skipped)."""
    if name not in touched_names(s):
        return 0
    n = sum(len(E.func_refs_by_name(e).get(name, ())) for e in ir.exprs_of(s))
    if isinstance(s, ir.Provide) and s.func == name:
        n += 1
    return n + sum(count_refs(t, name) for t in ir.children(s))
