"""The search space: every choice a schedule makes, asked of an Optuna trial (define-by-run).

Funcs are visited consumers first, so a producer's ``compute_at`` can name loops its consumers already
have. Per Func: where it is computed: root, inline, or in the loop nest of the one Func that computes all
its uses (its consumers', or, through inlined consumers, theirs: Mullapudi2016's group of that Func), per
strip of tiles, per tile, or per row of a tile with storage for the tile (a sliding window, Halide's hand
schedules). Or per iteration of the innermost reduction loop of the one update that reads it
(``in_update``: one slice per offset of a window, a denoiser's patch distances per search offset, as
Adams2019 computes them), with a chain of such producers at the same loop. Per stage: a tile of its two
innermost pure Vars (the outer loops keep the Vars' names, the inner ones are ``v.i``; a column count of 0
leaves whole rows), the tail of those splits (shift, guard or split), whether other Vars (channels) run
outermost, inside the rows, or (updates) between the tile's loops and the reduction loops, whether the
innermost loop is vectorized (for a Func of three or more dimensions, along the columns or along another
Var, run and stored innermost), unrolling of the row loop,
whether the outermost loop is parallel, and for updates whether the reduction loops run outside the tile
(a register tile, Halide's matmul) or inside it. For ragged Funcs: their dense dimensions (entry, head)
run outermost, fused into one loop or not, and producers can be computed per iteration of it (per entry
and head: an entry's intermediates stay in cache); a sum read by one Func can be computed per tile of it
(``in_consumer``, dense or ragged); column strips can run outside the entries, or a dense Func's rows
(``columns_first``: a strip of one or more tiles' weights stays in cache while every entry passes), and
the weights be read through a copy of the strip (``strip_copy``, Halide's ``in()`` at the strip loop); an
operand read with the reduction index innermost can be read through a copy stored with the columns
innermost, and an entry's operand whose rows lie apart (V in P V: a head's rows are a token of every head
apart) through a copy per entry with its rows contiguous (a panel); a row's reduction can run a tile of
rows side by side (unrolled, scalar) or, read contiguous along its RVar, be vectorized along it; loop
padding of the innermost ragged dim (and the output's storage padding it needs; a dense Func computed
``in_update`` may pad its columns too: a slice of a tile and its halo in whole vectors), sorting the batch by
length, or flattening the batch with the ragged rows into one loop over the valid rows (``fuse(b, i)``),
before the rows are tiled too (``flat_tiles``: tiles of tokens across entries, a sum per tile fusing the
same pair).

The parameter names and their choices never depend on earlier answers (Optuna's distributions are
fixed per name); a choice that does not apply to what earlier answers made is mapped to the nearest
one that does (a ``compute_at`` of a consumer that went inline computes at root). The records are
built as data; whether the whole is valid is the lowering's to say.
"""

from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass

import numpy as np

from .. import schedule as S
from ..algebra import expr as E
from ..algebra import f2
from ..algebra.simplify import simplify
from ..program import Program, dim_index, is_ragged, reduces_in_place
from ..schedule.records import stage_name

#: changes when a parameter's meaning changes: studies of an older space are not resumed
VERSION = 23  # 7: reduce_lanes (a reduction vectorized along its RVar); 8: pad asked of updates too; 9: copies
# in storage order run in blocks transposed in registers; 10: unroll_dim (a few channels a definition selects on);
# 11: flat_tiles (tiles of rows across entries, a sum per tile stored by flat position); 12: pad to two vectors;
# 13: per_entry (a ragged nest's producers per entry, all heads) and lanes along a ragged Func's heads;
# 14: panel (an operand's rows made contiguous per entry); 15: in_consumer and columns_first for dense Funcs;
# 16: in_update (per iteration of a consumer's reduction loop); 17: pad asked of dense Funcs computed in_update;
# 18: lanes along heads that are half a vector (8 heads on AVX-512); 19: others "outside_reduction";
# 20: tile_y 128, 192, 256 (strips of a nest whose members' windows span over 16 rows); 21: strip_panels;
# 22: tiles no larger than a declared extent at the tuning inputs (``analyze(extents=...)``); flat tiles not
# asked of a Func computed in another's nest and read by several; no transposed copy moving a ragged batch inside
# 23: a transposed copy along the heads in blocks no wider than the heads (8 at 16 lanes: was a scalar rest)
TILE_Y = (1, 2, 4, 6, 8, 16, 32, 64, 128, 192, 256)  # 6 rows x 2 vectors: 12 of 16 AVX2 registers
TILE_X_VECTORS = (0, 1, 2, 4, 8, 16)  # in vectors; 0: the loop is not split
WIDEST = 4  # vectors in one vector loop


class Q(enum.Enum):
    """The questions the space asks: where a Func is computed (``COMPUTE``, one per Func) and how each of
    its stages is tiled (the rest, one per stage; ``COPY`` and ``STRIP_COPY`` one per buffer read). The
    heuristic answers the same questions by these names, so a misspelt or retired one fails at once
    instead of silently taking the first choice."""

    COMPUTE = "compute"
    TAIL = "tail"
    PAD = "pad"
    TILE_Y = "tile_y"
    TILE_X = "tile_x"
    LANES = "lanes"
    OTHERS = "others"
    RVARS_OUTSIDE_TILE = "rvars_outside_tile"
    COLUMNS_FIRST = "columns_first"
    STRIP_TILES = "strip_tiles"
    FLATTEN = "flatten"
    FLAT_TILES = "flat_tiles"
    SORT = "sort"
    FUSE = "fuse"
    PER_ENTRY = "per_entry"
    VECTORIZE = "vectorize"
    REDUCE_LANES = "reduce_lanes"
    UNROLL = "unroll"
    UNROLL_DIM = "unroll_dim"
    PARALLEL = "parallel"
    COPY = "copy"
    STRIP_COPY = "strip_copy"
    STRIP_PANELS = "strip_panels"
    PANEL = "panel"

    def at(self, prefix: str, name: str = "") -> str:
        """The trial parameter: ``blur_y.s0.tile_x``, ``blur_x.compute``, ``C.s1.copy.B``."""
        return f"{prefix}.{self.value}" + (f".{name}" if name else "")

    @staticmethod
    def of(param: str) -> Q:
        """The question a trial parameter asks (ValueError for a name the space never uses)."""
        parts = param.split(".")
        for k in range(len(parts) - 1, 0, -1):
            try:
                return Q(parts[k])
            except ValueError:
                continue
        raise ValueError(f"{param!r} is not a question of the search space")


