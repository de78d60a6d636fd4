"""Output extents that a ragged pipeline fixes, put in as constants.

A dense pipeline computes whatever region its output buffer spans (Halide's rule), so an output's
extents are kernel arguments. A pipeline with ragged data checks every output against its declared shape
(``runtime.ragged_args.output``, ``Kernel._dense_output``): a dimension declared as a constant (the 64
columns of a head) is that constant at every call. Put in, it makes the regions of the Funcs computed
inside the output constant too (a [rows, 64] tile instead of [rows, extent]), so their strides are
constants and LLVM can keep a register tile in registers (measured: ragged attention's P V 15% faster).
"""

from __future__ import annotations

from ...algebra import expr as E
from ...program import Program, is_ragged
from .. import ir


def fixed_output_extents(program: Program) -> dict[str, int]:
    """``{"f.extent.k": n}`` for every output dimension declared as the constant n, in a pipeline with
    ragged inputs or outputs; empty for a dense pipeline."""
    shapes = [i.shape for i in program.inputs] + [program.func(o).shape for o in program.outputs]
    if not any(s is not None and any(map(is_ragged, s)) for s in shapes):
        return {}
    out = {}
    for name in program.outputs:
        for k, s in enumerate(program.func(name).shape or ()):
            if isinstance(s, E.Const):
                out[f"{name}.extent.{k}"] = int(s.value)
    return out


def put_in_extents(e: E.Expr, extents: dict[str, int]) -> E.Expr:
    """``e`` with each fixed extent symbol replaced by its value (in the symbol's own type)."""
    if not extents:
        return e
    return E.transform(e, lambda x: E.const(extents[x.name], x.dtype)
                       if isinstance(x, E.Var) and x.name in extents else x)


def put_in_stmt_extents(s: ir.Stmt, extents: dict[str, int]) -> ir.Stmt:
    return ir.map_stmt(s, lambda e: put_in_extents(e, extents)) if extents else s
