"""The search space: every choice a schedule makes, asked of an Optuna trial (define-by-run).

Funcs are visited consumers first, so a producer's ``compute_at`` can name loops its consumer already
has. Per Func: where it is computed (root, inline, or at the tile loops of its only consumer); per
stage: a tile of its two innermost pure Vars (the outer loops keep the Vars' names, the inner ones are
``v.i``), the tail of those splits (shift, guard or split), whether the innermost loop is vectorized,
unrolling of the row loop of the tile, which loop runs in parallel, and for updates whether the
reduction loops run outside the tile (a register tile, Halide's matmul) or inside it. For ragged Funcs:
loop padding of the innermost ragged dim (and the output's storage padding it needs) and sorting the
batch by length.

The parameter names and their choices never depend on earlier answers (Optuna's distributions are
fixed per name); a choice that does not apply to what earlier answers made is mapped to the nearest
one that does (a ``compute_at`` of a consumer that went inline computes at root). The records are
built as data; whether the whole is valid is the lowering's to say.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..algebra import expr as E
from ..program import Program, dim_index, is_ragged
from ..tiling import schedule as S

COMPUTE = ("root", "inline", "at_outer", "at_inner")
TILE_Y = (1, 2, 4, 8, 16, 32, 64)
TILE_X_VECTORS = (0, 1, 2, 4, 8, 16)  # in vectors; 0: the loop is not split
WIDEST = 4  # vectors in one vector loop


@dataclass(frozen=True)
class StageInfo:
    stage: int
    pure: tuple[str, ...]  # pure Vars of the stage, outermost first
    rvars: tuple[str, ...]
    ragged: frozenset  # pure Vars whose extent is ragged
    bounds_use: frozenset = frozenset()  # pure Vars the RDom's bounds use (its loops stay inside theirs)


@dataclass(frozen=True)
class FuncInfo:
    name: str
    lanes: int  # natural vector size of its type
    stages: tuple[StageInfo, ...]
    consumers: tuple[str, ...]
    is_output: bool
    inlinable: bool
    batch: str | None  # the Var of a ragged Func's batch dimension (the ragged extents' index)


def analyze(program: Program, lanes_of) -> tuple[FuncInfo, ...]:
    """What the search needs to know of each Func, consumers first. ``lanes_of(dtype)`` is the natural
    vector size of the target."""
    readers: dict[str, list[str]] = {f.name: [] for f in program.functions}
    for c in program.functions:
        exprs = [c.init] + [e for u in c.updates for e in (u.value, *u.args)]
        for n in {n.name for e in exprs for n in E.walk(e) if isinstance(n, E.FuncRef)}:
            if n in readers and n != c.name:
                readers[n].append(c.name)
    out = []
    for f in reversed(program.functions):
        ragged = frozenset(a for k, a in enumerate(f.args) if f.shape is not None and is_ragged(f.shape[k]))
        batch = f.args[0] if ragged and any(dim_index(0) in E.free_vars(s) for s in f.shape) else None
        stages = [StageInfo(0, tuple(f.args), (), ragged)]
        for k, u in enumerate(f.updates):
            pure = tuple(v for v, _ in sorted(u.pure_vars, key=lambda p: p[1]))
            rvars, uses = (), frozenset()
            if u.rdom is not None:
                rvars = tuple(u.rdom.vars)
                uses = frozenset().union(*(E.free_vars(e) for e in (*u.rdom.mins, *u.rdom.extents))) & set(pure)
            stages.append(StageInfo(k + 1, pure, rvars, ragged & set(pure), uses))
        is_out = f.name in program.outputs
        out.append(FuncInfo(f.name, lanes_of(f.dtype), tuple(stages), tuple(readers[f.name]), is_out,
                            not is_out and not f.updates, batch))
    return tuple(out)


def suggest(trial, funcs: tuple[FuncInfo, ...]) -> S.Schedule:
    """One schedule: the trial's answers to every question the Funcs ask."""
    records: list[S.Directive] = []
    tile_loops: dict[str, tuple[str, str]] = {}  # Func -> (outer tile loop, inner tile loop), if computed
    for f in funcs:
        where = "root"
        if not f.is_output:
            where = trial.suggest_categorical(f"{f.name}.compute", _compute_choices(f))
            if where.startswith("at_") and f.consumers[0] not in tile_loops:
                where = "root"  # the consumer is inline: there is no loop of it to compute at
        if where == "inline":
            records.append(S.ComputeInline(f.name))
            continue
        if where.startswith("at_"):
            consumer = f.consumers[0]
            loop = tile_loops[consumer][0 if where == "at_outer" else 1]
            records.append(S.ComputeAt(f.name, consumer, loop))
        elif not f.is_output:
            records.append(S.ComputeRoot(f.name))
        for st in f.stages:
            loops = _stage(trial, f, st, records)
            if st.stage == 0:
                tile_loops[f.name] = loops
    return S.Schedule(tuple(records))


