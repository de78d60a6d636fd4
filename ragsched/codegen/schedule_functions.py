"""Placing Funcs in the loop nest: where each is computed and stored, and the region each computes.

Funcs are visited consumers first. Each one's loop nests (``stage_loops``) go at the top of the loop
body it is computed at (root, or a consumer's loop for ``compute_at``); the region it must compute is
the box its consumers read inside that scope (``boxes``), with loops inside the scope ranging and loops
outside it held fixed: that is what makes ``compute_at`` compute one tile's worth. The region is grown
until it also covers what the Func's own updates read and write. Its storage (``Realize``) is placed
at the store level and covers everything computed and read there; when a serial loop lies between the
store and the compute level and the region slides along it, each iteration computes only the new part
(Halide's sliding window: ``sliding_window``) and the storage along that dimension is folded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..algebra import expr as E
from ..algebra import types as T
from ..algebra.bounds import Interval, prove
from ..algebra.simplify import simplify
from ..program import Function, Program, is_ragged
from ..schedule import loops as P
from ..schedule.resolve import FuncSchedule
from . import ir
from .boxes import Box, box_touched
from .flat_producers import flat_tiles
from .overwritten_points import overwritten_box, pure_stage_outside
from .sliding_window import slide
from .stage_loops import loop_name, req_max, req_min, resolve_tail, stage_nest
from .stmt_paths import count_refs, lets_between, loops_between, loops_named, replace_loop_body

I32 = T.INDEX


def extent_var(buffer: str, dim: int) -> E.Var:
    """The runtime extent of an output buffer's dimension (a kernel argument)."""
    return E.Var(f"{buffer}.extent.{dim}", I32)


def symbol_facts(program: Program) -> dict[str, Interval]:
    """What is known of the free symbols: Sizes and output extents are never negative."""
    zero = E.const(0, I32)
    facts = {s: Interval(zero, None) for s in program.sizes}
    for name in program.outputs:
        for k in range(program.func(name).rank):
            facts[extent_var(name, k).name] = Interval(zero, None)
    return facts


# ------------------------------------------------------------------------------------- placement
@dataclass
class Placed:
    """The loop nest with every Func placed, and what the runtime must check first.

    ``root_lets`` bind the regions of the Funcs computed at root, in order (each may use the ones
    before it): they stay symbols while later Funcs are placed, so that a producer's region is written
    in terms of its consumers' (and does not grow with the depth of a pyramid)."""

    stmt: ir.Stmt
    checks: list[ir.Requirement]
    copied_outputs: set[str]  # outputs computed into their own storage, then copied out
    root_lets: list[tuple[str, E.Expr]]


def output_box(f: Function) -> Box:
    zero = E.const(0, I32)
    return tuple(Interval(zero, E.sub(extent_var(f.name, k), 1)) for k in range(f.rank))


def within(inner: Box, outer: Box, facts) -> bool:
    """Whether ``inner`` provably lies inside ``outer``."""
    return all(i.lo is not None and i.hi is not None
               and prove(E.le(o.lo, i.lo), {}, facts) and prove(E.le(i.hi, o.hi), {}, facts)
               for i, o in zip(inner, outer, strict=True))


def _hull(a: Box | None, b: Box | None, facts) -> Box | None:
    if a is None or b is None:
        return a if b is None else b
    from ..algebra.bounds import hull

    return tuple(Interval(simplify(h.lo, facts) if h.lo is not None else None,
                          simplify(h.hi, facts) if h.hi is not None else None)
                 for h in (hull(x, y, facts) for x, y in zip(a, b, strict=True)))


def _same(a: Box, b: Box) -> bool:
    return all(x.lo == y.lo and x.hi == y.hi for x, y in zip(a, b, strict=True))


_TYPE_LIMIT = 2**31 - 1


def _check_bounded(f: Function, box: Box, what: str) -> None:
    for k, iv in enumerate(box):
        for end in (iv.lo, iv.hi):
            if end is None or isinstance(end, E.Const) and abs(end.value) >= _TYPE_LIMIT:
                raise ValueError(
                    f"cannot bound Func {f.name} along dimension {k}: {what} depends on data and is only "
                    f"limited by its type ({'unbounded' if end is None else end.value}); clamp that index "
                    "with rs.clamp(...)")


