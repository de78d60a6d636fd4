"""Wrappers (Halide's ``in()``): route reads of an Input or Func through a copy the schedule places.

Each ``Wrap`` record of the schedule adds a Func ``copy[v...] = wrapped[v...]`` to the program, just
before its first reader, and makes the consumer it names (or every other reader) read the copy. The
algorithm is unchanged (the copy is the identity); only where data lives changes, which is how a
schedule packs a strip of a matrix into contiguous memory inside a tile.
"""

from __future__ import annotations

from ...algebra import expr as E
from ...algebra import types as T
from ...program import Definition, Function, InputSpec, Program, is_ragged
from ...schedule import Schedule, Wrap


def wrap_funcs(program: Program, schedule: Schedule) -> Program:
    """``program`` with one copy Func per ``Wrap`` record of ``schedule``, and its readers redirected."""
    for d in schedule:
        if isinstance(d, Wrap):
            program = _wrap_one(program, d)
    return program


def _wrap_one(program: Program, d: Wrap) -> Program:
    names = {f.name for f in program.functions} | {i.name for i in program.inputs}
    if d.wrapped not in names:
        raise ValueError(f"{d.wrapped}.in_(): {d.wrapped!r} is not an Input or Func of this pipeline")
    if d.func in names:
        raise ValueError(f"{d.wrapped}.in_(): the wrapper's name {d.func!r} is taken")
    if d.consumer and d.consumer not in {f.name for f in program.functions}:
        raise ValueError(f"{d.wrapped}.in_({d.consumer}): {d.consumer!r} is not a Func of this pipeline")
    wrapped = program.lookup(d.wrapped)
    if isinstance(wrapped, InputSpec):
        args, dtype = tuple(f"_{k}" for k in range(wrapped.rank)), wrapped.dtype
        # a copy of a ragged Input has its domain: loops stop at each entry's length, as its reads must
        shape = wrapped.shape if any(is_ragged(e) for e in wrapped.shape) else None
    else:
        args, dtype, shape = wrapped.args, wrapped.dtype, wrapped.shape
    copy = Function(d.func, dtype, args, E.FuncRef(d.wrapped, tuple(E.Var(a, T.INDEX) for a in args), dtype),
                    shape=shape)

    def redirect(e: E.Expr) -> E.Expr:
        return E.transform(e, lambda n: E.FuncRef(d.func, n.args, n.dtype)
                           if isinstance(n, E.FuncRef) and n.name == d.wrapped else n)

    funcs, placed = [], False
    for f in program.functions:
        readers = f.name == d.consumer if d.consumer else f.name != d.wrapped
        if readers and f.reads(d.wrapped):
            if not placed:
                funcs.append(copy)
                placed = True
            f = Function(f.name, f.dtype, f.args, redirect(f.init),
                         tuple(Definition(tuple(map(redirect, u.args)), redirect(u.value), u.rdom, u.pure_vars)
                               for u in f.updates), f.shape)
        funcs.append(f)
    if not placed:
        who = f"Func {d.consumer}" if d.consumer else "no Func"
        raise ValueError(f"{d.wrapped}.in_({d.consumer}): {who} reads {d.wrapped}, so there is nothing to wrap")
    return Program(program.outputs, tuple(funcs), program.inputs, program.params, program.sizes)
