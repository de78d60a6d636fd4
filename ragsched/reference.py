"""The NumPy reference evaluator: the definition of what a pipeline computes, and the oracle of the tests.

It reads a frozen ``Program`` directly, with no schedule, lowering, bounds inference or simplifier, so
that a bug there cannot hide in the oracle too. Evaluation is lazy and data-driven: when an expression
needs Func ``g`` at some index arrays, ``g`` is computed over the bounding box of the actual index values
(memoized, and recomputed over the union when a later request needs more), then gathered.

Semantics decided here (the compiled kernels must match them):

- Values are NumPy values of the node's dtype; integer arithmetic wraps; ``//`` and ``%`` on integers
  are floor division and floor modulo with ``x // 0 == x % 0 == 0``; a cast from float to integer
  truncates toward zero, saturates, and maps NaN to 0; ``min``/``max`` propagate NaN.
- Every index an expression computes is checked, including those of a ``select`` branch that is not
  taken (both branches are evaluated): reading an Input outside its shape, or a Func outside its
  declared ``shape=``, is a ``ValueError`` naming it, the dimension and the range read.
- An update runs, for every point of its pure Vars (independently), over the points of its RDom in
  lexicographic order, first RVar outermost; each point reads the old values, then writes. It is
  vectorized only where that is provably the same: independent points, or ``f[L] = f[L] op e`` with
  ``op`` in + * min max, folded in the exact sequential order.
"""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np

from .algebra import expr as E
from .algebra.types import DType
from .program import Definition, Function, Program, dim_index, dims_used, is_ragged
from .ragged.array import RaggedArray

__all__ = ["evaluate", "run"]

#: Elements evaluated at once when an update is vectorized over its RDom points (bounds memory).
CHUNK = 1 << 22
#: Pure points above which a float sum is folded by a Python loop over RDom points (else accumulate).
_LOOP_OVER_RDOM = 256
_RECURSION_LIMIT = 20_000


class _Grow(Exception):
    """An update touched its own Func outside the box being computed: recompute over a larger one."""

    def __init__(self, name: str, box):
        super().__init__(name)
        self.name, self.box = name, box


# ------------------------------------------------------------------------------------------ public API
def evaluate(program: Program, inputs: dict, out_shapes: dict | None = None) -> tuple[np.ndarray, ...]:
    """The values of ``program.outputs`` (in order) for ``inputs`` (arrays by Input name, scalars by
    Param name). ``out_shapes`` gives the region of an output, by name: it overrides a declared
    ``shape=`` and is required for an output without one."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))  # deep expression trees recurse deeply
    try:
        with np.errstate(all="ignore"):
            ev = _Evaluator(program, inputs, out_shapes or {})
            return tuple(ev.output(name) for name in program.outputs)
    finally:
        sys.setrecursionlimit(limit)


def run(outputs, out_shape=None, **inputs):
    """Evaluate language Funcs: ``run(f, img=a)`` returns an array; ``run([f, g], ...)`` or
    ``run(rs.Pipeline(...), ...)`` a tuple. ``out_shape`` is a shape (one output), a list of shapes
    (``None`` for a declared one) or a dict by output name."""
    from . import lang
    from .lang import to_program

    single = isinstance(outputs, lang.Func)
    if isinstance(outputs, lang.Pipeline):
        funcs = list(outputs.outputs)
    else:
        funcs = [outputs] if single else list(outputs)
    names = [f.name for f in funcs]
    one_shape = out_shape is not None and all(isinstance(e, (int, np.integer)) for e in out_shape)
    if out_shape is None or isinstance(out_shape, dict):
        shapes = out_shape
    elif len(names) == 1 and one_shape:
        shapes = {names[0]: tuple(out_shape)}
    else:
        if len(out_shape) != len(names):
            raise ValueError(f"out_shape lists {len(out_shape)} shapes for {len(names)} outputs")
        shapes = {n: tuple(s) for n, s in zip(names, out_shape, strict=True) if s is not None}
    result = evaluate(to_program(funcs), inputs, shapes)
    return result[0] if single else result


# ----------------------------------------------------------------------------------- value semantics
def _cast(v, dt: np.dtype):
    """The IR's Cast: float to int truncates toward zero and saturates (NaN to 0); int to int wraps."""
    src = np.asarray(v).dtype
    if src == dt:
        return v
    if src.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        x = np.trunc(np.asarray(v, dtype=np.float64))  # float64 holds every float16/32 exactly
        big = x >= float(int(info.max) + 1)  # powers of two: exact in float64
        small = x < float(info.min)
        out = np.where(big | small | np.isnan(x), 0.0, x).astype(dt)
        return np.where(big, dt.type(info.max), np.where(small, dt.type(info.min), out))
    if dt.kind == "b":
        return np.asarray(v) != 0
    return np.asarray(v).astype(dt)


def _erf(x):
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(np.asarray(x, np.float64)), dtype=np.float64)


def _rsqrt(x):
    return np.reciprocal(np.sqrt(x))


_MATH = {
    "exp": np.exp, "log": np.log, "exp2": np.exp2, "log2": np.log2,
    "sqrt": np.sqrt, "rsqrt": _rsqrt, "tanh": np.tanh, "erf": _erf,
    "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil, "round": np.round,
    "pow": np.power, "abs": np.abs,
}

