"""The schedule primitives: one small frozen record per primitive call, and what each one means.

A record names its Func, the stage it applies to (0 is the pure definition, k is ``update(k - 1)``)
and the loop variables by name, so a schedule can be saved, compared, hashed, mutated by a search and
applied to a freshly built pipeline. Each record class is the primitive's one registry entry (as TVM's
``InstructionKind``): its name (``op``), how it changes a stage's loop plan (``on_plan``) or where its Func
is computed and stored (``on_func``), the checks that come with that, its Python text (``python_call``)
and its JSON row (the dataclass fields). Adding a primitive is adding a class here; the Func method
that writes it lives in ``methods``.
"""

from __future__ import annotations

import enum
from dataclasses import MISSING, asdict, dataclass, fields, replace
from typing import ClassVar

from ..algebra.f2 import F2Layout
from .loops import Dim, ForKind, FuncLoops, FuseOf, PadOf, SortOf, SplitOf, StagePlan, nodes_of

#: "auto" is "shift" for a pure definition and "guard" in an update, where "shift" and "pad" are refused:
#: they would apply the update twice to some points, or to points outside the region.
TAILS = ("auto", "guard", "shift", "pad", "split")

#: op name -> record class: every primitive, in the order it was defined
REGISTRY: dict[str, type[Directive]] = {}


@dataclass(frozen=True)
class Directive:
    """Base of all schedule records."""

    func: str
    op: ClassVar[str] = ""

    def __init_subclass__(cls, op: str = "", **kw):
        super().__init_subclass__(**kw)
        if op:
            cls.op = op
            REGISTRY[op] = cls

    # -- meaning
    def check(self, loops: FuncLoops) -> None:
        """Refuse what this record cannot mean for this Func (beyond its loop plan)."""

    def on_func(self, fs, loops: FuncLoops):
        """``fs`` (a ``resolve.FuncSchedule``) after this record."""
        self.check(loops)
        return fs

    # -- text
    def target_text(self) -> str:
        return f"funcs[{self.func!r}]"

    def arguments(self) -> tuple:
        """The method call's arguments, as values (``python_call`` writes their reprs)."""
        return ()

    def python_call(self) -> str:
        """The method call that writes this record, on ``funcs`` (names to Funcs and Inputs)."""
        return f"{self.target_text()}.{self.op}({', '.join(map(repr, self.arguments()))})"

    # -- JSON
    def to_row(self) -> dict:
        row = {"op": self.op, **asdict(self)}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in row.items()}

    @classmethod
    def from_row(cls, row: dict, k: int) -> Directive:
        names = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.default is MISSING}
        if not required <= set(row) <= names:
            raise ValueError(f"schedule entry {k} ({cls.op}): expected fields {sorted(names)}, got {sorted(row)}")
        return cls(**{n: tuple(v) if isinstance(v, list) else v for n, v in row.items()})


@dataclass(frozen=True)
class StageDirective(Directive):
    """A record that rewrites the loop plan of one stage."""

    stage: int

    def on_plan(self, plan: StagePlan) -> StagePlan:
        raise NotImplementedError

    def on_func(self, fs, loops: FuncLoops):
        if not isinstance(self.stage, int) or not 0 <= self.stage < loops.stages:
            raise ValueError(f"schedule record {self.op} names update {self.stage - 1} of Func {loops.name}, which "
                             f"has {loops.stages - 1} update(s)")
        plans = list(fs.plans)
        plans[self.stage] = self.on_plan(plans[self.stage])
        return replace(fs, plans=tuple(plans))

    def target_text(self) -> str:
        return f"funcs[{self.func!r}]" + (f".update({self.stage - 1})" if self.stage else "")


def _positive(n, what: str) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{what} must be a positive int, got {n!r}")
    return n


