"""Resolving a schedule: its records replayed onto the Funcs of a Program, every reference checked.

``resolve_func`` replays one Func's records (each record's own ``on_func``) and checks what they mean
together; the Func methods call it on every record they write, and ``resolve_schedule`` calls it for
every Func of a Program before it checks what spans Funcs (compute and store sites, outputs). So a
schedule is refused with the same message whether it is written call by call or loaded from a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..program import Function, Program, is_ragged, reduces_in_place
from .loops import ForKind, FuncLoops, PadOf, StagePlan
from .records import Directive, stage_name
from .value import Schedule


@dataclass(frozen=True)
class FuncSchedule:
    """Where one Func is computed and stored, and the plans of its stages."""

    compute: tuple[str, int, str] | None = None  # (consumer, stage, loop name); None = root
    store: tuple[str, int, str] | None = None
    store_given: bool = False
    inline: bool = False
    plans: tuple[StagePlan, ...] = ()
    bounds: dict[int, tuple[int, int]] = field(default_factory=dict)  # dim -> (min, extent)
    storage_order: tuple[int, ...] = ()  # dims outermost first; () is the natural order
    store_pads: dict[int, int] = field(default_factory=dict)  # dim -> storage multiple (store_padded)
    layout: object = None  # an F2Layout ordering each tile of the buffer (layout())
    memory: str = "global"  # where the buffer lives (store_in())


def loops_of(f: Function, is_output: bool = False) -> FuncLoops:
    """What the schedule layer needs to know of a frozen Function."""
    updates = tuple((tuple(d.pure_vars), tuple(d.rdom.vars) if d.rdom else ()) for d in f.updates)
    ragged = frozenset(k for k, s in enumerate(f.shape or ()) if is_ragged(s))
    reductions = tuple(reduces_in_place(f.name, d.args, d.value) for d in f.updates)
    return FuncLoops(f.name, tuple(f.args), updates, ragged, is_output, reductions)


def resolve_func(loops: FuncLoops, records) -> FuncSchedule:
    """The schedule of one Func after ``records`` (its own, in order), with the checks that need only
    the Func. Compute and store sites are checked against the other Funcs by ``resolve_schedule``."""
    fs = FuncSchedule(plans=tuple(loops.initial_plan(s) for s in range(loops.stages)))
    for d in records:
        fs = d.on_func(fs, loops)
    if not fs.store_given:
        fs = replace(fs, store=fs.compute)
    _check_stage_rules(loops, fs)
    if loops.is_output:
        _check_output(loops, fs)
    return fs


def resolve_schedule(program: Program, schedule: Schedule) -> dict[str, FuncSchedule]:
    """Every Func of ``program`` resolved under ``schedule``; records of Funcs that these outputs do not
    use are ignored (a schedule written for a larger pipeline), records naming an Input are refused."""
    inputs = {i.name for i in program.inputs}
    mine: dict[str, list[Directive]] = {f.name: [] for f in program.functions}
    for d in schedule:
        if d.func in inputs:
            raise ValueError(f"the schedule names {d.func!r}, an Input; only Funcs are scheduled")
        if d.func in mine:
            mine[d.func].append(d)
    out = {f.name: resolve_func(loops_of(f, f.name in program.outputs), mine[f.name]) for f in program.functions}
    for name, fs in out.items():
        for what, site in (("compute_at", fs.compute), ("store_at", fs.store if fs.store_given else None)):
            if site is not None:
                _check_site(out, name, site, what)
    return out


def _check_site(out: dict, func: str, site: tuple[str, int, str], what: str) -> None:
    consumer, stage, var = site
    text = stage_name(consumer, stage)
    if consumer not in out:
        raise ValueError(f"Func {func}: {what}({text}, {var!r}) names a Func that is not in this pipeline")
    if consumer == func:
        raise ValueError(f"Func {func}: {what} its own loop {var!r}")
    if stage >= len(out[consumer].plans):
        raise ValueError(f"Func {func}: {what}({text}, ...): {consumer} has no such update")


def _check_stage_rules(loops: FuncLoops, fs: FuncSchedule) -> None:
    """What a plan alone cannot know: dependences carried by the loops of updates."""
    for stage, plan in enumerate(fs.plans):
        if stage == 0:
            continue
        for dim in plan.dims:
            if dim.is_rvar and dim.kind == ForKind.PARALLEL:
                raise ValueError(
                    f"update {stage - 1} of Func {loops.name}: loop {dim.name!r} runs over an RDom, so its "
                    "iterations depend on each other (a reduction or recurrence): it cannot be parallel; "
                    "parallelize a pure Var of the update instead")
            reduces = stage - 1 < len(loops.reductions) and loops.reductions[stage - 1]
            if dim.is_rvar and dim.kind == ForKind.VECTORIZED and not reduces:
                raise ValueError(
                    f"update {stage - 1} of Func {loops.name}: loop {dim.name!r} runs over an RDom, whose "
                    "points must be visited in order: it cannot be vectorized (only an update "
                    f"{loops.name}[x] = op({loops.name}[x], e) with op one of + * min max and or, e not "
                    f"reading {loops.name}, may vectorize its RDom); vectorize a pure Var of the update instead")


def _check_output(loops: FuncLoops, fs: FuncSchedule) -> None:
    name = loops.name
    if fs.inline or fs.compute is not None:
        raise ValueError(f"Func {name} is an output of the pipeline: it is computed at root, not "
                         f"{'inline' if fs.inline else 'at another Func'}")
    if fs.storage_order not in ((), tuple(range(len(loops.args)))):
        raise ValueError(f"Func {name} is an output of the pipeline: its storage is the caller's array, "
                         "so reorder_storage does not apply")
    if fs.layout is not None:
        raise ValueError(f"Func {name} is an output of the pipeline: its storage is the caller's array, "
                         "so layout() does not apply (give the layout to a copy: f.in_().layout(...))")
    if loops.ragged_dims:
        _check_ragged_output_padding(loops, fs)


def _check_ragged_output_padding(loops: FuncLoops, fs: FuncSchedule) -> None:
    """A ragged output is the caller's RaggedArray: its storage padding is one multiple for all its ragged
    dims, and a padded loop may only write into the rows that padding adds."""
    ragged, args = loops.ragged_dims, loops.args
    for k, m in fs.store_pads.items():
        if k not in ragged:
            raise ValueError(f"Func {loops.name}: store_padded({args[k]!r}, {m}): {args[k]!r} is not a ragged "
                             "dimension of this ragged output (its storage is the caller's RaggedArray, which "
                             "pads ragged dimensions only)")
    if len(set(fs.store_pads.values())) > 1:
        raise ValueError(f"Func {loops.name}: the ragged dimensions of an output share one storage padding; "
                         f"store_padded gives {sorted(set(fs.store_pads.values()))}")
    stored = next(iter(fs.store_pads.values()), 1)
    for stage, plan in enumerate(fs.plans):
        at = dict(zip(args, range(len(args)))) if stage == 0 else dict(loops.updates[stage - 1][0])
        for t in plan.transforms:
            if not isinstance(t, PadOf):
                continue
            k = at[t.old]
            if k not in ragged or stored % t.multiple:
                need = (f"store_padded({args[k]!r}, m) with m a multiple of {t.multiple}" if k in ragged
                        else f"{t.old!r} is not one of its ragged dimensions, whose storage padding could hold "
                        "the padded points")
                raise ValueError(f"Func {loops.name}: pad({t.old!r}, {t.multiple}) writes past each entry of this "
                                 f"ragged output: {need}")