_BINARY = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: np.true_divide,
    E.FloorDiv: np.floor_divide, E.Mod: np.remainder, E.Min: np.minimum, E.Max: np.maximum,
    E.BitAnd: np.bitwise_and, E.BitOr: np.bitwise_or, E.BitXor: np.bitwise_xor,
    E.Shl: np.left_shift, E.Shr: np.right_shift, E.And: np.logical_and, E.Or: np.logical_or,
}
_COMPARE = {E.LT: np.less, E.LE: np.less_equal, E.EQ: np.equal, E.NE: np.not_equal}
#: Update operators that can be folded with a NumPy ufunc (``f[L] = f[L] op e``).
_FOLD = {E.Add: np.add, E.Mul: np.multiply, E.Min: np.minimum, E.Max: np.maximum}


# ----------------------------------------------------------------------------------- index helpers
Box = tuple[tuple[int, int], ...]  # half-open [lo, hi) per dimension


def _union(a: Box, b: Box) -> Box:
    return tuple((min(p[0], q[0]), max(p[1], q[1])) for p, q in zip(a, b, strict=True))


def _covers(a: Box, b: Box) -> bool:
    return all(p[0] <= q[0] and q[1] <= p[1] for p, q in zip(a, b, strict=True))


def _hull(idx) -> Box | None:
    """The bounding box of index arrays (broadcast together), or None when they hold no point."""
    if any(0 in np.shape(i) for i in idx):
        return None
    out = []
    for i in idx:
        if np.ndim(i) == 0:
            out.append((int(i), int(i) + 1))
        else:
            out.append((int(i.min()), int(i.max()) + 1))
    return tuple(out)


def _basic_key(idx, lo):
    """A basic-indexing key equivalent to fancy indexing with ``idx`` (offset by ``lo``), when every
    index is a scalar or a run of consecutive values along an axis of its own: then a gather is a
    view, not a copy. Returns (key, axes, ndim) or None."""
    nd = max((np.ndim(i) for i in idx), default=0)
    key, axes = [], []
    for i, origin in zip(idx, lo, strict=True):
        if np.ndim(i) == 0:
            key.append(int(i) - origin)
            continue
        a = np.asarray(i)
        if a.size == 1:
            key.append(int(a.reshape(-1)[0]) - origin)
            continue
        shape = (1,) * (nd - a.ndim) + a.shape
        varying = [d for d, s in enumerate(shape) if s != 1]
        if len(varying) != 1:
            return None
        flat = a.reshape(-1)
        start, n = int(flat[0]), flat.size
        if int(flat[-1]) - start != n - 1 or (n > 2 and not (np.diff(flat) == 1).all()):
            return None
        key.append(slice(start - origin, start - origin + n))
        axes.append(varying[0])
    if len(set(axes)) != len(axes):
        return None
    return key, axes, nd


def _view(arr: np.ndarray, basic) -> np.ndarray:
    key, axes, nd = basic
    v = arr[(*key, Ellipsis)]  # dims in the order of the sliced arguments
    v = v.transpose(sorted(range(len(axes)), key=axes.__getitem__))
    return v[(*(slice(None) if d in axes else None for d in range(nd)), Ellipsis)]


def _fancy_key(idx, lo):
    return tuple(np.asarray(i).astype(np.intp) - origin for i, origin in zip(idx, lo, strict=True))


def _gather(arr: np.ndarray, lo, idx):
    basic = _basic_key(idx, lo)
    return _view(arr, basic) if basic is not None else arr[_fancy_key(idx, lo)]


def _scatter(arr: np.ndarray, lo, idx, value) -> None:
    """``arr[idx - lo] = value``; the targets are distinct (the callers guarantee it)."""
    basic = _basic_key(idx, lo)
    if basic is not None:
        _view(arr, basic)[...] = value
    else:
        arr[_fancy_key(idx, lo)] = value


def _refers_to(e: E.Expr | None, name: str) -> bool:
    return e is not None and any(isinstance(n, E.FuncRef) and n.name == name for n in E.walk(e))