# ------------------------------------------------------------------------------------ loop records
@dataclass(frozen=True)
class Split(StageDirective, op="split"):
    var: str
    outer: str
    inner: str
    factor: int
    tail: str = "guard"

    def arguments(self) -> tuple:
        return self.var, self.outer, self.inner, self.factor

    def python_call(self) -> str:
        return super().python_call()[:-1] + f", tail={self.tail!r})"

    def on_plan(self, plan: StagePlan) -> StagePlan:
        k = plan.index(self.var, "split")
        if not isinstance(self.factor, int) or isinstance(self.factor, bool) or self.factor < 1:
            raise ValueError(f"Func {plan.func}: split of {self.var!r} needs a positive int factor, got "
                             f"{self.factor!r}")
        if self.tail not in TAILS:
            raise ValueError(f"Func {plan.func}: split of {self.var!r}: tail must be one of {', '.join(TAILS)}, "
                             f"got {self.tail!r}")
        if self.outer == self.inner:
            raise ValueError(f"Func {plan.func}: split of {self.var!r} needs distinct outer and inner names")
        old = plan.dims[k]
        if old.kind != ForKind.SERIAL:
            raise ValueError(f"Func {plan.func}: loop {self.var!r} is {old.kind.value}; split it before marking it")
        for n in (self.outer, self.inner):
            if n != self.var:
                plan.check_new_name(n, f"split {self.var!r}")
        if plan.whole_tiles_of_split(old.node):
            raise ValueError(f"Func {plan.func}: loop {self.var!r} runs the whole tiles of a split with tail='split' "
                             "(then the rest, in a loop of its own) and cannot be split again; split the "
                             "original loop by the larger factor first, then its inner loop")
        if self.tail == "pad" and old.is_rvar:
            raise ValueError(f"Func {plan.func}: tail='pad' on RVar {self.var!r} would visit points outside its "
                             "RDom; use 'guard' or 'split'")
        if self.tail in ("shift", "pad") and plan.stage > 0:
            what = "recompute points of the last tile" if self.tail == "shift" else "visit points past its end"
            raise ValueError(f"Func {plan.func}: update {plan.stage - 1}: split of {self.var!r} with "
                             f"tail={self.tail!r} would {what}, applying the update to points it must not change or "
                             "twice to the same point; an update splits with tail='guard' or 'split' ('auto' is "
                             "'guard' there)")
        outer = Dim(self.outer, is_rvar=old.is_rvar, node=plan.fresh_node(self.outer))
        with_outer = replace(plan, transforms=plan.transforms + (SplitOf(old.node, outer.node, "", 0, ""),))
        inner = Dim(self.inner, is_rvar=old.is_rvar, node=with_outer.fresh_node(self.inner))
        dims = list(plan.dims)
        dims[k:k + 1] = [outer, inner]
        t = SplitOf(old.node, outer.node, inner.node, self.factor, self.tail)
        return replace(plan, dims=tuple(dims), transforms=plan.transforms + (t,))


@dataclass(frozen=True)
class Reorder(StageDirective, op="reorder"):
    """Loop order of a stage, outermost first (NumPy's reading order, like the loop nest listing)."""

    vars: tuple[str, ...]

    def arguments(self) -> tuple:
        return self.vars

    def on_plan(self, plan: StagePlan) -> StagePlan:
        if len(set(self.vars)) != len(self.vars):
            raise ValueError(f"Func {plan.func}: reorder lists a loop twice: {', '.join(self.vars)}")
        slots = sorted(plan.index(v, "reorder") for v in self.vars)
        by_name = {x.name: x for x in plan.dims}
        dims = list(plan.dims)
        for slot, name in zip(slots, self.vars):
            dims[slot] = by_name[name]
        before = [x.name for x in plan.dims if x.is_rvar]
        after = [x.name for x in dims if x.is_rvar]
        if before != after:
            raise ValueError(f"Func {plan.func}: reorder({', '.join(self.vars)}) changes the order of the reduction "
                             f"loops ({', '.join(before)} -> {', '.join(after)}), which changes the order in which "
                             "the update visits its RDom and so its result")
        self._check_split_tails_nest(plan, dims)
        return replace(plan, dims=tuple(dims))

    def _check_split_tails_nest(self, plan: StagePlan, dims: list[Dim]) -> None:
        """A split with tail='split' runs its whole tiles, then the rest in a loop of its own: its inner loop
        (and every loop made from it) must stay inside its outer one, where the rest's shorter extent
        applies."""
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
                raise ValueError(f"Func {plan.func}: reorder({', '.join(self.vars)}) puts "
                                 f"{', '.join(map(repr, outside))} outside {outer!r}, the whole tiles of a split "
                                 "with tail='split' (its rest runs in a loop of its own, inside); split with "
                                 "tail='guard' to reorder them")


