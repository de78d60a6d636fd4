"""Lowering: a Program (and, later, its schedule) to one loop nest.

The default schedule computes every Func into its own buffer over the region its consumers need
(``regions.infer_regions``), producers first, with loops in natural order (first index outermost);
updates run in order, pure Vars outside RVars. Index arithmetic is carried out in 64 bits and exactly
(``widen_index``), which is what the pre-call bounds checks assume.
"""

from __future__ import annotations

from ..algebra import expr as E
from ..algebra import types as T
from ..algebra.bounds import Interval
from ..algebra.simplify import simplify
from ..program import Definition, Function, InputSpec, Program
from . import ir
from .regions import Box, extent_var, infer_regions, output_box, within

I64 = T.ADDRESS


def _i64(v: int) -> E.Const:
    return E.Const(v, I64)


# ------------------------------------------------------------------------------- specialization
def specialize_program(program: Program, values: dict[str, int]) -> Program:
    """Bake the given Sizes in as constants (``compile(specialize=...)``)."""
    unknown = set(values) - set(program.sizes)
    if unknown:
        raise ValueError(f"specialize names {', '.join(sorted(unknown))}, which are not Sizes of this "
                         f"pipeline (its Sizes: {', '.join(program.sizes) or 'none'})")
    if not values:
        return program
    mapping = {}
    for k, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"specialize: Size {k} must be a non-negative int, got {v!r}")
        mapping[k] = E.const(v, T.INDEX)

    def sub(e):
        return None if e is None else E.substitute(e, mapping)

    def sub_def(d: Definition) -> Definition:
        rd = d.rdom
        if rd is not None:
            rd = type(rd)(rd.name, rd.vars, tuple(map(sub, rd.mins)), tuple(map(sub, rd.extents)),
                          sub(rd.predicate))
        return Definition(tuple(map(sub, d.args)), sub(d.value), rd, d.pure_vars)

    funcs = tuple(Function(f.name, f.dtype, f.args, sub(f.init), tuple(map(sub_def, f.updates)),
                           None if f.shape is None else tuple(map(sub, f.shape))) for f in program.functions)
    inputs = tuple(InputSpec(i.name, i.dtype, tuple(map(sub, i.shape))) for i in program.inputs)
    return Program(program.outputs, funcs, inputs, program.params, program.sizes)


# ------------------------------------------------------------------------------- index arithmetic
_WIDEN = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.Mod, E.Min, E.Max)


def widen_index(e: E.Expr) -> E.Expr:
    """``e`` (an integer index expression) computed exactly in int64."""
    if e.dtype == I64 and not isinstance(e, (*_WIDEN, E.Neg, E.Select)):
        return e
    if isinstance(e, E.Const):
        return E.Const(int(e.value), I64)
    if isinstance(e, E.Cast) and isinstance(e.value, E.Var) and e.value.dtype == I64:
        return e.value  # a loop counter seen as an int32 Var: the cast is the identity on its range
    if isinstance(e, _WIDEN) and e.dtype.is_signed:
        return type(e)(widen_index(e.a), widen_index(e.b))
    if isinstance(e, E.Neg) and e.dtype.is_signed:
        return E.Neg(widen_index(e.a))
    if isinstance(e, E.Select):
        return E.Select(e.cond, widen_index(e.t), widen_index(e.f))
    return E.Cast(e, I64)


# ------------------------------------------------------------------------------------- buffers
class Buffers:
    """Where each Func and Input lives, and how to address it."""

    def __init__(self, program: Program, internal: dict[str, str]):
        self.program = program
        self.internal = internal  # func name -> internal buffer name (outputs computed in place: absent)

    def buffer_of(self, name: str) -> str:
        return self.internal.get(name, name)

    def is_internal(self, buf: str) -> bool:
        return buf in self.internal.values()

    def min_of(self, buf: str, k: int) -> E.Expr:
        return E.Var(f"{buf}.min.{k}", I64) if self.is_internal(buf) else _i64(0)

    def stride_of(self, buf: str, k: int, rank: int) -> E.Expr:
        return _i64(1) if k == rank - 1 else E.Var(f"{buf}.stride.{k}", I64)

    def extent_of(self, buf: str, k: int) -> E.Expr:
        return E.Var(f"{buf}.extent.{k}", I64)

    def flat_index(self, name: str, args) -> E.Expr:
        buf, rank = self.buffer_of(name), len(args)
        idx: E.Expr = _i64(0)
        for k, a in enumerate(args):
            term = E.Sub(widen_index(a), self.min_of(buf, k))
            idx = E.Add(idx, E.Mul(term, self.stride_of(buf, k, rank)))
        return idx


