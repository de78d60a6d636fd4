"""The loop nest of one stage (a pure definition or an update) under its plan (``schedule.loops``).

Loops run over the plan's dims, outermost first. A split loop's original variable becomes a let of its
parts (``x = x.min + xo * factor + xi``; shifted inwards for ``tail="shift"``), defined as soon as all
its parts are open, guarded by ``if x <= x.max`` for ``tail="guard"``; ``tail="split"`` emits a main
nest over whole tiles and a remainder nest. The region a stage covers is given by the symbols
``req_min``/``req_max`` of the Func (bound later, where the Func is computed); RVars cover their RDom.
Stores are still multi-dimensional (``Provide``) and reads still ``FuncRef``s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..algebra import expr as E
from ..algebra import types as T
from ..program import Function, dim_index, dims_used, is_ragged
from ..schedule.loops import FuseOf, PadOf, SortOf, SplitOf, StagePlan
from . import ir
from .flat_loops import TABLE, clamped, sorted_order
from .isl_tiles import split_bounds

I32 = T.INDEX


def loop_name(func: str, stage: int, var: str) -> str:
    return f"{func}.s{stage}.{var}"


def req_min(func: str, k: int) -> E.Var:
    """The least coordinate of dimension ``k`` that ``func`` must compute (bound at its compute site)."""
    return E.Var(f"{func}.req.{k}.min", I32)


def req_max(func: str, k: int) -> E.Var:
    return E.Var(f"{func}.req.{k}.max", I32)


def resolve_tail(tail: str, stage: int) -> str:
    """"auto": shift inwards in a pure definition, guard in an update (a shifted or rounded-up tile would
    apply a non-idempotent update twice to some points, or to points outside the region)."""
    if tail != "auto":
        return tail
    return "shift" if stage == 0 else "guard"


@dataclass
class _Nest:
    """What building one stage's loops needs to know."""

    func: Function
    stage: int
    plan: StagePlan
    mins: dict[str, E.Expr]  # original dims: first coordinate
    extents: dict[str, E.Expr]  # original dims: number of iterations
    value_of: dict[str, E.Expr]  # algorithm Var name -> its value (a symbol of this stage)
    body: ir.Stmt  # the innermost statement (a Provide, maybe under the RDom predicate)
    output: bool = True  # an output of the pipeline (its storage is the caller's: no padding)
    ragged: frozenset = frozenset()  # dims whose extent is the entry's own (a ragged domain)
    region: dict = None  # original dims: extent of the region (a ragged dim's: the longest entry's bound)
    tile: FlatTile | None = None  # this stage's fuse runs over positions of a consumer's flat loop

    def sym(self, dim: str) -> E.Var:
        return E.Var(loop_name(self.func.name, self.stage, dim), I32)


@dataclass(frozen=True)
class FlatTile:
    """A producer computed per tile of a consumer's flat ragged loop (``flat_producers``): the producer's
    fuse ``fuse`` of its dims ``dims`` (entry, position) runs over the flat positions the tile needs, which
    the producer stores along ``dims[0]`` (``dims[1]`` holds 0); its entry and position at each are the
    consumer's, read from the consumer's tables (``consumer``'s flat loop ``flat``)."""

    fuse: FuseOf
    dims: tuple[int, int]
    consumer: _Nest
    flat: FuseOf


def stage_nest(f: Function, stage: int, plan: StagePlan, output: bool = True, tile: FlatTile | None = None,
               flat_reads: dict | None = None) -> ir.Stmt:
    """The loops computing stage ``stage`` of ``f`` over its required region. ``tile``: the stage's flat
    fuse over a consumer's positions; ``flat_reads``: producer -> (its dims, this stage's ragged fuse) for
    the producers computed per tile of this stage's flat loop, read by flat position."""
    n = nest_of(f, stage, plan, output)
    if tile is not None:
        n.tile = tile
        n.body = _stored_by_position(n, tile)
    for producer, (dims, fz) in (flat_reads or {}).items():
        n.body = _read_by_position(n, producer, dims, fz)
    return with_sort_tables(n, _build(n, list(plan.dims), {}, set()))


