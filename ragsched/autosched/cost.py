"""The work of a pipeline as expressions of its Sizes and of the moments of its ragged lengths (sympy),
built once per pipeline and evaluated per input.

Each Func's points are the count of its region (its declared shape, or what its consumers read of it),
each update's the count of its pure region times its reduction domain; the work is points times the
arithmetic of the definition (``space._ops``: what inlining would repeat). A ragged region is a nested
sum: a triangular extent (``j <= i``) is summed symbolically by sympy, and a sum over the batch of a
polynomial in the entry's length ``lens[b]`` becomes a sum of the moments ``sum(lens**k)``, which an input
gives at once. So ``8 * sum(lens**2)`` is attention's score count, and evaluating a pipeline's work for
another batch costs a few multiplications, not an analysis. Regions the model cannot express (a read at
data-dependent or scaled indices) are left unknown (None) rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..algebra import expr as E
from ..algebra import types as T
from ..algebra.bounds import Interval, bounds_of
from ..algebra.simplify import simplify
from ..program import Program, dim_index, dims_used
from .space import _ops


@dataclass(frozen=True)
class StageCost:
    """One definition of a Func: how many points it computes and the operations at each."""

    func: str
    stage: int  # 0: the pure definition; k: update k - 1
    points: sp.Expr | None  # None: the region is not expressible
    ops: int

    @property
    def work(self) -> sp.Expr | None:
        return None if self.points is None else sp.expand(self.points * self.ops)


@dataclass(frozen=True)
class PipelineCost:
    """Every stage's cost, and the symbols they use: Sizes, and ``sum(NAME**k)`` per ragged length
    input (``sum(NAME**0)`` is the batch)."""

    stages: tuple[StageCost, ...]
    sizes: tuple[str, ...]
    moments: tuple[tuple[str, int], ...]  # (lengths input, power)

    @property
    def total_work(self) -> sp.Expr | None:
        works = [s.work for s in self.stages]
        return None if any(w is None for w in works) else sp.expand(sum(works))

    def values(self, inputs: dict) -> dict:
        """The symbols' values for these inputs (a dict as a Kernel takes them)."""
        out = {}
        for name, k in self.moments:
            lens = np.asarray(inputs[name], dtype=np.float64)
            out[_moment(name, k)] = float(np.sum(lens ** k))
        return out

    def evaluate(self, expr: sp.Expr | None, inputs: dict, sizes: dict[str, int]) -> float | None:
        """``expr`` (a stage's points or work, the total) for these inputs and Sizes (``sizes_from``)."""
        if expr is None:
            return None
        env = {sp.Symbol(n, integer=True, positive=True): v for n, v in sizes.items()}
        env.update(self.values(inputs))
        return float(expr.subs(env))


def sizes_from(program: Program, inputs: dict) -> dict[str, int]:
    """The Sizes the inputs' shapes bind (dense dimensions whose declared extent is a Size)."""
    out = {}
    for spec in program.inputs:
        shape = getattr(inputs.get(spec.name), "shape", None)
        if isinstance(shape, tuple) and len(shape) == len(spec.shape):
            for s, n in zip(spec.shape, shape, strict=True):
                if isinstance(s, E.Var) and s.name in program.sizes:
                    out[s.name] = int(n)
    return out


def _moment(name: str, k: int) -> sp.Symbol:
    return sp.Symbol(f"sum({name}**{k})", positive=True)


_INDEX = T.int32
_MOST_NODES = 40  # nodes of one extent beyond which a region is left unknown


class _Unknown(Exception):
    """An expression the model does not express (data, scaled or clamped indices)."""


def pipeline_cost(program: Program) -> PipelineCost:
    """Every stage's symbolic cost; regions of shapeless Funcs from their consumers' reads, consumers first."""
    regions: dict[str, list[E.Expr] | None] = {}
    for f in reversed(program.functions):
        regions[f.name] = list(f.shape) if f.shape is not None else _read_extents(f, program, regions)
    moments: set[tuple[str, int]] = set()
    stages = []
    for f in program.functions:
        region = regions[f.name]
        stages.append(StageCost(f.name, 0, _count(region, [], {}, moments), _ops(f.init)))
        for k, u in enumerate(f.updates):
            points = None
            if region is not None:
                pure = sorted(u.pure_vars, key=lambda p: p[1])
                as_dims = {v: E.Var(dim_index(d), _INDEX) for v, d in pure}  # the RDom's bounds use pure Vars
                rdom = [] if u.rdom is None else [E.substitute(x, as_dims) for x in u.rdom.extents]
                points = _count([region[d] for _, d in pure], rdom, {d: i for i, (_, d) in enumerate(pure)},
                                moments)
            stages.append(StageCost(f.name, k + 1, points, _ops(u.value)))
    return PipelineCost(tuple(stages), tuple(program.sizes), tuple(sorted(moments)))


