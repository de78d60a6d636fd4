"""A schedule with zero trials, after Mullapudi2016: greedy grouping of each Func into the loop nest of
the one Func that uses it, with tile sizes from a model of recompute and cache footprint.

1. Inlining (consumers first). Through the chain of inlined consumers, each Func is read at a set of
   points per point of the Func that finally stores the values (its offsets, composed as Minkowski
   sums). Inlining recomputes the Func's ``ops`` (weighed: a division 8, an exp 14, ``space._op_cost``)
   at every one of those points instead of loading it: it is chosen when ``ops * (points - 1) < 2 *
   points`` (the extra arithmetic is cheaper than the loads and the store it saves); for a Func that
   itself makes lookups (gathers, which ops does not count), a consumer's channels that it lacks
   multiply its points (inlined, it is computed again for each), and for any Func, the points of the
   consumer's dimensions its reads index by no Var where they are more than channels (a resampling
   filter's taps [tap, x], read again by every row). A Func read at data-dependent points (a lookup) is
   inlined when a call reads at most half as many of its points as it has (local_laplacian reads two of the
   eight intensity levels of each Laplacian level per pixel: stored, all eight would be computed). A Func
   of one load and at most one operation (a copy, a cast) is inlined however it is read: it costs no more
   than the load it saves.
   An index clamped to bounds free of the reader's rows and columns (a boundary condition; in a batch of
   images of different sizes, each image's own edge ``hs[b] - 1``) reads at its offset.
2. Grouping. A Func that is stored and read at constant offsets by Funcs of one loop nest joins that
   nest: computed per row of the nest's tile, stored for the tile and slid down it (each row computes
   only what the rows above did not: no recompute but the tile's top halo), while its window spans at
   most ``MAX_WINDOW`` rows. A Func with updates (a reduction, a scan) that one loop nest reads point by
   point is computed per tile of it (no recompute; its values are read while in cache); so is a
   reduction that writes each point at its own Vars (a sum over an RDom, not a scan, which would start
   again at each tile) read through a window of at most ``MAX_WINDOW`` rows and columns (a box sum of
   a box sum), which recomputes the tile's halo; and a reduction whose consumer's update sums over the
   dimension its columns index, reading the others at its own point (a 1x1 convolution over a per-channel
   filter's channels), with a register tile of the nest's rows. Others are at root.
3. Tiles. A loop nest is cut into strips of rows (the largest of 64..4 rows that leaves at least 4
   strips per core, and at least 4 times the rows its members' windows span, composed through them;
   192 or 128 where that span is over 16 rows) run in parallel; its
   columns are whole rows when a strip's members' rows (window + 1 each) fit in half the L2 cache,
   else tiles of the widest vector count that fits (without sizes: 8 rows by 4 vectors). A nest with
   reductions read through windows computed per tile takes the tile that recomputes the least halo
   among those whose reductions' values (all their planes: a value per offset of a search window) fit
   in half the L2 cache, at least two vectors wide and four tiles per core. Other Vars
   inside the rows when they have at most ``INSIDE_POINTS`` points (channels), so that the parallel loop
   is the strips', or when the nest's members read along them at offsets (a volume's 3D stencils: each
   plane outermost would compute its members again for every plane their windows span), else
   outermost in storage order (a batch and the rows of an NHWC image). An update's
   rows and columns are its own pure Vars' (a scan down the rows of [C, H, W]: C and W). Reductions
   get a register tile (4 rows by 2 vectors, the reduction loops outside it, unrolled; no row tile where
   there are fewer rows; where the rows' tiles are too few for the cores and the columns many, the
   columns' strips outermost and parallel; their other Vars inside the rows only while the tile's
   accumulators, one per point of them, are at most twice the vector registers, else between the tile's
   loops and the reduction loops), but for an
   update that writes where data says (a histogram): one scalar point at a time, its channels innermost
   (they share the pixel and its bin). Innermost
   loops are vectorized.
4. Ragged pipelines. A ragged loop nest with two or more dense dimensions (entry, head) fuses them into
   one parallel loop, and every Func whose uses all lie in it is computed per iteration (one head of one
   entry: its L x L scores stay in cache), but for a copy of a sum of weights shared by every entry
   (Q, K, V = X Wqkv), which goes to root. A sum read point by point by one Func over rows and columns
   is computed per tile of that Func (6 rows by 2 vectors, 4 with 32 vector registers; where every entry
   shares its weights, the rows are the entries' valid tokens fused into one loop, so that a tile
   crosses entries), the reduction
   loop outside the tile's unrolled rows (accumulators in registers), its operand read with the
   reduction index innermost through a copy stored the other way, and an operand made elsewhere whose
   rows lie apart through a copy per iteration of the dense dims with its rows contiguous (a packed
   panel: V's rows of one head are 2 KB apart, and a strip of its columns down an entry falls in few
   L1 sets; taken where entries longer than those sets hold, for the example lengths and the host's L1,
   have half the work or more); a root Func computing such a sum runs
   strips of 64 columns outside the entries, and the strip of weights is copied once per strip (it
   stays in cache while the tokens pass), as panels a tile wide, each panel's rows one after another
   (BLIS's packing: a tile's reads of the strip are one run, where a strip of several tiles stored row
   by row had the tile read a piece of each row: a 256-column strip of 64-column tiles ran 1.4x faster
   packed; a strip of one tile is the same either way). A row's reduction (max, sum) runs 8 rows side by
   side, scalar: independent chains of adds.
5. Vector lanes. Where a Func's reads gather along its columns (a lookup table at an index computed
   from the pixel) but move by a constant stride along another Var whose extent is a whole number of
   vectors (local_laplacian's intensity levels k: ``remap[idx(x) - 256 * k]``), that Var is the vector
   lanes, innermost in its loops and its storage; so for every stored Func that reads such a Func with
   the same Var in that dimension (the pyramids built from it), which keeps their reads contiguous.
   Region sizes come from interval bounds of each consumer's reads (a pyramid level is half its finer
   level; a lookup table's index is clamped).

The answers are the parameters of a trial of the search space, so the study enqueues them as its
first trial and the search starts from them.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..algebra import expr as E
from ..algebra.bounds import Interval, bounds_of
from ..algebra.simplify import simplify
from .space import TILE_X_VECTORS, FuncInfo, Q, lead_vars, suggest


@dataclass(frozen=True)
class Machine:
    cores: int
    l2_bytes: int
    l1_bytes: int = 32 * 1024
    l1_ways: int = 8

    @staticmethod
    def here(threads: int | None = None) -> Machine:
        cores = threads or os.cpu_count() or 1
        return Machine(cores, _cache_bytes(2) or 512 * 1024, _cache_bytes(1) or 32 * 1024,
                       _cache_value(1, "ways_of_associativity") or 8)


def _cache_value(level: int, name: str) -> int | None:
    """A number sysfs gives for this CPU's data or unified cache of ``level`` (Linux), or None."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    for d in sorted(root.glob("index*")) if root.is_dir() else []:
        try:
            if int((d / "level").read_text()) == level and (d / "type").read_text().strip() != "Instruction":
                text = (d / name).read_text().strip().upper()
                scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1], 1)
                return int(text.rstrip("KM")) * scale
        except (OSError, ValueError):
            continue
    return None


