"""The algorithm language: Var, RDom, Func, Input, Param, Size and the expressions built from them.

User-facing objects wrap immutable IR nodes (``ragsched.algebra.expr``) and add Python operators, so
that ``img[y, x + 1] * 0.5`` builds a typed tree. Each wrapper also carries the set of objects it
depends on (Funcs, Inputs, RDoms, ...), which is how a pipeline is collected from its outputs without
any global registry. Definitions are checked when they are made, with errors that name the Func.
"""

from __future__ import annotations

import dis
import itertools
import sys

import numpy as np

from .algebra import expr as E
from .algebra import types as T
from .algebra.types import DType
from .program import Definition, Function, ParamSpec, Program, dim_index, is_ragged, reduces_in_place
from .schedule.by_length import SchedulesByLength
from .schedule.loops import FuncLoops
from .schedule.methods import FuncScheduling
from .schedule.records import Wrap
from .schedule.value import Schedule, new_records

_counter = itertools.count()


def _fresh(prefix: str) -> str:
    return f"{prefix}{next(_counter)}"


# ------------------------------------------------------------------------------------ expressions
class Expr:
    """A typed expression of the algorithm language (Halide's Expr)."""

    __slots__ = ("_node", "deps")

    def __init__(self, node: E.Expr, deps: frozenset = frozenset()):
        self._node = node
        self.deps = deps

    @property
    def node(self) -> E.Expr:
        return self._node

    @property
    def dtype(self) -> DType:
        return self.node.dtype

    def __repr__(self) -> str:
        return str(self.node)

    def __bool__(self):
        raise TypeError(
            f"the truth value of the ragsched expression {self} is not known until the pipeline runs; "
            "use rs.select(...) for conditions and & | ~ instead of and/or/not")

    __hash__ = object.__hash__

    def __index__(self):
        raise TypeError(f"{self} is a ragsched expression, not a Python integer")

    # arithmetic
    def __add__(self, o): return _binop(E.add, self, o)
    def __radd__(self, o): return _binop(E.add, o, self)
    def __sub__(self, o): return _binop(E.sub, self, o)
    def __rsub__(self, o): return _binop(E.sub, o, self)
    def __mul__(self, o): return _binop(E.mul, self, o)
    def __rmul__(self, o): return _binop(E.mul, o, self)
    def __truediv__(self, o): return _binop(E.truediv, self, o)
    def __rtruediv__(self, o): return _binop(E.truediv, o, self)
    def __floordiv__(self, o): return _binop(E.floordiv, self, o)
    def __rfloordiv__(self, o): return _binop(E.floordiv, o, self)
    def __mod__(self, o): return _binop(E.mod, self, o)
    def __rmod__(self, o): return _binop(E.mod, o, self)
    def __pow__(self, o): return _binop(E.power, self, o)
    def __rpow__(self, o): return _binop(E.power, o, self)
    def __neg__(self): return Expr(E.neg(self.node), self.deps)
    def __pos__(self): return self
    def __abs__(self): return abs_(self)
    # comparisons build expressions
    def __lt__(self, o): return _binop(E.lt, self, o)
    def __le__(self, o): return _binop(E.le, self, o)
    def __gt__(self, o): return _binop(E.gt, self, o)
    def __ge__(self, o): return _binop(E.ge, self, o)
    def __eq__(self, o): return _binop(E.eq, self, o)  # type: ignore[override]
    def __ne__(self, o): return _binop(E.ne, self, o)  # type: ignore[override]
    # booleans and bits
    def __and__(self, o): return _binop(E.bit_and, self, o)
    def __rand__(self, o): return _binop(E.bit_and, o, self)
    def __or__(self, o): return _binop(E.bit_or, self, o)
    def __ror__(self, o): return _binop(E.bit_or, o, self)
    def __xor__(self, o): return _binop(E.bit_xor, self, o)
    def __rxor__(self, o): return _binop(E.bit_xor, o, self)
    def __invert__(self): return Expr(E.invert(self.node), self.deps)
    def __lshift__(self, o): return _binop(lambda a, b: E.shift(E.Shl, a, b), self, o)
    def __rshift__(self, o): return _binop(lambda a, b: E.shift(E.Shr, a, b), self, o)
    def __rlshift__(self, o): return _binop(lambda a, b: E.shift(E.Shl, a, b), o, self)
    def __rrshift__(self, o): return _binop(lambda a, b: E.shift(E.Shr, a, b), o, self)


def _unwrap(x):
    """(IR node or weak Python scalar, deps)."""
    if isinstance(x, Expr):
        return x.node, x.deps
    if isinstance(x, np.generic):
        return E.const(x.item(), T.as_dtype(x.dtype)), frozenset()
    if isinstance(x, (bool, int, float)):
        return x, frozenset()
    if isinstance(x, (Func, Input)):
        raise TypeError(f"{x.name} is a {type(x).__name__}; index it (for example {x.name}[x, y]) "
                        "to use its value")
    raise TypeError(f"cannot use {x!r} (a {type(x).__name__}) in a ragsched expression")


