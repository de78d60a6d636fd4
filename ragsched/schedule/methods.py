"""The scheduling methods of Funcs and their update stages (Halide's vocabulary, API section 3).

Each call writes one record (``records``) into the Func's schedule and returns the Func or stage, so
calls chain. Every record is checked at once by resolving the Func's schedule with it
(``resolve.resolve_func``, the resolver lowering uses), so a schedule that cannot be honoured is refused
when it is written, naming the Func, the Var and the reason. Loop order is given outermost first, as
the loop nest is printed.

A class that takes these methods (``lang.Func``) provides ``name``, ``_loops()`` (a ``FuncLoops``: what
the schedule layer knows of it) and ``_schedule`` (its records, a list).
"""

from __future__ import annotations

from . import records as S
from .resolve import resolve_func
from .value import Schedule


def _name(v) -> str:
    """A loop's name from a string, a Var, an RVar or a one-dimensional RDom (its RVar, as in Halide)."""
    if isinstance(v, str):
        return v
    rvars = getattr(v, "_rvars", None)  # an RDom
    if rvars is not None:
        if len(rvars) != 1:
            raise TypeError(f"RDom {v.name} has {len(rvars)} dimensions, so it is not one loop; name one of "
                            f"its RVars ({', '.join(f'{v.name}[{k}]' for k in range(len(rvars)))}, loops "
                            f"{', '.join(r.name for r in rvars)})")
        return rvars[0].name
    name = getattr(v, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"expected a Var, an RVar or a loop name, got {v!r}")
    return name


class LoopScheduling:
    """Loop transformations of one stage: ``self._func`` and ``self._stage`` say which."""

    _func: object
    _stage: int

    def _add(self, record: S.Directive):
        func = self._func
        resolve_func(func._loops(), [*func._schedule, record])  # raises if the record cannot be honoured
        func._schedule.append(record)
        return self

    def split(self, v, vo, vi, factor: int, tail: str = "auto"):
        """Split loop ``v`` into ``vo`` (outer) and ``vi`` (inner, ``factor`` iterations)."""
        return self._add(S.Split(self._func.name, self._stage, _name(v), _name(vo), _name(vi), factor, tail))

    def tile(self, *args, tail: str = "auto"):
        """``tile(y, x, yo, xo, yi, xi, fy, fx)``: split both and order them ``yo, xo, yi, xi``;
        ``tile(y, x, yi, xi, fy, fx)`` keeps ``y`` and ``x`` as the outer names."""
        if len(args) == 8:
            y, x, yo, xo, yi, xi, fy, fx = args
        elif len(args) == 6:
            y, x, yi, xi, fy, fx = args
            yo, xo = y, x
        else:
            raise TypeError("tile takes (y, x, yo, xo, yi, xi, fy, fx) or (y, x, yi, xi, fy, fx)")
        self.split(y, yo, yi, fy, tail=tail)
        self.split(x, xo, xi, fx, tail=tail)
        return self.reorder(yo, xo, yi, xi)

    def reorder(self, *vs):
        """Put the named loops in this order, outermost first, in the positions they occupy."""
        return self._add(S.Reorder(self._func.name, self._stage, tuple(_name(v) for v in vs)))

    def fuse(self, outer, inner, fused):
        """Merge loop ``outer`` and the loop ``inner`` directly inside it into one loop ``fused``."""
        return self._add(S.Fuse(self._func.name, self._stage, _name(outer), _name(inner), _name(fused)))

    def _marked(self, record_type, v, factor, suffix: str):
        v = _name(v)
        if factor is not None:
            inner = f"{v}.{suffix}"
            self.split(v, v, inner, factor)
            v = inner
        return self._add(record_type(self._func.name, self._stage, v))

    def vectorize(self, v, factor: int | None = None):
        """Vectorize loop ``v``; with a factor, split it first and vectorize the inner part (the outer
        keeps the name ``v``)."""
        return self._marked(S.Vectorize, v, factor, "v")

    def unroll(self, v, factor: int | None = None):
        return self._marked(S.Unroll, v, factor, "u")

    def sort_by_length(self, v):
        """Visit the entries of batch loop ``v`` longest first (by the extent of the ragged dims that
        depend on it), in an order that generated code computes: parallel work then ends with the short
        entries. The loop keeps its name."""
        return self._add(S.SortByLength(self._func.name, self._stage, _name(v)))

    def pad(self, v, multiple: int):
        """Round the extent of loop ``v`` (a pure Var, before it is split) up to a multiple of
        ``multiple`` (loop padding): a ragged loop then splits and vectorizes without a tail. The padded
        points are computed into padded storage (``store_padded`` for a ragged output) and never seen."""
        return self._add(S.Pad(self._func.name, self._stage, _name(v), multiple))

    def gpu_blocks(self, *vs):
        """Run these loops (outermost first, at most three) as the blocks of a GPU grid."""
        return self._add(S.GpuBlocks(self._func.name, self._stage, tuple(_name(v) for v in vs)))

    def gpu_threads(self, *vs):
        """Run these loops (outermost first, at most three) as the threads of each GPU block."""
        return self._add(S.GpuThreads(self._func.name, self._stage, tuple(_name(v) for v in vs)))

    def gpu_lanes(self, r):
        """Reduce RVar ``r`` (the innermost loop of an update) across the 32 lanes of a warp, with shuffles."""
        return self._add(S.GpuLanes(self._func.name, self._stage, _name(r)))

    def gpu_tile(self, *args, tail: str = "auto"):
        """``gpu_tile(y, x, yo, xo, yi, xi, fy, fx)``: ``tile``, then ``yo, xo`` as blocks and ``yi, xi`` as
        threads; ``gpu_tile(x, xo, xi, fx)`` the same in one dimension."""
        if len(args) == 8:
            y, x, yo, xo, yi, xi, fy, fx = args
            self.tile(y, x, yo, xo, yi, xi, fy, fx, tail=tail)
            return self.gpu_blocks(yo, xo).gpu_threads(yi, xi)
        if len(args) == 4:
            x, xo, xi, fx = args
            self.split(x, xo, xi, fx, tail=tail)
            return self.gpu_blocks(xo).gpu_threads(xi)
        raise TypeError("gpu_tile takes (y, x, yo, xo, yi, xi, fy, fx) or (x, xo, xi, fx)")

    def parallel(self, v, task_size: int | None = None):
        """Run the iterations of loop ``v`` on worker threads; with a task size, split first and run
        the outer part in parallel (the inner part, ``task_size`` iterations, stays serial)."""
        v = _name(v)
        if task_size is not None:
            self.split(v, v, f"{v}.t", task_size)
        return self._add(S.Parallel(self._func.name, self._stage, v))


