"""The points of a Func's pure definition that its first update overwrites before anything reads them
are not computed.

A Func initialised everywhere and then rewritten by a scan (``f[r] = g(f[r - 1])`` over r from 1) or by a
table of slices built from the slice before (the maxima over windows of 2^t rows: slice t from slice t -
1 for t from 1) stores its pure values over the whole region and then overwrites most of them: the pure
stage of such a pyramid of slices wrote six slices of the image where one is read. Here the first
update's written box W (its RVars' ranges, its pure Vars' whole region) is found, and when every read of
the Func in that update is of an earlier iteration of its outermost reduction loop (``f[r - c, ...]``, c
>= 1, at the update's own pure Vars), no point of W keeps a pure value that is ever read: the pure stage
runs over the region less W, as boxes (per dim of W, the part below and above it, the dims before it
restricted to W; their shifted tails guarded, since a piece may be shorter than a tile). Later updates
and consumers run after the first update, so they read only its values inside W.
"""

from __future__ import annotations

from dataclasses import replace

from ..algebra import expr as E
from ..algebra.simplify import simplify
from ..program import Function, is_ragged
from ..schedule import loops as P
from . import ir
from .stage_loops import req_max, req_min, resolve_tail

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
    made = {v: {v} for v in rvars}
    for t in plan.transforms:
        for nodes in made.values():
            if isinstance(t, P.SplitOf) and t.old in nodes:
                nodes |= {t.outer, t.inner}
            elif isinstance(t, P.FuseOf) and nodes & {t.outer, t.inner}:
                nodes.add(t.fused)
            elif isinstance(t, (P.SortOf, P.PadOf)) and t.old in nodes:
                nodes.add(getattr(t, "rank", t.old))
    for d in plan.dims:
        owner = next((v for v, nodes in made.items() if d.node in nodes), None)
        if owner is not None:
            return owner if made[owner] == {owner} else None
    return None


def guarded_tails(plan: P.StagePlan) -> P.StagePlan:
    """The pure stage's plan with shifted tails guarded: a piece may be shorter than a tile, and a tile
    shifted back from its end would start before the region (a scan's first point, split by 4: reads
    from -3)."""
    return replace(plan, transforms=tuple(
        replace(t, tail="guard") if isinstance(t, P.SplitOf) and resolve_tail(t.tail, 0) == "shift" else t
        for t in plan.transforms))


def pure_stage_outside(f: Function, nest: ir.Stmt, box: Bounds) -> ir.Stmt:
    """Copies of the pure stage's ``nest`` (its loops over ``f``'s ``req`` symbols) that together cover the
    region less ``box``: per dim of the box, below it and above it, the dims before it inside the box."""
    pieces = []
    inside: dict[int, tuple[E.Expr, E.Expr]] = {}
    for k in sorted(box):
        lo, hi = req_min(f.name, k), req_max(f.name, k)
        w_lo, w_hi = (E.cast(lo.dtype, x) if x.dtype != lo.dtype else x for x in box[k])
        for part in ((lo, E.minimum(hi, E.sub(w_lo, 1))), (E.maximum(lo, E.add(w_hi, 1)), hi)):
            pieces.append(_over(f, nest, {**inside, k: part}, len(pieces)))
        inside[k] = (E.maximum(lo, w_lo), E.minimum(hi, w_hi))
    return ir.block(*pieces)


def _over(f: Function, nest: ir.Stmt, ranges: dict[int, tuple[E.Expr, E.Expr]], n: int) -> ir.Stmt:
    """``nest`` over the given ranges of some dims (its ``req`` symbols replaced by lets of its own)."""
    names = {}
    for k in ranges:
        for end, sym in (("min", req_min(f.name, k)), ("max", req_max(f.name, k))):
            names[sym.name] = E.Var(f"{f.name}.s0.part{n}.{k}.{end}", sym.dtype)
    body = ir.map_stmt(nest, lambda e: E.substitute(e, names))
    for k, (lo, hi) in sorted(ranges.items(), reverse=True):
        body = ir.LetStmt(names[req_max(f.name, k).name].name, simplify(hi), body)
        body = ir.LetStmt(names[req_min(f.name, k).name].name, simplify(lo), body)
    return body