@dataclass(frozen=True)
class Fuse(StageDirective, op="fuse"):
    outer: str
    inner: str
    fused: str

    def arguments(self) -> tuple:
        return self.outer, self.inner, self.fused

    def on_plan(self, plan: StagePlan) -> StagePlan:
        ko, ki = plan.index(self.outer, "fuse"), plan.index(self.inner, "fuse")
        if ki != ko + 1:
            raise ValueError(f"Func {plan.func}: fuse({self.outer!r}, {self.inner!r}) needs {self.outer!r} directly "
                             f"outside {self.inner!r}; the loops are {', '.join(plan.names())} (reorder first)")
        a, b = plan.dims[ko], plan.dims[ki]
        for x in (a, b):
            if plan.whole_tiles_of_split(x.node):
                raise ValueError(f"Func {plan.func}: loop {x.name!r} runs the whole tiles of a split with "
                                 "tail='split' (then the rest, in a loop of its own) and cannot be fused: the fused "
                                 "loop would have no place for the rest; split with tail='guard' to fuse it")
        if a.kind != ForKind.SERIAL or b.kind != ForKind.SERIAL:
            raise ValueError(f"Func {plan.func}: fuse the loops {self.outer!r} and {self.inner!r} before marking "
                             "them")
        if self.fused not in (self.outer, self.inner):
            plan.check_new_name(self.fused, f"fuse {self.outer!r} and {self.inner!r}")
        fused = Dim(self.fused, is_rvar=a.is_rvar or b.is_rvar, node=plan.fresh_node(self.fused))
        dims = list(plan.dims)
        dims[ko:ki + 1] = [fused]
        return replace(plan, dims=tuple(dims), transforms=plan.transforms + (FuseOf(a.node, b.node, fused.node),))


_MARKED = {"vectorize": "vectorized", "unroll": "unrolled", "parallel": "run in parallel",
           "gpu_lanes": "run on a warp's lanes"}


@dataclass(frozen=True)
class _MarkLoop(StageDirective):
    """Set the kind of one loop (``kind``)."""

    var: str
    kind: ClassVar[ForKind] = ForKind.SERIAL

    def arguments(self) -> tuple:
        return (self.var,)

    def on_plan(self, plan: StagePlan) -> StagePlan:
        k = plan.index(self.var, self.op)
        dims = list(plan.dims)
        if dims[k].kind != ForKind.SERIAL:
            raise ValueError(f"Func {plan.func}: loop {self.var!r} is already {dims[k].kind.value}; it cannot also "
                             f"be {_MARKED[self.op]}")
        dims[k] = replace(dims[k], kind=self.kind)
        return replace(plan, dims=tuple(dims))


@dataclass(frozen=True)
class Vectorize(_MarkLoop, op="vectorize"):
    kind: ClassVar[ForKind] = ForKind.VECTORIZED


@dataclass(frozen=True)
class Unroll(_MarkLoop, op="unroll"):
    kind: ClassVar[ForKind] = ForKind.UNROLLED


@dataclass(frozen=True)
class Parallel(_MarkLoop, op="parallel"):
    kind: ClassVar[ForKind] = ForKind.PARALLEL


@dataclass(frozen=True)
class _GpuLoops(StageDirective):
    """Map loops onto the GPU's grid (``kind``): at most three, each a serial pure loop."""

    vars: tuple[str, ...]
    kind: ClassVar[ForKind] = ForKind.SERIAL

    def arguments(self) -> tuple:
        return self.vars

    def on_plan(self, plan: StagePlan) -> StagePlan:
        if not 1 <= len(self.vars) <= 3 or len(set(self.vars)) != len(self.vars):
            raise ValueError(f"Func {plan.func}: {self.op} takes one to three distinct loops, got {self.vars}")
        dims = list(plan.dims)
        for v in self.vars:
            k = plan.index(v, self.op)
            if dims[k].is_rvar:
                raise ValueError(f"Func {plan.func}{plan.where}: loop {v!r} runs over an RDom, whose points depend on "
                                 f"each other; {self.op} needs a pure loop")
            if dims[k].kind != ForKind.SERIAL:
                raise ValueError(f"Func {plan.func}: loop {v!r} is already {dims[k].kind.value}")
            dims[k] = replace(dims[k], kind=self.kind)
        blocks = [k for k, d in enumerate(dims) if d.kind == ForKind.GPU_BLOCK]
        threads = [k for k, d in enumerate(dims) if d.kind == ForKind.GPU_THREAD]
        if len(blocks) > 3 or len(threads) > 3:
            raise ValueError(f"Func {plan.func}: a GPU grid has at most three block and three thread dimensions")
        if blocks and threads and max(blocks) > min(threads):
            names = ", ".join(dims[k].name for k in blocks), ", ".join(dims[k].name for k in threads)
            raise ValueError(f"Func {plan.func}: the block loops ({names[0]}) must all be outside the thread loops "
                             f"({names[1]}); reorder first")
        return replace(plan, dims=tuple(dims))