def lower_expr(e: E.Expr, loop_vars: dict[str, str], bufs: Buffers) -> E.Expr:
    """Replace algorithm Vars by loop counters and FuncRefs by Loads from buffers."""

    def fn(n: E.Expr) -> E.Expr:
        if isinstance(n, E.Var) and n.name in loop_vars:
            return E.Cast(E.Var(loop_vars[n.name], I64), n.dtype)
        if isinstance(n, E.FuncRef):
            return E.Load(bufs.buffer_of(n.name), bufs.flat_index(n.name, n.args), n.dtype)
        return n

    return E.transform(e, fn)


# ------------------------------------------------------------------------------------ producers
def _loop_name(f: Function, stage: int, var: str) -> str:
    return f"{f.name}.s{stage}.{var}"


def _store(f: Function, bufs: Buffers, args, value, loop_vars) -> ir.Stmt:
    lowered_args = [lower_expr(a, loop_vars, bufs) for a in args]
    return ir.Store(bufs.buffer_of(f.name), bufs.flat_index(f.name, lowered_args),
                    lower_expr(value, loop_vars, bufs))


def _pure_loops(f: Function, stage: int, dims, bufs: Buffers, body: ir.Stmt) -> ir.Stmt:
    """Loops over the buffer's region along ``dims`` ((var, position) pairs, outermost first)."""
    buf = bufs.buffer_of(f.name)
    for var, pos in reversed(dims):
        body = ir.For(_loop_name(f, stage, var), bufs.min_of(buf, pos), bufs.extent_of(buf, pos),
                      ir.ForKind.SERIAL, body)
    return body


def produce(f: Function, bufs: Buffers) -> ir.Stmt:
    """The loop nests computing ``f``: its pure definition, then each update in order."""
    loop_vars = {a: _loop_name(f, 0, a) for a in f.args}
    init_args = [E.Var(a, T.INDEX) for a in f.args]
    stages = [_pure_loops(f, 0, [(a, k) for k, a in enumerate(f.args)], bufs,
                          _store(f, bufs, init_args, f.init, loop_vars))]
    for s, d in enumerate(f.updates, start=1):
        loop_vars = {v: _loop_name(f, s, v) for v, _ in d.pure_vars}
        if d.rdom is not None:
            loop_vars.update({v: _loop_name(f, s, v) for v in d.rdom.vars})
        body: ir.Stmt = _store(f, bufs, d.args, d.value, loop_vars)
        if d.rdom is not None:
            if d.rdom.predicate is not None:
                body = ir.IfThenElse(lower_expr(d.rdom.predicate, loop_vars, bufs), body)
            for v, lo, ext in reversed(list(zip(d.rdom.vars, d.rdom.mins, d.rdom.extents, strict=True))):
                body = ir.For(loop_vars[v], widen_index(lower_expr(lo, loop_vars, bufs)),
                              widen_index(lower_expr(ext, loop_vars, bufs)), ir.ForKind.SERIAL, body)
        stages.append(_pure_loops(f, s, list(d.pure_vars), bufs, body))
    return ir.Produce(f.name, ir.block(*stages))


def _copy_out(f: Function, bufs: Buffers) -> ir.Stmt:
    """Copy the output region of ``f`` from its internal buffer into the output buffer."""
    names = [_loop_name(f, len(f.updates) + 1, a) for a in f.args]
    src_args = [E.Var(n, I64) for n in names]
    src = E.Load(bufs.buffer_of(f.name), bufs.flat_index(f.name, src_args), f.dtype)
    dst_idx: E.Expr = _i64(0)
    for k, n in enumerate(names):
        dst_idx = E.Add(dst_idx, E.Mul(E.Var(n, I64), bufs.stride_of(f.name, k, f.rank)))
    body: ir.Stmt = ir.Store(f.name, dst_idx, src)
    for k in reversed(range(f.rank)):
        body = ir.For(names[k], _i64(0), bufs.extent_of(f.name, k), ir.ForKind.SERIAL, body)
    return ir.Produce(f"{f.name} (copy out)", body)