class FuncScheduling(LoopScheduling):
    """Where a Func is computed and stored, its declared bounds, and its update stages."""

    _stage = 0

    @property
    def _func(self):
        return self

    def update(self, k: int = 0) -> Stage:
        n = len(self._loops().updates)
        if not isinstance(k, int) or not 0 <= k < n:
            raise ValueError(f"Func {self.name} has {n} update definition(s); update({k!r}) does not exist")
        return Stage(self, k + 1)

    def compute_root(self):
        """Compute all of the Func before its consumers run."""
        return self._add(S.ComputeRoot(self.name))

    def compute_inline(self):
        """Substitute the Func's definition into its consumers (no buffer)."""
        return self._add(S.ComputeInline(self.name))

    def compute_at(self, consumer, var):
        """Compute the part of the Func that one iteration of ``consumer``'s loop ``var`` needs."""
        func, stage = _stage_of(consumer)
        return self._add(S.ComputeAt(self.name, S.stage_name(func.name, stage), _name(var)))

    def store_root(self):
        return self._add(S.StoreRoot(self.name))

    def store_at(self, consumer, var):
        """Keep the Func's buffer outside ``consumer``'s loop ``var``: with ``compute_at`` further
        inside, iterations reuse what earlier ones computed (a sliding window)."""
        func, stage = _stage_of(consumer)
        return self._add(S.StoreAt(self.name, S.stage_name(func.name, stage), _name(var)))

    def bound(self, v, min: int, extent: int):  # noqa: A002 - Halide's names
        """Compute exactly ``[min, min + extent)`` along pure Var ``v`` (checked against what is needed)."""
        return self._add(S.Bound(self.name, _name(v), int(min), extent))

    def reorder_storage(self, *vs):
        """Lay the Func's buffer out with its dimensions in this order, outermost first (the last is
        contiguous); every pure Var once. Halide lists them the other way round."""
        return self._add(S.ReorderStorage(self.name, tuple(_name(v) for v in vs)))

    def store_padded(self, v, multiple: int):
        """Round the storage of dimension ``v`` (a pure Var) up to a multiple of ``multiple`` (storage
        padding): rows of a ragged output start at aligned offsets (its RaggedArray's ``pad``), and a
        padded loop (``pad``) has somewhere to write."""
        return self._add(S.StorePadded(self.name, _name(v), multiple))

    def store_in(self, memory):
        """Keep the Func's buffer in GPU ``memory``: ``rs.MemoryType.Shared`` (one per block),
        ``Register`` (per thread) or ``Global``."""
        return self._add(S.StoreIn(self.name, getattr(memory, "value", memory)))

    def layout(self, layout):
        """Order the elements of each tile of the Func's buffer by ``layout`` (an ``rs.F2Layout`` from
        the offset in a tile onto some of the Func's pure Vars): blocked, Morton or swizzled storage."""
        return self._add(S.StoreLayout(self.name, layout))

    def set_estimate(self, v, min: int, extent: int):  # noqa: A002
        """A typical range of ``v``, for the autoscheduler; it changes nothing about the result."""
        return self._add(S.SetEstimate(self.name, _name(v), int(min), int(extent)))

    def schedule(self) -> Schedule:
        """This Func's schedule records, in order."""
        return Schedule(tuple(self._schedule))

    def stage_plan(self, stage: int = 0):
        """The loops of stage ``stage`` (0: the pure definition, k: ``update(k - 1)``) as the schedule so
        far leaves them, outermost first (a ``StagePlan``: names, kinds, and the splits and fuses)."""
        plans = resolve_func(self._loops(), self._schedule).plans
        if not isinstance(stage, int) or not 0 <= stage < len(plans):
            raise ValueError(f"Func {self.name} has stages 0..{len(plans) - 1}; stage {stage!r} does not exist")
        return plans[stage]

    def _replay(self, record: S.Directive):
        """Append a record read back from a saved schedule, with the same checks as the method call."""
        return self._add(record)


class Stage(LoopScheduling):
    """An update definition of a Func, for scheduling: ``f.update(0).vectorize(x, 8)``."""

    def __init__(self, func, stage: int):
        self._func, self._stage = func, stage

    def __repr__(self) -> str:
        return f"{self._func.name}.update({self._stage - 1})"


def _stage_of(consumer):
    if isinstance(consumer, Stage):
        return consumer._func, consumer._stage
    if isinstance(consumer, FuncScheduling):
        return consumer, 0
    raise TypeError(f"compute_at/store_at need a Func or an update stage, got {consumer!r}")