def _cache_bytes(level: int) -> int | None:
    """The size of this CPU's data or unified cache of ``level``, or None."""
    return _cache_value(level, "size")


def estimate_extents(program, inputs: dict | None) -> dict[str, tuple[int, ...]]:
    """Each Func's extents for the example inputs: declared shapes (Sizes bound by the inputs' dense
    dims), else the region its consumers read (interval bounds of their index expressions, consumers
    first: a pyramid level is half its finer level, a lookup table's index is clamped); a Func whose
    region is not constant takes the innermost extents of the first output that has a shape."""
    sizes = {}
    for spec in program.inputs:
        shape = getattr((inputs or {}).get(spec.name), "shape", None)
        if isinstance(shape, tuple) and len(shape) == len(spec.shape):
            for s, n in zip(spec.shape, shape, strict=True):
                if isinstance(s, E.Var) and s.name in program.sizes:
                    sizes[s.name] = E.const(int(n), s.dtype)
    out: dict[str, tuple[int, ...]] = {}
    for f in program.functions:
        if f.shape is None:
            continue
        dims = [simplify(E.substitute(s, sizes)) for s in f.shape]
        if all(isinstance(d, E.Const) for d in dims):
            out[f.name] = tuple(int(d.value) for d in dims)
    regions = _read_regions(program, sizes, out)
    known = [out[o] for o in program.outputs if o in out]
    for f in program.functions:
        if f.name not in out and f.name in regions:
            out[f.name] = tuple(hi - lo + 1 for lo, hi in regions[f.name])
        elif f.name not in out and known:
            out[f.name] = known[0][max(0, len(known[0]) - f.rank):]
    return out


def _read_regions(program, sizes: dict, shaped: dict) -> dict[str, list]:
    """Per shapeless Func, per dimension, the (lo, hi) its consumers read, where every end is constant.
    Funcs are visited consumers first, each over its own region (its declared shape, or what its
    consumers read of it)."""
    box: dict[str, list | None] = {n: [(0, e - 1) for e in ext] for n, ext in shaped.items()}
    for f in reversed(program.functions):
        own = box.get(f.name)
        if own is None:
            continue
        env = {a: Interval(lo, hi) for a, (lo, hi) in zip(f.args, own, strict=True)}
        sites = [(f.init, env)]
        for u in f.updates:
            uenv = {v: env[f.args[k]] for v, k in u.pure_vars}
            if u.rdom is not None:
                for v, lo, ext in zip(u.rdom.vars, u.rdom.mins, u.rdom.extents, strict=True):
                    lo, ext = (simplify(E.substitute(e, sizes)) for e in (lo, ext))
                    if not (isinstance(lo, E.Const) and isinstance(ext, E.Const)):
                        uenv = None
                        break
                    uenv[v] = Interval(int(lo.value), int(lo.value + ext.value) - 1)
            if uenv is not None:
                sites += [(e, uenv) for e in (u.value, *u.args)]
        for e, where in sites:
            for n in E.walk(e):
                if not isinstance(n, E.FuncRef) or n.name == f.name or n.name in shaped or \
                        program.is_input(n.name):
                    continue
                got = [_constant_ends(bounds_of(E.substitute(a, sizes), where)) for a in n.args]
                old = box.get(n.name, [])
                if None in got or old is None:
                    box[n.name] = None
                else:
                    box[n.name] = [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(old, got, strict=True)] \
                        if old else got
    return {n: b for n, b in box.items() if b is not None and n not in shaped}


def _constant_ends(iv: Interval) -> tuple[int, int] | None:
    if isinstance(iv.lo, E.Const) and isinstance(iv.hi, E.Const):
        return int(iv.lo.value), int(iv.hi.value)
    return None


def _sum(a: set, b: set) -> set:
    """Minkowski sum of two sets of offset tuples, aligned at their innermost dimensions."""
    out = set()
    for p in a:
        for q in b:
            n = max(len(p), len(q))
            p2, q2 = (0,) * (n - len(p)) + p, (0,) * (n - len(q)) + q
            out.add(tuple(i + j for i, j in zip(p2, q2, strict=True)))
    return out


