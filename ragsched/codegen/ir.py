"""The loop IR that lowering produces and every backend consumes.

Statements are immutable like expressions (``ragsched.algebra.expr``); loads and stores address a
buffer by a flat element index. A buffer ``f`` is described by the symbols ``f.min.k``,
``f.extent.k`` and ``f.stride.k``, bound by ``Allocate`` for internal buffers and passed as kernel
arguments for inputs and outputs, so one kernel serves every size.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, fields, replace

from ..algebra.expr import Expr, Let, Load, Var, rebuilt_when_unpickled, walk
from ..algebra.types import DType
from ..schedule.loops import ForKind  # noqa: F401 - loop kinds belong to the schedule layer


class Stmt:
    __slots__ = ()

    def __str__(self) -> str:
        from .printer import stmt_to_str

        return stmt_to_str(self)


def _node(cls):
    out = dataclass(frozen=True, slots=True)(cls)
    out.__reduce__ = rebuilt_when_unpickled(out)
    return out


@_node
class For(Stmt):
    """``for var in [min, min + extent)``; the loop counter is an int64 Var named ``var``. ``owns`` names
    the buffer of the Func whose update this loop runs over a pure Var: the language keeps each pure Var
    in its own position in every self-reference, so the iterations touch disjoint elements of it (a scan
    down the rows is independent across columns), which the vectorizer need not prove from indices."""

    var: str
    min: Expr
    extent: Expr
    kind: ForKind
    body: Stmt
    owns: str = ""


@_node
class Block(Stmt):
    stmts: tuple[Stmt, ...]


@_node
class Store(Stmt):
    buffer: str
    index: Expr
    value: Expr
    point: bool = False  # one point of a pure definition: no other store of its produce writes there


@_node
class Allocate(Stmt):
    """Storage for ``buffer`` (``size`` elements of ``dtype``) that lives while ``body`` runs."""

    buffer: str
    dtype: DType
    size: Expr
    body: Stmt


@_node
class LetStmt(Stmt):
    name: str
    value: Expr
    body: Stmt


@_node
class IfThenElse(Stmt):
    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None


@_node
class Provide(Stmt):
    """``func[args] = value`` before storage is flattened (args are the Func's coordinates)."""

    func: str
    args: tuple[Expr, ...]
    value: Expr
    point: bool = False  # the pure definition: each point is written once


@_node
class Realize(Stmt):
    """Storage for Func ``func`` over ``bounds`` ((min, extent) per dimension) while ``body`` runs;
    ``fold`` gives, per dimension, a storage fold (0 for none: ``sliding_window``);
    ``order`` the dimensions outermost first in memory (empty: natural order, the last dimension
    contiguous); ``layout`` an ``F2Layout`` (offset -> a tile of some of the Func's Vars) that orders
    the elements inside each tile, the tiles then stored in ``order``."""

    func: str
    dtype: DType
    bounds: tuple[tuple[Expr, Expr], ...]
    body: Stmt
    fold: tuple[int, ...] = ()
    order: tuple[int, ...] = ()
    layout: object = None


@_node
class Produce(Stmt):
    """Marks the statements that compute Func ``name`` (for listings and later passes)."""

    name: str
    body: Stmt


@_node
class Barrier(Stmt):
    """``__syncthreads()``: the threads of a GPU block wait here until all of them arrive, and see each
    other's writes after it (``gpu/barriers`` places them)."""


@_node
class Launch(Stmt):
    """Host code runs device kernel ``kernel`` on ``grid`` blocks (x, y, z extents, host expressions)."""

    kernel: str
    grid: tuple[Expr, ...]


def block(*stmts: Stmt) -> Stmt:
    """A Block of the given statements, flattening nested Blocks; a single statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Block):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Block(tuple(flat))


@dataclass(frozen=True)
class Argument:
    """One slot of a kernel's argument array: a buffer pointer or a scalar (size, extent, stride, Param)."""

    name: str
    dtype: DType | None  # element type for buffers, value type for scalars
    is_buffer: bool


@dataclass(frozen=True)
class Requirement:
    """Generated code reads ``name`` (an Input, or a Func with a declared shape) along ``dim`` from
    ``lo`` to ``hi`` (inclusive), which must lie in ``[0, extent)``; checked before every call."""

    name: str
    dim: int
    lo: Expr
    hi: Expr
    extent: Expr
    kind: str  # "input": reads of an Input; "shape": reads of a Func's declared shape or an output;
    # "bound": reads of a Func with bound(); "output": what an output's schedule writes; "output bound":
    # the caller's array along an output's bound() dimension, relative to the bound's min


@dataclass(frozen=True)
class LoweredKernel:
    """What lowering hands to a backend and to the runtime. ``lets`` are the symbols the
    requirements use besides the call's own (the regions of Funcs computed at root), in order."""

    name: str
    body: Stmt
    arguments: tuple[Argument, ...]
    requirements: tuple[Requirement, ...]
    outputs: tuple[str, ...]
    lets: tuple[tuple[str, Expr], ...] = ()
    output_pads: tuple[tuple[str, int], ...] = ()  # ragged outputs stored padded: (name, multiple)
    memory: tuple[tuple[str, str], ...] = ()  # Funcs stored outside global memory (store_in): (name, memory)

    def __reduce__(self):
        """Pickled with the body apart, as bytes unpickled on first use: a compile whose lowered kernel and
        machine code both come from the disk cache needs the arguments and requirements only, and
        rebuilding the body's nodes was most of its time (60 ms of 75 for a five-stage pipeline)."""
        rest = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "body"}
        return _kernel_with_pickled_body, (rest, pickle.dumps(self.body, protocol=pickle.HIGHEST_PROTOCOL))

    def __getattr__(self, name: str):  # only for attributes not set: the body of an unpickled kernel
        pickled = self.__dict__.get("_pickled_body")
        if name != "body" or pickled is None:
            raise AttributeError(name)
        body = pickle.loads(pickled)
        object.__setattr__(self, "body", body)
        self.__dict__.pop("_pickled_body", None)
        return body