def nest_of(f: Function, stage: int, plan: StagePlan, output: bool = True) -> _Nest:
    """What building the loops of stage ``stage`` of ``f`` needs: its dims' ranges, values and body."""
    if stage == 0:
        pure = [(a, k) for k, a in enumerate(f.args)]
        rdom = None
        args, value = [E.Var(a, I32) for a in f.args], f.init
    else:
        d = f.updates[stage - 1]
        pure, rdom, args, value = list(d.pure_vars), d.rdom, list(d.args), d.value
    value_of = {v: E.Var(loop_name(f.name, stage, v), I32) for v, _ in pure}
    if rdom is not None:
        value_of.update({v: E.Var(loop_name(f.name, stage, v), I32) for v in rdom.vars})
    sub = lambda e: E.substitute(e, value_of)  # noqa: E731
    mins, extents = {}, {}
    for v, k in pure:
        mins[v], extents[v] = req_min(f.name, k), E.add(E.sub(req_max(f.name, k), req_min(f.name, k)), 1)
    region = dict(extents)
    ragged = _bound_by_domain(f, pure, mins, extents, value_of)
    for t in plan.transforms:
        if isinstance(t, PadOf):  # loop padding: the extent rounded up (past the entry for a ragged dim)
            extents[t.old] = E.round_up(extents[t.old], t.multiple)
    body: ir.Stmt = ir.Provide(f.name, tuple(sub(a) for a in args), sub(value), point=stage == 0)
    if rdom is not None:
        for v, lo, ext in zip(rdom.vars, rdom.mins, rdom.extents, strict=True):
            mins[v], extents[v] = sub(lo), sub(ext)
        if rdom.predicate is not None:
            body = ir.IfThenElse(sub(rdom.predicate), body)
    return _Nest(f, stage, plan, mins, extents, value_of, body, output, frozenset(ragged), region)


def _position(n: _Nest, t: FuseOf) -> E.Expr:
    """The consumer's flat position at iteration ``t.fused`` of a tile's fuse (``FlatTile``)."""
    return E.add(n.mins[t.outer], n.sym(t.fused))


def _stored_by_position(n: _Nest, tile: FlatTile) -> ir.Stmt:
    """The stage's body storing (and reading itself) at (flat position, 0) in place of (entry, position)."""
    kb, ki = tile.dims
    entry, pos = n.sym(tile.fuse.outer), n.sym(tile.fuse.inner)
    at = _position(n, tile.fuse)

    def flat(args):
        if args[kb] != entry or args[ki] != pos:
            raise ValueError(f"Func {n.func.name} is computed per tile of Func {tile.consumer.func.name}'s flat "
                             f"loop {tile.flat.fused!r}, so it is stored by flat position; its definitions may only "
                             f"read and write it at ({tile.fuse.outer}, {tile.fuse.inner}) along dims {kb}, {ki}")
        return tuple(at if k == kb else E.const(0, I32) if k == ki else a for k, a in enumerate(args))

    refs = lambda e: E.transform(e, lambda x: E.FuncRef(x.name, flat(x.args), x.dtype)  # noqa: E731
                                 if isinstance(x, E.FuncRef) and x.name == n.func.name else x)

    def on_stmt(s):
        return replace(s, args=flat(s.args)) if isinstance(s, ir.Provide) and s.func == n.func.name else s

    return ir.map_stmt(n.body, refs, on_stmt)