def _compute_choices(f: FuncInfo) -> list[str]:
    out = ["root"]
    if f.inlinable:
        out.append("inline")
    if len(f.consumers) == 1:
        out += ["at_outer", "at_inner"]
    return out


def _stage(trial, f: FuncInfo, st: StageInfo, records: list) -> tuple[str, str]:
    """The records of one stage; returns its (outer, inner) tile loops, for producers' compute_at."""
    p = f"{f.name}.s{st.stage}"
    if not st.pure:
        return ("", "")
    x = st.pure[-1]
    y = st.pure[-2] if len(st.pure) >= 2 and st.pure[-2] != f.batch else None
    ragged = bool({x, y} & st.ragged)
    # a shifted tile ("auto") needs a region at least as large: not so for a producer computed per tile
    tail = trial.suggest_categorical(f"{p}.tail", ["guard", "split"] if ragged else ["auto", "guard", "split"])
    pad = 1
    if x in st.ragged and not st.rvars:
        pad = trial.suggest_categorical(f"{p}.pad", [1, f.lanes])
        if pad > 1:
            records.append(S.Pad(f.name, st.stage, x, pad))
            if f.is_output and st.stage == 0:
                records.append(S.StorePadded(f.name, x, pad))
    ty = trial.suggest_categorical(f"{p}.tile_y", list(TILE_Y)) if y else 1
    tx = trial.suggest_categorical(f"{p}.tile_x", list(TILE_X_VECTORS)) * f.lanes
    if x in st.ragged:
        tx = min(tx, WIDEST * f.lanes)  # a ragged tile is vectorized whole (reads past the entry stay provable)
    order = [v for v in st.pure if v not in (x, y)]
    inner = []
    if y and ty > 1:
        records.append(S.Split(f.name, st.stage, y, y, f"{y}.i", ty, tail))
        inner.append(f"{y}.i")
    if tx:
        records.append(S.Split(f.name, st.stage, x, x, f"{x}.i", tx, tail if pad % tx else "auto"))
        inner.append(f"{x}.i")
    outer = ([y] if y else []) + [x]
    rvars_outside = bool(st.rvars) and bool(inner) and not st.bounds_use & {x, y} and \
        trial.suggest_categorical(f"{p}.rvars_outside_tile", [True, False])
    loops = order + outer + (list(st.rvars) if rvars_outside else []) + inner + \
        ([] if rvars_outside else list(st.rvars))
    if inner or rvars_outside:
        records.append(S.Reorder(f.name, st.stage, tuple(loops)))
    innermost = f"{x}.i" if tx else x
    if trial.suggest_categorical(f"{p}.vectorize", [True, False]):
        # a tile of up to WIDEST vectors is one vector loop (LLVM splits it into registers; in the rest of
        # a tail="split" it runs serially); a wider tile or an untiled loop is split into vectors first
        if tx > WIDEST * f.lanes or not tx:
            exact = pad % f.lanes == 0 or tx and tail == "guard"
            records.append(S.Split(f.name, st.stage, innermost, innermost, f"{innermost}.v", f.lanes,
                                   "auto" if exact else "guard" if tx else tail))
            innermost = f"{innermost}.v"
        records.append(S.Vectorize(f.name, st.stage, innermost))
    if y and 1 < ty <= 8 and trial.suggest_categorical(f"{p}.unroll", [True, False]):
        records.append(S.Unroll(f.name, st.stage, f"{y}.i"))
    first = loops[0]
    if first == f.batch and st.ragged and trial.suggest_categorical(f"{p}.sort", [False, True]):
        records.append(S.SortByLength(f.name, st.stage, first))
    if trial.suggest_categorical(f"{p}.parallel", [True, False]):
        records.append(S.Parallel(f.name, st.stage, first))
    return (outer[0], outer[-1])
