"""The points of a Func's pure definition that its first update overwrites before anything reads them
are not computed.

A Func initialised everywhere and then rewritten by a scan (``f[r] = g(f[r - 1])`` over r from 1) or by a
table of slices built from the slice before (the maxima over windows of 2^t rows: slice t from slice t -
1 for t from 1) stores its pure values over the whole region and then overwrites most of them: the pure
stage of such a pyramid of slices wrote six slices of the image where one is read. Here the first
update's written box W (its RVars' ranges, its pure Vars' whole region) is found, and when every read of
the Func in that update is of an earlier iteration of its outermost reduction loop (``f[r - c, ...]``, c
>= 1, at the update's own pure Vars), no point of W keeps a pure value that is ever read: the pure stage
stores only outside W (a test of the point's W dims around each store). Later updates and consumers
run after the first update, so they read only its values inside W.
"""

from __future__ import annotations

from ..algebra import expr as E
from ..algebra.simplify import simplify
from ..program import Function, is_ragged
from ..schedule import loops as P
from . import ir

Bounds = dict[int, tuple[E.Expr, E.Expr]]


def overwritten_box(f: Function, update_plan: P.StagePlan) -> Bounds | None:
    """dim -> (lo, hi) of the points the first update of ``f`` writes before any read of them, along the
    dims where it does not run over a pure Var (along those it covers the whole region); None unless that
    is proven."""
    if not f.updates or f.shape is not None and any(is_ragged(s) for s in f.shape):
        return None
    u = f.updates[0]
    if u.rdom is None or u.rdom.predicate is not None:
        return None
    rvars = set(u.rdom.vars)
    pure_at = {k: v for v, k in u.pure_vars}
    for e in (*u.rdom.mins, *u.rdom.extents):  # a box: RDom bounds of Sizes, free of the Vars and of data
        if E.free_vars(e) & (rvars | set(f.args)) or E.reads_data(e):
            return None
    box: Bounds = {}
    written_by: dict[str, int] = {}  # RVar -> the dim it writes
    for k, a in enumerate(u.args):
        if k in pure_at:
            continue
        if isinstance(a, E.Const):
            box[k] = (a, a)
        elif isinstance(a, E.Var) and a.name in rvars and a.name not in written_by:
            j = u.rdom.vars.index(a.name)
            written_by[a.name] = k
            box[k] = (u.rdom.mins[j], simplify(E.sub(E.add(u.rdom.mins[j], u.rdom.extents[j]), 1)))
        else:
            return None
    carrier = _outermost_rvar(update_plan, u.rdom.vars)
    if carrier is None or carrier not in written_by:
        return None
    k = written_by[carrier]
    for r in E.func_refs(u.value):
        if r.name == f.name and not _earlier(r.args[k], carrier):
            return None
    return box


def _earlier(index: E.Expr, carrier: str) -> bool:
    """``index`` is ``carrier - c`` for a constant c >= 1."""
    parts, c = E.affine_parts(simplify(E.sub(index, E.Var(carrier, index.dtype))))
    return not parts and c <= -1


def _outermost_rvar(plan: P.StagePlan, rvars: tuple[str, ...]) -> str | None:
    """The RVar whose loop, neither split nor fused, runs outside every loop made from the other RVars."""
    made = {v: plan.derived({v}) for v in rvars}
    for d in plan.dims:
        owner = next((v for v, nodes in made.items() if d.node in nodes), None)
        if owner is not None:
            return owner if made[owner] == {owner} else None
    return None


def pure_stage_outside(f: Function, nest: ir.Stmt, box: Bounds) -> ir.Stmt:
    """The pure stage's ``nest`` with each store guarded by its point lying outside ``box``. One nest with a
    test, not copies over the boxes of the region less W: the copies' shifted tails would start before a
    piece shorter than a tile (a scan's first point, split by 4, read from -3), and four copies of a
    vectorized nest doubled LLVM's time. The test reads only the box's dims (reduction dims, rarely the
    vector lanes), so it is decided once per row where those loops are outside."""

    def guard(s: ir.Stmt) -> ir.Stmt:
        if not (isinstance(s, ir.Provide) and s.func == f.name):
            return s
        inside = None
        for k, (lo, hi) in sorted(box.items()):
            a = s.args[k]
            lo, hi = (x if x.dtype == a.dtype else E.cast(a.dtype, x) for x in (lo, hi))
            term = E.And(E.le(lo, a), E.le(a, hi))
            inside = term if inside is None else E.And(inside, term)
        return ir.IfThenElse(E.Not(inside), s)

    return ir.map_stmt(nest, lambda e: e, guard)