def _read_by_position(n: _Nest, producer: str, dims: tuple[int, int], fz: FuseOf) -> ir.Stmt:
    """The stage's reads of ``producer`` (computed per tile of this stage's flat loop ``fz``) at its flat
    position: the reads must be at this stage's own (entry, position)."""
    kb, ki = dims
    entry, pos = n.sym(fz.outer), n.sym(fz.inner)

    def flat(x: E.Expr) -> E.Expr:
        if not (isinstance(x, E.FuncRef) and x.name == producer):
            return x
        if x.args[kb] != entry or x.args[ki] != pos:
            raise ValueError(f"Func {producer} is computed per tile of Func {n.func.name}'s flat loop {fz.fused!r}, "
                             f"so Func {n.func.name} may read it only at its own ({fz.outer}, {fz.inner}) (along "
                             f"dims {kb}, {ki}), not at ({x.args[kb]}, {x.args[ki]})")
        at = n.sym(fz.fused)
        return E.FuncRef(x.name, tuple(at if k == kb else E.const(0, I32) if k == ki else a
                                       for k, a in enumerate(x.args)), x.dtype)

    return ir.map_stmt(n.body, lambda e: E.transform(e, flat))


def _padded_by(n: _Nest, d: str) -> int:
    return next((t.multiple for t in n.plan.transforms if isinstance(t, PadOf) and t.old == d), 1)


def _bound_by_domain(f: Function, pure, mins: dict, extents: dict, value_of: dict) -> set[str]:
    """Stop each ragged dimension of a declared ragged shape at the entry's own extent, given by the
    values of the dimensions it depends on (their loops must then enclose it): no point outside the
    domain is computed. Returns the dims so bounded."""
    out = set()
    at = {k: v for v, k in pure}
    for v, k in pure:
        if f.shape is None or not is_ragged(f.shape[k]):
            continue
        used = dims_used(f.shape[k])
        if not used <= at.keys():
            continue  # an update that does not run over the dims the extent uses: its region bounds it
        entry = E.substitute(f.shape[k], {dim_index(j): value_of[at[j]] for j in used})
        extents[v] = E.minimum(extents[v], E.sub(entry, mins[v]))
        out.add(v)
    return out


def _tail(n: _Nest, t: SplitOf) -> str:
    """The split's tail strategy; a ragged dimension may be shorter than the factor, so it guards. So may
    the parts of a ragged dimension's split (the rest of an entry, with tail="split", is shorter). A
    padded dim split by a divisor of its padding multiple has no tail: whole tiles cover it exactly."""
    if _padded_by(n, t.old) % t.factor == 0 and t.tail in ("auto", "pad", "guard", "split"):
        return "pad"
    if t.old in loops_from(n, n.ragged):
        if t.tail in ("shift", "pad"):
            raise ValueError(f"Func {n.func.name}: split({t.old!r}, ..., tail={t.tail!r}): {t.old!r} has a ragged "
                             "extent, which may be shorter than the factor; use tail='guard' or 'split'")
        if t.tail == "auto":
            return "guard"
    return resolve_tail(t.tail, n.stage)


def loops_from(n: _Nest, roots) -> set[str]:
    """``roots`` and every loop split or fused from one of them."""
    return n.plan.derived(roots)


# ----------------------------------------------------------------------------------- dims and values
def _split_of(plan: StagePlan, name: str, role: str) -> SplitOf | None:
    for t in plan.transforms:
        if isinstance(t, SplitOf) and getattr(t, role) == name:
            return t
    return None


def _fuse_of(plan: StagePlan, name: str, role: str) -> FuseOf | None:
    for t in plan.transforms:
        if isinstance(t, FuseOf) and getattr(t, role) == name:
            return t
    return None


def _dim_min(n: _Nest, d: str) -> E.Expr:
    """The first coordinate of node ``d``: its region's for an original dim, 0 for loops made later."""
    return n.mins.get(d, E.const(0, I32))


def _extent(n: _Nest, d: str, overrides: dict) -> E.Expr:
    """Iterations of dim ``d`` (original, or made by a split or fuse)."""
    if d in overrides:
        return overrides[d]
    if d in n.extents:  # an original dim (node ids of new loops never repeat a name in use)
        return n.extents[d]
    s = _split_of(n.plan, d, "outer")
    if s is not None:
        old = _extent(n, s.old, overrides)
        return E.floordiv(E.add(old, s.factor - 1), s.factor)
    s = _split_of(n.plan, d, "inner")
    if s is not None:
        return E.const(s.factor, I32)
    so = _sort_of(n.plan, d)
    if so is not None:
        return _extent(n, so.old, overrides)
    fz = _fuse_of(n.plan, d, "fused")
    if fz is not None:
        if n.tile is not None and fz == n.tile.fuse:  # the tile's positions: the region along its entry dim
            return _extent(n, fz.outer, overrides)
        if ragged_fuse(n, fz, overrides):
            return _flat_names(n, fz)[2]
        return E.mul(_extent(n, fz.outer, overrides), _extent(n, fz.inner, overrides))
    return n.extents[d]


