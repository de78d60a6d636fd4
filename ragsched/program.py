"""The frozen algorithm: what ``ragsched.lang`` builds and every later layer reads.

A ``Program`` is immutable and hashable: Functions (each a pure definition plus ordered updates),
Inputs, Params and Sizes, with Funcs in topological order (producers first). Lowering and the NumPy
reference both start from it, and neither can change it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

from .algebra import expr as E
from .algebra.expr import Expr
from .algebra.types import DType

#: A ragged extent speaks of the indices of the leading dimensions of its shape as Vars ``#0``, ``#1``...
_DIM = "#"


def dim_index(k: int) -> str:
    """The name that stands for the index of dimension ``k`` in a ragged extent."""
    return f"{_DIM}{k}"


@lru_cache(maxsize=4096)
def dims_used(e: Expr) -> frozenset[int]:
    """The leading dimensions whose index a shape extent depends on (none: a plain extent). Remembered
    (extents hash once): a ragged kernel's call asks it of every dimension of every argument, and walking
    the extents took a third of the Python time of a call (attention on five short entries)."""
    from .algebra.expr import free_vars

    return frozenset(int(v[len(_DIM):]) for v in free_vars(e) if v.startswith(_DIM))


def is_ragged(e: Expr) -> bool:
    return bool(dims_used(e))


@dataclass(frozen=True)
class RDomain:
    """A reduction domain: RVars ``vars`` (outermost first) over ``[mins[k], mins[k] + extents[k])``.

    Bounds may use the pure Vars of the definition (ragged and triangular reductions) and Sizes.
    ``predicate`` (RDom.where) further restricts the points visited.
    """

    name: str
    vars: tuple[str, ...]
    mins: tuple[Expr, ...]
    extents: tuple[Expr, ...]
    predicate: Expr | None = None


@dataclass(frozen=True)
class Definition:
    """One update: ``func[args] = value`` for every point of ``rdom`` (and every value of the pure vars).

    ``pure_vars`` are the update's data-parallel Vars: each one stands bare at a fixed argument
    position, here and in every reference of the Func to itself in ``value``.
    """

    args: tuple[Expr, ...]
    value: Expr
    rdom: RDomain | None
    pure_vars: tuple[tuple[str, int], ...]  # (var name, argument position)


#: the updates ``f[x] = op(f[x], e)`` whose RDom may be vectorized (``reduces_in_place``), each op with its
#: name in ``E.VectorReduce``
REDUCING_OPS = {E.Add: "add", E.Mul: "mul", E.Min: "min", E.Max: "max", E.And: "and", E.Or: "or"}


def reduces_in_place(func: str, args: tuple[Expr, ...], value: Expr) -> bool:
    """Whether the update ``func[args] = value`` is ``op(func[args], e)`` with an associative and
    commutative ``op`` and ``e`` not reading ``func``: its RDom's points may then be combined in any
    order (a float sum reassociated), so its loops over the RDom may be vectorized."""
    if type(value) not in REDUCING_OPS:
        return False
    for own, other in ((value.a, value.b), (value.b, value.a)):
        if isinstance(own, E.FuncRef) and own.name == func and own.args == tuple(args):
            return all(r.name != func for r in E.func_refs(other))
    return False


@dataclass(frozen=True)
class Function:
    """A Func: ``name[args] = init`` everywhere, then each update in order."""

    name: str
    dtype: DType
    args: tuple[str, ...]
    init: Expr
    updates: tuple[Definition, ...] = ()
    shape: tuple[Expr, ...] | None = None  # declared extents (the region starts at 0)

    @property
    def rank(self) -> int:
        return len(self.args)

    def reads(self, name: str) -> bool:
        """Whether any of its definitions reads Func or Input ``name`` (in a value or an index)."""
        exprs = [self.init] + [e for u in self.updates for e in (u.value, *u.args)]
        return any(name in E.func_refs_by_name(e) for e in exprs)


@dataclass(frozen=True)
class InputSpec:
    """An input array: its dtype and its shape, as expressions of Sizes."""

    name: str
    dtype: DType
    shape: tuple[Expr, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class ParamSpec:
    name: str
    dtype: DType


@dataclass(frozen=True)
class Program:
    """A whole pipeline: its outputs and everything they depend on."""

    outputs: tuple[str, ...]
    functions: tuple[Function, ...]  # producers before consumers
    inputs: tuple[InputSpec, ...]
    params: tuple[ParamSpec, ...]
    sizes: tuple[str, ...]

    @cached_property
    def _by_name(self) -> dict:
        d = {f.name: f for f in self.functions}
        d.update({i.name: i for i in self.inputs})
        return d

    def func(self, name: str) -> Function:
        return self._by_name[name]

    def is_input(self, name: str) -> bool:
        return isinstance(self._by_name.get(name), InputSpec)

    def lookup(self, name: str) -> Function | InputSpec:
        return self._by_name[name]


def map_program(program: Program, fn) -> Program:
    """``program`` with ``fn`` applied to every expression of every Func (definitions, RDoms, shapes): the
    one traversal that program-to-program passes share."""
    def sub_def(d: Definition) -> Definition:
        rd = d.rdom
        if rd is not None:
            rd = RDomain(rd.name, rd.vars, tuple(map(fn, rd.mins)), tuple(map(fn, rd.extents)),
                         None if rd.predicate is None else fn(rd.predicate))
        return Definition(tuple(map(fn, d.args)), fn(d.value), rd, d.pure_vars)

    funcs = tuple(Function(f.name, f.dtype, f.args, fn(f.init), tuple(map(sub_def, f.updates)),
                           None if f.shape is None else tuple(map(fn, f.shape))) for f in program.functions)
    return Program(program.outputs, funcs, program.inputs, program.params, program.sizes)