def _req_env(f: Function, box: Box) -> dict:
    env = {}
    for k, iv in enumerate(box):
        env[req_min(f.name, k).name] = Interval.point(iv.lo)
        env[req_max(f.name, k).name] = Interval.point(iv.hi)
    return env


def _req_bindings(f: Function, box: Box) -> list[tuple[str, E.Expr]]:
    out = []
    for k in range(f.rank):
        out += [(req_min(f.name, k).name, box[k].lo), (req_max(f.name, k).name, box[k].hi)]
    return out


def _req_lets(f: Function, box: Box, body: ir.Stmt) -> ir.Stmt:
    for name, value in reversed(_req_bindings(f, box)):
        body = ir.LetStmt(name, value, body)
    return body


def _loop_of(program: Program, scheds, site: tuple[str, int, str], who: str, what: str) -> str:
    consumer, stage, var = site
    plan = scheds[consumer].plans[stage]
    for d in plan.dims:
        if d.name == var:
            return loop_name(consumer, stage, d.node)
    where = f"update {stage - 1} of " if stage else ""
    raise ValueError(f"Func {who}: {what}({consumer if not stage else consumer + f'.update({stage - 1})'}, "
                     f"{var!r}): {where}Func {consumer} has no loop {var!r}; its loops are "
                     f"{', '.join(d.name for d in plan.dims) or 'none'}")


def place_funcs(program: Program, scheds: dict[str, FuncSchedule], facts) -> Placed:
    stmt: ir.Stmt = ir.Block(())
    checks: list[ir.Requirement] = []
    copied: set[str] = set()
    root_lets: list[tuple[str, E.Expr]] = []
    tiles, flat_reads = flat_tiles(program, scheds)
    for f in reversed(program.functions):
        fs = scheds[f.name]
        is_out = f.name in program.outputs
        loop = None if fs.compute is None else _loop_of(program, scheds, fs.compute, f.name, "compute_at")
        store = None if fs.store is None else _loop_of(program, scheds, fs.store, f.name, "store_at")
        _check_sites(f, fs, stmt, loop, store)
        root_demand = box_touched(stmt, f.name, reads=True, facts=facts)
        if root_demand is None and not is_out:
            continue  # nobody reads it
        tile = tiles.get(f.name, [None] * len(fs.plans))
        if root_demand is not None:  # (a Func stored by flat position is read inside its shape's entries)
            checks += _read_checks(f, fs, root_demand, is_out, set(tile[0].dims) if tile[0] else set())
        nests = [stage_nest(f, s, plan, is_out, tile[s], flat_reads.get((f.name, s)))
                 for s, plan in enumerate(fs.plans)]
        overwritten = overwritten_box(f, fs.plans[1]) if f.updates and tile[0] is None else None
        if overwritten:
            nests[0] = pure_stage_outside(f, nests[0], overwritten)
        chain = loops_between(stmt, store, loop) if store != loop and loop is not None else []
        lets = lets_between(stmt, store, loop) if chain else []
        placed: list[tuple[Box, tuple[int, ...]]] = []

        def with_produce(scope: ir.Stmt, f=f, fs=fs, nests=nests, chain=chain, lets=lets, placed=placed,
                         out=is_out):
            made = _produce(f, fs, nests, scope, out, chain, lets, facts)
            if made is None:
                return scope
            region, computed, fold = made
            placed.append((region, fold))
            return ir.block(_req_lets(f, computed, ir.Produce(f.name, ir.block(*nests))), scope)

        if loop is None:
            made = _produce(f, fs, nests, stmt, is_out, chain, lets, facts)
            region, computed, fold = made
            root_lets += _req_bindings(f, computed)
            placed.append((region, fold))
            stmt = ir.block(ir.Produce(f.name, ir.block(*nests)), stmt)
        else:
            stmt = replace_loop_body(stmt, loop, with_produce)
        region, fold = placed[0] if len(placed) == 1 else (output_box(f), tuple(0 for _ in range(f.rank)))
        _check_no_race(f, stmt, store, loop)
        stmt, was_copied = _realize(f, fs, stmt, store, loop, region, is_out, facts, checks, fold)
        if was_copied:
            copied.add(f.name)
    for i in program.inputs:
        box = box_touched(stmt, i.name, reads=True, facts=facts)
        if box is not None:
            for k, iv in enumerate(box):
                if iv.lo is None or iv.hi is None:
                    raise ValueError(f"cannot bound the reads of input {i.name} along dimension {k}; wrap it in "
                                     "a boundary condition (rs.clamp_edge, ...) or clamp the index")
                if not is_ragged(i.shape[k]):  # ragged dimensions: checked per entry (ragged_reads)
                    checks.append(ir.Requirement(i.name, k, iv.lo, iv.hi, i.shape[k], "input"))
    return Placed(stmt, checks, copied, root_lets)