@dataclass(frozen=True)
class GpuBlocks(_GpuLoops, op="gpu_blocks"):
    kind: ClassVar[ForKind] = ForKind.GPU_BLOCK


@dataclass(frozen=True)
class GpuThreads(_GpuLoops, op="gpu_threads"):
    kind: ClassVar[ForKind] = ForKind.GPU_THREAD


@dataclass(frozen=True)
class GpuLanes(_MarkLoop, op="gpu_lanes"):
    """Reduce the innermost loop of an update, an RVar, across the 32 lanes of a warp: each lane sums
    every 32nd point into a register, the lanes combine their sums with shuffles, one lane updates the
    Func. The update must be a sum, max or min (its points may be combined in any order); lowering checks
    that."""

    kind: ClassVar[ForKind] = ForKind.GPU_LANE

    def on_plan(self, plan: StagePlan) -> StagePlan:
        k = plan.index(self.var, self.op)
        if not plan.stage or not plan.dims[k].is_rvar:
            raise ValueError(f"Func {plan.func}{plan.where}: gpu_lanes({self.var!r}) needs an RVar of an update (a "
                             "reduction); map a pure loop with gpu_threads")
        if k != len(plan.dims) - 1:
            raise ValueError(f"Func {plan.func}{plan.where}: gpu_lanes({self.var!r}) needs the innermost loop; the "
                             f"loops are {', '.join(plan.names())}")
        if any(d.kind == ForKind.GPU_LANE for d in plan.dims):
            raise ValueError(f"Func {plan.func}{plan.where}: one loop per stage runs on a warp's lanes")
        return super().on_plan(plan)


@dataclass(frozen=True)
class SortByLength(StageDirective, op="sort_by_length"):
    """Visit the values of loop ``var`` (a batch dim) longest entry first: the extent of the stage's
    ragged dims that depend on it decides (balanced parallel work, a short tail)."""

    var: str

    def arguments(self) -> tuple:
        return (self.var,)

    def on_plan(self, plan: StagePlan) -> StagePlan:
        k = plan.index(self.var, "sort_by_length")
        old = plan.dims[k]
        if old.kind != ForKind.SERIAL or old.is_rvar or any(isinstance(t, SortOf) and t.rank == old.node
                                                             for t in plan.transforms):
            raise ValueError(f"Func {plan.func}: sort_by_length({self.var!r}) needs a pure loop not yet marked "
                             "or sorted")
        dims = list(plan.dims)
        dims[k] = replace(old, node=plan.fresh_node(self.var))
        return replace(plan, dims=tuple(dims), transforms=plan.transforms + (SortOf(old.node, dims[k].node),))


@dataclass(frozen=True)
class Pad(StageDirective, op="pad"):
    """Round the extent of loop ``var`` (a pure Var not yet split) up to a multiple: loop padding. The
    padded points are computed into padded storage and never read by a valid point, so a split by a
    divisor of ``multiple`` has no tail."""

    var: str
    multiple: int

    def arguments(self) -> tuple:
        return self.var, self.multiple

    def on_plan(self, plan: StagePlan) -> StagePlan:
        k = plan.index(self.var, "pad")
        if not isinstance(self.multiple, int) or isinstance(self.multiple, bool) or self.multiple < 1:
            raise ValueError(f"Func {plan.func}: pad({self.var!r}, ...) needs a positive int multiple, got "
                             f"{self.multiple!r}")
        old = plan.dims[k]
        if old.is_rvar:
            raise ValueError(f"Func {plan.func}: pad({self.var!r}): {self.var!r} is an RVar; padding it would visit "
                             "points outside its RDom and change the result")
        made = {n for t in plan.transforms if not isinstance(t, PadOf) for n in nodes_of(t)}
        if old.node in made or old.kind != ForKind.SERIAL:
            raise ValueError(f"Func {plan.func}: pad({self.var!r}) applies to a pure Var's own loop before it is "
                             "split, fused, sorted or marked")
        if any(isinstance(t, PadOf) and t.old == old.node for t in plan.transforms):
            raise ValueError(f"Func {plan.func}: loop {self.var!r} is already padded")
        return replace(plan, transforms=plan.transforms + (PadOf(old.node, self.multiple),))


