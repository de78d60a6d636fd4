"""Stage plans: the loops one stage of a Func will get, after its schedule records are applied.

A stage starts with one loop per pure Var (argument order) and, for an update, one per RVar inside
them (first RVar outermost), all serial. Each record then rewrites that list: ``split`` replaces a loop
by an outer and an inner one, ``fuse`` merges two adjacent loops, ``reorder`` permutes loops among the
positions they hold, and ``vectorize``/``unroll``/``parallel`` set a loop's kind. What cannot be
honoured is refused here, naming the Func, the Var and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..codegen.ir import ForKind
from . import schedule as S


@dataclass(frozen=True)
class Dim:
    """One loop of a stage. ``name`` is what schedules call it; ``node`` is unique within the stage
    (a split may give its outer loop the name of the loop it splits: ``vectorize(x, 8)``)."""

    name: str
    kind: ForKind = ForKind.SERIAL
    is_rvar: bool = False
    node: str = ""

    def __post_init__(self):
        if not self.node:
            object.__setattr__(self, "node", self.name)


@dataclass(frozen=True)
class SplitOf:
    """A split, by node: ``old`` = outer * factor + inner (plus the tail strategy)."""

    old: str
    outer: str
    inner: str
    factor: int
    tail: str


@dataclass(frozen=True)
class FuseOf:
    """A fuse, by node."""

    outer: str
    inner: str
    fused: str


@dataclass(frozen=True)
class SortOf:
    """``sort_by_length``: loop ``rank`` visits the values of ``old`` longest entry first."""

    old: str
    rank: str


@dataclass(frozen=True)
class PadOf:
    """``pad``: original dim ``old`` runs to its extent rounded up to ``multiple``."""

    old: str
    multiple: int


@dataclass(frozen=True)
class StagePlan:
    func: str
    stage: int
    dims: tuple[Dim, ...]  # outermost first
    transforms: tuple[SplitOf | FuseOf | SortOf | PadOf, ...] = ()

    def names(self) -> list[str]:
        return [d.name for d in self.dims]

    def fresh_node(self, name: str) -> str:
        """A node id for a new loop called ``name``: the name itself, or ``name~k`` when it is taken."""
        taken = {d.node for d in self.dims} | {n for t in self.transforms for n in _nodes(t)}
        if name not in taken:
            return name
        k = 1
        while f"{name}~{k}" in taken:
            k += 1
        return f"{name}~{k}"

    def index(self, var: str, what: str) -> int:
        for k, d in enumerate(self.dims):
            if d.name == var:
                return k
        stage = f" (update {self.stage - 1})" if self.stage else ""
        raise ValueError(f"Func {self.func}{stage}: cannot {what} {var!r}: no loop of that name; its loops "
                         f"are {', '.join(self.names())}")


def _nodes(t) -> tuple[str, ...]:
    if isinstance(t, PadOf):
        return (t.old,)
    if isinstance(t, SortOf):
        return (t.old, t.rank)
    return (t.old, t.outer, t.inner) if isinstance(t, SplitOf) else (t.outer, t.inner, t.fused)


def initial_plan(func: str, stage: int, pure_vars: list[str], rvars: list[str]) -> StagePlan:
    return StagePlan(func, stage, tuple(Dim(v) for v in pure_vars) + tuple(Dim(r, is_rvar=True) for r in rvars))


def apply(plan: StagePlan, d: S.Directive) -> StagePlan:
    """``plan`` after record ``d`` (which must concern this stage)."""
    if isinstance(d, S.Split):
        return _split(plan, d)
    if isinstance(d, S.Fuse):
        return _fuse(plan, d)
    if isinstance(d, S.Reorder):
        return _reorder(plan, d)
    if isinstance(d, S.SortByLength):
        k = plan.index(d.var, "sort_by_length")
        old = plan.dims[k]
        if old.kind != ForKind.SERIAL or old.is_rvar or any(isinstance(t, SortOf) and t.rank == old.node
                                                             for t in plan.transforms):
            raise ValueError(f"Func {plan.func}: sort_by_length({d.var!r}) needs a pure loop not yet marked "
                             "or sorted")
        dims = list(plan.dims)
        dims[k] = replace(old, node=plan.fresh_node(d.var))
        return replace(plan, dims=tuple(dims), transforms=plan.transforms + (SortOf(old.node, dims[k].node),))
    if isinstance(d, S.Pad):
        return _pad(plan, d)
    kinds = {S.Vectorize: ForKind.VECTORIZED, S.Unroll: ForKind.UNROLLED, S.Parallel: ForKind.PARALLEL}
    if type(d) in kinds:
        k = plan.index(d.var, d.op)
        dims = list(plan.dims)
        if dims[k].kind != ForKind.SERIAL:
            raise ValueError(f"Func {plan.func}: loop {d.var!r} is already {dims[k].kind.value}; it cannot also "
                             f"be {_MARKED[d.op]}")
        dims[k] = replace(dims[k], kind=kinds[type(d)])
        return replace(plan, dims=tuple(dims))
    raise TypeError(f"{d.op} is not a loop transformation")


_MARKED = {"vectorize": "vectorized", "unroll": "unrolled", "parallel": "run in parallel"}


def _pad(plan: StagePlan, d: S.Pad) -> StagePlan:
    k = plan.index(d.var, "pad")
    if not isinstance(d.multiple, int) or isinstance(d.multiple, bool) or d.multiple < 1:
        raise ValueError(f"Func {plan.func}: pad({d.var!r}, ...) needs a positive int multiple, got {d.multiple!r}")
    old = plan.dims[k]
    if old.is_rvar:
        raise ValueError(f"Func {plan.func}: pad({d.var!r}): {d.var!r} is an RVar; padding it would visit points "
                         "outside its RDom and change the result")
    made = {n for t in plan.transforms if not isinstance(t, PadOf) for n in _nodes(t)}
    if old.node in made or old.kind != ForKind.SERIAL:
        raise ValueError(f"Func {plan.func}: pad({d.var!r}) applies to a pure Var's own loop before it is split, "
                         "fused, sorted or marked")
    if any(isinstance(t, PadOf) and t.old == old.node for t in plan.transforms):
        raise ValueError(f"Func {plan.func}: loop {d.var!r} is already padded")
    return replace(plan, transforms=plan.transforms + (PadOf(old.node, d.multiple),))


def _check_new_name(plan: StagePlan, name: str, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"Func {plan.func}: {what} needs a loop name, got {name!r}")
    if name in plan.names():
        raise ValueError(f"Func {plan.func}: cannot {what} into {name!r}: that name is already used by a loop")


def _split(plan: StagePlan, d: S.Split) -> StagePlan:
    k = plan.index(d.var, "split")
    if not isinstance(d.factor, int) or isinstance(d.factor, bool) or d.factor < 1:
        raise ValueError(f"Func {plan.func}: split of {d.var!r} needs a positive int factor, got {d.factor!r}")
    if d.tail not in S.TAILS:
        raise ValueError(f"Func {plan.func}: split of {d.var!r}: tail must be one of {', '.join(S.TAILS)}, "
                         f"got {d.tail!r}")
    if d.outer == d.inner:
        raise ValueError(f"Func {plan.func}: split of {d.var!r} needs distinct outer and inner names")
    old = plan.dims[k]
    if old.kind != ForKind.SERIAL:
        raise ValueError(f"Func {plan.func}: loop {d.var!r} is {old.kind.value}; split it before marking it")
    for n in (d.outer, d.inner):
        if n != d.var:
            _check_new_name(plan, n, f"split {d.var!r}")
    if any(isinstance(t, SplitOf) and t.outer == old.node and t.tail == "split" for t in plan.transforms):
        raise ValueError(f"Func {plan.func}: loop {d.var!r} runs the whole tiles of a split with tail='split' "
                         "(then the rest, in a loop of its own) and cannot be split again; split the "
                         "original loop by the larger factor first, then its inner loop")
    if d.tail == "pad" and old.is_rvar:
        raise ValueError(f"Func {plan.func}: tail='pad' on RVar {d.var!r} would visit points outside its "
                         "RDom; use 'guard' or 'split'")
    if d.tail in ("shift", "pad") and plan.stage > 0:
        what = "recompute points of the last tile" if d.tail == "shift" else "visit points past its end"
        raise ValueError(f"Func {plan.func}: update {plan.stage - 1}: split of {d.var!r} with tail={d.tail!r} "
                         f"would {what}, applying the update to points it must not change or twice to the same "
                         "point; an update splits with tail='guard' or 'split' ('auto' is 'guard' there)")
    outer = Dim(d.outer, is_rvar=old.is_rvar, node=plan.fresh_node(d.outer))
    with_outer = replace(plan, transforms=plan.transforms + (SplitOf(old.node, outer.node, "", 0, ""),))
    inner = Dim(d.inner, is_rvar=old.is_rvar, node=with_outer.fresh_node(d.inner))
    dims = list(plan.dims)
    dims[k:k + 1] = [outer, inner]
    t = SplitOf(old.node, outer.node, inner.node, d.factor, d.tail)
    return replace(plan, dims=tuple(dims), transforms=plan.transforms + (t,))


def _fuse(plan: StagePlan, d: S.Fuse) -> StagePlan:
    ko, ki = plan.index(d.outer, "fuse"), plan.index(d.inner, "fuse")
    if ki != ko + 1:
        raise ValueError(f"Func {plan.func}: fuse({d.outer!r}, {d.inner!r}) needs {d.outer!r} directly outside "
                         f"{d.inner!r}; the loops are {', '.join(plan.names())} (reorder first)")
    a, b = plan.dims[ko], plan.dims[ki]
    for x in (a, b):
        if any(isinstance(t, SplitOf) and t.outer == x.node and t.tail == "split" for t in plan.transforms):
            raise ValueError(f"Func {plan.func}: loop {x.name!r} runs the whole tiles of a split with tail='split' "
                             "(then the rest, in a loop of its own) and cannot be fused: the fused loop would "
                             "have no place for the rest; split with tail='guard' to fuse it")
    if a.kind != ForKind.SERIAL or b.kind != ForKind.SERIAL:
        raise ValueError(f"Func {plan.func}: fuse the loops {d.outer!r} and {d.inner!r} before marking them")
    if d.fused not in (d.outer, d.inner):
        _check_new_name(plan, d.fused, f"fuse {d.outer!r} and {d.inner!r}")
    fused = Dim(d.fused, is_rvar=a.is_rvar or b.is_rvar, node=plan.fresh_node(d.fused))
    dims = list(plan.dims)
    dims[ko:ki + 1] = [fused]
    return replace(plan, dims=tuple(dims), transforms=plan.transforms + (FuseOf(a.node, b.node, fused.node),))


def _reorder(plan: StagePlan, d: S.Reorder) -> StagePlan:
    if len(set(d.vars)) != len(d.vars):
        raise ValueError(f"Func {plan.func}: reorder lists a loop twice: {', '.join(d.vars)}")
    slots = sorted(plan.index(v, "reorder") for v in d.vars)
    by_name = {x.name: x for x in plan.dims}
    dims = list(plan.dims)
    for slot, name in zip(slots, d.vars):
        dims[slot] = by_name[name]
    before = [x.name for x in plan.dims if x.is_rvar]
    after = [x.name for x in dims if x.is_rvar]
    if before != after:
        raise ValueError(f"Func {plan.func}: reorder({', '.join(d.vars)}) changes the order of the reduction "
                         f"loops ({', '.join(before)} -> {', '.join(after)}), which changes the order in which "
                         "the update visits its RDom and so its result")
    _check_split_tails_nest(plan, dims, d)
    return replace(plan, dims=tuple(dims))


def _check_split_tails_nest(plan: StagePlan, dims: list[Dim], d: S.Reorder) -> None:
    """A split with tail='split' runs its whole tiles, then the rest in a loop of its own: its inner loop
    (and every loop made from it) must stay inside its outer one, where the rest's shorter extent applies."""
    position = {x.node: k for k, x in enumerate(dims)}
    for t in plan.transforms:
        if not (isinstance(t, SplitOf) and t.tail == "split" and t.outer in position):
            continue
        made = {t.inner}
        for u in plan.transforms:
            if isinstance(u, SplitOf) and u.old in made:
                made |= {u.outer, u.inner}
            elif isinstance(u, FuseOf) and made & {u.outer, u.inner}:
                made.add(u.fused)
        outside = [x.name for x in dims if x.node in made and position[x.node] < position[t.outer]]
        if outside:
            outer = next(x.name for x in dims if x.node == t.outer)
            raise ValueError(f"Func {plan.func}: reorder({', '.join(d.vars)}) puts {', '.join(map(repr, outside))} "
                             f"outside {outer!r}, the whole tiles of a split with tail='split' (its rest runs in a "
                             "loop of its own, inside); split with tail='guard' to reorder them")