def _check_sites(f: Function, fs: FuncSchedule, stmt: ir.Stmt, loop: str | None, store: str | None) -> None:
    """The compute loop exists, encloses every use, and lies at or inside the store loop."""
    if loop is not None:
        scopes = [t.body for t in loops_named(stmt, loop)]
        if not scopes:
            raise ValueError(f"Func {f.name}: compute_at names loop {fs.compute[2]!r} of Func {fs.compute[0]}, "
                             "which is not computed in a loop nest (it is inline or unused)")
        if sum(count_refs(sc, f.name) for sc in scopes) != count_refs(stmt, f.name):
            raise ValueError(f"Func {f.name} is computed inside loop {fs.compute[2]!r} of {fs.compute[0]}, but it "
                             "is also used outside that loop; compute it at a loop that encloses all its uses "
                             "(or at root)")
    if store is not None and store != loop and not loops_between(stmt, store, loop or ""):
        raise ValueError(f"Func {f.name}: store_at({fs.store[0]}, {fs.store[2]!r}) must be at or outside the "
                         "loop it is computed at")


def _produce(f: Function, fs: FuncSchedule, nests, scope: ir.Stmt, is_out: bool, chain, lets, facts):
    """(the region ``f`` must cover for what ``scope`` reads of it, the part each iteration computes
    (less with a sliding window), the storage fold), or None when ``scope`` reads nothing of ``f``."""
    demand = box_touched(scope, f.name, reads=True, facts=facts)
    region = _hull(demand, output_box(f), facts) if is_out else demand
    if region is None:
        return None
    _check_bounded(f, region, "an index of a consumer reading it")
    for k, (lo, ext) in fs.bounds.items():
        region = tuple(Interval(E.const(lo, I32), E.const(lo + ext - 1, I32)) if j == k else iv
                       for j, iv in enumerate(region))
    region = _grow_for_updates(f, region, nests[1:], facts, _exact_update_dims(f, fs))
    computed, fold = region, tuple(0 for _ in region)
    if chain and not f.updates:
        # a dim whose loops pad or shift computes past the region: its storage is not folded (a padded
        # point's slot would be one the consumer still reads)
        rounded = {k for k, a in enumerate(f.args)
                   if not _keeps_inside(fs.plans[0], a, 0, f.shape is not None and is_ragged(f.shape[k]))}
        computed, fold = slide(f, region, chain, lets, facts, rounded)
    return region, _from_first_index(f, computed, facts), fold


def _from_first_index(f: Function, computed: Box, facts) -> Box:
    """The points ``f`` computes, started at index 0 along the ragged dims of its declared shape (whose
    domain starts there) where their first index may be below 0 even with every position and bound it
    names at 0 or more: a consumer's read at ``min(2 i + 1, lens[b] - 1)`` reaches -1 only in an empty
    entry, where it reads nothing, but would have ``f`` computed at -1 (reading its inputs past the
    entry). Its storage still covers the whole region. Other first indices (a tile's ``16 jo``, which the
    facts here do not bound) are kept as they are: a max there would hide per-tile storage's constant
    extents."""
    if f.shape is None:
        return computed
    zero = E.const(0, I32)

    def below_zero_maybe(lo: E.Expr) -> bool:
        named = {n.name: Interval(E.const(0, n.dtype), None) for n in E.walk(lo) if isinstance(n, E.Var)}
        return not prove(E.le(zero, lo), {}, {**named, **facts})

    return tuple(Interval(E.maximum(iv.lo, zero), iv.hi)
                 if is_ragged(f.shape[k]) and iv.lo is not None and below_zero_maybe(iv.lo) else iv
                 for k, iv in enumerate(computed))


