"""Ragged arguments of a kernel: a RaggedArray checked against the extents it must have, and a ragged
output allocated from the lengths, before generated code runs."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..algebra import expr as E
from ..program import dim_index, dims_used, is_ragged
from ..ragged.array import RAGGED, RaggedArray, per_axis

_OPS = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.FloorDiv: np.floor_divide,
        E.Min: np.minimum, E.Max: np.maximum}


def is_ragged_shape(shape) -> bool:
    return shape is not None and any(ragged_dims(tuple(shape)))


@lru_cache(maxsize=1024)
def ragged_dims(shape: tuple) -> tuple[bool, ...]:
    """Which dimensions of ``shape`` are ragged, remembered per shape (a call asks it of every dimension of
    every argument and output: attention on five short entries, about 365 -> 310 us a call)."""
    return tuple(map(is_ragged, shape))


def extent_values(expr: E.Expr, batch: int, arrays: dict, sizes: dict, what: str,
                  memo: dict | None = None) -> np.ndarray:
    """A ragged extent at every index b of the first dimension (int64), reading the lengths Inputs;
    ``memo`` (one call's) keeps each extent once evaluated: attention's Q, K, V and output share theirs."""
    if memo is not None and (expr, batch) in memo:
        return memo[expr, batch]
    b = np.arange(batch, dtype=np.int64)

    def ev(e):
        if isinstance(e, E.Const):
            return np.int64(e.value)
        if isinstance(e, E.Var):
            if e.name == dim_index(0):
                return b
            return np.int64(sizes[e.name])
        if isinstance(e, E.Cast):
            return ev(e.value)
        if type(e) in _OPS:
            return _OPS[type(e)](ev(e.a), ev(e.b))
        if isinstance(e, E.FuncRef) and e.name in arrays:
            a = arrays[e.name]
            idx = tuple(np.broadcast_to(ev(x), b.shape) for x in e.args)
            for k, (i, n) in enumerate(zip(idx, a.shape, strict=True)):
                if i.size and (i.min() < 0 or i.max() >= n):
                    raise ValueError(f"{what}: its extent {expr} reads {e.name} dimension {k} at index "
                                     f"{int(i.max() if i.max() >= n else i.min())}, outside its extent {n}")
            return a[idx].astype(np.int64)
        raise ValueError(f"{what}: cannot evaluate the ragged extent {expr} at run time")

    if dims_used(expr) - {0}:
        raise ValueError(f"{what}: ragged extents that depend on other dimensions than the first are not supported")
    out = np.broadcast_to(ev(expr), b.shape)
    if (out < 0).any():
        k = int(np.flatnonzero(out < 0)[0])
        raise ValueError(f"{what}: the ragged extent {expr} is {int(out[k])} at entry {k}; lengths must not be "
                         "negative")
    if memo is not None:
        memo[expr, batch] = out
    return out


def check_input(name: str, dt: np.dtype, shape, value, bind) -> RaggedArray:
    """Type, rank and entry template of a ragged argument; binds the Sizes of its fixed dimensions
    with ``bind(size_expr, value, dim)``. Lengths are checked by ``check_lengths`` once Sizes are known."""
    if not isinstance(value, RaggedArray):
        raise TypeError(f"argument {name} is ragged: pass a RaggedArray (RaggedArray.from_padded(array, lengths) "
                        f"or .from_list(arrays)), got {type(value).__name__}")
    if value.dtype != dt:
        raise TypeError(f"argument {name} has dtype {value.dtype}, expected {dt}")
    if value.ndim != len(shape):
        raise ValueError(f"argument {name} has {value.ndim} dimension(s), expected {len(shape)} ({value!r})")
    value.check(f"argument {name}")
    bind(shape[0], value.batch, 0)
    ragged = ragged_dims(tuple(shape))
    for k in range(1, len(shape)):
        if ragged[k] != (value.template[k - 1] is RAGGED):
            raise ValueError(f"argument {name}: dimension {k} is {'ragged' if ragged[k] else 'fixed'} "
                             f"in its Input but not in the RaggedArray ({value!r})")
        if not ragged[k]:
            bind(shape[k], value.template[k - 1], k)
    return value


def check_lengths(name: str, shape, value: RaggedArray, arrays: dict, sizes: dict, memo: dict | None = None) -> None:
    """Each ragged dimension's lengths in ``value`` against what the shape says at every entry (every
    one: generated code steps through an entry by the extents, and through the batch by the offsets)."""
    ragged = ragged_dims(tuple(shape))
    for k in range(1, len(shape)):
        if ragged[k]:
            want = extent_values(shape[k], value.batch, arrays, sizes, f"argument {name}", memo)
            got = value.axis_lengths(k)
            if not np.array_equal(want, got):
                b = int(np.flatnonzero(want != got)[0])
                raise ValueError(f"argument {name}: entry {b} has length {int(got[b])} in dimension {k}, but "
                                 f"its shape says {shape[k]} = {int(want[b])} there")


def ragged_lengths(shape, extent_of) -> np.ndarray:
    """The lengths of a RaggedArray of ``shape`` (its ragged dimensions after the first): one per entry
    where every ragged dimension has the same extent, else ``[B, R]``. ``extent_of(k)`` evaluates
    dimension k's extent at every entry."""
    ragged = ragged_dims(tuple(shape))
    axes = [k for k in range(1, len(shape)) if ragged[k]]
    if all(shape[k] == shape[axes[0]] for k in axes):
        return np.asarray(extent_of(axes[0]), dtype=np.int64)
    return np.stack([np.asarray(extent_of(k), dtype=np.int64) for k in axes], axis=1)