def _read_extents(f, program: Program, regions: dict) -> list[E.Expr] | None:
    """Per dimension of a shapeless Func, the extent its consumers read: where every read indexes the
    dimension with one Var of the consumer plus constants, the consumer's extent of that Var's dimension
    widened by the constants' spread; else the span of interval bounds over the consumer's (dense)
    region; None when neither applies."""
    sites = []
    for c in program.functions:
        if c.name == f.name:
            continue
        region = regions.get(c.name)
        defs = [(c.init, None)] + [(e, u.rdom) for u in c.updates for e in (u.value, *u.args)]
        for e, rdom in defs:
            for n in E.walk(e):
                if isinstance(n, E.FuncRef) and n.name == f.name:
                    if region is None:
                        return None
                    sites.append((c, region, n.args, rdom))
    if not sites:
        return None
    out = []
    for d in range(f.rank):
        ragged, spans = [], []  # (extent, offset) of reads along a ragged extent; intervals of the others
        for c, region, args, rdom in sites:
            a = args[d]
            v, off = _var_plus_const(a)
            ext = None
            if v is not None and v in c.args:
                ext = region[c.args.index(v)]
            elif v is not None and rdom is not None and v in rdom.vars and off == 0:
                k = rdom.vars.index(v)  # a reduction over [0, lens[b]): its extent, in the dims' names
                if isinstance(rdom.mins[k], E.Const) and rdom.mins[k].value == 0 and E.reads_data(rdom.extents[k]):
                    ext = E.substitute(rdom.extents[k], {p: E.Var(dim_index(j), _INDEX) for j, p in enumerate(c.args)})
            if ext is not None and dims_used(ext):  # uses the consumer's leading indices: the producer's
                ext = _as_producer_dims(ext, c.args, args)
                if ext is None:
                    return None
            if ext is not None and E.reads_data(ext):
                ragged.append((ext, off))
                continue
            if ext is not None:
                spans.append(Interval(E.const(off, _INDEX), E.add(E.sub(ext, 1), off)))
                continue
            env = {name: Interval(E.const(0, _INDEX), E.sub(ext, 1)) for name, ext in zip(c.args, region, strict=True)
                   if not E.reads_data(ext)}
            if rdom is not None:  # the reduction's Vars over their (dense) ranges
                for r, lo, ext in zip(rdom.vars, rdom.mins, rdom.extents, strict=True):
                    if E.reads_data(lo) or E.reads_data(ext):
                        return None
                    env[r] = Interval(lo, E.sub(E.add(lo, ext), 1))
            if E.free_vars(a) - env.keys() - set(program.sizes) or E.reads_data(a):
                return None  # an index of a Var whose range is not known here, or data
            iv = bounds_of(a, env)
            if iv.lo is None or iv.hi is None or E.reads_data(iv.lo) or E.reads_data(iv.hi):
                return None
            spans.append(iv)
        if ragged:
            if spans or any(e != ragged[0][0] for e, _ in ragged):
                return None
            offs = [o for _, o in ragged]
            out.append(E.add(ragged[0][0], max(offs) - min(offs)))
        else:
            lo, hi = spans[0].lo, spans[0].hi
            for iv in spans[1:]:
                lo, hi = E.minimum(lo, iv.lo), E.maximum(hi, iv.hi)
            out.append(simplify(E.add(E.sub(hi, lo), 1)))
    return out


def _as_producer_dims(ext: E.Expr, consumer_args, args) -> E.Expr | None:
    """A consumer's extent that uses its dimensions' indices (``#j``), in the producer's: ``#j`` becomes
    ``#d`` where the producer's dimension d is read at the consumer's Var of dimension j (None if none)."""
    remap = {}
    for j in dims_used(ext):
        d = next((d for d, a in enumerate(args) if isinstance(a, E.Var) and a.name == consumer_args[j]), None)
        if d is None:
            return None
        remap[dim_index(j)] = E.Var(dim_index(d), _INDEX)
    return E.substitute(ext, remap)