def _sort_of(plan: StagePlan, rank: str) -> SortOf | None:
    return next((t for t in plan.transforms if isinstance(t, SortOf) and t.rank == rank), None)


def _order_name(n: _Nest, t: SortOf) -> str:
    return f"{n.func.name}{TABLE}{n.stage}.{t.rank}.order"


def with_sort_tables(n: _Nest, stmt: ir.Stmt) -> ir.Stmt:
    """``stmt`` (the stage's loops) after the code that computes the visiting order of each sorted loop:
    its values by decreasing extent of the ragged dims that depend on it (a counting sort)."""
    for t in n.plan.transforms:
        if not isinstance(t, SortOf):
            continue
        sym = n.sym(t.old).name
        ragged = [v for v in sorted(n.ragged) if sym in E.free_vars(n.extents[v])]
        if not ragged:
            raise ValueError(f"Func {n.func.name}: sort_by_length({t.old!r}): no ragged dim of this stage has an "
                             f"extent that depends on {t.old!r}")
        lo = _dim_min(n, t.old)
        entries = n.extents[t.old]
        v = ragged[0]
        longest = n.region[v]

        def length(entry, v=v, lo=lo, longest=longest, sym=sym):
            ext = E.substitute(n.extents[v], {sym: E.add(lo, entry)})
            return E.maximum(E.minimum(ext, longest), 0)
        stmt = sorted_order(_order_name(n, t), f"{n.func.name}{TABLE}{n.stage}.{t.rank}", entries, longest,
                            length, stmt)
    return stmt


def ragged_fuse(n: _Nest, t: FuseOf, overrides: dict) -> bool:
    """A fuse of an entry loop with a ragged loop inside it (whose extent reads the entry's value): one
    flat loop over the valid pairs, with row ids (``flat_loop_tables``)."""
    return n.sym(t.outer).name in E.free_vars(_extent(n, t.inner, overrides))


def _flat_names(n: _Nest, t: FuseOf) -> tuple[str, str, E.Var]:
    """The buffers of a flat ragged loop (each entry's first position; the entry of each position) and
    its trip count. Not named like loops of the stage (their availability is checked by name)."""
    stem = f"{n.func.name}{TABLE}{n.stage}.{t.fused}"
    return f"{stem}.start", f"{stem}.row", E.Var(f"{stem}.total", I32)


def flat_loop_tables(n: _Nest, t: FuseOf, overrides: dict, loop: ir.Stmt) -> ir.Stmt:
    """``loop`` (the flat loop of ragged fuse ``t``) inside the code that builds its tables: ``start``
    (a prefix sum of the entries' extents) and ``row`` (the entry of each flat position), computed by
    the generated code before the loop runs."""
    start, row, total = _flat_names(n, t)
    stem = start[:-len(".start")]
    entry, k = E.Var(f"{stem}.entry", I32), E.Var(f"{stem}.k", I32)
    lo = _dim_min(n, t.outer)
    entries = _extent(n, t.outer, overrides)
    length = E.maximum(E.substitute(_extent(n, t.inner, overrides), {n.sym(t.outer).name: E.add(lo, entry)}), 0)
    first = E.Load(start, entry, I32)
    prefix = ir.For(entry.name, E.const(0, I32), entries, ir.ForKind.SERIAL,
                    ir.Store(start, E.add(entry, 1), E.add(first, length)))
    rows = ir.For(entry.name, E.const(0, I32), entries, ir.ForKind.SERIAL,
                  ir.For(k.name, E.const(0, I32), length, ir.ForKind.SERIAL, ir.Store(row, E.add(first, k), entry)))
    body = ir.LetStmt(total.name, E.Load(start, entries, I32),
                      ir.Allocate(row, I32, E.maximum(total, 1), ir.block(rows, loop)))
    return ir.Allocate(start, I32, E.add(entries, 1),
                       ir.block(ir.Store(start, E.const(0, I32), E.const(0, I32)), prefix, body))


