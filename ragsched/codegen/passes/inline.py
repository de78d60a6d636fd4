"""Inlining: the definitions of Funcs scheduled ``compute_inline`` substituted into their consumers."""

from __future__ import annotations

from ...algebra import expr as E
from ...program import Program, map_program
from ...schedule.resolve import FuncSchedule


def inline_funcs(program: Program, scheds: dict[str, FuncSchedule]) -> Program:
    """Substitute the definitions of inline Funcs into their consumers (and drop them)."""
    inline = {f.name: f for f in program.functions if scheds[f.name].inline}
    if not inline:
        return program

    def expand(e):
        def fn(n):
            if isinstance(n, E.FuncRef) and n.name in inline:
                f = inline[n.name]
                return expand(E.substitute(f.init, dict(zip(f.args, n.args, strict=True))))
            return n
        return None if e is None else E.transform(e, fn)

    kept = tuple(f for f in program.functions if f.name not in inline)
    return map_program(Program(program.outputs, kept, program.inputs, program.params, program.sizes), expand)