def _exact_update_dims(f: Function, fs: FuncSchedule) -> set[int]:
    """The dims along which every update of ``f`` has a pure Var whose loops do not shift: the updates
    touch the region there, whatever bounds inference makes of their split and fused loops (Halide's
    bounds of an update's pure Vars are the Func's region for the same reason), and points past it that
    loop padding (``pad``) adds. Those are not grown into the region: an update reads ``f`` at its pure
    Vars' own positions, so a padded point reads and writes only padded points, which no consumer reads
    (the storage covers them: it is sized by what the loops touch). Grown into the region, each pass
    would round the region up again."""
    exact = set(range(f.rank))
    for k, u in enumerate(f.updates):
        plan = fs.plans[k + 1]
        at = {p: v for v, p in u.pure_vars}
        exact &= {p for p, v in at.items()
                  if _keeps_inside(plan, v, k + 1, f.shape is not None and is_ragged(f.shape[p]), padding=True)}
    return exact


def _keeps_inside(plan, var: str, stage: int, ragged: bool, padding: bool = False) -> bool:
    """Whether the loops of ``var`` stay inside the region (``padding``: or past it by loop padding only)."""
    nodes, inside = {var}, True
    for t in plan.transforms:
        if isinstance(t, P.SplitOf) and t.old in nodes:
            nodes |= {t.outer, t.inner}
            tail = "guard" if ragged and t.tail == "auto" else resolve_tail(t.tail, stage)
            inside &= tail in ("guard", "split")
        elif isinstance(t, P.FuseOf) and nodes & {t.outer, t.inner}:
            nodes.add(t.fused)
        elif isinstance(t, P.SortOf) and t.old in nodes:
            nodes.add(t.rank)
        elif isinstance(t, P.PadOf) and t.old in nodes:
            inside &= t.multiple == 1 or padding
    return inside


def _grow_for_updates(f: Function, region: Box, update_nests, facts, exact: set[int] = frozenset()) -> Box:
    """Cover every point the updates of ``f`` write or read of ``f`` itself (scatters, recurrences)."""
    if not update_nests:
        return region
    body = ir.block(*update_nests)
    for _ in range(4):
        touched = box_touched(body, f.name, reads=True, writes=True, facts=facts, env=_req_env(f, region))
        if touched is not None:
            touched = tuple(region[k] if k in exact else iv for k, iv in enumerate(touched))
        grown = _hull(region, touched, facts)
        _check_bounded(f, grown, "an index its update definitions write or read")
        if _same(grown, region):
            return region
        region = grown
    raise ValueError(f"cannot bound Func {f.name}: the region its updates write keeps growing; clamp the "
                     "indices of its update definitions")


def _read_checks(f: Function, fs: FuncSchedule, demand: Box, is_out: bool, flat=frozenset()) -> list[ir.Requirement]:
    out = []
    for k, iv in enumerate(demand):
        if k in flat:
            continue
        if k in fs.bounds:
            lo, ext = fs.bounds[k]
            out.append(ir.Requirement(f.name, k, E.sub(iv.lo, lo), E.sub(iv.hi, lo), E.const(ext, I32), "bound"))
        elif is_out:
            out.append(ir.Requirement(f.name, k, iv.lo, iv.hi, extent_var(f.name, k), "shape"))
        elif f.shape is not None and not is_ragged(f.shape[k]):
            out.append(ir.Requirement(f.name, k, iv.lo, iv.hi, f.shape[k], "shape"))
    return out