# ------------------------------------------------------------------------- compute and storage
def stage_name(func: str, stage: int) -> str:
    """How a record names a stage: ``f`` or ``f.update(k)``."""
    return func if stage == 0 else f"{func}.update({stage - 1})"


def parse_stage_name(text: str) -> tuple[str, int]:
    """``"f"`` -> ("f", 0); ``"f.update(1)"`` -> ("f", 2)."""
    if text.endswith(")") and ".update(" in text:
        name, k = text[:-1].rsplit(".update(", 1)
        return name, int(k) + 1
    return text, 0


@dataclass(frozen=True)
class ComputeRoot(Directive, op="compute_root"):
    def on_func(self, fs, loops):
        return replace(fs, compute=None, inline=False)


@dataclass(frozen=True)
class ComputeInline(Directive, op="compute_inline"):
    def check(self, loops: FuncLoops) -> None:
        if loops.updates:
            raise ValueError(f"Func {loops.name} has update definitions and cannot be computed inline")

    def on_func(self, fs, loops):
        self.check(loops)
        return replace(fs, inline=True, compute=None)


@dataclass(frozen=True)
class _AtSite(Directive):
    consumer: str
    var: str

    def site(self) -> tuple[str, int, str]:
        """(consumer Func, its stage, loop name)."""
        return (*parse_stage_name(self.consumer), self.var)

    def python_call(self) -> str:
        func, stage = parse_stage_name(self.consumer)  # a loop of an update: funcs['f'].update(k)
        consumer = f"funcs[{func!r}]" + (f".update({stage - 1})" if stage else "")
        return f"{self.target_text()}.{self.op}({consumer}, {self.var!r})"


@dataclass(frozen=True)
class ComputeAt(_AtSite, op="compute_at"):
    def on_func(self, fs, loops):
        return replace(fs, compute=self.site(), inline=False)


@dataclass(frozen=True)
class StoreRoot(Directive, op="store_root"):
    def on_func(self, fs, loops):
        return replace(fs, store=None, store_given=True)


@dataclass(frozen=True)
class StoreAt(_AtSite, op="store_at"):
    def on_func(self, fs, loops):
        return replace(fs, store=self.site(), store_given=True)


@dataclass(frozen=True)
class Bound(Directive, op="bound"):
    var: str
    min: int
    extent: int

    def arguments(self) -> tuple:
        return self.var, self.min, self.extent

    def check(self, loops: FuncLoops) -> None:
        loops.dim_of(self.var, "bound()")
        _positive(self.extent, f"Func {loops.name}: bound extent")

    def on_func(self, fs, loops):
        self.check(loops)
        return replace(fs, bounds={**fs.bounds, loops.dim_of(self.var, "bound()"): (self.min, self.extent)})


@dataclass(frozen=True)
class SetEstimate(Directive, op="set_estimate"):
    var: str
    min: int
    extent: int

    def arguments(self) -> tuple:
        return self.var, self.min, self.extent


@dataclass(frozen=True)
class ReorderStorage(Directive, op="reorder_storage"):
    """Storage order of a Func's dimensions, outermost first (the last one is contiguous), like
    ``Reorder``: Halide's ``reorder_storage`` lists them innermost first."""

    vars: tuple[str, ...]

    def arguments(self) -> tuple:
        return self.vars

    def check(self, loops: FuncLoops) -> None:
        if sorted(self.vars) != sorted(loops.args):
            raise ValueError(f"Func {loops.name}: reorder_storage({', '.join(self.vars)}) must name each of its pure "
                             f"Vars ({', '.join(loops.args)}) once")

    def on_func(self, fs, loops):
        self.check(loops)
        return replace(fs, storage_order=tuple(loops.args.index(v) for v in self.vars))


@dataclass(frozen=True)
class StorePadded(Directive, op="store_padded"):
    """Round the storage extent of dimension ``var`` up to a multiple: storage padding. For a ragged
    output every ragged dimension shares the rounding (its RaggedArray's ``pad``)."""

    var: str
    multiple: int

    def arguments(self) -> tuple:
        return self.var, self.multiple

    def check(self, loops: FuncLoops) -> None:
        loops.dim_of(self.var, "store_padded()")
        _positive(self.multiple, f"Func {loops.name}: store_padded multiple")

    def on_func(self, fs, loops):
        self.check(loops)
        return replace(fs, store_pads={**fs.store_pads, loops.dim_of(self.var, "store_padded()"): self.multiple})


