"""Scalar and vector types, and NumPy's promotion rules (NEP 50: Python scalars are weak).

Types are small frozen records so that IR nodes carrying them stay hashable. Promotion is delegated to
NumPy itself (``np.result_type``), so ragsched and the NumPy reference can never disagree about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np


@dataclass(frozen=True, slots=True)
class DType:
    """A NumPy scalar type, optionally with vector lanes (lanes > 1 only appears after lowering)."""

    name: str
    lanes: int = 1

    def __repr__(self) -> str:
        return self.name if self.lanes == 1 else f"{self.name}x{self.lanes}"

    __str__ = __repr__

    def __reduce__(self):  # by constructor: dataclasses' per-field restore of slots is slower
        return DType, (self.name, self.lanes)

    def __eq__(self, other):  # every Var and Const comparison asks this: faster than the generated tuples
        return self is other or (type(other) is DType and self.name == other.name and self.lanes == other.lanes)

    def __hash__(self):
        return hash((self.name, self.lanes))

    @property
    def np(self) -> np.dtype:
        return _np_dtype(self.name)

    @property
    def kind(self) -> str:
        return self.np.kind  # 'b', 'i', 'u' or 'f'

    @property
    def bits(self) -> int:
        return 1 if self.kind == "b" else self.np.itemsize * 8

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.kind in "iu"

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def min(self):
        return _limits(self.name)[0]

    @property
    def max(self):
        return _limits(self.name)[1]

    def scalar(self) -> DType:
        return self if self.lanes == 1 else DType(self.name)

    def with_lanes(self, lanes: int) -> DType:
        return DType(self.name, lanes)


@cache
def _np_dtype(name: str) -> np.dtype:
    return np.dtype(name)


@cache
def _limits(name: str):
    dt = np.dtype(name)
    if dt.kind == "b":
        return (False, True)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return (int(info.min), int(info.max))
    info = np.finfo(dt)
    return (-float("inf"), float("inf"))


bool_ = DType("bool")
int8, int16, int32, int64 = DType("int8"), DType("int16"), DType("int32"), DType("int64")
uint8, uint16, uint32, uint64 = DType("uint8"), DType("uint16"), DType("uint32"), DType("uint64")
float16, float32, float64 = DType("float16"), DType("float32"), DType("float64")

ALL_TYPES = (bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64)
_BY_NAME = {t.name: t for t in ALL_TYPES}

#: The type of Vars, RVars and Sizes where they appear as values (Halide's choice: 32-bit indices).
INDEX = int32
#: The type that lowered index arithmetic (addresses, loop counters) is carried out in.
ADDRESS = int64


def as_dtype(t) -> DType:
    """Accept a DType, a NumPy dtype or type, or a name, and return the DType."""
    if isinstance(t, DType):
        return t
    try:
        name = np.dtype(t).name
    except TypeError as e:
        raise TypeError(f"not a data type: {t!r}") from e
    if name not in _BY_NAME:
        raise TypeError(f"unsupported data type {name!r}; ragsched supports {', '.join(_BY_NAME)}")
    return _BY_NAME[name]


Weak = bool | int | float


def is_weak(x) -> bool:
    """A Python scalar (NEP 50 'weak'): it takes the type of the typed operand it meets."""
    return isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)


def result_type(*operands) -> DType:
    """NumPy's result type of DTypes and weak Python scalars (NEP 50)."""
    key = tuple(o if type(o) is DType else _WEAK.get(type(o), o) for o in operands)
    try:
        return _result_type(key)
    except TypeError:  # something unhashable: NumPy says what it makes of it
        return as_dtype(np.result_type(*[o.np if isinstance(o, DType) else o for o in operands]))


# Under NEP 50 a Python scalar's value does not change the result type, only its kind; one of each
# kind stands for all, so that results can be cached (building an algorithm asks once per operator).
# Keyed by the type, not by 0, False and 0.0, which are equal as dict keys.
_WEAK = {bool: bool, int: int, float: float}


@cache
def _result_type(key: tuple) -> DType:
    return as_dtype(np.result_type(*[o.np if isinstance(o, DType) else o() if o in (bool, int, float) else o
                                     for o in key]))


def default_type(value) -> DType:
    """The type NumPy gives a lone Python scalar."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, float):
        return float64
    if isinstance(value, np.generic):
        return as_dtype(value.dtype)
    raise TypeError(f"not a scalar: {value!r}")


def fits(value, t: DType) -> bool:
    """Whether a Python scalar can be represented in ``t`` without overflow (NumPy raises otherwise)."""
    if t.is_float or isinstance(value, float):
        return True
    lo, hi = _limits(t.name)
    return lo <= int(value) <= hi


def can_cast(src: DType, dst: DType, casting: str = "same_kind") -> bool:
    return bool(np.can_cast(src.np, dst.np, casting=casting))
