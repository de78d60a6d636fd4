"""The schedule layer: primitives as records, a stage's loops as a plan, schedules as values, and the
resolver that lowering and the Func methods share. ``from ragsched import schedule as S`` gives the
records and ``S.Schedule``."""

from .by_length import LengthClass, SchedulesByLength, read_schedule  # noqa: F401
from .loops import ForKind  # noqa: F401
from .records import (  # noqa: F401
    MEMORY_TYPES,
    REGISTRY,
    TAILS,
    Bound,
    ComputeAt,
    ComputeInline,
    ComputeRoot,
    Directive,
    Fuse,
    GpuBlocks,
    GpuThreads,
    MemoryType,
    Pad,
    Parallel,
    Reorder,
    ReorderStorage,
    SetEstimate,
    SortByLength,
    Split,
    StageDirective,
    StoreAt,
    StoreIn,
    StoreLayout,
    StorePadded,
    StoreRoot,
    Unroll,
    Vectorize,
    Wrap,
)
from .value import Schedule, new_records  # noqa: F401