def _realize(f: Function, fs: FuncSchedule, stmt: ir.Stmt, store: str | None, compute: str | None,
             region: Box, is_out: bool, facts, checks: list, fold: tuple[int, ...]) -> tuple[ir.Stmt, bool]:
    """Wrap the store scope of ``f`` in its storage; outputs write to the caller's buffer when they can.
    A split with ``tail="split"`` repeats its loops (whole tiles, then the rest): each copy of the store
    loop gets storage sized by what its own body touches (the rest's tile may be shifted past the whole
    tiles' box)."""
    if is_out:
        scopes = [stmt] if store is None else [t.body for t in loops_named(stmt, store)]
        boxes = [_storage_box(f, fs, sc, facts) for sc in scopes]
        box, reads = boxes[0]
        for b, r in boxes[1:]:
            box, reads = _hull(box, b, facts), _hull(reads, r, facts)
        out = output_box(f)
        if within(box, out, facts):
            return stmt, False
        if f.updates:  # an update's reads of the point it writes are its writes: not reads past the output
            reads = None
            for sc in scopes:
                reads = _hull(reads, box_touched(_without_reads_in_place(sc, f.name), f.name, reads=True,
                                                 facts=facts), facts)
        if within(_hull(region, reads, facts), out, facts):
            # only the schedule's own rounding (tail shift/pad) reaches outside: check it at each call
            checks += [ir.Requirement(f.name, k, iv.lo, iv.hi, extent_var(f.name, k), "output")
                       for k, iv in enumerate(box)]
            return stmt, False
        # computed into storage of its own and copied out: the caller's array must lie within a bound()
        # dimension's storage (relative to the bound's min)
        checks += [ir.Requirement(f.name, k, E.const(-lo, I32), E.sub(extent_var(f.name, k), E.const(lo + 1, I32)),
                                  E.const(ext, I32), "output bound") for k, (lo, ext) in fs.bounds.items()]

    tiles = _layout_tiles(f, fs)
    if fs.layout is not None:  # a tiled dimension is stored whole (its slots are not reused by a fold)
        fold = tuple(0 if k in tiles else n for k, n in enumerate(fold))

    def realize(body: ir.Stmt) -> ir.Stmt:
        box, _ = _storage_box(f, fs, body, facts)
        # store_padded and whole layout tiles: that dimension's storage rounded up to its multiple
        multiple = {k: math.lcm(fs.store_pads.get(k, 1), tiles.get(k, 1)) for k in range(f.rank)}
        bounds = tuple((iv.lo, simplify(E.round_up(E.add(E.sub(iv.hi, iv.lo), 1), multiple[k]), facts))
                       for k, iv in enumerate(box))
        return ir.Realize(f.name, f.dtype, bounds, body, fold, fs.storage_order, fs.layout)

    if store is None:
        return realize(stmt), is_out
    return replace_loop_body(stmt, store, realize), is_out


def _without_reads_in_place(scope: ir.Stmt, name: str) -> ir.Stmt:
    """``scope`` with each read of ``name`` at the very point a definition of it writes (``f(b, i) = f[b, i]
    + ...``) replaced by 0: what is left are its reads of other points."""
    def on_stmt(s: ir.Stmt) -> ir.Stmt:
        if not (isinstance(s, ir.Provide) and s.func == name):
            return s
        value = E.transform(s.value, lambda n: E.const(0, n.dtype)
                            if isinstance(n, E.FuncRef) and n.name == name and n.args == s.args else n)
        return ir.Provide(s.func, s.args, value, s.point)

    return ir.map_stmt(scope, lambda e: e, on_stmt)


def _layout_tiles(f: Function, fs: FuncSchedule) -> dict[int, int]:
    """Dimension -> tile size of the Func's storage layout (none without one)."""
    if fs.layout is None:
        return {}
    return {f.args.index(name): 1 << bits for name, bits in fs.layout.outs}


def _storage_box(f: Function, fs: FuncSchedule, scope: ir.Stmt, facts) -> tuple[Box, Box]:
    """(the box ``f``'s storage must cover inside ``scope``: what it reads and writes there, its reads)."""
    reads = box_touched(scope, f.name, reads=True, facts=facts)
    writes = box_touched(scope, f.name, reads=False, writes=True, facts=facts)
    if fs.bounds and reads is not None and writes is not None:
        # reads along a bound() dim are checked against the bound before running: the storage is the bound
        # (and whatever the Func's own loops write), a constant size where the reads speak of symbols
        reads = tuple(Interval(E.const(fs.bounds[k][0], I32), E.const(sum(fs.bounds[k]) - 1, I32))
                      if k in fs.bounds else iv for k, iv in enumerate(reads))
    box = _hull(reads, writes, facts)
    _check_bounded(f, box, "an index it is computed or read at")
    return box, reads


def _check_no_race(f: Function, stmt: ir.Stmt, store: str | None, compute: str | None) -> None:
    """Storage outside a parallel loop that computes into it would be shared by the threads."""
    if compute is None or store == compute:
        return
    for t in loops_between(stmt, store, compute):
        if t.kind == ir.ForKind.PARALLEL:
            raise ValueError(f"Func {f.name} is stored outside the parallel loop {t.var} but computed inside it: "
                             "the threads would share (and race on) its storage; store it inside that loop")