def output(name: str, dt: np.dtype, shape, out, arrays: dict, sizes: dict, pad: int = 1,
           memo: dict | None = None) -> RaggedArray:
    """A ragged output: ``out`` checked, or a new RaggedArray with the lengths the shape gives (its rows
    padded to ``pad``, the schedule's ``store_padded``)."""
    ragged = ragged_dims(tuple(shape))
    if ragged[0]:
        raise ValueError(f"output {name}: its first dimension (the batch) must not be ragged")
    if not isinstance(shape[0], (E.Var, E.Const)) or (isinstance(shape[0], E.Var) and shape[0].name not in sizes):
        raise ValueError(f"output {name}: the extent of its first dimension ({shape[0]}) is not known from the inputs")
    batch = int(sizes[shape[0].name]) if isinstance(shape[0], E.Var) else int(shape[0].value)
    lengths = ragged_lengths(shape, lambda k: extent_values(shape[k], batch, arrays, sizes, f"output {name}", memo))
    template = []
    for k in range(1, len(shape)):
        if ragged[k]:
            template.append(RAGGED)
        elif isinstance(shape[k], E.Const):
            template.append(int(shape[k].value))
        elif isinstance(shape[k], E.Var) and shape[k].name in sizes:
            template.append(int(sizes[shape[k].name]))
        else:
            raise ValueError(f"output {name}: extent {k} ({shape[k]}) is not known from the inputs")
    if out is None:
        return RaggedArray._empty(dt, lengths, tuple(template), pad)
    if not isinstance(out, RaggedArray):
        raise TypeError(f"out= for ragged output {name} must be a RaggedArray, got {type(out).__name__}")
    out.check(f"out= for {name}")
    if out.dtype != dt or out.template != tuple(template) or out.pad != pad or \
            not np.array_equal(per_axis(out.template, out.lengths), per_axis(out.template, lengths)):
        raise ValueError(f"out= for {name} must be a RaggedArray of {dt} with entries {tuple(template)} "
                         f"(None: ragged), lengths {lengths.tolist()} and pad={pad} (the schedule's storage "
                         f"padding), got {out!r}")
    if not out.values.flags.writeable or not out.values.flags.c_contiguous:
        raise ValueError(f"out= for {name} must have writeable, contiguous values (generated code writes them "
                         "as one packed buffer)")
    return out
