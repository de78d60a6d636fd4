"""Producers computed per tile of a consumer's flat ragged loop, stored by flat position.

A consumer that fuses a ragged pair (``fuse(b, i, bi)``: one loop over the valid (b, i) pairs) and splits
that loop into tiles of tokens crosses entries: a tile of 6 positions may hold the last 2 tokens of one
entry and the first 4 of the next. A producer computed at such a tile (a GEMM's sum in registers) has no
box in (b, i) that is the tile: bounds inference gives every entry and every position, and the producer
would compute the whole batch once per tile. When the producer fuses the same two dims in each of its
stages, it runs over the tile's flat positions instead, each one's entry and position read from the
consumer's tables, and it is stored by flat position (its entry dim holds the position, its position dim
0), which is what the consumer reads.
"""

from __future__ import annotations

from ..algebra import expr as E
from ..program import Function, Program
from ..schedule.loops import FuseOf, StagePlan
from .stage_loops import FlatTile, flat_values, loops_from, nest_of, ragged_fuse


def flat_tiles(program: Program, scheds) -> tuple[dict[str, list[FlatTile]], dict[tuple[str, int], dict]]:
    """(producer -> a ``FlatTile`` per stage, (consumer, stage) -> {producer: (its dims, the fuse)}) for
    every producer computed per tile of a consumer's flat loop that fuses the dims the consumer reads it
    at."""
    tiles, reads = {}, {}
    for p in program.functions:
        fs = scheds[p.name]
        if fs.compute is None or p.name in program.outputs:
            continue
        consumer, stage, var = fs.compute
        cplan = scheds[consumer].plans[stage]
        consumer_fuses = [t for t in cplan.transforms if isinstance(t, FuseOf)]
        if not consumer_fuses:  # (most compute_at sites: no nest to build for them)
            continue
        cn = nest_of(program.func(consumer), stage, cplan, consumer in program.outputs)
        for t in consumer_fuses:
            if not ragged_fuse(cn, t, {}):
                continue
            dims = _read_dims(cn.func, stage, p.name, t)
            fuses = [_fuse_of_dims(p, k, plan, dims) for k, plan in enumerate(fs.plans)] if dims else []
            if not any(fuses):  # (False and None: no stage fuses them)
                continue
            where = f"Func {p.name} is computed per tile of Func {consumer}'s flat loop {t.fused!r}"
            if not all(fuses):
                missing = next(k for k, f in enumerate(fuses) if not f)
                if fuses[missing] is False:
                    raise ValueError(f"{where} and fuses its dims {dims}, but its update {missing - 1} does not "
                                     "write it at its own Vars there: it cannot be stored by flat position")
                raise ValueError(f"{where} and fuses its dims {dims} in some stages: fuse them in every stage "
                                 f"(stage {missing} does not), so that it is stored by flat position")
            if not _inside(cplan, var, t, cn) or fs.store != fs.compute or not _own_values(cn, t):
                continue  # computed (or stored) outside the flat loop: a plain fuse over its box
            others = [c.name for c in program.functions if c.name not in (p.name, consumer) and c.reads(p.name)]
            if others:  # (only the consumer's reads are turned into flat positions)
                raise ValueError(f"{where} and fuses its dims {dims}, so it is stored by flat position, where only "
                                 f"Func {consumer}'s reads of it look; Func {others[0]} reads it too, by entry and "
                                 f"position: do not fuse {p.name}'s dims there, or compute it at root")
            tiles[p.name] = [FlatTile(fz, dims, cn, t) for fz in fuses]
            reads.setdefault((consumer, stage), {})[p.name] = (dims, t)
    return tiles, reads


def _read_dims(c: Function, stage: int, producer: str, t: FuseOf) -> tuple[int, int] | None:
    """The producer's dims that the consumer's stage reads at its entry and position Vars (the same in
    every read), or None."""
    value = c.init if stage == 0 else c.updates[stage - 1].value
    found = set()
    for x in E.walk(value):
        if isinstance(x, E.FuncRef) and x.name == producer:
            names = [a.name if isinstance(a, E.Var) else None for a in x.args]
            if t.outer in names and t.inner in names:
                found.add((names.index(t.outer), names.index(t.inner)))
            else:
                return None
    return found.pop() if len(found) == 1 else None


def _fuse_of_dims(p: Function, stage: int, plan: StagePlan, dims: tuple[int, int]) -> FuseOf | None | bool:
    """The fuse of stage ``stage`` of ``p`` of its Vars at ``dims`` (entry outside position), None
    without one, False where the stage has no pure Var at those dims."""
    if stage == 0:
        at = dict(enumerate(p.args))
    else:
        d = p.updates[stage - 1]
        at = {k: v for v, k in d.pure_vars if d.args[k] == E.Var(v, d.args[k].dtype)}
    if not all(k in at for k in dims):
        return False
    outer, inner = (at[k] for k in dims)
    return next((t for t in plan.transforms if isinstance(t, FuseOf) and (t.outer, t.inner) == (outer, inner)),
                None)


def _inside(plan: StagePlan, var: str, t: FuseOf, cn) -> bool:
    """Whether loop ``var`` is the flat loop of ``t``, or lies inside it (its tables are built around it)."""
    derived = loops_from(cn, {t.fused})
    names = [d.name for d in plan.dims]
    root = next((k for k, d in enumerate(plan.dims) if d.node in derived), None)
    return root is not None and var in names and names.index(var) >= root


def _own_values(cn, t: FuseOf) -> bool:
    """Whether a position's entry and place in it depend on nothing but the position and the entry (not
    on another loop of the consumer, as a ragged extent that reads two dims would)."""
    entry, pos = flat_values(cn, t, E.Var("_position", cn.sym(t.fused).dtype),
                             E.Var("_entry", cn.sym(t.outer).dtype))
    prefix = f"{cn.func.name}.s{cn.stage}."
    return not any(v.startswith(prefix) for v in E.free_vars(entry) | E.free_vars(pos))


__all__ = ["flat_tiles"]
