"""Stage plans: the loops one stage of a Func will get, after its schedule records are applied.

A stage starts with one loop per pure Var (argument order) and, for an update, one per RVar inside
them (first RVar outermost), all serial. Each loop record (``records``) then rewrites that list: a
split replaces a loop by an outer and an inner one, a fuse merges two adjacent loops, a reorder permutes
loops among the positions they hold, and vectorize/unroll/parallel set a loop's kind. The kinds of loop
are defined here, in the schedule layer: lowering and the backends read them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ForKind(enum.Enum):
    SERIAL = "for"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"
    GPU_BLOCK = "gpu_block"
    GPU_THREAD = "gpu_thread"
    GPU_LANE = "gpu_lane"  # an RVar reduced across the 32 lanes of a warp (shuffles)


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
        taken = {d.node for d in self.dims} | {n for t in self.transforms for n in nodes_of(t)}
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
        raise ValueError(f"Func {self.func}{self.where}: cannot {what} {var!r}: no loop of that name; its loops "
                         f"are {', '.join(self.names())}")

    @property
    def where(self) -> str:
        """`` (update k)`` for an update stage, for messages."""
        return f" (update {self.stage - 1})" if self.stage else ""

    def check_new_name(self, name: str, what: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Func {self.func}: {what} needs a loop name, got {name!r}")
        if name in self.names():
            raise ValueError(f"Func {self.func}: cannot {what} into {name!r}: that name is already used by a loop")

    def derived(self, roots) -> set[str]:
        """``roots`` and every loop split or fused from one of them."""
        out = set(roots)
        for t in self.transforms:
            if isinstance(t, SplitOf) and t.old in out:
                out |= {t.outer, t.inner}
            elif isinstance(t, FuseOf) and {t.outer, t.inner} & out:
                out.add(t.fused)
        return out

    def whole_tiles_of_split(self, node: str) -> bool:
        """Whether loop ``node`` runs the whole tiles of a split with tail='split' (its rest has a loop of
        its own, so the loop can be neither split again nor fused)."""
        return any(isinstance(t, SplitOf) and t.outer == node and t.tail == "split" for t in self.transforms)


def nodes_of(t) -> tuple[str, ...]:
    """The loop nodes a transform names."""
    if isinstance(t, PadOf):
        return (t.old,)
    if isinstance(t, SortOf):
        return (t.old, t.rank)
    return (t.old, t.outer, t.inner) if isinstance(t, SplitOf) else (t.outer, t.inner, t.fused)


def initial_plan(func: str, stage: int, pure_vars: list[str], rvars: list[str]) -> StagePlan:
    return StagePlan(func, stage, tuple(Dim(v) for v in pure_vars) + tuple(Dim(r, is_rvar=True) for r in rvars))


@dataclass(frozen=True)
class FuncLoops:
    """What the schedule layer knows of a Func: its name, pure Vars and, per update, the pure Vars it
    keeps (with the dimension each indexes) and its RVars. Built from a ``program.Function`` or by the
    front end from a Func being defined, so that both check records with the same code."""

    name: str
    args: tuple[str, ...]
    updates: tuple[tuple[tuple[tuple[str, int], ...], tuple[str, ...]], ...] = ()
    ragged_dims: frozenset[int] = frozenset()  # dims whose extent depends on a batch index
    is_output: bool = False
    reductions: tuple[bool, ...] = ()  # per update: whether it reduces in place (its RDom may be vectorized)

    @property
    def stages(self) -> int:
        return 1 + len(self.updates)

    def initial_plan(self, stage: int) -> StagePlan:
        if stage == 0:
            return initial_plan(self.name, 0, list(self.args), [])
        pure, rvars = self.updates[stage - 1]
        return initial_plan(self.name, stage, [v for v, _ in pure], list(rvars))

    def dim_of(self, var: str, what: str) -> int:
        """The dimension of pure Var ``var``, refused naming ``what`` when it is not one."""
        if var not in self.args:
            raise ValueError(f"Func {self.name}: {what} names {var!r}, which is not one of its pure Vars "
                             f"({', '.join(self.args)})")
        return self.args.index(var)
