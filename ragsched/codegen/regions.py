"""Bounds inference across a pipeline: the region of every Func that must be computed, and the region
of every Input that will be read.

Consumers are visited before producers (reverse topological order). Each reference ``g[args]`` in a
definition of ``f`` demands the interval of every argument, with ``f``'s loop variables ranging over
``f``'s region and RVars over their (possibly pure-Var-dependent) bounds. A Func's region is the hull
of all demands, grown to cover what its own updates write and read (scatters, recurrences).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..algebra import expr as E
from ..algebra import types as T
from ..algebra.bounds import Interval, bounds_of, hull, prove
from ..algebra.simplify import simplify
from ..program import Definition, Function, Program

Box = tuple[Interval, ...]


def extent_var(buffer: str, dim: int) -> E.Var:
    """The runtime extent of an output buffer's dimension (a kernel argument)."""
    return E.Var(f"{buffer}.extent.{dim}", T.INDEX)


@dataclass(frozen=True)
class Regions:
    """Per Func: the box it is computed over; per Input, and per Func with a declared shape, the box
    that consumers read (inclusive bounds), which must lie inside its ``extents``."""

    funcs: dict[str, Box]
    reads: dict[str, tuple[Box, tuple[E.Expr, ...]]]
    facts: dict[str, Interval]


def symbol_facts(program: Program) -> dict[str, Interval]:
    """What is known of the free symbols: Sizes and output extents are never negative."""
    zero = E.const(0, T.INDEX)
    facts = {s: Interval(zero, None) for s in program.sizes}
    for name in program.outputs:
        for k in range(program.func(name).rank):
            facts[extent_var(name, k).name] = Interval(zero, None)
    return facts


def rvar_env(d: Definition, env: dict[str, Interval], facts) -> dict[str, Interval]:
    """Intervals of the RVars of update ``d``, given intervals of its pure Vars."""
    out = dict(env)
    if d.rdom is None:
        return out
    for v, lo, ext in zip(d.rdom.vars, d.rdom.mins, d.rdom.extents, strict=True):
        lo_b = bounds_of(lo, out, facts)
        hi_b = bounds_of(E.sub(E.add(lo, ext), 1), out, facts)
        out[v] = Interval(lo_b.lo, hi_b.hi)
    return out


def definition_envs(f: Function, box: Box, facts) -> list[tuple[Definition | None, dict[str, Interval]]]:
    """(definition, intervals of its variables) for the pure definition (None) and each update."""
    out: list = [(None, {a: box[k] for k, a in enumerate(f.args)})]
    for d in f.updates:
        env = {name: box[pos] for name, pos in d.pure_vars}
        out.append((d, rvar_env(d, env, facts)))
    return out


def _exprs_of(f: Function, d: Definition | None) -> list[E.Expr]:
    if d is None:
        return [f.init]
    out = [d.value, *d.args]
    if d.rdom is not None:
        out += [*d.rdom.mins, *d.rdom.extents]
        if d.rdom.predicate is not None:
            out.append(d.rdom.predicate)
    return out


def _demand(ref: E.FuncRef, env, facts, who: str, program: Program) -> Box:
    out = []
    for k, a in enumerate(ref.args):
        b = bounds_of(a, env, facts)
        if b.lo is None or b.hi is None:
            what = "input" if program.is_input(ref.name) else "Func"
            hint = ("wrap it in a boundary condition (rs.clamp_edge, ...) or clamp the index"
                    if what == "input" else "clamp the index")
            raise ValueError(f"cannot bound the reads of {what} {ref.name} along dimension {k} in Func "
                             f"{who}: the index {a} has no finite bounds; {hint}")
        out.append(Interval(simplify(b.lo, facts), simplify(b.hi, facts)))
    return tuple(out)


def _hull_box(a: Box | None, b: Box, facts) -> Box:
    if a is None:
        return b
    return tuple(Interval(simplify(h.lo, facts), simplify(h.hi, facts))
                 for h in (hull(x, y) for x, y in zip(a, b, strict=True)))


def _same_box(a: Box, b: Box) -> bool:
    return all(x.lo == y.lo and x.hi == y.hi for x, y in zip(a, b, strict=True))


def _grow_for_updates(f: Function, box: Box, facts, program: Program) -> Box:
    """Cover every point the updates of ``f`` write, and every point of ``f`` they read."""
    for _ in range(4):
        grown = box
        for d, env in definition_envs(f, box, facts)[1:]:
            writes = E.FuncRef(f.name, d.args, f.dtype)
            grown = _hull_box(grown, _demand(writes, env, facts, f.name, program), facts)
            for ref in E.func_refs(d.value):
                if ref.name == f.name:
                    grown = _hull_box(grown, _demand(ref, env, facts, f.name, program), facts)
        if _same_box(grown, box):
            return box
        box = grown
    raise ValueError(f"cannot bound Func {f.name}: the region its updates write keeps growing; "
                     "clamp the indices of its update definitions")


_TYPE_LIMIT = 2**31 - 1


def _check_finite(f: Function, box: Box) -> None:
    """A bound at the limit of a 32/64-bit type comes from a data-dependent index: refuse to allocate."""
    for k, iv in enumerate(box):
        for end in (iv.lo, iv.hi):
            if isinstance(end, E.Const) and abs(end.value) >= _TYPE_LIMIT:
                raise ValueError(
                    f"cannot bound Func {f.name} along dimension {k}: an index of {f.name} (or of a consumer "
                    f"reading it) depends on data and is only limited by its type ({end.value}); clamp that "
                    "index with rs.clamp(...)")


def output_box(f: Function) -> Box:
    zero = E.const(0, T.INDEX)
    return tuple(Interval(zero, E.sub(extent_var(f.name, k), 1)) for k in range(f.rank))


def within(inner: Box, outer: Box, facts) -> bool:
    """Whether ``inner`` provably lies inside ``outer``."""
    return all(prove(E.le(o.lo, i.lo), {}, facts) and prove(E.le(i.hi, o.hi), {}, facts)
               for i, o in zip(inner, outer, strict=True))


def infer_regions(program: Program) -> Regions:
    facts = symbol_facts(program)
    demand: dict[str, Box] = {}
    funcs: dict[str, Box] = {}
    for f in reversed(program.functions):
        if f.name in program.outputs:
            box = _hull_box(demand.get(f.name), output_box(f), facts)
        elif f.name in demand:
            box = demand[f.name]
        else:
            continue  # nobody reads it: it is not computed
        box = _grow_for_updates(f, box, facts, program)
        _check_finite(f, box)
        funcs[f.name] = box
        for d, env in definition_envs(f, box, facts):
            for e in _exprs_of(f, d):
                for ref in E.func_refs(e):
                    if ref.name != f.name:
                        demand[ref.name] = _hull_box(demand.get(ref.name), _demand(ref, env, facts, f.name,
                                                                                     program), facts)
    reads: dict = {}  # consumers before producers, so that the first failing check is the nearest
    for f in reversed(program.functions):
        if f.name in demand and f.name in program.outputs:
            reads[f.name] = (demand[f.name], tuple(extent_var(f.name, k) for k in range(f.rank)))
        elif f.name in demand and f.shape is not None:
            reads[f.name] = (demand[f.name], f.shape)
    reads.update({i.name: (demand[i.name], i.shape) for i in program.inputs if i.name in demand})
    return Regions(funcs, reads, facts)
