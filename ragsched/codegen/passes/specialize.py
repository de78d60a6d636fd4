"""Specialization: Sizes given to ``compile(specialize=...)`` become constants."""

from __future__ import annotations

from ...algebra import expr as E
from ...algebra import types as T
from ...program import InputSpec, Program, map_program


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

    program = map_program(program, lambda e: E.substitute(e, mapping))
    inputs = tuple(InputSpec(i.name, i.dtype, tuple(E.substitute(s, mapping) for s in i.shape))
                   for i in program.inputs)
    return Program(program.outputs, program.functions, inputs, program.params, program.sizes)