def _allocate(buf: str, f: Function, box: Box, body: ir.Stmt, bufs: Buffers) -> ir.Stmt:
    """Storage for an internal buffer over ``box``, with its min/extent/stride symbols bound."""
    lets: list[tuple[str, E.Expr]] = []
    for k in range(f.rank):
        lo, hi = widen_index(box[k].lo), widen_index(box[k].hi)
        lets.append((f"{buf}.min.{k}", lo))
        lets.append((f"{buf}.extent.{k}", E.Max(E.Add(E.Sub(hi, lo), _i64(1)), _i64(0))))
    for k in reversed(range(f.rank - 1)):  # row-major, the last dimension contiguous
        lets.append((f"{buf}.stride.{k}", E.Mul(bufs.stride_of(buf, k + 1, f.rank), bufs.extent_of(buf, k + 1))))
    size: E.Expr = _i64(1)
    for k in range(f.rank):
        size = E.Mul(size, bufs.extent_of(buf, k))
    stmt: ir.Stmt = ir.Allocate(buf, f.dtype, size, body)
    for name, value in reversed(lets):
        stmt = ir.LetStmt(name, value, stmt)
    return stmt


# ---------------------------------------------------------------------------------------- lower
def lower(program: Program, specialize: dict[str, int] | None = None, name: str | None = None) -> ir.LoweredKernel:
    prog = specialize_program(program, dict(specialize or {}))
    regions = infer_regions(prog)
    internal: dict[str, str] = {}
    copies = []
    for fname, box in regions.funcs.items():
        f = prog.func(fname)
        if fname not in prog.outputs:
            internal[fname] = fname
        elif not within(box, output_box(f), regions.facts):
            internal[fname] = f"{fname}.realized"
            copies.append(f)
    bufs = Buffers(prog, internal)

    body: ir.Stmt = ir.block(*(_copy_out(f, bufs) for f in copies)) if copies else ir.Block(())
    for f in reversed(prog.functions):
        if f.name not in regions.funcs:
            continue
        body = ir.block(produce(f, bufs), body)
        if f.name in internal:
            body = _allocate(internal[f.name], f, regions.funcs[f.name], body, bufs)

    facts = {**regions.facts, **{n: Interval(_i64(0), None) for n in _extent_symbols(body)}}
    body = ir.map_stmt(body, lambda e: simplify(e, facts))
    requirements = tuple(
        ir.Requirement(name, k, iv.lo, iv.hi, extents[k], prog.is_input(name))
        for name, (box, extents) in regions.reads.items() for k, iv in enumerate(box))
    return ir.LoweredKernel(name or "_".join(prog.outputs), body, kernel_arguments(prog, body), requirements,
                            prog.outputs)


def _extent_symbols(body: ir.Stmt) -> set[str]:
    out = set()
    for s in ir.walk_stmts(body):
        for e in ir.exprs_of(s):
            out |= {v for v in E.free_vars(e) if ".extent." in v or ".stride." in v}
        if isinstance(s, ir.LetStmt) and (".extent." in s.name or ".stride." in s.name):
            out.add(s.name)
    return out


def kernel_arguments(program: Program, body: ir.Stmt) -> tuple[ir.Argument, ...]:
    """The free symbols and external buffers of ``body``, in a stable order."""
    bound, free, used_buffers = set(), {}, set()
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.For):
            bound.add(s.var)
        elif isinstance(s, ir.LetStmt):
            bound.add(s.name)
        elif isinstance(s, ir.Allocate):
            bound.add(s.buffer)
        if isinstance(s, ir.Store):
            used_buffers.add(s.buffer)
        for e in ir.exprs_of(s):
            for n in E.walk(e):
                if isinstance(n, E.Var):
                    free.setdefault(n.name, n.dtype)
                elif isinstance(n, E.Load):
                    used_buffers.add(n.buffer)
    args = []
    for i in program.inputs:
        if i.name in used_buffers:
            args.append(ir.Argument(i.name, i.dtype, True))
    for o in program.outputs:
        args.append(ir.Argument(o, program.func(o).dtype, True))
    scalars = sorted((n, t) for n, t in free.items() if n not in bound)
    args += [ir.Argument(n, t, False) for n, t in scalars]
    return tuple(args)


__all__ = ["lower", "widen_index", "specialize_program", "extent_var"]
