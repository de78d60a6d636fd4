"""The default GPU schedule: slow but correct, for Funcs a schedule leaves without GPU loops.

Compiled for a GPU, every stage of a Func computed at root whose loops nothing has touched gets a grid:
the two innermost pure loops as 16x16 thread tiles (one loop: 64 threads), any pure loops outside them
fused into a third block dimension. A ragged stage is flattened first: its batch loop ``b`` (the first
pure Var) and the first ragged loop are fused into one loop over the valid (b, i) pairs (offset tables),
split into blocks of 64 threads; the other pure loops run inside each thread (a block loop around the
flat loop would put its offset tables inside the kernel). Where a stage cannot take such a grid (no pure loop,
an update whose pure loops the schedule cannot map), it runs as one thread; candidates are tried in
order and the first the records accept is kept. Guard tails throughout, so any size works.
"""

from __future__ import annotations

from ..program import Program, is_ragged
from .loops import ForKind, StagePlan
from .records import Fuse, GpuBlocks, GpuThreads, Reorder, Split
from .resolve import loops_of, resolve_func, resolve_schedule
from .value import Schedule

TILE_2D = 16
TILE_1D = 64


def default_gpu_schedule(program: Program, schedule: Schedule) -> Schedule:
    """The records to add to ``schedule`` so that every root Func's untouched stages run on the grid."""
    scheds = resolve_schedule(program, schedule)
    added = []
    for f in program.functions:
        fs = scheds[f.name]
        if fs.inline or fs.compute is not None:
            continue
        loops = loops_of(f, f.name in program.outputs)
        own = list(schedule.for_func(f.name))
        for stage, plan in enumerate(fs.plans):
            if plan.transforms or any(d.kind != ForKind.SERIAL for d in plan.dims):
                continue
            ragged = stage_ragged_vars(program, f, stage)
            for option in grid_options(f.name, stage, plan, ragged):
                try:
                    resolve_func(loops, own + option)
                except ValueError:
                    continue
                own += option
                added += option
                break
    return Schedule(tuple(added))


def _ragged_vars(loops, stage: int, regions_ragged: bool) -> set[str]:
    """The pure Vars of a stage whose extents may depend on the batch Var: its ragged dims, or, for a Func
    without a declared shape in a pipeline with ragged data (its region comes from ragged consumers),
    every Var after the first."""
    if regions_ragged:
        pure = loops.args if stage == 0 else [v for v, _ in loops.updates[stage - 1][0]]
        return set(pure[1:])
    if stage == 0:
        return {loops.args[k] for k in loops.ragged_dims}
    pure, _ = loops.updates[stage - 1]
    return {v for v, k in pure if k in loops.ragged_dims}


def _fuse_all(name, stage, vs: list[str], into: str) -> tuple[list, str | None]:
    """Records fusing adjacent loops ``vs`` (outermost first) into one called ``into``."""
    if not vs:
        return [], None
    recs, cur = [], vs[0]
    for k, v in enumerate(vs[1:]):
        new = into if k == len(vs) - 2 else f"{into}.{k}"
        recs.append(Fuse(name, stage, cur, v, new))
        cur = new
    return recs, cur


def stage_ragged_vars(program: Program, f, stage: int) -> set[str]:
    """``_ragged_vars`` of one stage of Function ``f`` of ``program``."""
    has_ragged = any(is_ragged(s) for x in (*program.functions, *program.inputs) for s in (x.shape or ()))
    return _ragged_vars(loops_of(f, f.name in program.outputs), stage, has_ragged and not f.shape)


def grid_options(name: str, stage: int, plan: StagePlan, ragged: set[str], tile_2d=(TILE_2D, TILE_2D),
                 tile_1d: int = TILE_1D) -> list[list]:
    """Candidate records mapping one untouched stage onto the grid, best first: flattened (b, i) pairs in
    blocks of ``tile_1d`` for a ragged stage, else ``tile_2d`` thread tiles of the two innermost pure
    loops, else ``tile_1d`` threads of the innermost (the autoscheduler's GPU space picks the sizes)."""
    pure = [d.name for d in plan.dims if not d.is_rvar]
    rvars = [d.name for d in plan.dims if d.is_rvar]
    out = []
    if ragged and pure and pure[0] not in ragged:
        b, i = pure[0], next(v for v in pure if v in ragged)
        rest = [v for v in pure if v not in (b, i)]
        order = [b, i] + rest + rvars
        recs = [Reorder(name, stage, tuple(order))] if order != [d.name for d in plan.dims] else []
        recs += [Fuse(name, stage, b, i, "gpu.bi"), Split(name, stage, "gpu.bi", "gpu.bo", "gpu.bt", tile_1d, "guard")]
        out.append(recs + [GpuBlocks(name, stage, ("gpu.bo",)), GpuThreads(name, stage, ("gpu.bt",))])
        return out
    if ragged:
        return out
    if len(pure) >= 2:
        y, x = pure[-2], pure[-1]
        recs = [Split(name, stage, y, "gpu.yo", "gpu.yi", tile_2d[0], "guard"),
                Split(name, stage, x, "gpu.xo", "gpu.xi", tile_2d[1], "guard")]
        outer = pure[:-2]
        recs.append(Reorder(name, stage, tuple(outer + ["gpu.yo", "gpu.xo", "gpu.yi", "gpu.xi"])))
        fuse_o, o = _fuse_all(name, stage, outer, "gpu.o")
        recs += fuse_o
        blocks = ([o] if o else []) + ["gpu.yo", "gpu.xo"]
        out.append(recs + [GpuBlocks(name, stage, tuple(blocks)), GpuThreads(name, stage, ("gpu.yi", "gpu.xi"))])
    if pure:
        x = pure[-1]
        recs = [Split(name, stage, x, "gpu.xo", "gpu.xi", tile_1d, "guard")]
        outer = pure[:-1]
        if outer:
            recs.append(Reorder(name, stage, tuple(outer + ["gpu.xo", "gpu.xi"])))
        fuse_o, o = _fuse_all(name, stage, outer, "gpu.o")
        recs += fuse_o
        blocks = ([o] if o else []) + ["gpu.xo"]
        out.append(recs + [GpuBlocks(name, stage, tuple(blocks)), GpuThreads(name, stage, ("gpu.xi",))])
    return out