def _kernel_with_pickled_body(rest: dict, body: bytes) -> LoweredKernel:
    kernel = object.__new__(LoweredKernel)
    kernel.__dict__.update(rest, _pickled_body=body)
    return kernel


# --------------------------------------------------------------------------------- generic traversal
def map_stmt(s: Stmt, on_expr, on_stmt=None) -> Stmt:
    """Rebuild ``s`` with every expression replaced by ``on_expr(e)``; ``on_stmt`` (if given) then sees
    each rebuilt statement, bottom-up, and returns its replacement."""
    if isinstance(s, Block):
        out: Stmt = block(*(map_stmt(t, on_expr, on_stmt) for t in s.stmts))
    elif isinstance(s, For):
        out = For(s.var, on_expr(s.min), on_expr(s.extent), s.kind, map_stmt(s.body, on_expr, on_stmt), s.owns)
    elif isinstance(s, Store):
        out = Store(s.buffer, on_expr(s.index), on_expr(s.value), s.point)
    elif isinstance(s, Allocate):
        out = Allocate(s.buffer, s.dtype, on_expr(s.size), map_stmt(s.body, on_expr, on_stmt))
    elif isinstance(s, LetStmt):
        out = LetStmt(s.name, on_expr(s.value), map_stmt(s.body, on_expr, on_stmt))
    elif isinstance(s, IfThenElse):
        out = IfThenElse(on_expr(s.cond), map_stmt(s.then, on_expr, on_stmt),
                         None if s.otherwise is None else map_stmt(s.otherwise, on_expr, on_stmt))
    elif isinstance(s, Produce):
        out = Produce(s.name, map_stmt(s.body, on_expr, on_stmt))
    elif isinstance(s, Provide):
        out = Provide(s.func, tuple(on_expr(a) for a in s.args), on_expr(s.value), s.point)
    elif isinstance(s, Realize):
        out = Realize(s.func, s.dtype, tuple((on_expr(m), on_expr(e)) for m, e in s.bounds),
                      map_stmt(s.body, on_expr, on_stmt), s.fold, s.order, s.layout)
    elif isinstance(s, Barrier):
        out = s
    elif isinstance(s, Launch):
        out = Launch(s.kernel, tuple(on_expr(g) for g in s.grid))
    else:
        raise TypeError(f"unknown statement {s!r}")
    return on_stmt(out) if on_stmt is not None else out


