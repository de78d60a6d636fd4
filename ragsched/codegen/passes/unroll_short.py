"""Short innermost loops unrolled without being asked: a serial loop of a few iterations (a sum over
three colour channels, a 7-tap window) with no loop inside it and a small body is marked for unrolling,
as LLVM's full unroll of constant trip counts would treat it (LLVM's unroller is off: its partial and
runtime unrolling of every other loop cost more compile time than it gained, ``llvm/load.py``).

Left as a loop, such a reduction pays a counter, a compare and a branch per element, and a loop over an
RDom inside a vectorized loop keeps its accumulator in memory. Marked before vectorization (as a
schedule's ``unroll`` is), the copies are vectorized with the rest and their index arithmetic folds to
constant offsets. Unrolled after vectorization instead, the same loops ran slower than left alone
(a denoiser's box sums: 53.5 -> 61.6 ms; before it, 54.7 -> 52.0).
"""

from __future__ import annotations

from dataclasses import replace

from ...algebra import expr as E
from .. import ir

#: the most iterations a loop is unrolled at without a schedule asking
MAX_ITERATIONS = 8
#: the most expression nodes its copies may hold in all: a 7-tap box sum's body holds about 200 (the
#: schedule's own ``unroll`` may make up to ``unroll.MAX_UNROLLED_NODES``)
MAX_NODES = 1500


def unroll_short_loops(stmt: ir.Stmt) -> ir.Stmt:
    """``stmt`` with every serial loop that is innermost, of constant extent 2 to ``MAX_ITERATIONS`` and
    small (``MAX_NODES`` expression nodes unrolled) marked UNROLLED (``unroll_loops`` unrolls it)."""

    def on_stmt(s: ir.Stmt) -> ir.Stmt:
        return replace(s, kind=ir.ForKind.UNROLLED) if _short(s) else s

    return ir.map_stmt(stmt, lambda e: e, on_stmt)


def _short(s: ir.Stmt) -> bool:
    if not (isinstance(s, ir.For) and s.kind is ir.ForKind.SERIAL and isinstance(s.extent, E.Const)):
        return False
    n = int(s.extent.value)
    if not 2 <= n <= MAX_ITERATIONS:
        return False
    inner = list(ir.walk_stmts(s.body))
    if any(isinstance(t, (ir.For, ir.Allocate)) for t in inner):
        return False
    nodes = sum(sum(1 for _ in E.walk(e)) for t in inner for e in ir.exprs_of(t))
    return nodes * n <= MAX_NODES