def flat_values(n: _Nest, t: FuseOf, fused: E.Expr, outer: E.Expr, overrides: dict | None = None):
    """(entry, position inside it) of flat position ``fused`` of ragged fuse ``t`` of nest ``n``, with
    ``outer`` standing for the entry in the position's range: the entry from the row table, the position
    from the entry's start; both clamped to their ranges (which they never leave), so that bounds
    inference sees those ranges."""
    overrides = overrides or {}
    start, row, _ = _flat_names(n, t)
    lo_o, lo_i = _dim_min(n, t.outer), _dim_min(n, t.inner)
    hi_o = E.add(lo_o, E.sub(_extent(n, t.outer, overrides), 1))
    hi_i = E.substitute(E.add(lo_i, E.sub(_extent(n, t.inner, overrides), 1)), {n.sym(t.outer).name: outer})
    entry = E.add(lo_o, E.Load(row, fused, I32))
    pos = E.add(lo_i, E.sub(fused, E.Load(start, E.sub(outer, lo_o), I32)))
    return clamped(entry, lo_o, hi_o), clamped(pos, lo_i, hi_i)


def _definitions(n: _Nest, overrides: dict) -> list[tuple[str, list[str], E.Expr, E.Expr | None]]:
    """(name, the dims it is made of, its value, its guard or None) for every dim that is not a loop."""
    out = []
    for t in n.plan.transforms:
        if isinstance(t, PadOf):
            continue  # a padded dim keeps its loop; only its extent changes
        if isinstance(t, SortOf):
            lo = _dim_min(n, t.old)
            hi = E.add(lo, E.sub(_extent(n, t.old, overrides), 1))
            value = E.add(lo, E.Load(_order_name(n, t), n.sym(t.rank), I32))
            out.append((t.old, [t.rank], clamped(value, lo, hi), None))
        elif isinstance(t, SplitOf):
            tail = _tail(n, t)
            base = _dim_min(n, t.old)
            outer, inner = n.sym(t.outer), n.sym(t.inner)
            ext = _extent(n, t.old, overrides)
            if tail == "shift":
                start = E.minimum(E.mul(outer, t.factor), E.sub(ext, t.factor))
            else:
                start = E.mul(outer, t.factor)
            value = E.add(E.add(base, start), inner)
            guard = E.le(n.sym(t.old), E.add(base, E.sub(ext, 1))) if tail == "guard" else None
            out.append((t.old, [t.outer, t.inner], value, guard))
        elif n.tile is not None and t == n.tile.fuse:
            c = n.tile.consumer
            entry, pos = flat_values(c, n.tile.flat, _position(n, t), n.sym(t.outer))
            out.append((t.outer, [t.fused], entry, None))
            out.append((t.inner, [t.fused, t.outer], pos, None))
        elif ragged_fuse(n, t, overrides):
            entry, pos = flat_values(n, t, n.sym(t.fused), n.sym(t.outer), overrides)
            out.append((t.outer, [t.fused], entry, None))
            out.append((t.inner, [t.fused, t.outer], pos, None))
        else:
            # max(extent, 1): the same values whenever the fused loop runs, and a divisor that bounds
            # inference can see is positive (so fused % e stays in [0, e)). The outer value is clamped to
            # its range, which it never leaves: fused // e over a product of two extents of which one is
            # ragged (``lens[b] - min``, any int32 to interval arithmetic) was bounded by the int32 range,
            # and the storage sized from it was too small (a fused i, j of attention's scores crashed)
            ext_inner = E.maximum(_extent(n, t.inner, overrides), 1)
            fused = n.sym(t.fused)
            lo_o, lo_i = _dim_min(n, t.outer), _dim_min(n, t.inner)
            hi_o = E.add(lo_o, E.sub(_extent(n, t.outer, overrides), 1))
            out.append((t.outer, [t.fused], clamped(E.add(lo_o, E.floordiv(fused, ext_inner)), lo_o, hi_o), None))
            out.append((t.inner, [t.fused], E.add(lo_i, E.mod(fused, ext_inner)), None))
    return out