def _node_of(x) -> tuple[E.Expr, frozenset]:
    n, d = _unwrap(x)
    return (n if isinstance(n, E.Expr) else E.const(n)), d


def _binop(fn, a, b) -> Expr:
    na, da = _unwrap(a)
    nb, db = _unwrap(b)
    return Expr(fn(na, nb), da | db)


def wrap(value) -> Expr:
    """Any operand (Expr or Python/NumPy scalar) as an Expr."""
    n, d = _node_of(value)
    return Expr(n, d)


def index_wrap(value) -> Expr:
    """Like ``wrap``, but a Python int becomes an index (int32) constant when it fits."""
    if isinstance(value, int) and not isinstance(value, bool) and T.fits(value, T.INDEX):
        return Expr(E.const(value, T.INDEX))
    return wrap(value)


# ----------------------------------------------------------------------------- symbols and sizes
class Var(Expr):
    """A pure variable: one dimension of a Func's domain."""

    __slots__ = ("name",)

    def __init__(self, name: str | None = None):
        self.name = name or _fresh("v")
        super().__init__(E.Var(self.name, T.INDEX))
        self.deps = frozenset((self,))


def vars(names: str) -> tuple[Var, ...]:  # noqa: A001 - the API name
    """``rs.vars("b h i j")``: several Vars at once."""
    return tuple(Var(n) for n in names.replace(",", " ").split())


