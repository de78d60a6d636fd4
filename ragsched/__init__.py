"""ragsched: an auto-scheduling loop compiler for ragged tensors (Halide-style algorithms and schedules)."""

from .algebra.f2 import F2Layout  # noqa: F401
from .algebra.types import (  # noqa: F401
    DType,
    bool_,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from .autosched import Tuning, autoschedule, tune  # noqa: F401
from .functions import (  # noqa: F401
    argmax,
    argmin,
    cast,
    ceil,
    clamp,
    clamp_edge,
    constant_exterior,
    cos,
    erf,
    exp,
    exp2,
    floor,
    log,
    log2,
    max,
    maximum,
    min,
    minimum,
    mirror_image,
    pow,
    product,
    repeat_image,
    round,
    rsqrt,
    select,
    sin,
    sqrt,
    sum,
    tanh,
)
from .lang import (  # noqa: F401
    Expr,
    Func,
    FuncRef,
    Input,
    Param,
    Pipeline,
    Ragged,
    RDom,
    RVar,
    Size,
    Var,
    abs_,
    vars,
)
from .ragged.array import RaggedArray  # noqa: F401
from .schedule import LengthClass, MemoryType, Schedule, SchedulesByLength, read_schedule  # noqa: F401
from .schedule.methods import Stage  # noqa: F401


def natural_vector_size(dtype, target=None) -> int:
    """Lanes of ``dtype`` in one vector register of ``target`` (16 float32 with AVX-512, 8 with AVX2). The
    default is the default target: this CPU, or the level the environment variable ``RAGSCHED_CPU`` names."""
    from .algebra.types import as_dtype
    from .codegen.target import parse

    return parse(target).natural_vector_size(as_dtype(dtype))

abs = abs_  # noqa: A001 - rs.abs, as in the API
bool = bool_  # noqa: A001

__version__ = "0.1.0"