# --------------------------------------------------------------------------------------- emission
def _build(n: _Nest, dims: list, overrides: dict, defined: set) -> ir.Stmt:
    if not dims:
        return _define_pending(n, n.body, overrides, defined)
    stmt = _build_loop(n, dims, overrides, defined)
    if n.tile is not None and _root_of(n, dims[0].node) == n.tile.fuse.fused:
        _refuse_vector(n, dims, n.tile.fuse, loops_from(n, {n.tile.fuse.fused}))
    fz = _flat_rooted_at(n, dims[0].node, overrides)
    if fz is None:
        return stmt
    derived = loops_from(n, {fz.fused})
    _refuse_vector(n, dims, fz, derived)
    _check_available(n, dims[0].name, [_extent(n, fz.outer, overrides)], defined)
    return flat_loop_tables(n, fz, overrides, stmt)


def _refuse_vector(n: _Nest, dims, fz: FuseOf, derived: set) -> None:
    for d in dims:
        if d.node in derived and d.kind is ir.ForKind.VECTORIZED:
            raise ValueError(f"Func {n.func.name}: loop {d.name!r} runs over the valid ({fz.outer}, {fz.inner}) "
                             "pairs of a ragged dim and cannot be vectorized (each position reads its entry "
                             "from a table); vectorize a dim inside it")


def _flat_rooted_at(n: _Nest, node: str, overrides: dict) -> FuseOf | None:
    """The ragged fuse whose flat loop ``node`` is, or is the outermost part of (through splits)."""
    fz = _fuse_of(n.plan, _root_of(n, node), "fused")
    if fz is None or n.tile is not None and fz == n.tile.fuse:  # a tile's fuse reads its consumer's tables
        return None
    return fz if ragged_fuse(n, fz, overrides) else None


def _root_of(n: _Nest, node: str) -> str:
    """The loop that ``node`` is the outermost part of, through splits (itself when not split)."""
    while (s := _split_of(n.plan, node, "outer")) is not None:
        node = s.old
    return node


def _build_loop(n: _Nest, dims: list, overrides: dict, defined: set) -> ir.Stmt:
    d = dims[0]
    split = _split_of(n.plan, d.node, "outer")
    if split is not None and _tail(n, split) == "split":
        return _split_tail(n, dims, overrides, defined, split)
    lo = _dim_min(n, d.node) if _is_original(n, d.node) else E.const(0, I32)
    ext = _extent(n, d.node, overrides)
    _check_available(n, d.name, [lo, ext], defined | _complete(_definitions(n, overrides), defined))
    inner_defined = defined | {d.node}
    body = _build(n, dims[1:], overrides, inner_defined)
    body = _define_pending(n, body, overrides, inner_defined, just_opened=d.node)
    return ir.For(loop_name(n.func.name, n.stage, d.node), lo, ext, d.kind, body, _owns(n, d))


def _owns(n: _Nest, d) -> str:
    """The Func whose elements this loop's iterations touch disjointly: an update's loop over pure Vars
    (``ir.For.owns``)."""
    return n.func.name if n.stage > 0 and not d.is_rvar else ""


def _is_original(n: _Nest, d: str) -> bool:
    return not any(isinstance(t, SplitOf) and d in (t.outer, t.inner) or isinstance(t, FuseOf) and d == t.fused
                   or isinstance(t, SortOf) and d == t.rank for t in n.plan.transforms)