@dataclass(frozen=True)
class Wrap(Directive, op="in"):
    """Func ``func`` is a copy of ``wrapped`` (an Input or a Func) that ``consumer`` reads instead of
    ``wrapped`` (every consumer when ``consumer`` is empty): Halide's ``in()``. Scheduling the copy
    packs data, for example a strip of a matrix into contiguous memory at a tile. Lowering adds the copy
    (``codegen/passes/wrap_funcs``) before it resolves the rest of the schedule."""

    wrapped: str
    consumer: str = ""

    def python_call(self) -> str:
        consumer = f"funcs[{self.consumer!r}]" if self.consumer else "None"
        return f"funcs[{self.func!r}] = funcs[{self.wrapped!r}].in_({consumer}, name={self.func!r})"


@dataclass(frozen=True)
class StoreLayout(Directive, op="layout"):
    """The elements of each tile of the Func's buffer ordered by ``layout``, an ``rs.F2Layout`` from one
    input dim (the offset in the tile) onto some of the Func's pure Vars (a power-of-two tile of each):
    a blocked, Morton or swizzled order of an intermediate. The buffer's extents along those Vars are
    rounded up to whole tiles; tiles are stored in the Func's storage order."""

    layout: F2Layout

    def check(self, loops: FuncLoops) -> None:
        lay = self.layout
        if not isinstance(lay, F2Layout):
            raise TypeError(f"Func {loops.name}: layout() takes an rs.F2Layout, got {type(lay).__name__}")
        if len(lay.ins) != 1:
            raise ValueError(f"Func {loops.name}: a storage layout maps one input dim (the offset in a tile), "
                             f"got {len(lay.ins)}: {', '.join(n for n, _ in lay.ins)}")
        for name, _ in lay.outs:
            loops.dim_of(name, "layout()")
        if not lay.is_bijective():
            raise ValueError(f"Func {loops.name}: layout() needs a bijection between the offsets and the points "
                             "of a tile (each element stored once, each slot used once)")

    def on_func(self, fs, loops):
        self.check(loops)
        return replace(fs, layout=self.layout)

    def python_call(self) -> str:
        lay = self.layout
        return f"{self.target_text()}.layout(rs.F2Layout({lay.ins!r}, {lay.outs!r}, {lay.bases!r}))"

    def to_row(self) -> dict:
        lay = self.layout
        return {"op": self.op, "func": self.func,
                "layout": {"ins": [list(d) for d in lay.ins], "outs": [list(d) for d in lay.outs],
                           "bases": [[list(b) for b in per_bit] for per_bit in lay.bases]}}

    @classmethod
    def from_row(cls, row: dict, k: int) -> StoreLayout:
        try:
            lay = row["layout"]
            layout = F2Layout(tuple((str(n), int(b)) for n, b in lay["ins"]),
                              tuple((str(n), int(b)) for n, b in lay["outs"]),
                              tuple(tuple(tuple(int(v) for v in b) for b in per_bit) for per_bit in lay["bases"]))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"schedule entry {k} (layout): not a layout ({err})") from None
        if set(row) != {"func", "layout"}:
            raise ValueError(f"schedule entry {k} (layout): expected fields ['func', 'layout'], got {sorted(row)}")
        return cls(row["func"], layout)


class MemoryType(enum.StrEnum):
    """Where a buffer may live (``store_in``): global memory, a GPU block's shared memory, a thread's
    registers."""

    Global = "global"
    Shared = "shared"
    Register = "register"


MEMORY_TYPES = tuple(m.value for m in MemoryType)


@dataclass(frozen=True)
class StoreIn(Directive, op="store_in"):
    """The memory a Func's buffer lives in (``MEMORY_TYPES``); a backend that has no such memory refuses
    it when compiling."""

    memory: str

    def arguments(self) -> tuple:
        return (self.memory,)

    def check(self, loops: FuncLoops) -> None:
        if self.memory not in MEMORY_TYPES:
            raise ValueError(f"Func {loops.name}: store_in() takes one of {', '.join(MEMORY_TYPES)} "
                             f"(rs.MemoryType), got {self.memory!r}")

    def on_func(self, fs, loops):
        self.check(loops)
        return replace(fs, memory=self.memory)