class Size(Expr):
    """A symbolic size, bound from the shapes of the arguments when a kernel is called."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        _check_name(name, "Size")
        self.name = name
        super().__init__(E.Var(name, T.INDEX))
        self.deps = frozenset((self,))


class Param(Expr):
    """A scalar argument of the pipeline."""

    __slots__ = ("name",)

    def __init__(self, name: str, dtype=T.float32):
        _check_name(name, "Param")
        self.name = name
        super().__init__(E.Var(name, T.as_dtype(dtype)))
        self.deps = frozenset((self,))


def _check_name(name, what):
    if not isinstance(name, str) or not name:
        raise TypeError(f"a {what} needs a non-empty string name, got {name!r}")


class RVar(Expr):
    """One dimension of an RDom."""

    __slots__ = ("name", "rdom", "index")

    def __init__(self, rdom: RDom, index: int):
        self.name, self.rdom, self.index = f"{rdom.name}.{index}", rdom, index
        super().__init__(E.Var(self.name, T.INDEX))
        self.deps = frozenset((self, rdom)) | rdom._bound_deps

    @property
    def min(self) -> Expr:
        return self.rdom._ranges[self.index][0]

    @property
    def extent(self) -> Expr:
        return self.rdom._ranges[self.index][1]


class RDom(Expr):
    """A reduction domain, Halide style: ``RDom(min, extent)``, ``RDom((min, extent), ...)`` or
    ``RDom(input)`` (all of an Input's points). The last dimension varies fastest (NumPy order).

    Bounds may be expressions of pure Vars (``RDom(0, lens[b])``, ``RDom(0, i + 1)``).
    """

    __slots__ = ("name", "_ranges", "_rvars", "_bound_deps", "_predicate")

    def __init__(self, *ranges, name: str | None = None):
        if name is not None:
            _check_name(name, "RDom")
        # unnamed: the variable the caller assigns it to (``k = rs.RDom(0, K)`` is k), else ``r``; the same
        # in every build of a pipeline, so that saved schedules can name its RVars (``k.0``)
        self.name = name or _assigned_name(sys._getframe(1)) or "r"
        if len(ranges) == 1 and isinstance(ranges[0], (Input, Func)):
            src = ranges[0]
            if any(is_ragged(s.node) for s in src.shape or ()):
                raise ValueError(f"RDom({src.name}): its shape is ragged; give the ranges, with bounds that are "
                                 "expressions of the pure Vars (RDom(0, lens[b]))")
            ranges = tuple((0, s) for s in src.shape)
        elif len(ranges) == 2 and not any(isinstance(r, (tuple, list)) for r in ranges):
            ranges = (tuple(ranges),)
        if not ranges:
            raise ValueError("an RDom needs at least one (min, extent) range")
        rs_, deps = [], frozenset()
        for k, r in enumerate(ranges):
            if not (isinstance(r, (tuple, list)) and len(r) == 2):
                raise TypeError(f"RDom {self.name}: range {k} must be a (min, extent) pair, got {r!r}")
            lo, ext = index_wrap(r[0]), index_wrap(r[1])
            for what, v in (("min", lo), ("extent", ext)):
                if not v.dtype.is_int:
                    raise TypeError(f"RDom {self.name}: the {what} of dimension {k} must be an integer "
                                    f"expression, got {v} of type {v.dtype}")
                if any(isinstance(d, RVar) for d in v.deps):
                    raise ValueError(f"RDom {self.name}: the bounds of dimension {k} may not use RVars ({v})")
            rs_.append((lo, ext))
            deps |= lo.deps | ext.deps
        self._ranges = tuple(rs_)
        self._bound_deps = deps
        self._predicate = None
        self._rvars = tuple(RVar(self, k) for k in range(len(rs_)))
        super().__init__(self._rvars[0].node if len(rs_) == 1 else E.Var(self.name), self._rvars[0].deps)

    @property
    def node(self) -> E.Expr:
        if len(self._rvars) != 1:
            raise TypeError(f"RDom {self.name} has {len(self._rvars)} dimensions; use {self.name}[k] "
                            "for one of its RVars")
        return self._rvars[0].node

    @property
    def deps(self):  # type: ignore[override]
        return self._rvars[0].deps

    @deps.setter
    def deps(self, value):
        pass

    def __getitem__(self, k: int) -> RVar:
        return self._rvars[k]

    def __iter__(self):
        return iter(self._rvars)

    def __len__(self) -> int:
        return len(self._rvars)

    @property
    def dimensions(self) -> int:
        return len(self._rvars)

    @property
    def x(self) -> RVar:
        return self._rvars[0]

    @property
    def y(self) -> RVar:
        return self._rvars[1]

    def where(self, cond) -> RDom:
        """Visit only the points where ``cond`` (an expression of the RVars) holds."""
        c = wrap(cond)
        E.as_bool(c.node, f"RDom {self.name}.where({c})")
        self._predicate = c if self._predicate is None else self._predicate & c
        self._bound_deps = self._bound_deps | (c.deps - frozenset(self._rvars) - {self})
        return self

    def _domain(self):
        from .program import RDomain

        pred = None if self._predicate is None else self._predicate.node
        return RDomain(self.name, tuple(v.name for v in self._rvars),
                       tuple(lo.node for lo, _ in self._ranges), tuple(e.node for _, e in self._ranges), pred)


_STORES = frozenset({"STORE_NAME", "STORE_FAST", "STORE_GLOBAL", "STORE_DEREF"})


def _assigned_name(frame) -> str | None:
    """The name that the statement running in ``frame`` assigns the call's result to, when it is a plain
    ``name = call(...)``; None otherwise (an unpacking, an argument of another call)."""
    try:
        instructions = list(dis.get_instructions(frame.f_code))
    except (TypeError, ValueError):
        return None
    for k, ins in enumerate(instructions[:-1]):
        if ins.offset == frame.f_lasti:
            after = instructions[k + 1]
            if after.opname in _STORES and isinstance(after.argval, str) and after.argval.isidentifier():
                return after.argval
            return None
    return None


# ------------------------------------------------------------------------------------ ragged extents
class Ragged:
    """An extent that depends on the indices of the dimensions before it, for shapes:
    ``Ragged("L", lens)`` is ``lens[b]`` in ``[B, L, 8, 64]`` (``lens`` an integer Input indexed by the
    leading dimensions), ``Ragged("T", lambda i: i + 1)`` is ``i + 1`` in ``[N, T]`` (a triangle).
    Several dimensions may share one (``[B, 8, L, L]``)."""

    def __init__(self, name: str, lengths):
        _check_name(name, "Ragged")
        self.name = name
        if isinstance(lengths, Input):
            if not lengths.dtype.is_int:
                raise TypeError(f"Ragged {name}: the lengths Input {lengths.name} must have an integer type, "
                                f"not {lengths.dtype}")
            self.rank, self._make = lengths.rank, lambda dims: lengths[tuple(dims)]
        elif callable(lengths):
            import inspect

            try:
                self.rank = len(inspect.signature(lengths).parameters)
            except (TypeError, ValueError):
                raise TypeError(f"Ragged {name}: cannot tell how many indices {lengths!r} takes") from None
            self._make = lambda dims: index_wrap(lengths(*dims))
        else:
            raise TypeError(f"Ragged {name}: lengths must be an integer Input or a function of the outer "
                            f"indices, got {lengths!r}")
        self.lengths = lengths

    def extent_at(self, position: int, owner: str) -> Expr:
        """The extent of dimension ``position`` of a shape, in terms of the leading dimensions' indices."""
        if self.rank == 0 or self.rank > position:
            raise ValueError(f"{owner}: Ragged {self.name} depends on the first {self.rank} dimension(s), so it "
                             f"can only stand after them, not at dimension {position}")
        w = self._make([Expr(E.Var(dim_index(j), T.INDEX)) for j in range(self.rank)])
        if not w.dtype.is_int:
            raise TypeError(f"{owner}: Ragged {self.name} gives {w}, not an integer")
        return w

    def __repr__(self) -> str:
        return f"Ragged({self.name!r})"


# ------------------------------------------------------------------------------- inputs and funcs
def _shape_exprs(owner: str, shape) -> tuple[Expr, ...]:
    out = []
    for k, s in enumerate(shape):
        if isinstance(s, Ragged):
            out.append(s.extent_at(k, owner))
            continue
        w = index_wrap(s)
        if not w.dtype.is_int:
            raise TypeError(f"{owner}: extent {k} of the shape must be an integer expression, got {w}")
        if any(isinstance(d, (Var, RVar)) for d in w.deps):
            raise ValueError(f"{owner}: extent {k} of the shape ({w}) may only use Sizes and constants")
        out.append(w)
    return tuple(out)


class Input:
    """An input array: ``Input("img", rs.float32, [H, W])``, or a rank for anonymous sizes."""

    def __init__(self, name: str, dtype, shape):
        _check_name(name, "Input")
        self.name = name
        self.dtype = T.as_dtype(dtype)
        if isinstance(shape, int):
            if shape < 0:
                raise ValueError(f"Input {name}: rank must be >= 0, got {shape}")
            shape = [Size(f"{name}.shape[{k}]") for k in range(shape)]
        self.shape = _shape_exprs(f"Input {name}", shape)
        self._wrappers: dict[str, Func] = {}

    def in_(self, consumer=None, name: str | None = None) -> Func:
        """A copy of this Input that ``consumer`` reads instead (every consumer when None), to be
        scheduled like any Func: Halide's ``in()``. Its Vars are ``_0, _1, ...``."""
        return _wrapper(self, tuple(Var(f"_{k}") for k in range(self.rank)), consumer, name)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Input({self.name!r}, {self.dtype}, {list(self.shape)})"

    def __getitem__(self, key) -> Expr:
        args, deps = _index_args(self.name, self.rank, key)
        return Expr(E.FuncRef(self.name, args, self.dtype), deps | {self})

    def _spec(self):
        from .program import InputSpec

        return InputSpec(self.name, self.dtype, tuple(s.node for s in self.shape))


def _index_args(name: str, rank: int | None, key) -> tuple[tuple[E.Expr, ...], frozenset]:
    key = key if isinstance(key, tuple) else (key,)
    if rank is not None and len(key) != rank:
        raise ValueError(f"{name} has {rank} dimension(s) but is indexed with {len(key)}: "
                         f"{name}[{', '.join(map(str, key))}]")
    args, deps = [], frozenset()
    for k, a in enumerate(key):
        if isinstance(a, slice) or a is Ellipsis:
            raise TypeError(f"{name}[...]: index {k} is a slice; index with Vars and expressions")
        n, d = _node_of(a) if not isinstance(a, int) else (index_wrap(a).node, frozenset())
        if not n.dtype.is_int:
            raise TypeError(f"index {k} of {name} must be an integer expression, got {n} of type {n.dtype}")
        args.append(n)
        deps |= d
    return tuple(args), deps


class _Update:
    """What ``f[args] += e`` hands to ``Func.__setitem__`` when f has no definition yet."""

    def __init__(self, op, value):
        self.op, self.value = op, value


class FuncRef(Expr):
    """``f[args]``: the value of a Func at a point; also the target of ``+=`` and friends."""

    __slots__ = ("func", "key")

    def __init__(self, func: Func, key):
        self.func, self.key = func, key

    @property
    def node(self) -> E.Expr:  # type: ignore[override]
        f = self.func
        if f._init is None:
            raise ValueError(f"Func {f.name} is used before it is defined (in {f.name}[...]); "
                             "give it a pure definition first")
        args, _ = _index_args(f.name, f.rank, self.key)
        return E.FuncRef(f.name, args, f.dtype)

    @property
    def deps(self):  # type: ignore[override]
        _, d = _index_args(self.func.name, self.func.rank, self.key)
        return d | {self.func}

    @deps.setter
    def deps(self, value):
        pass

    def _aug(self, op, other):
        if self.func._init is None:
            return _Update(op, other)
        return _binop({"+": E.add, "-": E.sub, "*": E.mul, "/": E.truediv,
                       "min": E.minimum, "max": E.maximum}[op], self, other)

    def __iadd__(self, o): return self._aug("+", o)
    def __isub__(self, o): return self._aug("-", o)
    def __imul__(self, o): return self._aug("*", o)
    def __itruediv__(self, o): return self._aug("/", o)


class Func(FuncScheduling):
    """A function over an integer domain, defined by a pure definition and optional updates.

    Scheduling methods (split, tile, reorder, vectorize, parallel, compute_at, ...) come from
    ``schedule.methods.FuncScheduling``."""

    def __init__(self, name: str | None = None, shape=None, dtype=None):
        self.name = name or _fresh("f")
        _check_name(self.name, "Func")
        self.shape = None if shape is None else _shape_exprs(f"Func {self.name}", shape)
        self._declared_dtype = None if dtype is None else T.as_dtype(dtype)
        self._dtype: DType | None = self._declared_dtype
        self._args: tuple[Var, ...] | None = None
        self._init: Expr | None = None
        self._updates: list = []
        self._used_by: set[str] = set()
        self._schedule: list = []
        self._wrappers: dict[str, Func] = {}

    # -- introspection
    @property
    def dtype(self) -> DType:
        if self._dtype is None:
            raise ValueError(f"Func {self.name} has no definition yet, so no type")
        return self._dtype

    @property
    def rank(self) -> int | None:
        if self._args is not None:
            return len(self._args)
        return None if self.shape is None else len(self.shape)

    @property
    def args(self) -> tuple[Var, ...]:
        return self._args or ()

    def defined(self) -> bool:
        return self._init is not None

    def _loops(self) -> FuncLoops:
        """What the schedule layer checks records against: the Vars of each stage as defined so far."""
        if self._init is None:
            raise ValueError(f"Func {self.name} has no definition to schedule yet")
        updates, reductions = [], []
        for key, v, pure in self._updates:
            deps = v.deps.union(*(wrap(k).deps for k in key))
            rdoms = [d for d in deps if isinstance(d, RDom)]
            updates.append((tuple(pure), tuple(rv.name for rv in rdoms[0]) if rdoms else ()))
            reductions.append(reduces_in_place(self.name, tuple(wrap(k).node for k in key), v.node))
        return FuncLoops(self.name, tuple(a.name for a in self._args), tuple(updates), reductions=tuple(reductions))

    def _apply_schedule(self, schedule, outputs) -> None:
        """``Schedule.apply``: write ``schedule`` onto the Funcs reachable from ``outputs``."""
        apply_schedule(schedule, outputs)

    def __repr__(self) -> str:
        return f"Func({self.name!r})"

    # -- definitions
    def __getitem__(self, key) -> FuncRef:
        key = key if isinstance(key, tuple) else (key,)
        if self.rank is not None and len(key) != self.rank:
            raise ValueError(f"Func {self.name} has {self.rank} dimension(s) but is indexed with {len(key)}")
        return FuncRef(self, key)

    def __setitem__(self, key, value) -> None:
        key = key if isinstance(key, tuple) else (key,)
        if isinstance(value, _Update):
            self._define_implicit(key, value)
        elif self._init is None:
            self._define_pure(key, value)
        else:
            self._define_update(key, value)

    def _show(self, key, value) -> str:
        return f"{self.name}[{', '.join(str(wrap(k)) for k in key)}] = {value}"

    def _define_pure(self, key, value) -> None:
        if self.shape is not None and len(key) != len(self.shape):
            raise ValueError(f"Func {self.name} is declared with {len(self.shape)} dimension(s) but defined "
                             f"with {len(key)}: {self._show(key, value)}")
        if not all(type(k) is Var for k in key):
            raise ValueError(f"the first (pure) definition of Func {self.name} must have distinct Vars as "
                             f"arguments, got {self._show(key, value)}; to update points, define "
                             f"{self.name} everywhere first")
        if len({k.name for k in key}) != len(key):
            raise ValueError(f"Func {self.name}: a Var appears twice on the left of {self._show(key, value)}")
        v = self._typed_value(key, value, pure=True)
        self._check_deps(key, v, allowed={k.name for k in key}, pure=True)
        self._args, self._init = key, v
        self._dtype = v.dtype

    def _define_update(self, key, value) -> None:
        if self._used_by:
            raise ValueError(f"Func {self.name} cannot get a new definition: it is already used by "
                             f"{', '.join(sorted(self._used_by))}")
        if len(key) != self.rank:
            raise ValueError(f"Func {self.name} has {self.rank} dimension(s) but {self._show(key, value)} "
                             f"uses {len(key)}")
        v = self._typed_value(key, value, pure=False)
        pure = [(k.name, pos) for pos, k in enumerate(key) if type(k) is Var]
        names = [n for n, _ in pure]
        if len(set(names)) != len(names):
            raise ValueError(f"Func {self.name}: a Var appears twice on the left of {self._show(key, value)}")
        lhs_deps = frozenset().union(*(wrap(k).deps for k in key))
        self._check_deps(key, v, allowed=set(names), pure=False, extra=lhs_deps)
        # Halide's rule: each pure Var stays in its own position in every self-reference.
        for ref in E.func_refs(v.node):
            if ref.name != self.name:
                continue
            for n, pos in pure:
                if ref.args[pos] != E.Var(n, T.INDEX):
                    raise ValueError(
                        f"Func {self.name}: in {self._show(key, value)}, the pure Var {n} must appear "
                        f"unchanged at position {pos} of every reference to {self.name} (found "
                        f"{E.FuncRef(self.name, ref.args, ref.dtype)}); use an RDom to iterate instead")
        self._updates.append((key, v, pure))

    def _define_implicit(self, key, upd: _Update) -> None:
        if self.rank is not None and len(key) != self.rank:
            raise ValueError(f"Func {self.name} has {self.rank} dimension(s), indexed with {len(key)}")
        v = wrap(upd.value)
        if upd.value is not None and not isinstance(upd.value, Expr) and self._declared_dtype is None:
            t = T.default_type(upd.value)
        else:
            t = self._declared_dtype or v.dtype
        if upd.op in ("+", "-"):
            init = 0
        elif upd.op in ("*", "/"):
            init = 1
        else:
            raise ValueError(f"Func {self.name}: define it before updating it with {upd.op}")
        if upd.op == "/" and not t.is_float:
            t = T.float64
        pure_args = tuple(Var(f"{self.name}.v{k}") for k in range(len(key)))
        self._dtype = t
        self._define_pure(pure_args, Expr(E.const(init, t)))
        ref = self[key]
        self._define_update(key, ref._aug(upd.op, upd.value))

    def _typed_value(self, key, value, pure: bool) -> Expr:
        if isinstance(value, (Func, Input)):
            raise TypeError(f"{self._show(key, value.name)}: the right side is a {type(value).__name__}; "
                            f"index it, for example {value.name}[...]")
        try:
            if not isinstance(value, Expr) and T.is_weak(value):
                t = self._dtype or T.default_type(value)
                return Expr(E.const(value, t))
            v = wrap(value)
            v.node  # noqa: B018 - raises if it refers to an undefined Func
        except (TypeError, ValueError) as err:
            raise type(err)(f"in the definition of Func {self.name}: {err}") from None
        target = self._dtype if not pure else self._declared_dtype
        if target is not None and v.dtype != target:
            if not T.can_cast(v.dtype, target, "same_kind"):
                raise TypeError(f"Func {self.name} has type {target} but {self._show(key, v)} has type "
                                f"{v.dtype}; use rs.cast({target}, ...) to convert")
            v = Expr(E.Cast(v.node, target), v.deps)
        return v

    def _check_deps(self, key, v: Expr, allowed: set, pure: bool, extra=frozenset()) -> None:
        deps = v.deps | extra
        rdoms = {d for d in deps if isinstance(d, RDom)}
        if pure and rdoms:
            r = next(iter(rdoms))
            raise ValueError(f"the pure definition of Func {self.name} uses RDom {r.name}: "
                             f"{self._show(key, v)}; use an update definition or an inline reduction "
                             "(rs.sum, ...)")
        if len(rdoms) > 1:
            raise ValueError(f"Func {self.name}: one definition may use one RDom, got "
                             f"{', '.join(sorted(r.name for r in rdoms))} in {self._show(key, v)}")
        for d in deps:
            if type(d) is Var and d.name not in allowed:
                raise ValueError(f"Func {self.name}: the Var {d.name} is used in {self._show(key, v)} but "
                                 "is not one of its pure Vars (the Vars standing alone as arguments on "
                                 "the left)")
            if isinstance(d, Func) and d is not self and d._init is None:
                raise ValueError(f"Func {self.name} uses Func {d.name} before {d.name} is defined")
            if d is self and pure:
                raise ValueError(f"the pure definition of Func {self.name} refers to {self.name} itself: "
                                 f"{self._show(key, v)}; a recursive definition needs an RDom update")
        for d in deps:
            if isinstance(d, Func) and d is not self:
                d._used_by.add(self.name)

    # -- lowering and compiling (see ragsched.codegen and ragsched.runtime)
    def compile(self, target: str = "cpu", threads=None, schedule=None, specialize=None, device=None,
                fast_math: bool = False):
        return Pipeline([self]).compile(target=target, threads=threads, schedule=schedule,
                                        specialize=specialize, device=device, fast_math=fast_math)

    def lowered(self, specialize=None) -> str:
        return Pipeline([self]).lowered(specialize=specialize)

    def print_loop_nest(self) -> None:
        Pipeline([self]).print_loop_nest()

    def in_(self, consumer=None, name: str | None = None) -> Func:
        """A copy of this Func that ``consumer`` reads instead (every consumer when None), to be
        scheduled on its own: Halide's ``in()``. It has this Func's Vars."""
        if self._init is None:
            raise ValueError(f"Func {self.name} has no definition to wrap yet")
        return _wrapper(self, self._args, consumer, name)

    def realize(self, shape=None, **inputs):
        """Compile (cached) and run: ``f.realize((H, W), img=...)``."""
        k = self.compile()
        return k(out_shape=shape, **inputs) if shape is not None else k(**inputs)


def _wrapper(wrapped, args, consumer, name) -> Func:
    """The Func that ``wrapped.in_(consumer)`` returns: the same one for the same consumer. Its schedule
    starts with the ``Wrap`` record, which makes lowering route the consumer's reads through it."""
    if consumer is not None and not isinstance(consumer, Func):
        raise TypeError(f"{wrapped.name}.in_(): the consumer must be a Func or None, got {consumer!r}")
    cname = "" if consumer is None else consumer.name
    if consumer is not None and wrapped not in func_deps(consumer):
        raise ValueError(f"{wrapped.name}.in_({cname}): Func {cname} does not read {wrapped.name}")
    for w in wrapped._wrappers.values():
        if w._schedule[0].consumer == cname and (name is None or w.name == name):
            return w
    name = name or (f"{wrapped.name}_in_{cname}" if cname else f"{wrapped.name}_in")
    w = Func(name, dtype=wrapped.dtype)
    w[args] = wrapped[args]
    w._schedule.append(Wrap(name, wrapped.name, cname))
    wrapped._wrappers[name] = w
    return w


# -------------------------------------------------------------------------------------- pipelines
class Pipeline:
    """One or more output Funcs compiled together (``rs.Pipeline([f, g])``). ``by_length``: schedules by
    length class (``rs.SchedulesByLength``) that ``compile()`` uses where it is given no schedule."""

    def __init__(self, outputs, by_length=None):
        outs = [outputs] if isinstance(outputs, Func) else list(outputs)
        if not outs:
            raise ValueError("a Pipeline needs at least one output Func")
        for f in outs:
            if not isinstance(f, Func):
                raise TypeError(f"pipeline outputs must be Funcs, got {f!r}")
            if not f.defined():
                raise ValueError(f"output Func {f.name} has no definition")
        if len({f.name for f in outs}) != len(outs):
            raise ValueError("a Pipeline lists the same output twice")
        self.outputs = tuple(outs)
        if by_length is not None and not isinstance(by_length, SchedulesByLength):
            raise TypeError(f"by_length must be an rs.SchedulesByLength or None, got {type(by_length).__name__}")
        self.by_length = by_length

    def program(self):
        return to_program(self.outputs)

    def schedule(self):
        """The schedule records of every Func of the pipeline (an ``rs.Schedule``)."""
        funcs = reachable_funcs(self.outputs)
        algorithm = [f.name for f in reversed(self.program().functions)]
        wrappers = sorted(set(funcs) - set(algorithm))  # made by in_(); their Wrap records come first
        out = []
        for name in wrappers + algorithm:
            out.extend(funcs[name]._schedule)
        return Schedule(tuple(out))

    def compile(self, target: str = "cpu", threads=None, schedule=None, specialize=None, device=None,
                fast_math: bool = False):
        """A Kernel for ``target`` ("cpu", "cpu:<level>", "cuda"); for "cuda", ``device="emulate"`` runs the
        GPU kernels on the CPU in the GPU emulator (NumPy in, NumPy out). ``fast_math=True`` (CPU only)
        computes float32 exp, log, exp2, log2 and pow by shorter code to looser error bounds
        (docs/language.md)."""
        from .runtime.kernel import compile_pipeline

        return compile_pipeline(self, target=target, threads=threads, schedule=schedule,
                                specialize=specialize, device=device, fast_math=fast_math)

    def lowered(self, specialize=None) -> str:
        """The lowered loop nest, as text (after the schedule)."""
        from .codegen.lower import lower

        return str(lower(self.program(), self.schedule(), specialize=specialize or {}).body)

    def print_loop_nest(self) -> None:
        from .codegen.lower import lower
        from .codegen.printer import loop_nest

        print(loop_nest(lower(self.program(), self.schedule()).body), end="")


# ------------------------------------------------------------------------------------ functions
def _call(name: str, *args) -> Expr:
    nodes, deps = zip(*(_unwrap(a) for a in args), strict=True)
    return Expr(E.call(name, *nodes), frozenset().union(*deps))


def abs_(x): return _call("abs", x)


# ------------------------------------------------------------------------ freezing into a Program
def func_deps(f: Func) -> frozenset:
    """Everything a Func's definitions and shape use: Funcs, Inputs, Params, Sizes, RDoms, Vars."""
    deps = f._init.deps
    for key, v, _ in f._updates:
        deps = deps | v.deps
        for k in key:
            deps = deps | wrap(k).deps
    for s in f.shape or ():
        deps = deps | s.deps
    return deps


def reachable_funcs(outputs) -> dict[str, Func]:
    """The Funcs that ``outputs`` (a Func, a list of Funcs or a Pipeline) depend on, by name."""
    if isinstance(outputs, Pipeline):
        outputs = outputs.outputs
    elif isinstance(outputs, Func):
        outputs = [outputs]
    seen: dict[str, Func] = {}
    stack = list(outputs)
    while stack:
        f = stack.pop()
        if f.name in seen:
            continue
        seen[f.name] = f
        for d in func_deps(f):
            if isinstance(d, Func) and d is not f:
                stack.append(d)
            if isinstance(d, (Func, Input)):
                stack.extend(d._wrappers.values())  # copies made by in_() for the schedule
    return seen


def schedulable(outputs) -> dict:
    """What a schedule may name, by name: the reachable Funcs (with the wrappers ``in_`` made) and the
    Inputs (which ``in_`` can wrap). This is the ``funcs`` a pipeline file's ``hand_schedule`` gets."""
    funcs = reachable_funcs(outputs)
    out: dict = {}
    for f in funcs.values():
        out.update({d.name: d for d in func_deps(f) if isinstance(d, Input)})
    out.update(funcs)
    return out


def apply_schedule(schedule, outputs) -> None:
    """Append the records of ``schedule`` to the Funcs reachable from ``outputs`` (``Schedule.apply``),
    each checked as its method call would be; records a Func holds already are not added again."""
    funcs = schedulable(outputs)
    existing = {name: f._schedule for name, f in funcs.items() if hasattr(f, "_schedule")}
    for d in new_records(existing, schedule):
        if isinstance(d, Wrap):
            if d.wrapped not in funcs:
                raise ValueError(f"the schedule wraps {d.wrapped!r}, which is not in this pipeline")
            if d.consumer and d.consumer not in funcs:
                raise ValueError(f"the schedule wraps {d.wrapped!r} for {d.consumer!r}, which is not in this "
                                 "pipeline")
            funcs[d.func] = funcs[d.wrapped].in_(funcs[d.consumer] if d.consumer else None, name=d.func)
            continue
        if d.func not in funcs:
            raise ValueError(f"the schedule names Func {d.func!r}, which is not in this pipeline "
                             f"(its Funcs: {', '.join(sorted(funcs))})")
        funcs[d.func]._replay(d)


def to_program(outputs) -> Program:
    order: list[Func] = []
    state: dict[int, int] = {}  # 1 = visiting, 2 = done
    everything: set = set()

    def visit(f: Func, path: tuple[str, ...]):
        s = state.get(id(f))
        if s == 2:
            return
        if s == 1:
            raise ValueError(f"Funcs depend on each other in a cycle: {' -> '.join(path + (f.name,))}")
        state[id(f)] = 1
        deps = func_deps(f)
        everything.update(deps)
        for d in sorted((d for d in deps if isinstance(d, Func) and d is not f), key=lambda d: d.name):
            visit(d, path + (f.name,))
        state[id(f)] = 2
        order.append(f)

    for f in outputs:
        visit(f, ())

    while True:  # a ragged Input's shape reads its lengths Input, which has a shape too
        inputs = sorted({d for d in everything if isinstance(d, Input)}, key=lambda d: d.name)
        more = frozenset().union(*(s.deps for i in inputs for s in i.shape)) - everything
        if not more:
            break
        everything.update(more)
    rdoms = {d for d in everything if isinstance(d, RDom)}
    for r in rdoms:
        everything.update(r._bound_deps)
    params = sorted({d for d in everything if isinstance(d, Param)}, key=lambda d: d.name)
    sizes = sorted({d for d in everything if isinstance(d, Size)}, key=lambda d: d.name)

    _check_unique_names(order, inputs, params, sizes, everything)

    functions = []
    for f in order:
        updates = []
        for key, v, pure in f._updates:
            args = tuple(wrap(k).node for k in key)
            deps = v.deps.union(*(wrap(k).deps for k in key))
            rd = [d for d in deps if isinstance(d, RDom)]
            updates.append(Definition(args, v.node, rd[0]._domain() if rd else None, tuple(pure)))
        functions.append(Function(
            name=f.name, dtype=f.dtype, args=tuple(a.name for a in f._args), init=f._init.node,
            updates=tuple(updates), shape=None if f.shape is None else tuple(s.node for s in f.shape)))
    return Program(
        outputs=tuple(f.name for f in outputs), functions=tuple(functions),
        inputs=tuple(i._spec() for i in inputs),
        params=tuple(ParamSpec(p.name, p.dtype) for p in params),
        sizes=tuple(s.name for s in sizes))


def _check_unique_names(funcs, inputs, params, sizes, everything) -> None:
    seen: dict[str, object] = {}

    def claim(name: str, obj, what: str):
        other = seen.get(name)
        if other is not None and other is not obj:
            raise ValueError(f"two different objects of this pipeline are named {name!r} "
                             f"({type(other).__name__} and {what}); give them distinct names")
        seen[name] = obj

    for f in funcs:
        claim(f.name, f, "Func")
    for i in inputs:
        claim(i.name, i, "Input")
    for p in params:
        claim(p.name, p, "Param")
    for s in sizes:
        claim(s.name, s, "Size")
    symbols = {d.name: d for d in everything if type(d) in (Var, RVar)}
    for name, d in symbols.items():
        other = seen.get(name)
        if other is not None:
            raise ValueError(f"the {type(d).__name__} {name!r} has the same name as a "
                             f"{type(other).__name__}; give them distinct names")

