"""Freeze the Funcs reachable from some outputs into an immutable ``Program``, checking names."""

from __future__ import annotations

from . import lang as L
from .program import Definition, Function, ParamSpec, Program
from .schedule.records import Wrap
from .schedule.value import new_records


def func_deps(f: L.Func) -> frozenset:
    """Everything a Func's definitions and shape use: Funcs, Inputs, Params, Sizes, RDoms, Vars."""
    deps = f._init.deps
    for key, v, _ in f._updates:
        deps = deps | v.deps
        for k in key:
            deps = deps | L.wrap(k).deps
    for s in f.shape or ():
        deps = deps | s.deps
    return deps


def reachable_funcs(outputs) -> dict[str, L.Func]:
    """The Funcs that ``outputs`` (a Func, a list of Funcs or a Pipeline) depend on, by name."""
    if isinstance(outputs, L.Pipeline):
        outputs = outputs.outputs
    elif isinstance(outputs, L.Func):
        outputs = [outputs]
    seen: dict[str, L.Func] = {}
    stack = list(outputs)
    while stack:
        f = stack.pop()
        if f.name in seen:
            continue
        seen[f.name] = f
        for d in func_deps(f):
            if isinstance(d, L.Func) and d is not f:
                stack.append(d)
            if isinstance(d, (L.Func, L.Input)):
                stack.extend(d._wrappers.values())  # copies made by in_() for the schedule
    return seen


def schedulable(outputs) -> dict:
    """What a schedule may name, by name: the reachable Funcs (with the wrappers ``in_`` made) and the
    Inputs (which ``in_`` can wrap). This is the ``funcs`` a pipeline file's ``hand_schedule`` gets."""
    funcs = reachable_funcs(outputs)
    out: dict = {}
    for f in funcs.values():
        out.update({d.name: d for d in func_deps(f) if isinstance(d, L.Input)})
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
    order: list[L.Func] = []
    state: dict[int, int] = {}  # 1 = visiting, 2 = done
    everything: set = set()

    def visit(f: L.Func, path: tuple[str, ...]):
        s = state.get(id(f))
        if s == 2:
            return
        if s == 1:
            raise ValueError(f"Funcs depend on each other in a cycle: {' -> '.join(path + (f.name,))}")
        state[id(f)] = 1
        deps = func_deps(f)
        everything.update(deps)
        for d in sorted((d for d in deps if isinstance(d, L.Func) and d is not f), key=lambda d: d.name):
            visit(d, path + (f.name,))
        state[id(f)] = 2
        order.append(f)

    for f in outputs:
        visit(f, ())

    while True:  # a ragged Input's shape reads its lengths Input, which has a shape too
        inputs = sorted({d for d in everything if isinstance(d, L.Input)}, key=lambda d: d.name)
        more = frozenset().union(*(s.deps for i in inputs for s in i.shape)) - everything
        if not more:
            break
        everything.update(more)
    rdoms = {d for d in everything if isinstance(d, L.RDom)}
    for r in rdoms:
        everything.update(r._bound_deps)
    params = sorted({d for d in everything if isinstance(d, L.Param)}, key=lambda d: d.name)
    sizes = sorted({d for d in everything if isinstance(d, L.Size)}, key=lambda d: d.name)

    _check_unique_names(order, inputs, params, sizes, everything)

    functions = []
    for f in order:
        updates = []
        for key, v, pure in f._updates:
            args = tuple(L.wrap(k).node for k in key)
            deps = v.deps.union(*(L.wrap(k).deps for k in key))
            rd = [d for d in deps if isinstance(d, L.RDom)]
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
    symbols = {d.name: d for d in everything if type(d) in (L.Var, L.RVar)}
    for name, d in symbols.items():
        other = seen.get(name)
        if other is not None:
            raise ValueError(f"the {type(d).__name__} {name!r} has the same name as a "
                             f"{type(other).__name__}; give them distinct names")