# -------------------------------------------------------------------------------------- evaluator
class _Evaluator:
    def __init__(self, program: Program, inputs: dict, out_shapes: dict):
        self.program = program
        self.sizes: dict[str, np.int32] = {}
        self.params: dict[str, np.generic] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self.done: dict[str, tuple[Box, np.ndarray]] = {}  # computed Funcs: box and values
        self.working: dict[str, list] = {}  # Funcs whose updates are running: [box, values]
        self.context: list[str] = []  # Funcs being computed, for error messages
        self.defining: list = []  # (Func, box) of the pure definitions being evaluated, innermost last
        self._order = {f.name: k for k, f in enumerate(program.functions)}
        self._bind(inputs, out_shapes)

    # -- arguments and sizes
    def _bind(self, inputs: dict, out_shapes: dict) -> None:
        p = self.program
        expected = {i.name for i in p.inputs} | {q.name for q in p.params}
        missing = sorted(expected - set(inputs))
        if missing:
            raise TypeError(f"missing argument(s): {', '.join(missing)}")
        unexpected = sorted(set(inputs) - expected)
        if unexpected:
            raise TypeError(f"unexpected argument(s): {', '.join(unexpected)} "
                            f"(the pipeline takes {', '.join(sorted(expected)) or 'none'})")
        for spec in p.params:
            self.params[spec.name] = _param_value(spec.name, spec.dtype, inputs[spec.name])
        bound_from: dict[str, str] = {}
        ragged_inputs = []
        for spec in p.inputs:
            a = inputs[spec.name]
            if any(is_ragged(s) for s in spec.shape):
                ragged_inputs.append(spec)
                self._bind_ragged_sizes(spec, a, bound_from)
                continue
            if isinstance(a, RaggedArray):
                raise TypeError(f"argument {spec.name}: Input {spec.name} has no ragged dimension; pass a NumPy "
                                "array, not a RaggedArray")
            if isinstance(a, np.generic):
                a = np.asarray(a)
            if not isinstance(a, np.ndarray):
                raise TypeError(f"argument {spec.name}: expected a NumPy array of {spec.dtype}, "
                                f"got {type(a).__name__}")
            if a.dtype != spec.dtype.np:
                raise TypeError(f"argument {spec.name}: expected dtype {spec.dtype}, got {a.dtype}")
            if a.ndim != spec.rank:
                raise ValueError(f"argument {spec.name}: expected {spec.rank} dimension(s), got {a.ndim} "
                                 f"(shape {a.shape})")
            self.arrays[spec.name] = a
            for k, s in enumerate(spec.shape):
                if isinstance(s, E.Var) and s.name in p.sizes:
                    self._bind_size(s.name, a.shape[k], f"{spec.name} (dimension {k})", bound_from)
        for name in out_shapes:
            if name not in p.outputs:
                raise ValueError(f"out_shape given for {name!r}, which is not an output "
                                 f"({', '.join(p.outputs)})")
            if len(out_shapes[name]) != p.func(name).rank:
                raise ValueError(f"output {name} has {p.func(name).rank} dimension(s), its out_shape "
                                 f"{tuple(out_shapes[name])} has {len(out_shapes[name])}")
        for name in p.outputs:
            f = p.func(name)
            if name in out_shapes and f.shape is not None:
                for k, s in enumerate(f.shape):
                    if isinstance(s, E.Var) and s.name in p.sizes and s.name not in self.sizes:
                        self._bind_size(s.name, out_shapes[name][k], f"out_shape of {name} (dimension {k})",
                                        bound_from)
        unbound = [s for s in p.sizes if s not in self.sizes]
        if unbound:
            raise ValueError(f"Size(s) {', '.join(unbound)} cannot be bound: no input dimension has them "
                             "as its extent (give the output's region as out_shape)")
        for spec in ragged_inputs:  # the lengths Inputs are bound now
            self._bind_ragged_values(spec, inputs[spec.name])
        for spec in p.inputs:  # extents that are expressions of Sizes, or constants
            for k, s in enumerate(spec.shape):
                if is_ragged(s):
                    continue
                want = int(self._eval(s, {}))
                got = self.arrays[spec.name].shape[k]
                if got != want:
                    raise ValueError(f"argument {spec.name}: dimension {k} has extent {got}, but its shape "
                                     f"says {s} = {want}")
        self.domains = {f.name: self._padded_extents(f.shape) for f in p.functions if f.shape is not None}
        self.regions: dict[str, tuple[int, ...]] = {}
        for name in p.outputs:
            f = p.func(name)
            if name in out_shapes and f.shape is not None and any(is_ragged(s) for s in f.shape):
                raise ValueError(f"output {name} has a ragged shape, which out_shape cannot replace")
            if name in out_shapes:
                region = tuple(int(e) for e in out_shapes[name])
            elif f.shape is not None:
                region = self.domains[name]
            else:
                raise ValueError(f"output {name} has no declared shape: give its region as out_shape")
            if len(region) != f.rank:
                raise ValueError(f"output {name} has {f.rank} dimension(s), its region {region} has "
                                 f"{len(region)}")
            if any(e < 0 for e in region):
                raise ValueError(f"output {name}: negative extent in its region {region}")
            self.regions[name] = region

    # -- ragged arguments: a RaggedArray is checked against the extents, then read as a padded array
    def _bind_ragged_sizes(self, spec, a, bound_from: dict) -> None:
        if not isinstance(a, RaggedArray):
            raise TypeError(f"argument {spec.name}: Input {spec.name} is ragged; pass a RaggedArray "
                            f"(RaggedArray.from_padded(array, lengths) or .from_list(arrays)), got {type(a).__name__}")
        if a.dtype != spec.dtype.np:
            raise TypeError(f"argument {spec.name}: expected dtype {spec.dtype}, got {a.dtype}")
        if a.ndim != spec.rank:
            raise ValueError(f"argument {spec.name}: expected {spec.rank} dimension(s), got a RaggedArray with "
                             f"{a.ndim} ({a!r})")
        for k, s in enumerate(spec.shape):
            if k == 0:
                fixed = a.batch
            elif is_ragged(s) != (a.template[k - 1] is None):
                raise ValueError(f"argument {spec.name}: dimension {k} is {'ragged' if is_ragged(s) else 'fixed'} "
                                 f"in Input {spec.name} but not in the RaggedArray ({a!r})")
            elif is_ragged(s):
                if dims_used(s) != {0}:
                    raise ValueError(f"argument {spec.name}: dimension {k} depends on the indices of dimensions "
                                     f"{sorted(dims_used(s))}; a RaggedArray's lengths depend on the batch index")
                continue
            else:
                fixed = a.template[k - 1]
            if isinstance(s, E.Var) and s.name in self.program.sizes:
                self._bind_size(s.name, fixed, f"{spec.name} (dimension {k})", bound_from)

    def _bind_ragged_values(self, spec, a: RaggedArray) -> None:
        for k, s in enumerate(spec.shape):
            if k == 0 and not is_ragged(s):
                want = int(self._eval(s, {}))
                if a.batch != want:
                    raise ValueError(f"argument {spec.name}: {a.batch} batch entries, but its shape says {s} = {want}")
            if k and is_ragged(s):
                lengths = np.broadcast_to(self._eval(s, {dim_index(0): np.arange(a.batch, dtype=np.int32)}), a.batch)
                got = a.axis_lengths(k)
                if not np.array_equal(lengths, got):
                    b = int(np.flatnonzero(lengths != got)[0])
                    raise ValueError(f"argument {spec.name}: entry {b} has length {int(got[b])} in dimension {k}, "
                                     f"but its shape says {s} = {int(lengths[b])} there")
            elif k:
                want = int(self._eval(s, {}))
                if a.template[k - 1] != want:
                    raise ValueError(f"argument {spec.name}: dimension {k} has extent {a.template[k - 1]}, but its "
                                     f"shape says {s} = {want}")
        self.arrays[spec.name] = a.to_padded(0)

    def _extent_values(self, shape, k: int, extents: list[int]) -> np.ndarray:
        """Extent ``k`` of a (maybe ragged) shape at every index of the leading dimensions it uses."""
        used = sorted(dims_used(shape[k]))
        grid = np.meshgrid(*(np.arange(extents[j], dtype=np.int32) for j in used), indexing="ij")
        env = {dim_index(j): g for j, g in zip(used, grid, strict=True)}
        return np.broadcast_to(self._eval(shape[k], env), grid[0].shape if grid else ())

    def _padded_extents(self, shape) -> tuple[int, ...]:
        """The box that holds a (maybe ragged) shape: each ragged extent at its largest."""
        out: list[int] = []
        for k in range(len(shape)):
            v = self._extent_values(shape, k, out)
            out.append(max(0, int(v.max())) if v.size else 0)
        return tuple(out)

    def _as_ragged(self, f: Function, padded: np.ndarray) -> RaggedArray:
        """A ragged output's value: its padded box cut to the extents, as a RaggedArray."""
        axes = [k for k, s in enumerate(f.shape) if is_ragged(s)]
        if any(dims_used(f.shape[k]) != {0} for k in axes):
            raise ValueError(f"output {f.name}: its ragged extents must depend on the first index only, to be "
                             f"returned as a RaggedArray (shape {f.shape})")
        per = [self._extent_values(f.shape, k, [padded.shape[0]]).astype(np.int64) for k in axes]
        shared = all(f.shape[k] == f.shape[axes[0]] for k in axes)
        lengths = per[0] if shared else np.stack(per, axis=1)
        return RaggedArray.from_padded(padded, lengths, axis=tuple(axes))

    def _bind_size(self, name: str, value: int, where: str, bound_from: dict) -> None:
        value = int(value)
        if name in self.sizes:
            if int(self.sizes[name]) != value:
                raise ValueError(f"Size {name} is {int(self.sizes[name])} from {bound_from[name]} but "
                                 f"{value} from {where}")
            return
        if not 0 <= value <= np.iinfo(np.int32).max:
            raise ValueError(f"Size {name} = {value} from {where} does not fit the int32 index type")
        self.sizes[name] = np.int32(value)
        bound_from[name] = where

    # -- outputs and Funcs
    def output(self, name: str) -> np.ndarray:
        f = self.program.func(name)
        region = self.regions[name]
        if math.prod(region) == 0:
            out = np.empty(region, f.dtype.np)
        else:
            box, arr = self.realize(name, tuple((0, e) for e in region))
            key = tuple(slice(-lo, -lo + e) for (lo, _), e in zip(box, region, strict=True))
            out = np.array(arr[key], copy=True)
        if f.shape is not None and any(is_ragged(s) for s in f.shape):
            return self._as_ragged(f, out)
        return out

    def realize(self, name: str, need: Box) -> tuple[Box, np.ndarray]:
        """Func ``name`` computed over a box that covers ``need`` (memoized)."""
        have = self.done.get(name)
        if have is not None and _covers(have[0], need):
            return have
        box = need if have is None else _union(have[0], need)
        f = self.program.func(name)
        self.context.append(name)
        try:
            for _ in range(64):
                box = self._footprint(f, box)
                try:
                    arr = self._compute(f, box)
                    break
                except _Grow as g:
                    if g.name != name:
                        raise
                    box = _union(box, g.box)
            else:  # pragma: no cover - the accessed points form a finite set
                raise RuntimeError(f"Func {name}: its updates keep reaching new points")
        finally:
            self.context.pop()
        self.done[name] = (box, arr)
        return box, arr

    def _compute(self, f: Function, box: Box) -> np.ndarray:
        shape = tuple(hi - lo for lo, hi in box)
        env = {a: _grid_axis(box[k], k, len(box)) for k, a in enumerate(f.args)}
        arr = np.empty(shape, f.dtype.np)
        self.defining.append((f, box))
        try:
            arr[...] = self._eval(f.init, env)
        finally:
            self.defining.pop()
        if f.updates:
            self.working[f.name] = [box, arr]
            try:
                for upd in f.updates:
                    self._run_update(f, upd, box, arr)
            finally:
                del self.working[f.name]
        return arr

    # -- reads
    def _read(self, ref: E.FuncRef, idx: list):
        name = ref.name
        hull = _hull(idx)
        if hull is not None and self.defining and not self._inside(name, hull):
            idx, hull = self._at_valid_points(idx)
        if hull is None:
            return np.zeros(np.broadcast_shapes(*(np.shape(i) for i in idx)), ref.dtype.np)
        if name in self.arrays:
            a = self.arrays[name]
            for k, (lo, hi) in enumerate(hull):
                if lo < 0 or hi > a.shape[k]:
                    raise ValueError(f"Input {name} is read outside its shape{self._where()}: {ref} reads "
                                     f"dimension {k} over [{lo}, {hi - 1}], but its extent is {a.shape[k]}")
            return _gather(a, (0,) * len(hull), idx)
        if name in self.working:
            box, arr = self.working[name]
            if not _covers(box, hull):
                raise _Grow(name, hull)
            return _gather(arr, [lo for lo, _ in box], idx)
        self._check_domain(ref, hull)
        box, arr = self.realize(name, hull)
        return _gather(arr, [lo for lo, _ in box], idx)

    def _inside(self, name: str, hull: Box) -> bool:
        """Whether ``hull`` lies inside Input ``name`` or Func ``name``'s declared shape."""
        extents = self.arrays[name].shape if name in self.arrays else self.domains.get(name)
        return extents is None or name in self.working or \
            all(lo >= 0 and hi <= e for (lo, hi), e in zip(hull, extents, strict=True))

    def _at_valid_points(self, idx: list) -> tuple[list, Box | None]:
        """``idx`` and its hull over the points of the Func being defined that lie in its ragged domain,
        the others moved to the first such point: a ragged Func is computed over its padded box, and
        what its padding points read is never part of a result (a clamp to an empty entry's own edge,
        ``min(max(y, 0), hs[b] - 1)``, is -1 there and nowhere else). Unchanged where the Func has no
        ragged shape or the reads span other axes than its own."""
        f, box = self.defining[-1]
        if f.shape is None or not any(map(is_ragged, f.shape)):
            return idx, _hull(idx)
        shape = tuple(hi - lo for lo, hi in box)
        try:
            if np.broadcast_shapes(shape, *(np.shape(i) for i in idx)) != shape:
                return idx, _hull(idx)
        except ValueError:
            return idx, _hull(idx)
        grid = {dim_index(k): _grid_axis(b, k, len(box)) for k, b in enumerate(box)}
        valid = np.ones(shape, bool)
        for k, s in enumerate(f.shape):
            if is_ragged(s):
                valid &= grid[dim_index(k)] < self._eval(s, grid)
        if not valid.any():
            return idx, None
        first = np.argwhere(valid)[0]
        moved = [np.where(valid, i, np.broadcast_to(i, shape)[tuple(first)]) for i in idx]
        return moved, _hull(moved)

    def _check_domain(self, ref: E.FuncRef, hull: Box) -> None:
        dom = self.domains.get(ref.name)
        for k, (lo, hi) in enumerate(hull if dom is not None else ()):
            if lo < 0 or hi > dom[k]:
                raise ValueError(f"Func {ref.name} is read outside its declared shape{self._where()}: {ref} "
                                 f"reads dimension {k} over [{lo}, {hi - 1}], but its extent is {dom[k]}")

    def _prefetch(self, exprs, env: dict, memo: dict, need: dict | None = None) -> None:
        """Compute, once and over the union of what they need, the Funcs that ``exprs`` read at indices
        that do not depend on Func values (rather than growing them read by read). With ``need``,
        only accumulate the boxes into it."""
        fetch = need is None
        need = {} if need is None else need
        for e in exprs:
            if e is None or any(isinstance(n, E.Let) for n in E.walk(e)):
                continue
            for n in E.walk(e):
                if not isinstance(n, E.FuncRef) or n.name in self.arrays or n.name in self.working:
                    continue
                if any(isinstance(m, E.FuncRef) for a in n.args for m in E.walk(a)):
                    continue
                hull = _hull([self._eval(a, env, memo) for a in n.args])
                if hull is not None:
                    self._check_domain(n, hull)
                    need[n.name] = hull if n.name not in need else _union(need[n.name], hull)
        if fetch:
            self._fetch(need)

    def _fetch(self, need: dict) -> None:
        for name in sorted(need, key=self._order.__getitem__, reverse=True):  # consumers first
            self.realize(name, need[name])

    def _where(self) -> str:
        return f" (in Func {self.context[-1]})" if self.context else ""

    # -- expressions
    def _eval(self, e: E.Expr, env: dict, memo: dict | None = None):
        """The value of ``e`` with Vars bound by ``env`` (arrays that broadcast together)."""
        if memo is None:
            memo = {}
            self._prefetch([e], env, memo)
        key = id(e)
        if key in memo:
            return memo[key]
        out = self._eval_node(e, env, memo)
        if out.dtype != e.dtype.np:  # pragma: no cover - a hand-built, mistyped node
            out = _cast(out, e.dtype.np)
        memo[key] = out
        return out

    def _eval_node(self, e: E.Expr, env: dict, memo: dict):
        t = e.dtype.np
        ev = lambda x, dt=t: _cast(self._eval(x, env, memo), dt)  # noqa: E731
        cls = type(e)
        if cls is E.Const:
            return t.type(e.value)
        if cls is E.Var:
            for scope in (env, self.sizes, self.params):
                if e.name in scope:
                    return scope[e.name]
            raise ValueError(f"unbound variable {e.name}{self._where()}")
        if cls in _BINARY:
            return _BINARY[cls](ev(e.a), ev(e.b))
        if cls in _COMPARE:
            dt = e.a.dtype.np
            return _COMPARE[cls](ev(e.a, dt), ev(e.b, dt))
        if cls is E.Cast:
            return _cast(self._eval(e.value, env, memo), t)
        if cls is E.Not:
            a = ev(e.a)
            return np.logical_not(a) if t.kind == "b" else np.invert(a)
        if cls is E.Neg:
            return np.negative(ev(e.a))
        if cls is E.Select:
            return np.where(ev(e.cond, np.dtype(bool)), ev(e.t), ev(e.f))
        if cls is E.Call:
            fn = _MATH.get(e.name)
            if fn is None:
                raise NotImplementedError(f"the reference has no math function {e.name!r}")
            work = np.dtype(np.float32) if t == np.float16 else t  # float16 math in float32
            return _cast(fn(*(ev(a, work) for a in e.args)), t)
        if cls is E.FuncRef:
            return self._read(e, [self._eval(a, env, memo) for a in e.args])
        if cls is E.Let:
            inner = dict(env)
            inner[e.name] = self._eval(e.value, env, memo)
            return self._eval(e.body, inner, {})
        raise TypeError(f"the reference cannot evaluate {cls.__name__} nodes (lowered IR?): {e}")

    # -- updates
    def _footprint(self, f: Function, box: Box) -> Box:
        """Grow ``box`` to every point the updates write, and read of ``f`` itself, where those
        indices do not depend on ``f`` (others are found while running: see ``_Grow``)."""
        for _ in range(8):
            grown = box
            for upd in f.updates:
                pure_pos = {pos for _, pos in upd.pure_vars}
                exprs = [(pos, a) for pos, a in enumerate(upd.args) if pos not in pure_pos]
                rd = upd.rdom
                for part in (upd.value, rd.predicate if rd else None):
                    for ref in E.walk(part) if part is not None else ():
                        if isinstance(ref, E.FuncRef) and ref.name == f.name:
                            exprs += [(pos, a) for pos, a in enumerate(ref.args) if pos not in pure_pos]
                exprs = list(dict.fromkeys((pos, a) for pos, a in exprs if not _refers_to(a, f.name)))
                if not exprs or (rd and any(_refers_to(x, f.name) for x in (rd.predicate, *rd.mins,
                                                                            *rd.extents))):
                    continue
                for env, _shape, _grid in self._chunks(f, upd, grown, CHUNK):
                    memo: dict = {}
                    self._prefetch([a for _, a in exprs], env, memo)
                    for pos, a in exprs:
                        v = self._eval(a, env, memo)
                        if np.size(v):
                            lo, hi = int(np.min(v)), int(np.max(v)) + 1
                            grown = tuple((min(b[0], lo), max(b[1], hi)) if k == pos else b
                                          for k, b in enumerate(grown))
            if grown == box:
                return box
            box = grown
        return box

    def _pure_grid(self, upd: Definition, box: Box) -> tuple[dict, tuple[int, ...]]:
        """The update's pure Vars as an open grid over their dims of ``box``; axis 0 is left (size 1)
        for the RDom points."""
        n = len(upd.pure_vars)
        env = {name: _grid_axis(box[pos], j + 1, n + 1) for j, (name, pos) in enumerate(upd.pure_vars)}
        return env, tuple(box[pos][1] - box[pos][0] for _, pos in upd.pure_vars)

    def _rdom_bounds(self, upd: Definition, pure_env: dict):
        """Per-RVar (min, end) arrays over the pure grid, the hull of the RDom over the pure points where
        it is not empty, and whether the bounds are the same at every pure point."""
        rd = upd.rdom
        memo: dict = {}
        self._prefetch(rd.mins + rd.extents, pure_env, memo)
        mins = [np.asarray(self._eval(m, pure_env, memo), np.int64) for m in rd.mins]
        ends = [lo + np.asarray(self._eval(x, pure_env, memo), np.int64)
                for lo, x in zip(mins, rd.extents, strict=True)]
        shape = np.broadcast_shapes(*(m.shape for m in mins + ends))
        nonempty = np.ones(shape, bool)
        for lo, end in zip(mins, ends, strict=True):
            nonempty &= end > lo
        if not nonempty.any():
            return mins, ends, None, True
        hull = [(int(np.broadcast_to(lo, shape)[nonempty].min()),
                 int(np.broadcast_to(end, shape)[nonempty].max()))
                for lo, end in zip(mins, ends, strict=True)]
        uniform = all(a.size == 1 for a in mins + ends)
        return mins, ends, hull, uniform

    def _chunks(self, f: Function, upd: Definition, box: Box, size: int):
        """Yield (env, shape, is_grid) for the update's points, at most about ``size`` at a time, in
        lexicographic RDom order. A grid env has the RDom points on axis 0 and the pure Vars on the
        next axes; where bounds or a predicate leave out points, the env is flat (1-D coordinates)."""
        pure_env, pshape = self._pure_grid(upd, box)
        npoints = math.prod(pshape)
        if npoints == 0:
            return
        rd = upd.rdom
        if rd is None:
            yield pure_env, (1, *pshape), True
            return
        mins, ends, hull, uniform = self._rdom_bounds(upd, pure_env)
        if hull is None:
            return
        extents = [hi - lo for lo, hi in hull]
        total = math.prod(extents)
        step = max(1, size // npoints)
        nd = len(pshape) + 1
        for start in range(0, total, step):
            coords = np.unravel_index(np.arange(start, min(start + step, total)), extents)
            env = dict(pure_env)
            for name, c, (lo, _) in zip(rd.vars, coords, hull, strict=True):
                env[name] = (c + lo).astype(np.int32).reshape((-1,) + (1,) * (nd - 1))
            shape, grid = (len(coords[0]), *pshape), True
            if not uniform:
                inside = True
                for name, lo, end in zip(rd.vars, mins, ends, strict=True):
                    inside = inside & (env[name] >= lo) & (env[name] < end)
                env, shape, grid = _restrict(env, shape, grid, inside, list(pure_env) + list(rd.vars))
                if env is None:
                    continue
            if rd.predicate is not None:
                keep = self._eval(rd.predicate, env)
                env, shape, grid = _restrict(env, shape, grid, keep, list(pure_env) + list(rd.vars))
                if env is None:
                    continue
            yield env, shape, grid

    def _run_update(self, f: Function, upd: Definition, box: Box, arr: np.ndarray) -> None:
        lo = [b[0] for b in box]
        mode, fold = _plan(f, upd)
        exprs = [upd.value, *upd.args]
        if any(isinstance(n, E.FuncRef) and n.name not in self.arrays and n.name != f.name
               for e in exprs for n in E.walk(e)):
            need: dict = {}
            for env, _shape, _grid in self._chunks(f, upd, box, CHUNK):
                self._prefetch(exprs, env, {}, need)
            self._fetch(need)
        if mode == "sequential":
            self._run_sequential(f, upd, box, arr)
        elif mode == "parallel":
            for env, _shape, _grid in self._chunks(f, upd, box, CHUNK):
                memo: dict = {}
                value = self._eval(upd.value, env, memo)
                targets = self._targets(f, upd, env, memo, box)
                if targets is not None:
                    _scatter(arr, lo, targets, value)
        elif mode == "scatter":  # f[L] = f[L] op e, L depending on RVars: fold point by point, in order
            op, e = fold
            flat = arr.reshape(-1)
            for env, shape, _grid in self._chunks(f, upd, box, CHUNK):
                memo = {}
                value = np.broadcast_to(_cast(self._eval(e, env, memo), arr.dtype), shape)
                targets = self._targets(f, upd, env, memo, box)
                if targets is None:
                    continue
                targets = [np.broadcast_to(np.asarray(t, np.int64) - o, shape) for t, o in zip(targets, lo,
                                                                                             strict=True)]
                where = np.ravel_multi_index(targets, arr.shape) if arr.ndim else np.zeros(shape, np.intp)
                op.at(flat, where.reshape(-1), value.reshape(-1))
        else:  # "reduce": f[L] = f[L] op e, L depending only on the pure Vars
            self._run_reduce(f, upd, box, arr, *fold)

    def _targets(self, f: Function, upd: Definition, env: dict, memo: dict, box: Box):
        """The LHS indices of an update at the points of ``env`` (None when there are none)."""
        targets = [self._eval(a, env, memo) for a in upd.args]
        hull = _hull(targets)
        if hull is not None and not _covers(box, hull):
            raise _Grow(f.name, hull)
        return None if hull is None and targets else targets

    def _run_reduce(self, f: Function, upd: Definition, box: Box, arr: np.ndarray, op, e: E.Expr) -> None:
        lo = [b[0] for b in box]
        pure_env, pshape = self._pure_grid(upd, box)
        if math.prod(pshape) == 0:
            return
        targets = self._targets(f, upd, pure_env, {}, box)
        if targets is None:
            return
        acc = np.array(np.broadcast_to(_gather(arr, lo, targets), (1, *pshape)))  # one per pure point
        exact_order = arr.dtype.kind == "f" and op in (np.add, np.multiply)
        for env, shape, grid in self._chunks(f, upd, box, CHUNK):
            value = np.broadcast_to(_cast(self._eval(e, env), arr.dtype), shape)
            if not grid:  # flat points: fold each into its pure point's accumulator, in order
                where = [np.zeros(shape, np.intp)]
                where += [np.broadcast_to(env[name], shape).astype(np.intp) - box[pos][0]
                          for name, pos in upd.pure_vars]
                op.at(acc, tuple(where), value)
            elif not exact_order:  # integer + and *, min, max: the order does not change the result
                op(acc, op.reduce(value, axis=0, keepdims=True, dtype=arr.dtype), out=acc)
            elif math.prod(pshape) >= _LOOP_OVER_RDOM:
                for j in range(shape[0]):
                    op(acc, value[j:j + 1], out=acc)
            else:
                steps = np.concatenate([acc, value], axis=0)
                op.accumulate(steps, axis=0, out=steps)
                acc[...] = steps[-1:]
        _scatter(arr, lo, targets, acc)

    def _run_sequential(self, f: Function, upd: Definition, box: Box, arr: np.ndarray) -> None:
        """The definition itself: one RDom point at a time (vectorized over the pure points)."""
        lo = [b[0] for b in box]
        pure_env, pshape = self._pure_grid(upd, box)
        if math.prod(pshape) == 0:
            return
        rd = upd.rdom
        names = list(pure_env) + list(rd.vars)
        mins, ends, hull, uniform = self._rdom_bounds(upd, pure_env)
        if hull is None:
            return
        for point in itertools.product(*(range(a, b) for a, b in hull)):
            env = dict(pure_env)
            env.update({name: np.int32(c) for name, c in zip(rd.vars, point, strict=True)})
            shape, grid = (1, *pshape), True
            if not uniform:
                inside = True
                for c, a, b in zip(point, mins, ends, strict=True):
                    inside = inside & (a <= c) & (c < b)
                env, shape, grid = _restrict(env, shape, grid, inside, names)
                if env is None:
                    continue
            memo: dict = {}
            if rd.predicate is not None:
                env, shape, grid = _restrict(env, shape, grid, self._eval(rd.predicate, env, memo), names)
                if env is None:
                    continue
                memo = {}
            value = self._eval(upd.value, env, memo)
            targets = self._targets(f, upd, env, memo, box)
            if targets is not None:
                _scatter(arr, lo, targets, value)


def _plan(f: Function, upd: Definition):
    """How to run an update: "parallel" (every point writes its own element and reads only that),
    "reduce"/"scatter" (``f[L] = f[L] op e`` with ``e`` free of ``f``; L without/with RVars) or
    "sequential". Returns (mode, (ufunc, e) or None)."""
    name, rd = f.name, upd.rdom
    if rd is None:
        return "parallel", None  # one point per pure point: the pure points are independent
    if any(_refers_to(x, name) for x in (rd.predicate, *rd.mins, *rd.extents, *upd.args)):
        return "sequential", None
    rvars = set(rd.vars)
    lhs_rvars = {a.name for a in upd.args if isinstance(a, E.Var) and a.name in rvars}
    self_refs = [n for n in E.walk(upd.value) if isinstance(n, E.FuncRef) and n.name == name]
    if lhs_rvars == rvars and all(r.args == upd.args for r in self_refs):
        return "parallel", None  # injective: every RVar stands alone on the left
    v = upd.value
    if type(v) in _FOLD and v.dtype == f.dtype:
        for ref, e in ((v.a, v.b), (v.b, v.a)):
            if isinstance(ref, E.FuncRef) and ref.name == name and ref.args == upd.args \
                    and not _refers_to(e, name):
                lhs_uses_rvars = any(E.free_vars(a) & rvars for a in upd.args)
                return ("scatter" if lhs_uses_rvars else "reduce"), (_FOLD[type(v)], e)
    return "sequential", None


def _grid_axis(bounds: tuple[int, int], axis: int, ndim: int) -> np.ndarray:
    """``arange(lo, hi)`` (int32, the index type) laid along ``axis`` of an open grid."""
    shape = [1] * ndim
    shape[axis] = -1
    return np.arange(bounds[0], bounds[1], dtype=np.int32).reshape(shape)


def _restrict(env: dict, shape, grid: bool, keep, names):
    """Keep only the points where ``keep`` holds: the env becomes flat 1-D coordinates (or None)."""
    keep = np.broadcast_to(keep, shape)
    if keep.all():
        return env, shape, grid
    if not keep.any():
        return None, None, None
    out = dict(env)
    for n in names:
        out[n] = np.broadcast_to(env[n], shape)[keep]
    return out, (int(np.count_nonzero(keep)),), False


def _param_value(name: str, t: DType, v):
    """A Param's value as a NumPy scalar of its type; refuses values of another kind."""
    dt = t.np
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    if isinstance(v, np.generic):
        if v.dtype == dt or np.can_cast(v.dtype, dt, "safe"):
            return dt.type(v)
        raise TypeError(f"argument {name}: expected a {t} scalar, got {v.dtype}")
    if isinstance(v, bool):
        ok = dt.kind == "b"
    elif isinstance(v, int):
        ok = dt.kind in "iuf"
        if dt.kind in "iu" and not np.iinfo(dt).min <= v <= np.iinfo(dt).max:
            raise ValueError(f"argument {name}: {v} is out of range for {t}")
    elif isinstance(v, float):
        ok = dt.kind == "f"
    else:
        ok = False
    if not ok:
        raise TypeError(f"argument {name}: expected a {t} scalar, got {type(v).__name__} {v!r}")
    return dt.type(v)