def _split_tail(n: _Nest, dims, overrides, defined, split: SplitOf) -> ir.Stmt:
    """Whole tiles in a main nest, then the remainder (``tail="split"``): no guard, no padding."""
    ext = _extent(n, split.old, overrides)
    d = dims[0]
    _check_available(n, d.name, [ext], defined | _complete(_definitions(n, overrides), defined))
    # the bounds of both loops are isl's (isl_tiles). A ragged extent (min(region, lens[b] - min)) is
    # never negative, as lengths are checked; max(.., 0) says so to bounds inference
    tiles = split_bounds(split.factor).at(E.maximum(ext, 0) if split.old in n.ragged else ext)
    inner_defined = defined | {d.node}
    main_over = dict(overrides)
    main_over[split.inner] = E.const(split.factor, I32)
    main_body = _define_pending(n, _build(n, dims[1:], main_over, inner_defined), main_over,
                                inner_defined, just_opened=d.node)
    main = ir.For(loop_name(n.func.name, n.stage, d.node), E.const(0, I32), tiles.whole, d.kind, main_body,
                  _owns(n, d))
    rest_over = dict(overrides)
    rest_over[split.inner] = tiles.rest  # from tiles.whole * factor (isl's rest_start) on
    rest_dims = [replace(x, kind=ir.ForKind.SERIAL) if x.node == split.inner else x
                 for x in dims[1:]]  # the remainder is shorter than a vector: its inner loop is serial
    rest_body = _define_pending(n, _build(n, rest_dims, rest_over, inner_defined), rest_over,
                                inner_defined, just_opened=d.node)
    # a loop of one iteration, not a let: a Func computed at this loop is computed in the remainder too
    rest = ir.IfThenElse(E.lt(E.const(0, I32), tiles.rest),
                         ir.For(loop_name(n.func.name, n.stage, d.node), tiles.whole, E.const(1, I32),
                                ir.ForKind.SERIAL, rest_body))
    return ir.block(main, rest)


def _check_available(n: _Nest, dim: str, exprs, defined: set) -> None:
    prefix = f"{n.func.name}.s{n.stage}."
    for e in exprs:
        for v in E.free_vars(e):
            if v.startswith(prefix):
                name = v[len(prefix):]
                if name not in defined and name != dim:
                    where = f"update {n.stage - 1} of " if n.stage else ""
                    raise ValueError(
                        f"{where}Func {n.func.name}: loop {dim!r} cannot be outside loop {name!r}: its bounds "
                        f"depend on {name!r} (an RDom whose bounds use a pure Var, or a ragged extent, must "
                        "stay inside the loop of what it uses)")


def _define_pending(n: _Nest, body: ir.Stmt, overrides, defined: set, just_opened: str | None = None) -> ir.Stmt:
    """Wrap ``body`` in the lets (and guards) of the dims whose parts are all open at this point and were
    not complete one loop further out."""
    defs = _definitions(n, overrides)
    outer_defined = defined - {just_opened} if just_opened else defined
    complete_here = _complete(defs, defined) - _complete(defs, outer_defined)
    if just_opened is None:
        complete_here = set()
    for name, _, value, guard in reversed(_ordered(defs, complete_here)):
        if guard is not None:
            body = ir.IfThenElse(guard, body)
        body = ir.LetStmt(loop_name(n.func.name, n.stage, name), value, body)
    return body


def _complete(defs, defined: set) -> set:
    """Names that can be defined once ``defined`` loops are open (following chains of splits/fuses)."""
    have = set(defined)
    changed = True
    while changed:
        changed = False
        for name, parts, _, _ in defs:
            if name not in have and all(p in have for p in parts):
                have.add(name)
                changed = True
    return have - set(defined)


def _ordered(defs, names: set) -> list:
    """The definitions of ``names``, each after the ones it is made of."""
    out, have = [], set()
    pending = [d for d in defs if d[0] in names]
    while pending:
        for d in pending:
            if all(p in have or p not in names for p in d[1]):
                out.append(d)
                have.add(d[0])
                pending.remove(d)
                break
        else:  # pragma: no cover - the plan's transforms form a tree
            raise RuntimeError("cyclic loop definitions")
    return out