def map_unpredicated_blocks(s: Stmt, on_block) -> Stmt:
    """``s`` with the statements of each Block replaced by ``on_block(statements)`` (inner Blocks first),
    except inside an ``IfThenElse`` whose condition differs between lanes (its loads and stores are
    masked: a pass that regroups them there would drop the mask)."""
    if isinstance(s, Block):
        return on_block(tuple(map_unpredicated_blocks(t, on_block) for t in s.stmts))
    if isinstance(s, (For, LetStmt, Allocate, Produce)):
        return replace(s, body=map_unpredicated_blocks(s.body, on_block))
    if isinstance(s, IfThenElse) and s.cond.dtype.lanes == 1:
        return IfThenElse(s.cond, map_unpredicated_blocks(s.then, on_block),
                          None if s.otherwise is None else map_unpredicated_blocks(s.otherwise, on_block))
    return s


def children(s: Stmt) -> tuple[Stmt, ...]:
    """The statements directly inside ``s``, in order."""
    if isinstance(s, Block):
        return s.stmts
    if isinstance(s, IfThenElse):
        return (s.then,) if s.otherwise is None else (s.then, s.otherwise)
    body = getattr(s, "body", None)
    return () if body is None else (body,)


def walk_stmts(s: Stmt):
    """Every statement of ``s``, pre-order (iterative: nests of lets run deep)."""
    stack = [s]
    while stack:
        t = stack.pop()
        yield t  # (the cases inline, not children(): this walk is on lowering's hot path)
        if isinstance(t, Block):
            stack.extend(reversed(t.stmts))
        elif isinstance(t, (For, Allocate, LetStmt, Produce, Realize)):
            stack.append(t.body)
        elif isinstance(t, IfThenElse):
            if t.otherwise is not None:
                stack.append(t.otherwise)
            stack.append(t.then)


def exprs_of(s: Stmt) -> tuple[Expr, ...]:
    """The expressions held directly by statement ``s`` (not by its sub-statements)."""
    if isinstance(s, For):
        return (s.min, s.extent)
    if isinstance(s, Store):
        return (s.index, s.value)
    if isinstance(s, Allocate):
        return (s.size,)
    if isinstance(s, LetStmt):
        return (s.value,)
    if isinstance(s, IfThenElse):
        return (s.cond,)
    if isinstance(s, Provide):
        return (*s.args, s.value)
    if isinstance(s, Realize):
        return tuple(x for b in s.bounds for x in b)
    if isinstance(s, Launch):
        return s.grid
    return ()


def free_symbols(s: Stmt) -> tuple[dict, set[str]]:
    """The scalars ``s`` uses without binding them (name -> type; loop variables and lets are bound), and
    the buffers it loads from or stores to."""
    bound, used, buffers = set(), {}, set()
    for t in walk_stmts(s):
        if isinstance(t, For):
            bound.add(t.var)
        elif isinstance(t, LetStmt):
            bound.add(t.name)
        elif isinstance(t, Store):
            buffers.add(t.buffer)
        for e in exprs_of(t):
            for n in walk(e):
                if isinstance(n, Var):
                    used.setdefault(n.name, n.dtype)
                elif isinstance(n, Let):
                    bound.add(n.name)
                elif isinstance(n, Load):
                    buffers.add(n.buffer)
    return {n: t for n, t in used.items() if n not in bound}, buffers