def plan(funcs: tuple[FuncInfo, ...], extents: dict[str, tuple[int, ...]] | None = None,
         machine: Machine | None = None, lengths=None) -> dict:
    """The heuristic's answer to every question the search space may ask, by parameter name. ``lengths``:
    the example inputs' ragged lengths (one entry each), if known."""
    machine = machine or Machine.here()
    extents = extents or {}
    params: dict = {}
    points: dict[str, dict[str, set]] = {}  # inlined Func -> storing Func -> offsets read per point of it
    home: dict[str, str] = {}  # stored Func -> the Func whose loop nest computes it
    members: dict[str, list[str]] = {}  # loop nest that can take members -> its members
    window: dict[str, int] = {}  # loop nest -> the most rows a member's window spans
    spans_across: dict[str, int] = {}  # loop nest -> the most points of its other Vars a member's window spans
    reach: dict[str, int] = {}  # member -> rows its window spans, composed through the members it feeds
    batched: set[str] = set()  # ragged loop nests whose loop over (entry, head, ...) takes members
    via: dict[str, set] = {}  # inlined Func -> the loop nests its values are computed in
    tiled: set[str] = set()  # Funcs that a sum is computed per tile of
    reduced_in: dict[str, list[str]] = {}  # loop nest -> the reductions computed per tile of it
    halo: dict[str, tuple[int, int]] = {}  # loop nest -> rows and columns its per-tile reductions add to a tile
    # inlined Func -> storing Func -> how many times each point read is computed (a Func read by a
    # consumer of higher rank, the same at each of its channels, is computed for each channel)
    times: dict[str, dict[str, int]] = {}
    rereads: dict[str, dict[str, int]] = {}  # the same, by every dimension its reads index by no Var (_rereads)
    looked_up: dict[str, int] = {}  # inlined Func read at points data picks -> how many points a call reads
    opaque: set[str] = set()  # inlined Funcs read at other than constant offsets (their points: unknown)
    mixed: set[str] = set()  # reductions summed over by their consumer's update (Read.mixed), in its nest
    sliced: dict[str, tuple[str, int]] = {}  # Func read a slice per RVar point (Read.slices), or feeding
    # only such Funcs -> (the update's Func, its RDom's points)
    per_slice: set[str] = set()  # Funcs whose update's producers are computed a slice at a time
    in_slices: set[str] = set()  # those producers
    info = {f.name: f for f in funcs}
    for f in funcs:
        if (chain := _slice_chain(f, sliced)) is not None:
            sliced[f.name] = chain
        homes = set().union(*(via.get(c, {home.get(c)}) for c in f.consumers)) if f.consumers else {None}
        rel: dict[str, set] = {}
        rep: dict[str, int] = {}
        again: dict[str, int] = {}
        regular = all(r.offsets is not None and r.consumer not in looked_up and r.consumer not in opaque
                      for r in f.reads)
        if regular:
            for r in f.reads:
                across = _channels(info[r.consumer], f, extents)
                for host, offs in points.get(r.consumer, {r.consumer: {(0,)}}).items():
                    rel[host] = rel.get(host, set()) | _sum(offs, set(r.offsets))
                    rep[host] = max(rep.get(host, 1), times.get(r.consumer, {}).get(host, 1) * across)
                    again[host] = max(again.get(host, 1), rereads.get(r.consumer, {}).get(host, 1) *
                                      _rereads(info[r.consumer], r, extents))
        # inlined, a Func is computed again for each channel of a consumer that lacks them; counted for
        # a Func that makes lookups (gathers: costly, and not in ops). Any Func is computed again at each
        # point of the consumer's dimensions that its reads index by no Var (``again``): counted where
        # those are more points than channels (``INSIDE_POINTS``: a resampling filter's taps [tap, x],
        # read by every row of the image). A few channels' recompute is not: inlined, the Func stays in
        # its consumer's loop; stored, it takes a buffer and a loop nest of its own (counted, a denoiser's
        # weights were stored per pixel and ran 4.4x slower)
        m = max((len(v) * max(rep.get(h, 1) if f.lookups else 1,
                              again.get(h, 1) if again.get(h, 1) > INSIDE_POINTS else 1)
                 for h, v in rel.items()), default=1)
        groups = {home.get(h) for h in rel} if regular and rel else {None}
        g = next(iter(groups)) if len(groups) == 1 else None
        if f.is_output:
            home[f.name] = f.name
        elif f.inlinable and regular and f.ops * (m - 1) < 2 * m:
            params[Q.COMPUTE.at(f.name)] = "inline"
            points[f.name], times[f.name], rereads[f.name] = rel, rep, again
            via[f.name] = homes
            continue
        elif f.inlinable and (lookups := _points_looked_up(f, points, times, looked_up, extents)) and \
                2 * lookups <= math.prod(extents[f.name]):
            # read at points data picks, at most half as many as it has: most of its values are never used
            params[Q.COMPUTE.at(f.name)] = "inline"
            looked_up[f.name] = lookups
            via[f.name] = homes
            continue
        elif f.dense and f.inlinable and not regular and f.ops <= 1 and f.loads <= 1 and not f.lookups:
            # one load and at most one operation (a copy, a cast) per read, however often each point is
            # read: cheaper than a store and a load
            params[Q.COMPUTE.at(f.name)] = "inline"
            opaque.add(f.name)
            via[f.name] = homes
            continue
        elif len(homes) == 1 and ((per_tile := _tile_sum(f, via) if not f.dense else _dense_tile_sum(f, via, info))
                                  or next(iter(homes)) in batched and not _sums_weights(f, funcs)):
            # per (entry, head): an entry's intermediates (L x L scores) stay in cache; a sum read only
            # point by point by one Func is computed per tile of it, in registers
            params[Q.COMPUTE.at(f.name)] = "in_consumer" if per_tile else "at_batch"
            if per_tile:
                tiled.add(f.consumers[0])
            home[f.name] = next(iter(homes))
            continue
        elif f.dense and f.name in sliced and (all(c in in_slices for c in f.consumers) or len(f.stages) > 1 and
                                               home.get(sliced[f.name][0]) not in (None, sliced[f.name][0]) and
                                               sliced[f.name][1] * SLICE_TILE[0] * SLICE_TILE[1] * f.lanes *
                                               f.itemsize > machine.l1_bytes // 2):
            # a reduction feeding only a slice per point of an update's RDom (a denoiser's box sums of one
            # offset of its search window), the update computed per tile of another loop nest: computed a
            # slice at a time, per iteration of that update's reduction loop, in L1, where every slice of
            # a tile together would take more than half of it (a 3 x 3 search's 9 slices: 18 KB at 8 lanes
            # and 36 at 16, 1.09x and 1.25x faster so with 32 KB of L1); so are the stored Funcs that feed
            # only such slices
            params[Q.COMPUTE.at(f.name)] = "in_update"
            in_slices.add(f.name)
            per_slice.add(sliced[f.name][0])
            home[f.name] = home[sliced[f.name][0]]
            continue
        elif f.dense and regular and len(f.stages) > 1 and len(rel) == 1 and g in members and \
                max(rep.values()) == 1 and (all(not any(o) for o in next(iter(rel.values()))) or
                                            _windowed(next(iter(rel.values()))) and _reduces_in_place(f)):
            # a reduction read point by point, or through a small window, by one loop nest: computed per
            # tile of it (its values are read while in cache, not stored whole and read back; a window
            # recomputes the tile's halo)
            params[Q.COMPUTE.at(f.name)] = "at_inner"
            home[f.name] = g
            reduced_in.setdefault(g, []).append(f.name)
            rows, cols = halo.get(g, (0, 0))
            halo[g] = (rows + _rows_spanned(rel), cols + _cols_spanned(rel))
            continue
        elif f.dense and len(f.stages) > 1 and len(f.reads) == 1 and _mixes_columns(f.reads[0], info, home) and \
                home.get(f.reads[0].consumer) in members:
            # a reduction whose one consumer's update sums over one of its dimensions and reads the others
            # at its own point (a 1x1 convolution over a depthwise convolution's channels): computed in that
            # consumer's loop nest, read while in cache instead of stored whole and read back. Each point
            # once: the consumer's points that read the same ones differ in its columns, which the nest's
            # tiles run inside the loop the reduction is computed at (where the nest runs its column
            # strips outermost, the search space puts it at root)
            params[Q.COMPUTE.at(f.name)] = "at_inner"
            home[f.name] = home[f.reads[0].consumer]
            mixed.add(f.name)
            continue
        elif g in members and len(f.stages) == 1 and \
                _rows_spanned(rel) + max(reach.get(h, 0) for h in rel) <= MAX_WINDOW:
            params[Q.COMPUTE.at(f.name)] = "slide"
            home[f.name] = g
            members[g].append(f.name)
            window[g] = max(window.get(g, 0), _rows_spanned(rel))
            spans_across[g] = max(spans_across.get(g, 0), _others_spanned(rel))
            reach[f.name] = _rows_spanned(rel) + max(reach.get(h, 0) for h in rel)
            continue
        else:
            params[Q.COMPUTE.at(f.name)] = "root"
            home[f.name] = f.name
        if len(f.stages) == 1 and len(f.args) >= 2:
            members[f.name] = []
        if not f.dense and f.batch and len(f.stages) == 1 and len(lead_vars(f, f.stages[0])) >= 2:
            batched.add(f.name)
    lanes = _lane_vars(funcs, params, extents)
    along_heads = _heads_hosts(funcs, home, lengths, machine)
    # (the Funcs stored with the heads innermost: their nest runs its lanes along them)
    heads_stored = {f.name for f in funcs if f.stages[0].lead_lanes and home.get(f.name) in along_heads}
    for f in funcs:
        grouped = home.get(f.name) != f.name
        for st in f.stages:
            p = f"{f.name}.s{st.stage}"
            for name, *_ in st.copies:
                params[Q.COPY.at(p, name)] = False
            for name, *_ in st.strips:  # asked only in a nest whose column strips run outermost
                params[Q.STRIP_COPY.at(p, name)] = True
                params[Q.STRIP_PANELS.at(p, name)] = True
            if not f.dense and f.batch and (grouped or f.name in batched or f.name in tiled):
                params.update(_batched_stage(f, st, p, params.get(Q.COMPUTE.at(f.name)), f.name in tiled,
                                             _sums_weights(f, funcs), _row_vectors(lengths, f.lanes)))
                if f.name in along_heads and len(lead_vars(f, st)) >= 2:
                    params[Q.PER_ENTRY.at(p)] = True
                if st.lead_lanes and home.get(f.name) in along_heads:
                    params.update(_along_heads(st, p, f.name in tiled, heads_stored))
                if st.rvars and params[Q.RVARS_OUTSIDE_TILE.at(p)]:
                    for name, *_ in st.copies:  # operands made elsewhere read through a transposed copy
                        params[Q.COPY.at(p, name)] = home.get(name) != home.get(f.name) or \
                            params.get(Q.COMPUTE.at(f.name)) == "in_consumer"
                    # and those whose rows lie apart, through a packed panel per (entry, head): one head's
                    # rows gathered (per entry, a copy would only reorder a contiguous block: as fast)
                    for name, _, row in st.panels:
                        params[Q.PANEL.at(p, name)] = home.get(name) != home.get(f.name) and \
                            home.get(f.name) not in along_heads and _panel_pays(row, lengths, machine)
                continue
            if f.dense and (f.name in tiled or params.get(Q.COMPUTE.at(f.name)) == "in_consumer"):
                params.update(_dense_register_tile(f, st, p, f.name in tiled, extents.get(f.name), machine.cores))
                continue
            if st.scatter:  # one point at a time, scalar (a vector of bins would gather and scatter)
                params.update({Q.TILE_Y.at(p): 1, Q.TILE_X.at(p): 0, Q.TAIL.at(p): "auto", Q.OTHERS.at(p): "innermost"})
            elif st.rvars:
                params.update(_reduction_tiles(f, st, p, extents.get(f.name), machine, grouped))
                nest = home[f.name]
                nest_rows = params.get(Q.TILE_Y.at(f"{nest}.s0"), 0) if f.name in mixed else 0
                if 1 < nest_rows <= 8 and st.pure[-2:] == info[nest].args[-2:]:
                    # computed per tile of a nest: a register tile of the nest's rows, none left over (4
                    # of 6: a serial rest of 2; a held-out separable convolution's rules 1.3x faster at 8 and 16 lanes)
                    params[Q.TILE_Y.at(p)] = nest_rows
            elif not grouped:
                params.update(_tiles(f, st, p, extents.get(f.name), members.get(f.name, []),
                                     window.get(f.name, 0), machine,
                                     sum(_planes(info[m], extents) for m in reduced_in.get(f.name, [])),
                                     halo.get(f.name, (0, 0)), spans_across.get(f.name, 0),
                                     max((reach[m] for m in members.get(f.name, [])), default=0)))
            else:
                params.update({Q.TILE_Y.at(p): 1, Q.TILE_X.at(p): 0, Q.TAIL.at(p): "auto"})
            if st.stage == 0 and f.name in lanes:
                params[Q.LANES.at(p)] = lanes[f.name]
            params.update({Q.VECTORIZE.at(p): not st.scatter, Q.PARALLEL.at(p): not grouped, Q.PAD.at(p): 1,
                           Q.SORT.at(p): False})
            params.setdefault(Q.UNROLL.at(p), False)
            params.setdefault(Q.REDUCE_LANES.at(p), False)
            for v, _ in st.unrollable:  # each copy's selects fold: one channel's arithmetic, not all of them
                params[Q.UNROLL_DIM.at(p, v)] = True
    for u in per_slice:  # its reduction loops outside a tile that is the whole of its nest's tile
        nest = home[u]
        params.update({Q.TILE_Y.at(f"{nest}.s0"): SLICE_TILE[0], Q.TILE_X.at(f"{nest}.s0"): SLICE_TILE[1]})
        for st in info[u].stages[1:]:
            p = f"{u}.s{st.stage}"
            params.update({Q.TILE_Y.at(p): SLICE_TILE[0], Q.TILE_X.at(p): SLICE_TILE[1], Q.UNROLL.at(p): False,
                           Q.RVARS_OUTSIDE_TILE.at(p): True})
    return params


#: The tile (rows, vectors of columns) of a loop nest whose update computes its producers a slice at a
#: time: each slice and the update's accumulators over it in L1 (16 rows of 4 vectors: 4 KB a float32
#: slice at 16 lanes, 16 KB for four channels of accumulators); 4 vectors wide, the slices' halo columns
#: add a quarter (a denoiser's 7 x 7 search, in turns: 16 x 4 vectors 44.6 ms, 8 x 8 48.8, 32 x 2 54.0)
SLICE_TILE = (16, 4)


def _slice_chain(f: FuncInfo, sliced: dict) -> tuple[str, int] | None:
    """(the Func whose update reads ``f`` a slice per point of its RDom, those points), directly or
    through Funcs that are themselves so read (every consumer of ``f`` one of them, for the same update),
    or None."""
    if len(f.reads) == 1 and f.reads[0].slices:
        return f.reads[0].consumer, f.reads[0].slices
    chains = {sliced.get(r.consumer) for r in f.reads}
    if f.reads and len(chains) == 1 and None not in chains and all(r.offsets is not None for r in f.reads):
        return chains.pop()
    return None


#: The most rows a member's window may span in a nest, composed through the members between it and the
#: nest's Func: strips are at most 192 rows (``TALL_STRIP_ROWS``) and at least four such spans tall, so a
#: Func that would span more starts a nest of its own: a long chain of stencils slides in groups (one nest
#: of 31 sliding stages made a tall strip, and region expressions composed stage by stage that took
#: minutes to lower and compile). 24 rows, not 16: a chain of 3x3 stencils slides in groups of 7, not 5,
#: in strips of 192 rows, and stores fewer whole images between them
MAX_WINDOW = 24

#: The rows of a loop nest's strips: the tallest of ``STRIP_ROWS`` that leaves four strips a core and is
#: four times as tall as the rows its members' windows span, composed through the members (the halo
#: each strip computes again); where that halo is too tall for any (over 16 rows), the tallest of
#: ``TALL_STRIP_ROWS`` that is. Not taller where the halo is short: a two-row blur's strips of 128 rows
#: ran 13% slower than 64 (fewer strips to balance over the cores, no halo to save); nor 256 rows: a
#: chain of 3x3 stencils sliding in groups of 7 (24 rows of halo) ran 37.3 ms so, 35.3 in 192
STRIP_ROWS = (64, 32, 16, 8)
TALL_STRIP_ROWS = (192, 128)


def _spanned(rel: dict, d: int) -> int:
    """How many points apart along dimension ``d`` (counted from the last, -1) the points of a Func read
    per point of the Funcs that store them lie, at most."""
    xs = [q[d] for v in rel.values() for q in v if len(q) >= -d]
    return max(xs) - min(xs) if xs else 0


def _rows_spanned(rel: dict) -> int:
    """``_spanned`` along the rows (the next-to-last dimension)."""
    return _spanned(rel, -2)


def _others_spanned(rel: dict) -> int:
    """``_spanned`` along the dimensions before the rows (a volume's planes), the widest of them."""
    rank = max((len(q) for v in rel.values() for q in v), default=0)
    return max((_spanned(rel, d) for d in range(-rank, -2)), default=0)


def _cols_spanned(rel: dict) -> int:
    """``_spanned`` along the columns (the last dimension)."""
    return _spanned(rel, -1)


def _reduces_in_place(f: FuncInfo) -> bool:
    """Whether each update of ``f`` writes every point at its own Vars (a sum over an RDom), not along
    an RDom (a scan down the rows: computed per tile, it would start again from the first row)."""
    return all(len(st.pure) == len(f.args) for st in f.stages[1:])


def _mixes_columns(r, info: dict, home: dict) -> bool:
    """Whether read ``r`` sums over the dimension of the read Func that its consumer's columns (its last
    Var) index (``Read.mixed``), the consumer computed in a loop nest with the same columns."""
    c = info[r.consumer]
    nest = info.get(home.get(r.consumer))
    return r.mixed is not None and not r.data and r.mixed == len(c.args) - 1 and nest is not None and \
        nest.args[-1:] == c.args[-1:]


def _windowed(offsets: set) -> bool:
    """Whether a Func read at ``offsets`` is read point by point or through a window of at most
    ``MAX_WINDOW`` rows and columns (offsets in the last two dimensions only)."""
    rel = {None: offsets}
    return all(not any(o[:-2]) for o in offsets) and _rows_spanned(rel) <= MAX_WINDOW and \
        _cols_spanned(rel) <= MAX_WINDOW


def _planes(f: FuncInfo, extents: dict) -> int:
    """Values of ``f`` per point of its rows and columns (its last two dimensions): the product of the
    extents of its other dimensions (the 49 offsets of a patch distance, the channels of a colour sum)."""
    e = extents.get(f.name)
    return math.prod(e[:-2]) if e is not None and len(e) >= 2 else 1


def _channels(consumer: FuncInfo, f: FuncInfo, extents: dict) -> int:
    """How many points of ``consumer`` read each point of ``f`` at one offset: the extent of the
    consumer's leading dimensions that ``f`` lacks (colour channels reading one gray level)."""
    e = extents.get(consumer.name)
    extra = len(consumer.args) - len(f.args)
    return math.prod(e[:extra]) if extra > 0 and e is not None and len(e) == len(consumer.args) else 1


def _rereads(consumer: FuncInfo, read, extents: dict) -> int:
    """How many points of ``consumer`` read each point that ``read`` (a ``Read``) reads: the product of the
    extents of the consumer's dimensions it indexes with no Var (a resampling filter's taps [tap, x], read
    by every row and channel of an image [c, y, x])."""
    e = extents.get(consumer.name)
    if e is None or len(e) != len(consumer.args):
        return 1
    return math.prod(e[k] for k in read.unused)


def _points_looked_up(f: FuncInfo, points: dict, times: dict, looked_up: dict, extents: dict) -> int:
    """How many points of ``f`` a call reads, if it is read by lookup (some index is data: local_laplacian's
    output reads two of the eight intensity levels of each Laplacian level, at each pixel) or by Funcs
    that are inlined into lookups; else 0."""
    if not extents.get(f.name) or not any(r.data or r.consumer in looked_up for r in f.reads) or \
            any(r.offsets is None and not r.data for r in f.reads):
        return 0
    total = 0
    for r in f.reads:
        if r.consumer in looked_up:
            total += r.sites * looked_up[r.consumer]
            continue
        for host, offs in points.get(r.consumer, {r.consumer: {(0,)}}).items():
            if not extents.get(host):
                return 0
            total += r.sites * len(offs) * times.get(r.consumer, {}).get(host, 1) * math.prod(extents[host])
    return total


def _lane_vars(funcs: tuple[FuncInfo, ...], params: dict, extents: dict) -> dict[str, str]:
    """Stored Funcs whose vector lanes run along a Var other than the columns: where along the columns
    a read gathers (a lookup table at a data-dependent index) and along that Var it moves by a constant
    stride (local_laplacian's intensity levels: ``remap[idx(x) - 256 * k]``), and then every Func that
    reads such a Func with the same Var in that dimension (through inlined Funcs too): stored with that
    Var innermost, its reads of the producer stay contiguous. The Var's extent must be a whole number of
    vectors."""
    info = {f.name: f for f in funcs}

    def fits(f: FuncInfo, v: str) -> bool:
        e = extents.get(f.name)
        return v in f.stages[0].lane_vars and e is not None and len(e) == len(f.args) and \
            e[f.args.index(v)] % f.lanes == 0 and e[f.args.index(v)] > 0

    inline = {f.name for f in funcs if params.get(Q.COMPUTE.at(f.name)) == "inline"}
    lanes: dict[str, str] = {}
    for f in funcs:
        v = next((v for v in f.stages[0].cheap_lanes if fits(f, v)), None) if f.name not in inline else None
        if v is not None:
            lanes[f.name] = v
    carried = dict(lanes)  # also inlined Funcs whose consumers read them with the lane Var
    todo = list(carried)
    while todo:
        f = info[todo.pop()]
        d = f.args.index(carried[f.name])
        for c, dim, u in f.passed_dims:
            if dim != d or c in carried or not (c in inline or fits(info[c], u)):
                continue
            carried[c] = u
            if c not in inline:
                lanes[c] = u
            todo.append(c)
    return lanes


def _sums_weights(f: FuncInfo, funcs: tuple[FuncInfo, ...]) -> bool:
    """Whether ``f`` copies a sum (read by ``f`` alone) of operands that every entry shares (weights
    W[c, n]): computed per entry, each entry would read all the weights again; at root in column strips
    outermost, a strip of them is read once while every entry's tokens pass."""
    return any(p.consumers == (f.name,) and any(st.strips for st in p.stages) for p in funcs)


def _sum_read_pointwise_by_one(f: FuncInfo, inlined: dict) -> bool:
    """Whether ``f`` is a reduction that one stored (not inlined) Func reads, point by point only."""
    return len(f.consumers) == 1 and f.consumers[0] not in inlined and len(f.stages) > 1 and \
        all(r.offsets is not None and all(not any(o) for o in r.offsets) for r in f.reads)


def _tile_sum(f: FuncInfo, inlined: dict) -> bool:
    """Whether ``f`` is a sum over the rows and columns of a ragged Func that one stored Func reads
    point by point: computed per tile of that Func, its accumulators stay in registers."""
    return bool(f.batch) and _sum_read_pointwise_by_one(f, inlined) and \
        len(f.stages[0].pure) - len(lead_vars(f, f.stages[0])) >= 2


def _dense_tile_sum(f: FuncInfo, inlined: dict, info: dict) -> bool:
    """Whether dense ``f`` is a product-like sum (its update reads an operand along the columns with a
    reduction index elsewhere, B[k, j] in a sum over k) that one stored Func of two or more dimensions
    reads point by point: computed per register tile of it, as a matmul's hand schedule does (its rules
    had computed it per strip of 64 rows, whose accumulators LLVM cannot keep in registers across k: the
    rows of the strip lie a symbolic stride apart; 66 ms against the hand schedule's 12)."""
    return _sum_read_pointwise_by_one(f, inlined) and any(st.strips and len(st.pure) >= 2 for st in f.stages[1:]) \
        and len(info[f.consumers[0]].stages) == 1 and len(info[f.consumers[0]].stages[0].pure) >= 2


def _dense_register_tile(f: FuncInfo, st, p: str, hosts_sum: bool, extent, cores: int) -> dict:
    """A dense register tile, 6 rows by 2 vectors of accumulators (4 with 32 vector registers; no wider
    than the Func's columns), the rows unrolled: for the Func it is computed per tile of, column strips
    of 64 outermost (in parallel, a strip of the operand read along the columns stays in cache and is
    read through a copy) and the tiles of rows inside (a strip no wider than the Func), the last tile and
    strip shifted inwards where the Func is at least that large (a tail split three ways, rows, strips
    and tiles, took a matmul 0.83 s to compile, 0.21 shifted); where the columns make one strip only and
    there are several cores, the rows outermost and in parallel instead (a depthwise-separable layer's
    16 output channels made one strip of a 64-wide tile: one thread, every tile in the rest); for the
    sum itself, the same tile with the reduction loops outside it."""
    vectors = 4 if f.lanes >= 16 else 2
    known = bool(extent) and len(extent) == len(f.args)
    if known:
        rows, cols = extent[st.dims[-2]], extent[st.dims[-1]]
        vectors = max(1, min(vectors, -(-cols // f.lanes)))
    out = {Q.TILE_Y.at(p): 6, Q.TILE_X.at(p): vectors, Q.TAIL.at(p): "split", Q.UNROLL.at(p): True,
           Q.VECTORIZE.at(p): True, Q.OTHERS.at(p): "outside", Q.PAD.at(p): 1, Q.SORT.at(p): False,
           Q.REDUCE_LANES.at(p): False}
    if not hosts_sum:
        return {**out, Q.RVARS_OUTSIDE_TILE.at(p): True, Q.PARALLEL.at(p): False, Q.COLUMNS_FIRST.at(p): False}
    strip = max(1, 64 // (vectors * f.lanes))
    if known:
        strip = max(1, min(strip, cols // (vectors * f.lanes)))  # no wider than the Func
        if rows >= 6 and cols >= strip * vectors * f.lanes:
            out[Q.TAIL.at(p)] = "auto"
        if cols // (strip * vectors * f.lanes) < min(cores, 2):
            return {**out, Q.COLUMNS_FIRST.at(p): False, Q.PARALLEL.at(p): True, Q.RVARS_OUTSIDE_TILE.at(p): False}
    return {**out, Q.COLUMNS_FIRST.at(p): True, Q.STRIP_TILES.at(p): strip, Q.PARALLEL.at(p): True,
            Q.RVARS_OUTSIDE_TILE.at(p): False}


#: the most padded work the rules accept for a wider tile of ragged rows, over the useful work
MAX_PADDING = 0.05


def _row_vectors(lengths, lanes: int) -> int:
    """Vectors in a tile of ragged rows whose rows are padded to whole tiles (attention's scores): two
    where the padded points stay under ``MAX_PADDING`` of the useful work for these lengths (long
    entries: the two vectors' twelve accumulators ran the attention core 1.18x faster on RACE), else
    one. The padded points are scores, computed in the first of a row's two products (Q K^T; P V reads
    only an entry's own keys): L (ceil(L) - L) of them in an entry of L rows, against 2 L^2 useful."""
    if lengths is None or len(lengths) == 0 or not np.any(lengths):
        return 1
    return 2 if _padding(lengths, 2 * lanes) <= MAX_PADDING else 1


def _padding(lengths, multiple: int) -> float:
    """Padded scores over useful work (``_row_vectors``) for entries of these lengths whose rows are
    padded to ``multiple`` columns."""
    n = np.asarray(lengths, np.int64)
    useful = 2 * float((n * n).sum())
    padded = float((n * (-(-n // multiple) * multiple - n)).sum())
    return padded / useful if useful else 0.0


def _heads_hosts(funcs: tuple[FuncInfo, ...], home: dict, lengths, machine: Machine) -> set[str]:
    """The ragged loop nests whose producers run their vector lanes along a dense dimension (heads)
    instead of their ragged columns, computed per entry, all heads at once: each score a vector of heads,
    with no padding and no scalar rest, where an entry's intermediates of every head stay in L2. Chosen
    where, for the example lengths, rows padded to one vector would pad more than ``MAX_PADDING`` of the
    useful work, or entries whose intermediates fit in L2 hold at least half the work (attention on
    CoLA's 13 tokens: 14% padded, 1.25x faster; MNLI's 43: 1.2x faster; on SQuAD's 160, whose scores of
    8 heads take 1.6 MB an entry, 1.19x slower, RACE's 350 1.63x), and the rows' padding costs at least
    the heads' share of a vector (``_lanes_cost``)."""
    if lengths is None or len(lengths) == 0 or not np.any(lengths):
        return set()
    members: dict[str, list[FuncInfo]] = {}
    for f in funcs:
        if f.stages[0].lead_lanes and home.get(f.name) not in (None, f.name):
            members.setdefault(home[f.name], []).append(f)
    out = set()
    for host, group in members.items():
        stored = [f.entry_storage for f in group if f.entry_storage is not None]
        if not stored:  # (only Funcs shaped like their consumers, whose heads may not fill vectors)
            continue
        in_cache = _work_share(lengths, lambda n, stored=stored: sum(
            (size * n ** dims for size, dims in stored), np.zeros_like(n)) <= machine.l2_bytes)
        padding = _padding(lengths, group[0].lanes)
        if (padding > MAX_PADDING or in_cache >= 0.5) and _lanes_cost(group) <= 1 + padding:
            out.add(host)
    return out


#: a point's cost on vectors of half the natural width, over its cost on whole ones. Measured as the rows'
#: padding at which the two meet, in turns (2 threads, an Intel AVX-512 host, rocketlake): once the heads'
#: copies ran in blocks of the heads (a split by 16 had left 8 heads to the scalar rest, and half vectors
#: had looked 1.2x dearer than rows padded 6%), attention on MNLI's 43 tokens (rows padded 6%) ran
#: 1.03-1.2x faster on half-vector heads than along its rows (b128 and b32, three runs), the encoder layer
#: within 1.5%, CoLA's 13 tokens (22%) 1.08-1.14x faster; so 1, no dearer. (A core with two 512-bit FMA
#: units may differ: not measured.)
HALF_VECTOR_COST = 1.0


def _lanes_cost(group: list[FuncInfo]) -> float:
    """A point's cost with ``group``'s lanes along its dense dimension (heads) over its cost on whole
    vectors: 1 where the heads fill them (8 heads at 8 lanes), ``HALF_VECTOR_COST`` where they fill half
    (8 at 16); the rules take the heads where rows padded to a vector cost as much or more."""
    fills = [min(1.0, bound / f.lanes) for f in group for v, bound in f.bounded if v in f.stages[0].lead_lanes]
    return 1.0 if min(fills, default=1.0) >= 1 else HALF_VECTOR_COST


def _panel_pays(row: int | None, lengths, machine: Machine) -> bool:
    """Whether an entry's operand whose rows lie ``row`` bytes apart (None: unknown, as far as a way of
    L1) is worth a packed copy, for the example lengths: a column strip down an entry's rows (one cache
    line per row) falls in the L1 sets that addresses ``row`` apart share, which hold ``ways`` lines each;
    past that many rows the strip evicts itself. Taken where entries longer than that hold at least half
    the work (n^2 per entry: a sum over the entry's rows for each of its rows). Measured on attention's V
    (2 KB between rows, 16 rows fit in a 32 KB 8-way L1), rows' lanes, in turns: CoLA's 13 tokens 4%
    slower with the copy, MNLI's 43 6% faster, RACE's 350 1.26x."""
    way = machine.l1_bytes // machine.l1_ways
    rows = machine.l1_ways * max(1, way // row) if row else machine.l1_ways
    share = _work_share(lengths, lambda n: n > rows)
    return share is not None and share >= 0.5


def _work_share(lengths, keep) -> float | None:
    """The share of a batch's work (n^2 per entry of n tokens: each row of an entry reduces over its rows)
    in the entries where ``keep`` (on the float array of lengths) holds; None when no entry has a token."""
    if lengths is None or len(lengths) == 0 or not np.any(lengths):
        return None
    n = np.asarray(lengths, np.float64)
    work = n * n
    return float(work[keep(n)].sum()) / float(work.sum())


def _along_heads(st, p: str, hosts_sum: bool, heads_stored: set[str]) -> dict:
    """A stage of a Func computed per entry with its vector lanes along a dense dimension (heads):
    unpadded, reading its operands through copies contiguous along the heads, but those of its nest
    stored with the heads innermost already (``heads_stored``; an operand computed in the nest in its
    own order, as an encoder's Q taken from its QKV product, is copied too: without, the encoder's
    scores read Q a head 64 floats apart, 1.09x slower on MNLI b128); a sum per tile of it in tiles of 6
    rows by 2 columns (12 vectors of accumulators)."""
    lane = st.lead_lanes[0]
    out = {Q.LANES.at(p): lane, Q.PAD.at(p): 1}
    if hosts_sum:
        out.update({Q.TILE_Y.at(p): 6, Q.TILE_X.at(p): 2})
    for name, *_ in dict(st.lane_copies).get(lane, ()):
        out[Q.COPY.at(p, name)] = name not in heads_stored
    return out


def _batched_stage(f: FuncInfo, st, p: str, where, hosts_sum: bool, shared: bool = False,
                   row_vectors: int = 1) -> dict:
    """A stage of a ragged loop nest computed per (entry, head): the nest's own loop fused and parallel;
    a sum per tile of its consumer with its reduction loops outside the tile's unrolled rows and whole
    vector columns; the consumer of such a sum and other sums in register tiles of 6 rows by 2 vectors
    with the reduction loops outside; a row's reduction 8 rows at a time, unrolled; the rest vectorized
    along their columns."""
    root = where in (None, "root")
    out = {Q.PARALLEL.at(p): root, Q.FUSE.at(p): True, Q.SORT.at(p): False, Q.PAD.at(p): 1,
           Q.TAIL.at(p): "split", Q.TILE_Y.at(p): 1, Q.TILE_X.at(p): 0, Q.VECTORIZE.at(p): True,
           Q.UNROLL.at(p): False}
    rows = [v for v in st.pure[:-1] if v in st.ragged]
    # a sum computed per tile of its consumer, and that consumer, over ragged columns: the rows padded to
    # whole vectors and the tile one vector wide, so that every tile is whole (a wider tile left a rest as
    # wide, up to 3 vectors of a row of 43, which ran serially: attention's scores 1.3x slower)
    ragged_cols = st.pure[-1] in st.ragged and (where == "in_consumer" or hosts_sum)
    if ragged_cols:
        out[Q.PAD.at(p)] = row_vectors * f.lanes
    if where == "in_consumer":
        out.update({Q.VECTORIZE.at(p): "whole", Q.RVARS_OUTSIDE_TILE.at(p): True, Q.UNROLL.at(p): True})
    elif hosts_sum or st.rvars and rows:
        # a register tile: 6 rows by 2 vectors of accumulators with 16 vector registers, by 4 with 32;
        # over ragged columns one vector wide, 8 rows (6 accumulators left the fma chains' latency
        # exposed: attention on CoLA's 13 tokens, rows one vector wide, in turns on an AVX-512 host: 6
        # rows 2.34 ms, 8 rows 1.83, 12 1.86, 16 1.94; MNLI's 43 within 8% either way)
        vectors = row_vectors if ragged_cols else 4 if f.lanes >= 16 else 2
        out.update({Q.TILE_Y.at(p): 8 if ragged_cols and vectors == 1 else 6, Q.TILE_X.at(p): vectors,
                    Q.UNROLL.at(p): True, Q.RVARS_OUTSIDE_TILE.at(p): True})
        # the tiles of rows of a Func hosting a sum of weights every entry shares cross entries (its batch
        # fused with its rows first): tiles per entry leave a short one at the end of each entry, and a
        # token-flattened product ran 1.2-1.6x faster on long sentences and 2.6x on short ones (CoLA's 13
        # tokens); with weights of its own per entry (a batched GEMM) it ran 1.49x slower on SQuAD's
        out[Q.FLAT_TILES.at(p)] = hosts_sum and shared
        # a root Func computing a sum per tile runs strips of 64 columns outermost (a strip of weights
        # stays in cache while the entries pass)
        out[Q.COLUMNS_FIRST.at(p)] = hosts_sum and root
        out[Q.STRIP_TILES.at(p)] = max(1, 64 // (vectors * f.lanes))
    elif st.lane_rvar:  # a reduction of each row read along it: vector lanes along the row
        out.update(_lanes_along_the_reduction(p))
    elif st.rvars:  # a reduction of each row (a row's max or sum): 8 or 16 rows side by side, scalar
        # (independent chains of adds; a vector across rows would gather with the row's stride)
        out.update({Q.RVARS_OUTSIDE_TILE.at(p): True, Q.TILE_X.at(p): 1 if f.lanes >= 8 else 2,
                    Q.VECTORIZE.at(p): False, Q.UNROLL.at(p): True})
    if where != "in_consumer" and not (st.rvars and rows):
        out.setdefault(Q.RVARS_OUTSIDE_TILE.at(p), False)
    out.setdefault(Q.REDUCE_LANES.at(p), False)
    return out


def _lanes_along_the_reduction(p: str) -> dict:
    """A stage whose operands are read contiguous along its innermost RVar and none along its columns
    (``StageInfo.lane_rvar``: a row's max or sum): the RVar innermost and vectorized (each lane a partial
    result), the columns untiled. Vector lanes along the columns would each read another row: gathers
    (attention's row maxima: 1.05-1.13x slower as 8 rows of scalar chains)."""
    return {Q.RVARS_OUTSIDE_TILE.at(p): False, Q.TILE_X.at(p): 0, Q.UNROLL.at(p): False,
            Q.REDUCE_LANES.at(p): True}


def _reduction_tiles(f: FuncInfo, st, p: str, extent, machine: Machine, grouped: bool = False) -> dict:
    """A reduction's (or a scan's) register tile: 4 rows by 2 vectors, the reduction loops outside it,
    the rows unrolled; none of rows where there are fewer rows than that. Where the tiles of rows are
    too few to keep every core busy and the columns are many (a scan down the rows of each channel: its
    rows are the 3 channels), the strips of columns run outermost, in parallel. ``grouped``: computed
    per tile of another Func (its rows and columns are the tile's; its other Vars', ``extent``'s)."""
    out = {Q.TILE_Y.at(p): 4, Q.TILE_X.at(p): 2, Q.RVARS_OUTSIDE_TILE.at(p): True, Q.UNROLL.at(p): True,
           Q.TAIL.at(p): "split", Q.OTHERS.at(p): "inside"}
    if st.lane_rvar:
        return {**out, **_lanes_along_the_reduction(p)}
    if grouped or not extent or len(st.pure) < 2 or len(extent) != len(f.args):
        return _accumulators_fit(f, st, out, p, extent)
    out[Q.OTHERS.at(p)] = _others_place(st, extent)
    rows, cols = extent[st.dims[-2]], extent[st.dims[-1]]
    if rows < 4:
        out[Q.TILE_Y.at(p)] = 1
    row_tiles = -(-rows // out[Q.TILE_Y.at(p)])
    if row_tiles < 4 * machine.cores and cols // (2 * f.lanes) >= 4 * machine.cores:
        out[Q.COLUMNS_FIRST.at(p)] = True
    return _accumulators_fit(f, st, out, p, extent)


def _vector_registers(f: FuncInfo) -> int:
    """The vector registers of the target f is vectorized for: 32 where a vector holds 16 float32s
    (AVX-512), else 16 (AVX2)."""
    return 32 if f.lanes >= 16 else 16


def _accumulators_fit(f: FuncInfo, st, out: dict, p: str, extent) -> dict:
    """The other Vars of a reduction's stage (besides its rows and columns) run inside its register
    tile's rows only where the tile's accumulators, one per point of them, are at most twice the vector
    registers (a few spilled to L1 cost little: three colour channels of 4 rows by 2 vectors, 24 on
    AVX2's 16 registers, ran 3% faster so than outside); else between the tile's loops and the
    reduction loops, so that each of their points keeps a register tile across the reduction (a
    denoiser's 49 offsets of a search window made 392 accumulators, read and written back at every
    step of the reduction: its rules 1.38x slower)."""
    if out[Q.OTHERS.at(p)] != "inside" or not out[Q.RVARS_OUTSIDE_TILE.at(p)] or not extent or \
            len(extent) != len(f.args):
        return out
    points = math.prod(extent[d] for d in st.dims[:-2])
    if points * max(out[Q.TILE_Y.at(p)], 1) * max(out[Q.TILE_X.at(p)], 1) > 2 * _vector_registers(f):
        out[Q.OTHERS.at(p)] = "outside_reduction"
    return out


def _tiles(f: FuncInfo, st, p: str, extent, members: list[str], window: int, machine: Machine,
           planes: int = 0, halo: tuple[int, int] = (0, 0), across: int = 0, span: int = 0) -> dict:
    """The tile of a loop nest: ``members`` slide down it (rows of ``window + 1``), their windows
    spanning ``span`` rows composed through them (the halo a strip computes again); reductions of
    ``planes`` values per point in all are computed per tile of it, over the tile and a ``halo`` of
    (rows, columns) around it; ``across``: the most points of the other Vars (a volume's planes) a
    member's window spans."""
    if not extent or len(extent) != len(f.args):  # sizes not known (ragged, no inputs): 8 rows by 4 vectors
        return {Q.TILE_Y.at(p): 8, Q.TILE_X.at(p): 4, Q.TAIL.at(p): "split", Q.OTHERS.at(p): "inside"}
    rows = extent[st.dims[-2]] if len(st.dims) >= 2 else 1  # an update's rows and columns: its pure Vars'
    cols = extent[st.dims[-1]]
    if any(halo) and (tile := _reduction_host_tile(f, rows, cols, planes, halo, machine)):
        ty, tx = tile
        return {Q.TILE_Y.at(p): ty, Q.TILE_X.at(p): tx, Q.TAIL.at(p): "auto" if rows >= ty and cols >= tx * f.lanes
                else "guard", Q.OTHERS.at(p): _others_place(st, extent, across)}
    ty = 4
    for t in STRIP_ROWS + TALL_STRIP_ROWS:
        if rows // t >= 4 * machine.cores and t >= 4 * span:
            ty = t
            break
    row_bytes = sum(4 * (window + 1) * cols for _ in members) or 4 * cols
    tx = 0
    if row_bytes > machine.l2_bytes // 2:
        per_col = row_bytes / cols
        fits = [v for v in TILE_X_VECTORS if v and v * f.lanes * per_col <= machine.l2_bytes // 2]
        tx = max(fits) if fits else 1
    # a shifted tile ("auto") needs as many rows and columns as it has: a narrower image is guarded
    whole = rows >= ty and cols >= max(tx, 1) * f.lanes
    return {Q.TILE_Y.at(p): ty, Q.TILE_X.at(p): tx, Q.TAIL.at(p): "auto" if whole else "guard",
            Q.OTHERS.at(p): _others_place(st, extent, across)}


def _reduction_host_tile(f: FuncInfo, rows: int, cols: int, planes: int, halo: tuple[int, int],
                         machine: Machine) -> tuple[int, int] | None:
    """(rows, vectors) of a tile that reductions of ``planes`` values per point are computed per tile of:
    the one that recomputes the least halo among those whose reductions' values (over the tile and its
    halo) fit in half the L2 cache, at least as wide as a reduction's register tile (2 vectors) and
    leaving 4 tiles per core; None if none fits."""
    best = None
    for ty in (64, 32, 16, 8, 4):
        for tx in (v for v in TILE_X_VECTORS if v >= 2):
            w = tx * f.lanes
            if 4 * planes * (ty + halo[0]) * (w + halo[1]) > machine.l2_bytes // 2 or \
                    -(-rows // ty) * -(-cols // w) < 4 * machine.cores:
                continue
            recompute = (ty + halo[0]) * (w + halo[1]) / (ty * w)
            if best is None or recompute < best[0]:
                best = (recompute, ty, tx)
    return best[1:] if best else None


#: the most points of the other Vars (besides rows and columns) that run inside the rows
INSIDE_POINTS = 32


def _others_place(st, extent, across: int = 0) -> str:
    """Where a stage's other Vars run: inside the rows when they are few (colour channels: a row's
    producers are computed once for all of them, and the planes are streamed side by side, as many as
    hardware prefetchers follow), else outermost, in storage order (a batch and the rows of an NHWC
    image: inside, each row would jump through hundreds of planes). Inside too, however many, where the
    members sliding down the rows read along them at offsets (``across`` points: a volume's stencil
    reads the planes next to its own): outermost, each plane would compute its members' rows again for
    every plane their windows span (a chain of four 3D 7-point stencils, 96 planes: 3.4x slower)."""
    points = math.prod(extent[d] for d in st.dims[:-2])
    return "inside" if points <= INSIDE_POINTS or across else "outside"


class RuleTrial:
    """Stands in for an Optuna trial: answers each question from the plan (or with its first choice)
    and remembers the answers. An answer the question does not offer is recorded in ``refused`` (the
    first choice is taken instead), and the plan may only answer questions the space declares (``Q``)."""

    def __init__(self, answers: dict):
        for name in answers:
            Q.of(name)  # a question the space does not ask is a bug in the rules
        self.answers = answers
        self.params: dict = {}
        self.refused: dict = {}

    def suggest_categorical(self, name: str, choices):
        value = self.answers.get(name, choices[0])
        if value not in choices:
            self.refused[name] = value
            value = choices[0]
        self.params[name] = value
        return value


def heuristic(funcs: tuple[FuncInfo, ...], extents: dict[str, tuple[int, ...]] | None = None,
              machine: Machine | None = None, lengths=None):
    """(the heuristic's schedule, the trial parameters that give it)."""
    trial = RuleTrial(plan(funcs, extents, machine, lengths))
    schedule = suggest(trial, funcs)
    return schedule, dict(trial.params)