def _var_plus_const(a: E.Expr) -> tuple[str | None, int]:
    if isinstance(a, E.Var):
        return a.name, 0
    if isinstance(a, E.Add) and isinstance(a.a, E.Var) and isinstance(a.b, E.Const):
        return a.a.name, int(a.b.value)
    if isinstance(a, E.Sub) and isinstance(a.a, E.Var) and isinstance(a.b, E.Const):
        return a.a.name, -int(a.b.value)
    return None, 0


def _count(extents: list[E.Expr] | None, rdom: list[E.Expr], dims: dict[int, int], moments: set) -> sp.Expr | None:
    """The points of the nested domain: ``extents`` (dimension k's may use the indices of dimensions
    before it, ``#j``, and a length ``lens[#0]``), then ``rdom``'s extents (which may use them too);
    ``dims`` maps a Func dimension to its position among ``extents`` (an update's pure dims)."""
    if extents is None:
        return None
    idx = [sp.Symbol(f"i{k}", integer=True, nonnegative=True) for k in range(len(extents))]
    length: dict[str, sp.Symbol] = {}
    if any(sum(1 for _ in E.walk(e)) > _MOST_NODES for e in (*extents, *rdom)):
        return None  # nested clamps of a deep pyramid: sympy takes minutes over their products
    try:
        exts = [_sympy(e, idx, dims, length) for e in (*extents, *rdom)]
    except _Unknown:
        return None
    expr = sp.Integer(1)
    for k in range(len(exts) - 1, -1, -1):
        ext = exts[k]
        uses = [idx[k]] if k < len(idx) else []
        if k == 0 and length:  # lens[b] is the batch index's too
            uses += list(length.values())
        if any(expr.has(u) for u in uses) or any(x.has(idx[k]) for x in exts[k + 1:] if k < len(idx)):
            if k == 0 and length:  # the batch: a polynomial in the entry's length, summed as moments
                expr = _sum_over_batch(sp.expand(expr), length, ext, moments)
                if expr is None:
                    return None
            else:
                expr = sp.summation(expr, (idx[k], 0, ext - 1))
        else:
            expr = expr * ext
    if length and any(expr.has(s) for s in length.values()):
        return None  # a length outside the batch's dimension
    return sp.factor_terms(sp.expand(expr))


def _sum_over_batch(expr: sp.Expr, length: dict, batch: sp.Expr, moments: set) -> sp.Expr | None:
    """sum over the batch of ``expr``, a polynomial in each entry's length: the moments of the lengths."""
    (name, ell), = length.items()
    if expr.has(sp.Symbol("i0", integer=True, nonnegative=True)):
        return None  # depends on the entry's number itself
    poly = sp.Poly(expr, ell)
    out = sp.Integer(0)
    for (k,), c in poly.terms():
        if k == 0:
            out += c * batch
        else:
            moments.add((name, k))
            out += c * _moment(name, k)
    return out


def _sympy(e: E.Expr, idx: list, dims: dict, length: dict) -> sp.Expr:
    if isinstance(e, E.Const):
        return sp.Integer(int(e.value)) if float(e.value).is_integer() else sp.Float(e.value)
    if isinstance(e, E.Var):
        if e.name.startswith(dim_index(0)[:-1]) and e.name[len(dim_index(0)) - 1:].isdigit():
            k = int(e.name[len(dim_index(0)) - 1:])
            return idx[dims.get(k, k)]
        return sp.Symbol(e.name, integer=True, positive=True)
    if isinstance(e, E.FuncRef) and len(e.args) == 1 and isinstance(e.args[0], E.Var) \
            and e.args[0].name == dim_index(0) and dims.get(0, 0) == 0:
        if length and e.name not in length:
            raise _Unknown(e)
        return length.setdefault(e.name, sp.Symbol(f"{e.name}[b]", integer=True, positive=True))
    if isinstance(e, E.Cast):
        return _sympy(e.a, idx, dims, length)
    ops = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
           E.FloorDiv: lambda a, b: sp.floor(a / b), E.Min: sp.Min, E.Max: sp.Max}
    if type(e) in ops:
        return ops[type(e)](_sympy(e.a, idx, dims, length), _sympy(e.b, idx, dims, length))
    raise _Unknown(e)
