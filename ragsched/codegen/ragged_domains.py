"""Ragged domains for Funcs that do not declare one: a Func read only by ragged Funcs, each reading it
at its own point (its Vars, maybe permuted, or some of them), takes their domain.

An inline reduction (``rs.sum``) or an elementwise step between ragged Funcs has no declared shape;
without this, computed at root it would cover the padded box and read ragged inputs past each entry's
length. With it, its loops stop at the entry's length like its consumer's.
"""

from __future__ import annotations

from ..algebra import expr as E
from ..algebra import types as T
from ..program import Function, Program, dim_index, dims_used, is_ragged, map_program


def infer_ragged_domains(program: Program) -> Program:
    if not any(f.shape is not None and any(map(is_ragged, f.shape)) for f in program.functions):
        return program  # no ragged Func to take a domain from
    shapes = {f.name: f.shape for f in program.functions}
    funcs = {f.name: f for f in program.functions}
    for f in reversed(program.functions):  # consumers first: an inferred domain can be passed on
        if f.shape is not None or f.name in program.outputs:
            continue
        got = _from_readers(f, program.functions, shapes)
        if got is not None:
            shapes[f.name] = got
            funcs[f.name] = Function(f.name, f.dtype, f.args, f.init, f.updates, got)
    if all(funcs[f.name] is f for f in program.functions):
        return program
    return Program(program.outputs, tuple(funcs[f.name] for f in program.functions), program.inputs,
                   program.params, program.sizes)


def _from_readers(g: Function, functions, shapes: dict) -> tuple[E.Expr, ...] | None:
    found = None
    for c in functions:
        if c.name == g.name:
            continue
        exprs = [c.init] + [e for u in c.updates for e in (u.value, *u.args)]
        refs = [n for e in exprs for n in E.walk(e) if isinstance(n, E.FuncRef) and n.name == g.name]
        if not refs:
            continue
        shape = shapes.get(c.name)
        if shape is None or not any(map(is_ragged, shape)):
            return None
        for r in refs:
            mine = _permuted(shape, c.args, r.args)
            if mine is None or (found is not None and mine != found):
                return None
            found = mine
    return found


def _permuted(shape, cargs: tuple[str, ...], args) -> tuple[E.Expr, ...] | None:
    """The consumer's shape seen from the producer when it reads ``g[args]`` with ``args`` distinct Vars
    of the consumer (all of them, maybe permuted, or some: an inline reduction over the others); None
    otherwise, or when a ragged extent would use a dimension the producer lacks or one after its own."""
    names = [a.name if isinstance(a, E.Var) else None for a in args]
    if None in names or len(set(names)) != len(names) or not set(names) <= set(cargs):
        return None
    where = {n: m for m, n in enumerate(names)}  # consumer Var -> producer dimension
    remap = {dim_index(j): E.Var(dim_index(where[v]), T.INDEX) for j, v in enumerate(cargs) if v in where}
    out = []
    for m, n in enumerate(names):
        extent = shape[cargs.index(n)]
        if not all(dim_index(j) in remap for j in dims_used(extent)):
            return None
        extent = E.substitute(extent, remap)
        if any(j >= m for j in dims_used(extent)):
            return None
        out.append(extent)
    return tuple(out)


def lengths_inputs(program: Program) -> list[str]:
    """The Inputs that ragged extents read (``lens`` of ``Ragged("L", lens)``)."""
    shapes = [s for x in (*program.inputs, *program.functions) for s in (x.shape or ())]
    return sorted({n.name for s in shapes if is_ragged(s) for n in E.walk(s)
                   if isinstance(n, E.FuncRef) and program.is_input(n.name)})


def class_lengths(program: Program, who: str) -> list[str]:
    """``lengths_inputs(program)``, which length classes are told by (``rs.SchedulesByLength``); a
    ValueError from ``who`` where there are none."""
    names = lengths_inputs(program)
    if not names:
        raise ValueError(f"{who}: schedules by length class need a ragged pipeline, and no Input of this one "
                         "gives lengths (Ragged(name, lens)) to tell classes by")
    return names


def max_symbol(name: str) -> E.Var:
    """The largest value of lengths Input ``name``, a kernel argument the runtime computes."""
    return E.Var(f"{name}.max", T.INDEX)


def bound_lengths(program: Program) -> Program:
    """Every read of a lengths Input ``lens[x]`` becomes ``max(min(lens[x], lens.max), 0)``: the same value
    (the runtime refuses negative lengths), but one that bounds inference can bound (the reads of a Func
    over ``RDom(0, lens[b])`` are then bounded by the longest entry rather than by the int32 range, and
    from below by 0: the rest of a ``tail="split"`` split of such an RDom starts at ``lens[b] // f * f``)."""
    names = set(lengths_inputs(program))
    if not names:
        return program

    def bound(e):
        return E.transform(e, lambda n: E.maximum(E.minimum(n, E.cast(n.dtype, max_symbol(n.name))),
                                                  E.const(0, n.dtype))
                           if isinstance(n, E.FuncRef) and n.name in names else n)

    shapes = {f.name: f.shape for f in program.functions}
    out = map_program(program, bound)
    # shapes stay as written: they address packed storage and are evaluated by the runtime
    return Program(out.outputs, tuple(Function(f.name, f.dtype, f.args, f.init, f.updates, shapes[f.name])
                                      for f in out.functions), out.inputs, out.params, out.sizes)