@dataclass(frozen=True)
class StageInfo:
    stage: int
    pure: tuple[str, ...]  # pure Vars of the stage, outermost first
    rvars: tuple[str, ...]
    ragged: frozenset  # pure Vars whose extent is ragged
    bounds_use: frozenset = frozenset()  # pure Vars the RDom's bounds use (its loops stay inside theirs)
    #: Funcs and Inputs this update reads with a reduction Var innermost and its column Var elsewhere:
    #: (name, a copy's Vars in the storage order that puts the column dimension innermost)
    copies: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()  # (source, storage order, its Vars)
    #: Inputs and Funcs this update reads with its column Var innermost and a reduction Var elsewhere (a
    #: weight matrix W[c, n] in a sum over c): a strip of columns can be copied contiguous
    strips: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (name, a copy's innermost Var, its Vars)
    #: an update that writes where data says (a histogram's bin): its accumulators cannot be kept in
    #: registers, and a vector of them is a gather and a scatter
    scatter: bool = False
    #: Vars besides the rows and columns that can be the vector lanes instead of the columns (the stage
    #: then runs them innermost, its Func stored with them innermost): the intensity levels k of
    #: local_laplacian's pyramids
    lane_vars: tuple[str, ...] = ()
    #: those of ``lane_vars`` along which every data-dependent read is a constant stride from one base,
    #: where along the columns some is a gather: a lookup table ``remap[idx(x) - 256 * k]``
    cheap_lanes: tuple[str, ...] = ()
    #: the dimension of the Func each of ``pure`` indexes (an update's pure Vars are some of its dims)
    dims: tuple[int, ...] = ()
    #: the innermost RVar of an update that reduces in place whose operands are read contiguous along it
    #: and none along the columns (a row's max or sum): vector lanes along it read contiguous memory,
    #: where lanes along the columns gather (``_lane_rvar``)
    lane_rvar: str | None = None
    #: (Var, extent): Vars besides the rows and columns of a dimension declared a few points long (2 to
    #: ``MAX_UNROLLED_DIM``) that the definition compares with constants (a select per channel): unrolled,
    #: each copy's selects fold to one branch (bound to the declared extent: an output's out= may
    #: otherwise be longer)
    unrollable: tuple[tuple[str, int], ...] = ()
    #: a ragged Func's dense dimensions besides the batch (heads) that can be the vector lanes instead of
    #: its ragged columns, when its loop nest runs per entry: every vector whole (a dimension of a whole
    #: number of vectors), where vectors along a short ragged row are padded or leave a scalar rest
    lead_lanes: tuple[str, ...] = ()
    #: per Var of ``lead_lanes``: the reads of this update that a copy makes contiguous along it (as
    #: ``copies`` along the columns)
    lane_copies: tuple[tuple[str, tuple], ...] = ()
    #: Inputs and Funcs of one entry (read at the batch or a ragged Var) that this update reads with its
    #: column Var innermost and a reduction Var at an index with another between them (V[b, j, h, d] in
    #: a sum over j along d): their rows lie apart, by whole rows of the dims between, at a stride that
    #: maps a column strip of many rows to few cache sets; a copy per entry in the storage order (the
    #: dims between outermost, then the reduction's, then the columns') makes them contiguous (a panel)
    #: (source, storage order of its Vars, the bytes between its rows where its shape says: else None)
    panels: tuple[tuple[str, tuple[str, ...], int | None], ...] = ()


MAX_UNROLLED_DIM = 4


@dataclass(frozen=True)
class Read:
    """How one consumer reads a Func: the consumer, and per dimension of the Func the offsets from the
    consumer's own Var of that dimension (None: the index is not the consumer's Var plus a constant).
    An update's read counts at each point of a small RDom of constant bounds (``MAX_RDOM_POINTS``)."""

    consumer: str
    offsets: tuple[tuple[int, ...], ...] | None  # one tuple per read site; None: an irregular read
    sites: int = 1  # how many reads the consumer's definitions make
    data: bool = False  # some index is data (a lookup: the point read depends on values)
    #: the dimension every read indexes with an RVar of the consumer's update, the others at the consumer's
    #: own Vars (a mix of channels: a 1x1 convolution's sum over the channels of what it reads), or None
    mixed: int | None = None
    #: where the consumer's update indexes some of the Func's dimensions by its RVars alone (an offset of a
    #: search window picks a slice: a denoiser's patch distances per offset), the points of that RDom (a
    #: small box of constant bounds); else 0
    slices: int = 0
    #: the consumer's dimensions whose Var no read indexes with: each point read is read again at every
    #: point of them (a gray level by each colour channel; a resampling filter's taps, [tap, x], by every
    #: row and channel of the image it resamples)
    unused: tuple[int, ...] = ()


@dataclass(frozen=True)
class FuncInfo:
    name: str
    lanes: int  # natural vector size of its type
    stages: tuple[StageInfo, ...]
    consumers: tuple[str, ...]
    is_output: bool
    inlinable: bool
    batch: str | None  # the Var of a ragged Func's batch dimension (the ragged extents' index)
    reads: tuple[Read, ...] = ()  # how each consumer reads it
    ops: int = 0  # arithmetic of its pure definition, weighed by cost (``_op_cost``: what inlining repeats per read)
    args: tuple[str, ...] = ()
    dense: bool = True  # no Func of the pipeline is ragged (loops can be reordered freely)
    shaped: bool = True  # its shape is declared (else it is ragged where its consumers read it)
    #: (consumer, dimension, the consumer's Var) for each consumer whose every read of this Func indexes
    #: that dimension with that one Var (the consumer can run it as vector lanes as this Func does)
    passed_dims: tuple[tuple[str, int, str], ...] = ()
    lookups: int = 0  # reads of its pure definition at data-dependent points (gathers)
    loads: int = 0  # reads of Funcs and Inputs in its pure definition
    #: a ragged Func of declared shape: (bytes per ragged point, its ragged dims): one entry of n tokens
    #: stores the first times n to the power of the second (None: not ragged, or a dense dim not constant)
    entry_storage: tuple[int, int] | None = None
    itemsize: int = 4  # bytes of one element
    #: (Var, n): pure Vars whose extent is at most a constant n: the Func's declared extent (constant, or
    #: at the inputs tuned on), or that of a dimension of a declared shape it reads with that Var alone (a
    #: head of [.., 8, 64]); a tile larger than n shifted inwards would read before the start
    bounded: tuple[tuple[str, int], ...] = ()


def analyze(program: Program, lanes_of, extents: dict[str, tuple[int, ...]] | None = None) -> tuple[FuncInfo, ...]:
    """What the search needs to know of each Func, consumers first. ``lanes_of(dtype)`` is the natural
    vector size of the target; ``extents`` (``heuristic.estimate_extents``), the extents of the Funcs
    at the inputs tuned on: a declared shape's bound tiles as a constant one does (an output of 21
    columns tiled by 64 and shifted inwards started at -43: a quarter of the random points of random
    pipelines on small images were refused so)."""
    from ..codegen.ragged_domains import lengths_inputs

    readers: dict[str, list[str]] = {f.name: [] for f in program.functions}
    sites: dict[str, list[Read]] = {f.name: [] for f in program.functions}
    extents_from = frozenset(lengths_inputs(program))
    for c in program.functions:
        exprs = [c.init] + [e for u in c.updates for e in (u.value, *u.args)]
        refs = [n for e in exprs for n in E.walk(e) if isinstance(n, E.FuncRef) and n.name in readers]
        for n in {n.name for n in refs}:
            if n != c.name:
                readers[n].append(c.name)
        in_init = {id(n) for n in E.walk(c.init) if isinstance(n, E.FuncRef)}
        in_update = {id(n): u for u in c.updates for e in (u.value, *u.args) for n in E.walk(e)
                     if isinstance(n, E.FuncRef)}
        for name in {n.name for n in refs} - {c.name}:
            own = [n for n in refs if n.name == name]
            offs = [o for n in own for o in ([_offsets(n.args, c.args)] if id(n) in in_init else
                                             _update_offsets(n, in_update[id(n)], c.args))]
            data = any(_looks_up(a, extents_from, c.args[-2:]) for n in own for a in n.args)
            mixed = {_mixed_dim(n, in_update.get(id(n)), c.args) for n in own}
            slices = {_slices(n, in_update.get(id(n))) for n in own}
            used = set().union(*(E.free_vars(a) for n in own for a in n.args if isinstance(a, E.Expr)))
            sites[name].append(Read(c.name, None if None in offs else tuple(sorted(set(offs))), len(own), data,
                                    mixed.pop() if len(mixed) == 1 else None, slices.pop() if len(slices) == 1 else 0,
                                    tuple(k for k, v in enumerate(c.args) if v not in used)))
    wrapper_vars = {i.name: tuple(f"_{k}" for k in range(len(i.shape))) for i in program.inputs}
    wrapper_vars.update({f.name: tuple(f.args) for f in program.functions})
    # (shape, bytes per element) of what a copy can wrap
    shapes = {i.name: (i.shape, i.dtype.np.itemsize) for i in program.inputs}
    shapes.update({f.name: (f.shape, f.dtype.np.itemsize) for f in program.functions})
    # per buffer, the dims that its other dims' extents depend on (a ragged batch): a copy cannot move them
    # inside the others
    pinned = {name: frozenset(k for k in range(len(shape)) for d in shape if dim_index(k) in E.free_vars(d))
              for name, (shape, _) in shapes.items() if shape}
    dense = not any(f.shape is not None and any(is_ragged(s) for s in f.shape) for f in program.functions)
    passed = _passed_dims(program)
    out: list[FuncInfo] = []
    by_name: dict[str, FuncInfo] = {}  # (those of out: consumers come first)
    for f in reversed(program.functions):
        ragged = frozenset(a for k, a in enumerate(f.args) if f.shape is not None and is_ragged(f.shape[k]))
        batch = f.args[0] if ragged and any(dim_index(0) in E.free_vars(s) for s in f.shape) else None
        if f.shape is None and not dense:
            ragged, batch = _ragged_like_consumers(f, program, out)
        # (an output's storage is the caller's array: its order is not the schedule's to choose)
        lane_vars = tuple(f.args[:-2]) if dense and not f.updates and f.name not in program.outputs else ()
        lead_lanes = _lead_lanes(f, ragged, batch, lanes_of(f.dtype)) if f.name not in program.outputs else ()
        stages = [StageInfo(0, tuple(f.args), (), ragged, lane_vars=lane_vars,
                            cheap_lanes=_cheap_lanes(f.init, f.args[-1], lane_vars), dims=tuple(range(f.rank)),
                            unrollable=_unrollable(f), lead_lanes=lead_lanes)]
        per_token = ragged | ({batch} if batch else set())  # a dense Func's: none
        for k, u in enumerate(f.updates):
            ordered = sorted(u.pure_vars, key=lambda p: p[1])  # (Var, dimension) in dimension order
            pure = tuple(v for v, _ in ordered)
            rvars, uses = (), frozenset()
            if u.rdom is not None:
                rvars = tuple(u.rdom.vars)
                uses = frozenset().union(*(E.free_vars(e) for e in (*u.rdom.mins, *u.rdom.extents))) & set(pure)
            scatter = any(E.reads_data(a) for a in u.args)
            stages.append(StageInfo(k + 1, pure, rvars, ragged & set(pure), uses,
                                    _transposed_reads(u.value, pure, rvars, wrapper_vars, pinned=pinned),
                                    _strip_reads(u.value, pure, rvars, wrapper_vars, per_token),
                                    scatter, dims=tuple(d for _, d in ordered),
                                    lane_rvar=None if scatter else _lane_rvar(f.name, u, pure, rvars),
                                    lead_lanes=tuple(v for v in lead_lanes if v in pure) if not scatter else (),
                                    lane_copies=tuple((v, _transposed_reads(u.value, pure, rvars, wrapper_vars, v,
                                                                            pinned))
                                                      for v in lead_lanes if v in pure),
                                    panels=_panel_reads(u.value, pure, rvars, wrapper_vars, ragged | {batch}, shapes)))
        is_out = f.name in program.outputs
        ops = _op_cost(f.init)
        out.append(FuncInfo(f.name, lanes_of(f.dtype), tuple(stages), tuple(readers[f.name]), is_out,
                            not is_out and not f.updates, batch, tuple(sites[f.name]), ops, tuple(f.args),
                            dense, f.shape is not None, tuple(passed[f.name]), _lookups(f.init),
                            sum(isinstance(n, E.FuncRef) for n in E.walk(f.init)),
                            _entry_storage(f, ragged, batch), f.dtype.np.itemsize,
                            _bounded(f, shapes, (extents or {}).get(f.name) if f.shape is not None else None,
                                     lead_lanes, _consumer_bounds(f, sites[f.name], by_name))))
        by_name[f.name] = out[-1]
    return tuple(out)


def _consumer_bounds(f, reads, by_name: dict) -> dict[str, int]:
    """Per dimension Var of ``f``, the least constant extent of the same dimension of a consumer that reads
    it there at its own Var (no offset): a Func shaped by its consumers (a sum of heads' products copied
    to scores of 8 heads) has no shape of its own to say so. ``by_name``: the consumers' FuncInfos."""
    out: dict[str, int] = {}
    for r in reads:
        c = by_name.get(r.consumer)
        if c is None or r.offsets is None:
            continue
        known = dict(c.bounded)
        for k, v in enumerate(f.args):
            n = known.get(c.args[k]) if k < len(c.args) else None
            if n is not None and all(len(o) > k and o[k] == 0 for o in r.offsets):
                out[v] = min(out.get(v, n), n)
    return out


def _bounded(f, shapes: dict, declared: tuple[int, ...] | None = None, lanes: tuple[str, ...] = (),
             consumers: dict[str, int] | None = None) -> tuple[tuple[str, int], ...]:
    """``FuncInfo.bounded``: the least constant extent of each pure Var's dimension, declared by the Func
    (``declared``: its shape's extents at the inputs tuned on) or by a shape it reads at that dimension
    with the Var alone; for the Vars of ``lanes`` (its ``lead_lanes``), also by what its updates read and
    by its consumers (``consumers``: a sum over heads' products, shaped like its consumers, reads its
    operands' heads, which may be Funcs without a shape)."""
    out: dict[str, int] = {}

    def bound(var: str | None, extent) -> None:
        if var in f.args and isinstance(extent, E.Const) and extent.value > 0:
            out[var] = min(out.get(var, int(extent.value)), int(extent.value))

    for a, extent in zip(f.args, f.shape or (), strict=False):
        bound(a, extent)
    for a, n in zip(f.args, declared or (), strict=False):
        if n > 0:
            out[a] = min(out.get(a, n), n)
    # (what the definition reads bounds every Var; what the updates read, the lanes' only)
    reads = [(n, None) for n in E.walk(f.init)] + [(n, lanes) for u in f.updates for n in E.walk(u.value)]
    for n, only in reads:
        if not isinstance(n, E.FuncRef):
            continue
        for arg, extent in zip(n.args, shapes.get(n.name, (None,))[0] or (), strict=False):
            var = arg.name if isinstance(arg, E.Var) else None
            if only is None or var in only:
                bound(var, extent)
    for v, n in (consumers or {}).items():
        if v in lanes and v in f.args:
            out[v] = min(out.get(v, n), n)
    return tuple(sorted(out.items()))


def _entry_storage(f, ragged: frozenset, batch: str | None) -> tuple[int, int] | None:
    """``FuncInfo.entry_storage`` of ``f``."""
    if batch is None or f.shape is None:
        return None
    points = np.dtype(f.dtype.name).itemsize
    for v, extent in zip(f.args, f.shape, strict=True):
        if v == batch or v in ragged:
            continue
        if not isinstance(extent, E.Const):
            return None
        points *= int(extent.value)
    return points, len(ragged)


def _lead_lanes(f, ragged: frozenset, batch: str | None, lanes: int) -> tuple[str, ...]:
    """``StageInfo.lead_lanes`` of ``f``: the dense Vars besides the batch and the columns of a ragged Func
    whose ragged columns are short rows to vectorize, where the dimension is declared a whole number of
    vectors or half of one (a narrower register of the same ISA: 8 heads on AVX-512's 16 lanes ran
    attention on short entries 1.0-1.4x faster than rows padded to 16, measured), or not declared (a Func
    shaped like its consumers)."""
    if batch is None or f.args[-1] not in ragged or lanes < 2:
        return ()
    out = []
    for k, v in enumerate(f.args[:-1]):
        if v == batch or v in ragged:
            continue
        extent = f.shape[k] if f.shape is not None else None
        if extent is None or isinstance(extent, E.Const) and extent.value > 0 and \
                (extent.value % lanes == 0 or 2 * extent.value == lanes):
            out.append(v)
    return tuple(out)


def _unrollable(f) -> tuple[tuple[str, int], ...]:
    """``StageInfo.unrollable`` of ``f``'s pure definition."""
    if f.shape is None or f.updates:
        return ()
    compared = set()
    for n in E.walk(f.init):
        if isinstance(n, (E.EQ, E.NE, E.LT, E.LE)):
            for a, b in ((n.a, n.b), (n.b, n.a)):
                if isinstance(a, E.Var) and isinstance(b, E.Const):
                    compared.add(a.name)
    out = []
    for v, extent in zip(f.args[:-2], f.shape[:-2], strict=True):
        if v in compared and isinstance(extent, E.Const) and 2 <= extent.value <= MAX_UNROLLED_DIM:
            out.append((v, int(extent.value)))
    return tuple(out)


def _lookups(e: E.Expr) -> int:
    """Reads in ``e`` at an index that is data."""
    return sum(1 for n in E.walk(e) if isinstance(n, E.FuncRef)
               and any(E.reads_data(a) for a in n.args))


def _passed_dims(program: Program) -> dict[str, list]:
    """Per Func: (consumer, dimension, Var) where every read of it by the consumer's pure definition
    indexes the dimension with the same Var of the consumer's (not its rows or columns)."""
    out: dict[str, list] = {f.name: [] for f in program.functions}
    for c in program.functions:
        refs: dict[str, list] = {}
        for n in E.walk(c.init):
            if isinstance(n, E.FuncRef) and n.name in out and n.name != c.name:
                refs.setdefault(n.name, []).append(n.args)
        for name, sites in refs.items():
            for d in range(len(sites[0])):
                first = sites[0][d]
                if isinstance(first, E.Var) and first.name in c.args[:-2] and all(a[d] == first for a in sites):
                    out[name].append((c.name, d, first.name))
    return out


def _cheap_lanes(init: E.Expr, x: str, lane_vars: tuple[str, ...]) -> tuple[str, ...]:
    """The Vars of ``lane_vars`` along which each read at a data-dependent index moves by a constant
    stride (or not at all), where at least one such read gathers along the columns ``x``."""
    if not lane_vars:
        return ()
    indices = [a for n in E.walk(init) if isinstance(n, (E.FuncRef, E.Load))
               for a in (n.args if isinstance(n, E.FuncRef) else (n.index,))
               if E.reads_data(a)]
    gathers = any(x in E.free_vars(m) for a in indices for m in E.walk(a) if isinstance(m, (E.FuncRef, E.Load)))
    if not gathers:
        return ()
    out = []
    for v in lane_vars:
        step = [simplify(E.sub(E.substitute(a, {v: E.add(n, 1)}), a)) for a in indices
                for n in {m for m in E.walk(a) if isinstance(m, E.Var) and m.name == v}]
        if all(isinstance(d, E.Const) for d in step):
            out.append(v)
    return tuple(out)


def _ragged_like_consumers(f, program: Program, done: list[FuncInfo]) -> tuple[frozenset, str | None]:
    """A Func without a declared shape is ragged where its consumers read it: a dimension indexed by a
    consumer's ragged Var is ragged, and the first one is the batch when indexed by the consumer's."""
    infos = {i.name: i for i in done}
    ragged, batch = set(), None
    for c in program.functions:
        info = infos.get(c.name)
        if info is None or c.name == f.name:
            continue
        for n in E.walk(c.init):
            if not isinstance(n, E.FuncRef) or n.name != f.name:
                continue
            for k, a in enumerate(n.args):
                if isinstance(a, E.Var) and a.name in info.stages[0].ragged:
                    ragged.add(f.args[k])
            first = n.args[0] if n.args else None
            if info.batch and isinstance(first, E.Var) and first.name == info.batch:
                batch = f.args[0]
    return frozenset(ragged), batch if ragged else None


def _lane_rvar(name: str, u, pure, rvars) -> str | None:
    """``StageInfo.lane_rvar`` of update ``u`` of Func ``name``."""
    if not pure or not rvars or not reduces_in_place(name, u.args, u.value):
        return None
    r, x = rvars[-1], pure[-1]
    # (a read that no RVar moves, a row's mean in its variance, is one value per row: it does not count)
    inner = [n.args[-1] for n in E.walk(u.value) if isinstance(n, E.FuncRef) and n.name != name and n.args
             and set(rvars) & set().union(*(E.free_vars(a) for a in n.args))]
    along_r = any(isinstance(a, E.Var) and a.name == r for a in inner)
    return r if along_r and not any(x in E.free_vars(a) for a in inner) else None


def _transposed_reads(value, pure, rvars, wrapper_vars, lane: str | None = None, pinned=None) -> tuple:
    """The reads of ``value`` that a copy in another storage order makes contiguous along the stage's
    columns (its innermost pure Var), or along ``lane``: a read whose innermost index is a reduction Var
    and another index that Var (K[b, j, h, k] in a sum over k of a row of scores along j; Halide's hand
    schedules read such operands through a transposed ``in()``). Not where that index is a dim that the
    buffer's other extents depend on (``pinned``: a batch of ragged images summed per image; the copy's
    loop over it must stay outside theirs: 14 of 30 uniform points of a ragged image batch refused)."""
    if not pure or not rvars:
        return ()
    x, out = lane or pure[-1], {}
    for n in E.walk(value):
        if not isinstance(n, E.FuncRef) or n.name not in wrapper_vars or n.name in out:
            continue
        args = n.args
        inner = args[-1] if args else None
        cols = [k for k, a in enumerate(args[:-1]) if isinstance(a, E.Var) and a.name == x]
        if isinstance(inner, E.Var) and inner.name in rvars and len(cols) == 1 and \
                cols[0] not in (pinned or {}).get(n.name, ()):
            names = wrapper_vars[n.name]
            out[n.name] = tuple(v for k, v in enumerate(names) if k != cols[0]) + (names[cols[0]],)
    return tuple((name, order, tuple(wrapper_vars[name])) for name, order in sorted(out.items()))


def _strip_reads(value, pure, rvars, wrapper_vars, per_token) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """The operands of ``value`` read with the stage's column Var innermost, a reduction Var at another
    index and none of the Vars ``per_token`` (batch, ragged; a dense stage's row Var): what every entry
    or row shares (a weight matrix W[c, n] in a sum over c along n). Per strip of columns, a copy makes
    the strip's rows contiguous (fewer pages, no stride between rows)."""
    if not pure or not rvars or None in per_token:
        return ()
    x, out = pure[-1], set()
    per_token = per_token or set(pure[-2:-1])
    for n in E.walk(value):
        if not isinstance(n, E.FuncRef) or n.name not in wrapper_vars or not n.args:
            continue
        names = [a.name if isinstance(a, E.Var) else None for a in n.args]
        if names[-1] == x and any(v in rvars for v in names[:-1]) and \
                not per_token & set().union(*(E.free_vars(a) for a in n.args[:-1])):
            out.add((n.name, wrapper_vars[n.name][-1], tuple(wrapper_vars[n.name])))
    return tuple(sorted(out))


def _panel_reads(value, pure, rvars, wrapper_vars, per_token, shapes) -> tuple:
    """The operands of ``value`` that ``StageInfo.panels`` describes: read with the stage's column Var
    innermost, a reduction Var at an index two or more before it, and one of the Vars ``per_token``
    (batch, ragged) at another; with the storage order that puts the reduction's and the columns' dims
    innermost (the others keep their order), and the bytes from one row to the next where the dims after
    the reduction's are constant (``shapes``: name -> (shape or None, bytes per element))."""
    if not pure or not rvars or None in per_token:
        return ()
    x, out = pure[-1], {}
    for n in E.walk(value):
        if not isinstance(n, E.FuncRef) or n.name not in wrapper_vars or not n.args or n.name in out:
            continue
        names = [a.name if isinstance(a, E.Var) else None for a in n.args]
        at = [k for k, v in enumerate(names[:-2]) if v in rvars]
        if names[-1] != x or len(at) != 1 or \
                not per_token & set().union(*(E.free_vars(a) for k, a in enumerate(n.args[:-1]) if k != at[0])):
            continue
        src = wrapper_vars[n.name]
        order = tuple(v for k, v in enumerate(src) if k not in (at[0], len(src) - 1)) + (src[at[0]], src[-1])
        shape, size = shapes[n.name]
        after = [simplify(e) for e in shape[at[0] + 1:]] if shape is not None else [None]
        row = math.prod(int(e.value) for e in after) * size if all(isinstance(e, E.Const) for e in after) else None
        out[n.name] = (order, row)
    return tuple((name, order, row) for name, (order, row) in sorted(out.items()))


def _looks_up(index: E.Expr, extents_from: frozenset, varying) -> bool:
    """Whether ``index`` depends on data: reads a Func or Input, but for an entry's own extent
    (``hs[b]`` of ``clamp(y + 1, 0, hs[b] - 1)``, a read of a ragged extent's lengths Input at indices
    free of the reader's rows and columns ``varying``), the same for every point of the entry."""
    return any(isinstance(n, E.Load) or isinstance(n, E.FuncRef) and
               (n.name not in extents_from or any(E.free_vars(a) & set(varying) for a in n.args))
               for n in E.walk(index))


def _ops(e: E.Expr) -> int:
    """Operations computing ``e``'s value (index arithmetic inside a read is not counted)."""
    if isinstance(e, (E.Var, E.Const, E.FuncRef)):
        return 0
    return 1 + sum(_ops(c) for c in E.children(e))


#: What one operation costs against an add or a multiply, roughly, in vector instructions' issue slots: a
#: float division or square root holds the divider for 5-10 cycles where two fmas issue a cycle (Zen 4,
#: Skylake-X), so 8; a math function its loop's instructions (exp's 14 over 16 lanes) times its time
#: against exp (``python -m benchmarks.vector_math``). What inlining a Func repeats at each read is
#: weighed by these: recomputing a division or an exp is not as cheap as an add.
_DIV_COST = 8
_CALL_COST = {"exp": 14, "exp2": 12, "log": 26, "log2": 28, "pow": 30, "tanh": 30, "erf": 50, "sin": 65,
              "cos": 65, "sqrt": _DIV_COST, "rsqrt": _DIV_COST}


def _op_cost(e: E.Expr) -> int:
    """``_ops`` with each operation weighed by its cost (``_DIV_COST``, ``_CALL_COST``; others 1)."""
    if isinstance(e, (E.Var, E.Const, E.FuncRef)):
        return 0
    own = _CALL_COST.get(e.name, 1) if isinstance(e, E.Call) else \
        _DIV_COST if isinstance(e, E.Div) and e.dtype.is_float else 1
    return own + sum(_op_cost(c) for c in E.children(e))


def _unclamped(a: E.Expr, consumer_args) -> E.Expr:
    """``a`` without the min and max around it whose other operand uses none of ``consumer_args`` but
    those outside its last two (rows and columns): an image's own edge in a batch of images of different
    sizes, ``min(y + 1, hs[b] - 1)``, is a boundary as ``H - 1`` is, fixed for the loops over one entry."""
    varying = set(consumer_args[-2:])
    while isinstance(a, (E.Min, E.Max)):
        uses = [bool(E.free_vars(x) & varying) for x in (a.a, a.b)]
        if uses == [True, False]:
            a = a.a
        elif uses == [False, True]:
            a = a.b
        else:
            break
    return a


def _offsets(args, consumer_args) -> tuple[int, ...] | None:
    """The constant offsets of a read ``f[v0 + c0, v1 + c1, ...]`` from the reader's Vars, dimension by
    dimension (the reader's innermost Vars against the Func's), or None. A dimension read at a constant
    (a channel picked out, ``f[0, y, x]``) counts as offset 0: each point of it still feeds one point
    of the reader, so it says nothing of recompute. A clamp of such an index to bounds that do not depend
    on the reader's rows and columns (a boundary condition, ``f[clamp(y + 1, 0, H - 1), x]``) counts as its
    offset: it changes only the points at the edges."""
    out = []
    for k, a in enumerate(reversed(args)):
        if not isinstance(a, E.Expr):
            return None
        a = _unclamped(a, consumer_args)
        if isinstance(simplify(a), E.Const):
            out.append(0)
            continue
        if k >= len(consumer_args):
            return None
        d = simplify(E.sub(a, E.Var(consumer_args[len(consumer_args) - 1 - k], a.dtype)))
        if not isinstance(d, E.Const):
            return None
        out.append(int(d.value))
    return tuple(reversed(out))


#: An update reads a Func at each point of its RDom: where the RDom has constant bounds and at most this
#: many points (a patch of a box filter, the colour channels summed), its reads are that many constant
#: offsets, as a stencil's are; a larger or variable RDom (a matrix product's k) reads irregularly.
MAX_RDOM_POINTS = 64


def _update_offsets(ref: E.FuncRef, u, consumer_args) -> list:
    """The offsets (as ``_offsets``) of the read ``ref`` in the update ``u`` of a Func with Vars
    ``consumer_args``, one per point of its RDom; [None] where they are not constant offsets (the update
    does not write each point at its own Vars, or its RDom is not a small box of constant bounds)."""
    if tuple(a.name if isinstance(a, E.Var) else None for a in u.args) != tuple(consumer_args):
        return [None]
    rd = u.rdom
    if rd is None:
        return [_offsets(ref.args, consumer_args)]
    mins = [simplify(lo) for lo in rd.mins]
    if _rdom_points(rd) is None or not all(isinstance(lo, E.Const) for lo in mins):
        return [None]
    ranges = [range(int(lo.value), int(lo.value) + int(simplify(n).value)) for lo, n in zip(mins, rd.extents)]
    return [_offsets(tuple(_at_point(a, dict(zip(rd.vars, point))) for a in ref.args), consumer_args)
            for point in itertools.product(*ranges)]


def _mixed_dim(ref: E.FuncRef, u, consumer_args) -> int | None:
    """``Read.mixed`` of one read ``ref``, made in update ``u`` (None: in a pure definition)."""
    if u is None or u.rdom is None or tuple(a.name if isinstance(a, E.Var) else None for a in u.args) != \
            tuple(consumer_args) or len(ref.args) != len(consumer_args):
        return None
    rvars = set(u.rdom.vars)
    args = [simplify(a) if isinstance(a, E.Expr) else a for a in ref.args]
    across = [k for k, a in enumerate(args) if isinstance(a, E.Var) and a.name in rvars]
    own = all(isinstance(a, E.Var) and a.name == consumer_args[k] for k, a in enumerate(args) if k not in across)
    return across[0] if len(across) == 1 and own else None


def _slices(ref: E.FuncRef, u) -> int:
    """``Read.slices`` of one read ``ref``, made in update ``u`` (None: in a pure definition). Only where the
    update's two innermost Vars index it too (each slice is read over the update's own tile: not a matrix
    product's operand, whose rows are read again for every column)."""
    names = [a.name for a in ref.args if isinstance(a, E.Var)]
    if u is None or u.rdom is None or not set(u.rdom.vars) & set(names) or \
            not all(isinstance(a, E.Var) and a.name in names for a in u.args[-2:]):
        return 0
    return _rdom_points(u.rdom) or 0


def _rdom_points(rd) -> int | None:
    """The points of RDom ``rd`` where it is a small box (no predicate, constant extents, at most
    ``MAX_RDOM_POINTS``), else None."""
    extents = [simplify(n) for n in rd.extents]
    if rd.predicate is not None or not all(isinstance(n, E.Const) for n in extents):
        return None
    points = math.prod(int(n.value) for n in extents)
    return points if points <= MAX_RDOM_POINTS else None


def _at_point(a, at: dict):
    """The index ``a`` with the RVars of ``at`` replaced by their values."""
    if not isinstance(a, E.Expr):
        return a
    return E.transform(a, lambda n: E.const(at[n.name], n.dtype) if isinstance(n, E.Var) and n.name in at else n)


def suggest(trial, funcs: tuple[FuncInfo, ...]) -> S.Schedule:
    """One schedule: the trial's answers to every question the Funcs ask."""
    records: list[S.Directive] = []
    hosts: dict[str, Host] = {}  # Func computed in a loop nest of its own -> its loops
    own: dict[str, Host] = {}  # every stored single-stage Func -> its loops (wherever it is computed)
    group: dict[str, str] = {}  # Func -> the Func whose loop nest computes it (itself at root)
    depth: dict[str, int] = {}  # Func computed at a host's loop -> how deep (see LEVELS)
    inlined: dict[str, frozenset] = {}  # inlined Func -> the groups its values are computed in
    looked_up: set[str] = set()  # inlined Funcs read at points data picks, directly or through others
    readers: dict[str, frozenset] = {}  # Func -> the stored Funcs whose definitions compute its reads
    reduction_loops: dict[str, tuple[int, str]] = {}  # Func -> (its update, that update's innermost RVar loop)
    sites: dict[str, tuple[str, str]] = {}  # Func computed in_update -> (its consumer's stage, the loop)
    for f in funcs:
        where = "root"
        if not f.is_output:
            where = trial.suggest_categorical(Q.COMPUTE.at(f.name), _compute_choices(f))
        readers[f.name] = frozenset().union(*(readers.get(c, frozenset({c})) for c in f.consumers))
        if where == "in_update":
            # per iteration of the reduction loop of the one Func whose update reads it (directly or
            # through inlined Funcs): a slice of it at a time (an offset of a window), its working set
            # the update's tile (a denoiser's patch distances per search offset); else per tile of its nest
            (u,) = readers[f.name] if len(readers[f.name]) == 1 else (None,)
            site = sites.get(u) or (u in reduction_loops and (stage_name(u, reduction_loops[u][0]),
                                                               reduction_loops[u][1]))
            if site and not any(r.data for r in f.reads):
                # (a reader computed there itself: at the same loop, so a chain of producers is computed
                # slice by slice together)
                records.append(S.ComputeAt(f.name, *site))
                sites[f.name] = site
                group[f.name], depth[f.name] = group[u], max(LEVELS.values())
                readers[f.name] = frozenset({f.name})
                for st in f.stages:
                    host = _stage(trial, f, st, records, reduction_loops=reduction_loops, in_update=True)
                    if st.stage == 0 and len(f.stages) == 1 and host is not None:
                        own[f.name] = host
                continue
            where = "at_inner"
        # read where data says: per iteration of a consumer's loop the region it needs is all of it (so
        # computed at a loop, it would be computed whole again at each iteration): at root instead
        gathered = any(r.data or r.consumer in looked_up for r in f.reads)
        if where in LEVELS and gathered:
            where = "root"
        # read through a copy (a consumer's transposed copy of it): computed where every copy can read it
        # (``_copies_level``, below); per tile of its consumer no copy's loop is known to enclose it
        if where == "in_consumer" and any(isinstance(d, S.Wrap) and d.wrapped == f.name for d in records):
            where = "at_inner"
        if where == "inline" and gathered:
            looked_up.add(f.name)
        if where != "inline":
            readers[f.name] = frozenset({f.name})
        if where == "inline":
            records.append(S.ComputeInline(f.name))
            inlined[f.name] = frozenset().union(*(inlined.get(c, {group.get(c)}) for c in f.consumers))
            if any(c in depth for c in f.consumers):  # its uses lie where its consumers are computed
                depth[f.name] = _deepest(f, depth)
            continue
        if where == "in_consumer":
            c = f.consumers[0]
            if c in own:  # per tile of its one consumer (a sum kept in registers while a tile is made)
                records.append(S.ComputeAt(f.name, c, own[c].tile))
                group[f.name] = group[c]
                depth[f.name] = (0 if own[c].tile == own[c].strip else 1) if group[c] == c else depth[c]
            else:
                where = "at_batch"
        if where in LEVELS:
            homes = frozenset().union(*(inlined.get(c, {group.get(c)}) for c in f.consumers))
            home = next(iter(homes)) if len(homes) == 1 else None
            host = hosts.get(home)
            # no single loop nest computes all its uses; or that nest runs column strips outermost and a
            # use reads across columns (a row's reduction): no loop of the nest encloses all its uses
            if host is None or host.columns_first and any(r.offsets is None for r in f.reads):
                where = "root"
            else:
                # no deeper than the consumers computed in the same nest (their uses must lie inside)
                level = min(LEVELS[where], _deepest(f, depth), _copies_level(f.name, records, host))
                if level < LEVELS["at_batch"]:
                    where = "root"
                else:
                    where = host.place(f.name, level, records)
                    group[f.name], depth[f.name] = home, LEVELS[where]
        if where == "root" and not f.is_output:
            records.append(S.ComputeRoot(f.name))
        if where == "root" or f.is_output:
            group[f.name] = f.name
        home = hosts.get(group[f.name]) if group[f.name] != f.name else None
        copy_at = (home.func, home.batch) if home is not None and home.batch else None
        strip_at = (home.func, home.strip, home.width) if home is not None and home.columns_first else None
        # a sum per tile of a consumer whose tiles cross entries runs over the tile's tokens
        # (read by one Func: only the loop's Func reads what is stored by flat position)
        flat_with = where == "in_consumer" and own[f.consumers[0]].flat and len(f.consumers) == 1
        # vector lanes along a dense dim (heads): where each computation of the Func covers all of it
        lead_ok = where == "at_batch" and home is not None and home.per_entry or \
            where == "in_consumer" and own[f.consumers[0]].lead_lanes
        for st in f.stages:
            host = _stage(trial, f, st, records, copy_at, strip_at, where == "in_consumer", flat_with, lead_ok,
                          reduction_loops, flat_ok=group[f.name] == f.name or len(f.consumers) == 1)
            if st.stage == 0 and len(f.stages) == 1 and host is not None:
                own[f.name] = host
                if group[f.name] == f.name:
                    hosts[f.name] = host
    return S.Schedule(tuple(records))


def _copies_level(name: str, records: list, host: Host) -> int:
    """The deepest level of ``host``'s nest (``LEVELS``) whose loop encloses every copy of ``name``
    (``in_()``) that the records compute; below ``at_batch`` where a copy is computed at root or in
    another nest (no loop of this one encloses it)."""
    copies = {d.func for d in records if isinstance(d, S.Wrap) and d.wrapped == name}
    level = max(LEVELS.values())
    loops = {host.batch: -1, host.strip: 0, host.tile: 1, host.row: 2}
    for d in records:
        if d.func in copies and isinstance(d, S.ComputeRoot):
            return LEVELS["at_batch"] - 1
        if d.func in copies and isinstance(d, S.ComputeAt):
            if d.consumer != host.func or d.var not in loops:
                return LEVELS["at_batch"] - 1
            level = min(level, loops[d.var])
    return level


def _deepest(f: FuncInfo, depth: dict[str, int]) -> int:
    """The deepest level of its group's loop nest that ``f`` can be computed at: no deeper than its
    consumers computed in the nest, and one level shallower than those that read it at other than
    constant offsets (a reduction over a row reads past its own tile); never above the batch loop."""
    irregular = {r.consumer for r in f.reads if r.offsets is None}
    levels = [depth[c] - (c in irregular) for c in f.consumers if c in depth]
    return max(min(levels, default=max(LEVELS.values())), LEVELS["at_batch"])


#: where a Func computed in another's loop nest goes: per entry of the batch (ragged Funcs: per iteration
#: of the loops over the dense dimensions, outermost), per strip of tiles, per tile, or per row of a tile
#: stored for the whole tile (a sliding window: each row computes only what the previous rows did not)
LEVELS = {"at_batch": -1, "at_outer": 0, "at_inner": 1, "slide": 2}


@dataclass(frozen=True)
class Host:
    """The loops of a Func's loop nest that producers can be computed at."""

    func: str
    strip: str  # the outermost tile loop
    tile: str  # the innermost tile loop (the strip loop when the columns are not tiled)
    row: str | None  # the row loop inside a tile
    batch: str | None = None  # the loop over the dense dimensions of a ragged Func (fused or innermost)
    columns_first: bool = False  # its column strips run outermost
    flat: bool = False  # its tiles of rows cross entries (the batch fused with the ragged rows first)
    per_entry: bool = False  # ``batch`` is the entry's loop, outside its other dense dims (heads)
    lead_lanes: bool = False  # its vector lanes run along a dense dim (``StageInfo.lead_lanes``)
    width: int = 0  # a tile's columns, where every tile starts at a multiple of them (else 0)

    def place(self, name: str, level: int, records: list) -> str:
        if level == 2 and self.row is None:
            level = 1
        if level == -1 and self.batch is None or level == 1 and self.tile == self.strip:
            level = 0  # the same loop: recorded at the shallower level
        if level == 2:
            records.append(S.StoreAt(name, self.func, self.tile))
            records.append(S.ComputeAt(name, self.func, self.row))
        else:
            loop = {-1: self.batch, 0: self.strip, 1: self.tile}[level]
            records.append(S.ComputeAt(name, self.func, loop))
        return {-1: "at_batch", 0: "at_outer", 1: "at_inner", 2: "slide"}[level]


def _compute_choices(f: FuncInfo) -> list[str]:
    out = ["root"]
    if f.inlinable:
        out.append("inline")
    if f.consumers:
        out += [level for level in LEVELS if level != "at_batch" or not f.dense]
    if len(f.consumers) == 1:
        out.append("in_consumer")
    if f.consumers:
        out.append("in_update")
    return out


def lead_vars(f: FuncInfo, st: StageInfo) -> list[str]:
    """The loops a ragged Func's stage runs outermost: its dense dimensions but the columns (none for a
    Func without a batch)."""
    return [v for v in st.pure[:-1] if v not in st.ragged] if f.batch else []


def _stage(trial, f: FuncInfo, st: StageInfo, records: list, copy_at=None, strip_at=None,
           per_tile: bool = False, flat_with: bool = False, lead_ok: bool = False,
           reduction_loops: dict | None = None, in_update: bool = False, flat_ok: bool = True) -> Host | None:
    """The records of one stage; returns the loops producers can be computed at. ``copy_at`` is the
    (Func, loop) per batch entry of the loop nest computing this Func, if any: where copies it reads go;
    ``strip_at`` the column strip loop of that nest when its strips run outermost (and its tiles' width);
    ``per_tile``: the Func is computed per tile of its consumer (``in_consumer``), ``flat_with`` whose tiles
    cross entries;
    ``lead_ok``: each computation of the Func covers its dense dims whole (its lanes may run along one);
    ``flat_ok``: its own flat loops may be asked (flat tiles, flattened rows): not where it is computed in
    another Func's nest and read by more than one Func (per tile of a flat loop it is stored by flat
    position, which only the loop's Func reads, and lowering refuses it)."""
    p = f"{f.name}.s{st.stage}"
    if not st.pure:
        return None
    x = st.pure[-1]
    # a ragged Func's dense dimensions (batch, heads) run outermost: per iteration of them, one entry's
    # rows and columns are tiled
    lead = lead_vars(f, st)
    rest = [v for v in st.pure[:-1] if v not in lead]
    y = (rest[-1] if rest else None) if f.batch else \
        (st.pure[-2] if len(st.pure) >= 2 and st.pure[-2] != f.batch else None)
    ragged = bool({x, y} & st.ragged)
    # tiles of a ragged Func's rows that cross entries: the batch fused with the rows (one loop over the
    # valid tokens) before the rows are tiled, so that only the last tile of a strip is short, not the
    # last of every entry (a token-flattened GEMM); a sum per tile of such a Func fuses the same pair and
    # runs over the tile's tokens (stored by flat position)
    flat = f.batch in lead and y in st.ragged and x not in st.ragged and \
        st.pure.index(y) == st.pure.index(f.batch) + 1 and \
        (flat_with if per_tile else f.shaped and not st.rvars and flat_ok and
         trial.suggest_categorical(Q.FLAT_TILES.at(p), [False, True]))
    if flat:
        name = f"{f.batch}{y}" if f"{f.batch}{y}" not in set(st.pure) | set(st.rvars) else f"{f.batch}_{y}"
        records.append(S.Fuse(f.name, st.stage, f.batch, y, name))
        lead, rest, y = [v for v in lead if v != f.batch], [name if v == y else v for v in rest], name
    # a shifted tile ("auto") needs a region at least as large: not so for a producer computed per tile
    tail = trial.suggest_categorical(Q.TAIL.at(p), ["guard", "split"] if ragged else ["auto", "guard", "split"])
    pad = 1
    # (a sum per tile: its consumer's tile may be padded); a dense Func computed per iteration of a
    # reduction loop: its slice (a tile and its halo, 38 columns for 32 and a 7-point window) in whole
    # vectors. (Not asked elsewhere: a padded Func reads its producers and Inputs past its region, and an
    # Input read without a boundary condition refuses the schedule at the first call.)
    if x in st.ragged and (not st.rvars or per_tile) or in_update and f.dense and not st.ragged:
        pad = trial.suggest_categorical(Q.PAD.at(p), [1, f.lanes, 2 * f.lanes])
        if pad > 1:
            records.append(S.Pad(f.name, st.stage, x, pad))
            if f.is_output and st.stage == 0:
                records.append(S.StorePadded(f.name, x, pad))
    # the vector lanes along the columns, or along another Var (run innermost, stored innermost): a dense
    # Func's channels, or a ragged Func's heads (its short ragged rows then need no padding nor scalar rest)
    lane = trial.suggest_categorical(Q.LANES.at(p), [x, *st.lane_vars]) if st.lane_vars else \
        trial.suggest_categorical(Q.LANES.at(p), [x, *st.lead_lanes]) if st.lead_lanes else x
    along_lead = lane in st.lead_lanes and lane in lead
    if lane in st.lead_lanes and not (along_lead and lead_ok):
        lane, along_lead = x, False  # (this Func is computed per head: its lanes along the columns)
    ty = trial.suggest_categorical(Q.TILE_Y.at(p), list(TILE_Y)) if y else 1
    # a tile's width in vectors: of columns, or, the lanes along another dense dim, columns (each a vector)
    unit = 1 if along_lead else f.lanes
    tx = trial.suggest_categorical(Q.TILE_X.at(p), list(TILE_X_VECTORS)) * unit
    if x in st.ragged:
        tx = min(tx, WIDEST * f.lanes)  # a ragged tile is vectorized whole (reads past the entry stay provable)
    # no larger than a dimension a few points long (a shifted tile would start before it), or guarded
    bounded = dict(f.bounded)
    ty = min(ty, bounded.get(y, ty))
    if tx > bounded.get(x, tx):
        tx = max(bounded[x] // unit * unit, unit)
    guard_x = tx > bounded.get(x, tx)
    others = lead + [v for v in rest if v != y] if f.batch else [v for v in st.pure if v not in (x, y)]
    if lane != x:
        others.remove(lane)
        if along_lead:
            lead = [v for v in lead if v != lane]
        if st.stage == 0:  # (an update's storage is its Func's)
            records.append(S.ReorderStorage(f.name, tuple(v for v in f.args if v != lane) + (lane,)))
    # the other Vars (channels, batch) outermost, or inside the rows (next to the columns), so that
    # producers computed per row that do not depend on them are computed once for all of them
    # or, in a reduction, innermost: a histogram's channels read the same pixel and compute the same bin;
    # or between the tile's loops and the reduction loops: inside the rows they would make the tile's
    # accumulators too many for registers (49 offsets of a search window), outermost the tile's operands
    # would be read once per point of them
    place = trial.suggest_categorical(
        Q.OTHERS.at(p), ["outside", "inside"] + (["innermost", "outside_reduction"] if st.rvars else [])) \
        if others and y is not None and f.dense else "outside"
    inside = place == "inside"
    if y and ty > 1:
        records.append(S.Split(f.name, st.stage, y, y, f"{y}.i", ty, tail))
    x_split = len(records)  # where the column split is (a strip of tiles replaces it, below)
    if tx:
        records.append(S.Split(f.name, st.stage, x, x, f"{x}.i", tx,
                               "guard" if guard_x else tail if pad % tx else "auto"))
    outer = ([y] if y else []) + ([x] if tx else [])
    row = [f"{y}.i"] if y and ty > 1 else []
    cols = [f"{x}.i" if tx else x]
    # a ragged Func's reduction loops may also run outside whole rows and columns: computed per tile of
    # its consumer (in_consumer), those are the consumer's tile, kept in registers
    rvars_outside = bool(st.rvars) and bool(row or tx or f.batch) and not st.bounds_use & {x, y} and \
        trial.suggest_categorical(Q.RVARS_OUTSIDE_TILE.at(p), [True, False])
    rv = list(st.rvars)
    between = place == "outside_reduction" and rvars_outside
    loops = ([] if inside or between else others) + outer + (others if between else []) + \
        (rv if rvars_outside else []) + row + (others if inside else []) + cols + ([] if rvars_outside else rv)
    if rvars_outside and not row and not tx:  # no tile: the reduction loops run outside the whole rows
        loops = others + rv + ([y] if y else []) + cols
    if lane != x:
        loops.append(lane)
    if place == "innermost":
        loops = [v for v in loops if v not in others] + others
    # producers computed in this nest per entry (all heads at once: their lanes may run along the heads)
    # or per iteration of the innermost dense dim (per entry and head)
    per_entry = len(lead) >= 2 and not flat and len(f.stages) == 1 and \
        trial.suggest_categorical(Q.PER_ENTRY.at(p), [False, True])
    batch = (lead[0] if per_entry else lead[-1]) if lead and not flat else None
    # a ragged Func's column strips outside its entries (Halide's matmul, on packed tokens): a sum per
    # tile reads one strip of weights, which stays in cache while every entry's rows pass; a dense
    # reduction's, when its rows are too few to run in parallel (a scan down the rows of each channel)
    cols_first = bool((f.batch and not st.rvars or f.dense and y) and tx and x not in st.ragged) \
        and trial.suggest_categorical(Q.COLUMNS_FIRST.at(p), [False, True])
    if cols_first:
        lead = [v for v in lead if v != f.batch]
        inner = [v for v in loops if v not in lead and v != x]
        outer, batch = [x] + ([y] if y else []), None
        # a strip of several tiles (their weights copied together): the tokens of a tile of rows are
        # then read once per strip, not once per tile
        per_strip = trial.suggest_categorical(Q.STRIP_TILES.at(p), [1, 2, 4, 8])
        if x in bounded:  # (a strip shifted inwards is no larger than the dimension either)
            per_strip = min(per_strip, max(1, bounded[x] // tx))
        if per_strip > 1:  # strips of whole tiles: the columns split in strips, then each in tiles
            tail_x = records[x_split].tail
            records[x_split:x_split + 1] = [S.Split(f.name, st.stage, x, x, f"{x}.t", tx * per_strip, tail_x),
                                            S.Split(f.name, st.stage, f"{x}.t", f"{x}.t", f"{x}.i", tx, tail_x)]
            at = inner.index(y) + 1 if y in inner else 1
            inner[at:at] = [f"{x}.t"]
            outer.append(f"{x}.t")
        loops = lead + [x] + inner
    if loops != list(st.pure) + rv:
        records.append(S.Reorder(f.name, st.stage, tuple(loops)))
    # a ragged Func's rows flattened with its batch (``fuse(b, i)``): one loop over the entries' valid
    # rows, whose iterations are equal work however the lengths vary (load balance across threads)
    if f.batch and f.shaped and not st.rvars and not cols_first and not row and y in st.ragged and \
            loops[:2] == [f.batch, y] and flat_ok \
            and trial.suggest_categorical(Q.FLATTEN.at(p), [False, True]):
        flat = f"{f.batch}{y}" if f"{f.batch}{y}" not in set(st.pure) else f"{f.batch}_{y}"
        records.append(S.Fuse(f.name, st.stage, f.batch, y, flat))
        loops = [flat] + loops[2:]
        outer = [flat if v == y else v for v in outer]
        batch = None
    if loops[0] == f.batch and st.ragged and f.shaped and trial.suggest_categorical(Q.SORT.at(p), [False, True]):
        records.append(S.SortByLength(f.name, st.stage, f.batch))
    if len(lead) >= 2 and not per_entry and trial.suggest_categorical(Q.FUSE.at(p), [False, True]):
        # one loop over (entry, head) pairs: a parallel loop with many more iterations than entries
        taken = set(st.pure) | set(rv)
        fused = lead[0]
        for v in lead[1:]:
            name = fused + v if fused + v not in taken else f"{fused}_{v}"
            records.append(S.Fuse(f.name, st.stage, fused, v, name))
            fused = name
        loops = [fused] + loops[len(lead):]
        batch = fused if batch else None
    innermost = cols[0] if lane == x else lane
    # a reduction of rows read contiguous along its RVar, innermost: the vector lanes along the RVar,
    # each keeping a partial result (combined at the end of the row), instead of along the columns
    reduce_lanes = st.lane_rvar is not None and loops[-1] == st.lane_rvar and \
        trial.suggest_categorical(Q.REDUCE_LANES.at(p), [False, True])
    if reduce_lanes:
        records.append(S.Split(f.name, st.stage, st.lane_rvar, st.lane_rvar, f"{st.lane_rvar}.v", f.lanes, "guard"))
        records.append(S.Vectorize(f.name, st.stage, f"{st.lane_rvar}.v"))
    elif rvars_outside and reduction_loops is not None:  # per iteration of it, the update covers its tile
        reduction_loops[f.name] = (st.stage, rv[-1])
    # a ragged Func's untiled columns may be one vector loop too ("whole": per tile of a consumer, the
    # consumer's columns; where their count varies with the entry, the loop runs serially)
    vector = not reduce_lanes and \
        trial.suggest_categorical(Q.VECTORIZE.at(p), [True, False, "whole"] if f.batch else [True, False])
    if vector:
        # a tile of up to WIDEST vectors is one vector loop (LLVM splits it into registers; in the rest of
        # a tail="split" it runs serially); a wider tile or an untiled loop is split into vectors first
        if along_lead:  # a vector of heads: the whole dimension (a whole number of vectors, or half of one), no rest
            innermost = lane
        elif lane != x:  # a vector of the other Var's points, at one point of the row
            records.append(S.Split(f.name, st.stage, lane, lane, f"{lane}.v", f.lanes, tail))
            innermost = f"{lane}.v"
        elif tx > WIDEST * f.lanes or not tx and vector != "whole":
            exact = pad % f.lanes == 0 or tx and tail == "guard"
            records.append(S.Split(f.name, st.stage, innermost, innermost, f"{innermost}.v", f.lanes,
                                   "auto" if exact else "guard" if tx else tail))
            innermost = f"{innermost}.v"
        records.append(S.Vectorize(f.name, st.stage, innermost))
    # the rows of a tile; a ragged Func's whole rows when its reductions run outside them (constant only
    # per tile of a consumer: elsewhere the loop runs serially)
    rows = row[0] if row and ty <= 8 else \
        y if f.batch and y and not row and (rvars_outside or per_tile and along_lead) else None
    if y is None and rvars_outside and 0 < tx <= 16 and not vector:
        rows = cols[0]  # a tile of rows reduced side by side: independent chains of adds, not one
    if rows and trial.suggest_categorical(Q.UNROLL.at(p), [True, False]):
        records.append(S.Unroll(f.name, st.stage, rows))
        # a tile of columns too, each a vector: all in registers (a sum per tile: its consumer's columns)
        if along_lead and cols[0] != rows and (cols[0] != x or per_tile):
            records.append(S.Unroll(f.name, st.stage, cols[0]))
    unrolled = set()
    for v, extent in st.unrollable:
        if v in loops and v != lane and trial.suggest_categorical(Q.UNROLL_DIM.at(p, v), [False, True]):
            records += [S.Bound(f.name, v, 0, extent), S.Unroll(f.name, st.stage, v)]
            unrolled.add(v)
    # the outermost loop of a pure Var (a reduction loop's iterations depend on each other: a sum per tile
    # of tokens across entries runs its reduction outermost)
    outermost = next((v for v in loops if v not in unrolled and v not in rv), None)
    if trial.suggest_categorical(Q.PARALLEL.at(p), [True, False]) and outermost is not None:
        records.append(S.Parallel(f.name, st.stage, outermost))
    # operands read with the reduction index innermost: through copies contiguous along the lanes
    # (blocks no wider than the lanes' dimension: 8 heads at 16 lanes are blocks of 8, not a scalar rest)
    block = f.lanes if lane == x else min(f.lanes, bounded.get(lane, f.lanes))
    for name, order, source in st.copies if lane == x else dict(st.lane_copies).get(lane, ()):
        if trial.suggest_categorical(Q.COPY.at(p, name), [False, True]):
            _copy(f.name, name, order, source, block, copy_at, records)
    for name, inner, copy_vars in st.strips if strip_at else ():
        if trial.suggest_categorical(Q.STRIP_COPY.at(p, name), [False, True]):
            # stored as panels a tile wide (k-major: a tile's reads of the strip are one run), the tile this
            # Func's or, computed per tile of its host, the host's; where the copy is a matrix, the tile a
            # power of two of columns and the host's tiles not shifted (a panel would not start where a
            # tile does)
            panel = (tx or strip_at[2]) if strip_at[2] else 0
            if not (len(copy_vars) == 2 and panel >= f.lanes and not panel & (panel - 1) and
                    trial.suggest_categorical(Q.STRIP_PANELS.at(p, name), [False, True])):
                panel = 0
            _strip_copy(f.name, name, inner, strip_at[:2], f.lanes, records, copy_vars, panel)
    # an entry's operand whose rows lie apart: through a copy per entry with its rows contiguous
    for name, order, _ in st.panels if lane == x and copy_at else ():
        if trial.suggest_categorical(Q.PANEL.at(p, name), [False, True]):
            _panel(f.name, name, order, f.lanes, copy_at, records)
    if not outer:
        return None
    # (tiles at multiples of their width: a shifted last tile is not, nor are the tiles of a strip it shifts)
    aligned = tx if tx and records[x_split].tail in ("guard", "split", "pad") else 0
    return Host(f.name, outer[0], outer[-1], row[0] if row else None, batch, cols_first, bool(flat), per_entry,
                along_lead, aligned)


def _wrap(consumer: str, name: str, at, records: list) -> str:
    """``consumer`` reads ``name`` through a copy (``in_()``) computed at loop ``at`` (a (Func, loop)
    pair; None: at root); returns the copy's name."""
    copy = f"{name}_in_{consumer}"
    records.append(S.Wrap(copy, name, consumer))
    records.append(S.ComputeAt(copy, *at) if at else S.ComputeRoot(copy))
    return copy


def _copy(consumer: str, name: str, order: tuple[str, ...], source: tuple[str, ...], lanes: int, at,
          records: list) -> None:
    """``consumer`` reads ``name`` through a copy stored in ``order`` (its column dimension innermost),
    made per batch entry of the loop nest computing ``consumer`` (``at``), or once at root. The copy runs
    in blocks of ``lanes`` x ``lanes``: a vector down each of ``lanes`` unrolled columns (the source's
    innermost dimension), which the backend loads as rows and transposes in registers. (In the source's
    order, contiguous reads and strided writes, ragged attention ran 1.06-1.10x slower; in the storage's
    order LLVM made the vectors gathers of elements a row apart: 19% of its time on AVX-512.)"""
    copy = _wrap(consumer, name, at, records)
    records.append(S.ReorderStorage(copy, order))
    col, inner = order[-1], source[-1]
    if lanes < 2 or col == inner:
        return
    records.append(S.Split(copy, 0, col, col, f"{col}.v", lanes, "split"))
    records.append(S.Split(copy, 0, inner, inner, f"{inner}.u", lanes, "split"))
    rest = tuple(v for v in source if v not in (col, inner))
    records.append(S.Reorder(copy, 0, (*rest, col, inner, f"{inner}.u", f"{col}.v")))
    records.append(S.Vectorize(copy, 0, f"{col}.v"))
    records.append(S.Unroll(copy, 0, f"{inner}.u"))


def _strip_copy(consumer: str, name: str, inner: str, at: tuple[str, str], lanes: int, records: list,
                copy_vars: tuple[str, ...] = (), panel: int = 0) -> None:
    """``consumer`` reads ``name`` through a copy of one column strip (``inner`` is the copy's column
    Var), made per iteration of the strip loop ``at`` (outermost: each strip is copied once), its rows
    contiguous and copied a vector at a time; with ``panel`` (a power of two of columns, the copy a
    matrix of ``copy_vars``), stored as panels that wide, each row of a panel after the one above it
    (BLIS's packed panels: an F2 layout of tiles one row by ``panel``, the tiles down the rows first)."""
    copy = _wrap(consumer, name, at, records)
    records.append(S.Split(copy, 0, inner, inner, f"{inner}.v", lanes, "guard"))
    records.append(S.Vectorize(copy, 0, f"{inner}.v"))
    if panel:
        (row,) = (v for v in copy_vars if v != inner)
        records.append(S.StoreLayout(copy, f2.row_major({row: 1, inner: panel})))
        records.append(S.ReorderStorage(copy, (inner, row)))


def _panel(consumer: str, name: str, order: tuple[str, ...], lanes: int, at: tuple[str, str],
           records: list) -> None:
    """``consumer`` reads ``name`` through a copy stored in ``order`` (``StageInfo.panels``), made per
    batch entry of the loop nest computing ``consumer`` (``at``), in its storage order, its rows copied a
    vector at a time."""
    copy = _wrap(consumer, name, at, records)
    records.append(S.ReorderStorage(copy, order))
    records.append(S.Reorder(copy, 0, order))
    records.append(S.Split(copy, 0, order[-1], order[-1], f"{order[-1]}.v", lanes, "guard"))
    records.append(S.Vectorize(copy, 0, f"{order[-1]}.v"))
