"""Barriers between the thread-loop nests of a GPU kernel (Halide's ``FuseGPUThreadLoops`` places its
``__syncthreads`` the same way).

At block level (outside the thread loops) a kernel is a sequence of thread nests, each run by every
thread on its own points. A thread may read what another thread of its block wrote in an earlier nest
(a tile staged in shared memory) or overwrite what another read, so a barrier goes between two nests
whenever one writes a buffer the other reads or writes, counting everything since the last barrier; a
block-level serial loop whose body writes and then reads (or reads and then writes) the same buffer gets
one at the end of each iteration, so the next iteration's writes wait for this one's reads. Block-level
control flow depends on block indices and host values only, so every thread of a block meets the same
barriers.
"""

from __future__ import annotations

from ...algebra import expr as E
from .. import ir
from ..ir import ForKind


def _is_thread_work(s: ir.Stmt) -> bool:
    return any(isinstance(t, ir.For) and t.kind == ForKind.GPU_THREAD for t in ir.walk_stmts(s))


def accesses(s: ir.Stmt) -> tuple[set[str], set[str]]:
    """The buffers ``s`` reads and the ones it writes."""
    reads, writes = set(), set()
    for t in ir.walk_stmts(s):
        if isinstance(t, ir.Store):
            writes.add(t.buffer)
        for e in ir.exprs_of(t):
            reads |= {n.buffer for n in E.walk(e) if isinstance(n, E.Load)}
    return reads, writes


def insert_barriers(s: ir.Stmt) -> ir.Stmt:
    """``s`` (a kernel body) with a ``Barrier`` wherever two thread nests of a block may conflict."""
    if isinstance(s, ir.For) and s.kind == ForKind.GPU_THREAD:
        return s
    if isinstance(s, ir.Block):
        return ir.block(*_sequence(s.stmts))
    if isinstance(s, ir.For):
        body = insert_barriers(s.body)
        reads, writes = accesses(body)
        if _is_thread_work(body) and writes & (reads | writes) and not isinstance(_last(body), ir.Barrier):
            body = ir.block(body, ir.Barrier())
        return ir.For(s.var, s.min, s.extent, s.kind, body)
    if isinstance(s, ir.LetStmt):
        return ir.LetStmt(s.name, s.value, insert_barriers(s.body))
    if isinstance(s, ir.Allocate):
        return ir.Allocate(s.buffer, s.dtype, s.size, insert_barriers(s.body))
    if isinstance(s, ir.Produce):
        return ir.Produce(s.name, insert_barriers(s.body))
    if isinstance(s, ir.IfThenElse) and not _thread_guard(s):
        return ir.IfThenElse(s.cond, insert_barriers(s.then),
                             None if s.otherwise is None else insert_barriers(s.otherwise))
    return s


def _thread_guard(s: ir.IfThenElse) -> bool:
    """The guard ``threadIdx.y == 0`` that ``kernels`` puts around a nest: part of the nest."""
    return any(isinstance(v, E.Var) and v.name.startswith("threadIdx.") for v in E.walk(s.cond))


def _last(s: ir.Stmt) -> ir.Stmt:
    return s.stmts[-1] if isinstance(s, ir.Block) else s


def _sequence(stmts) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    pending_reads: set[str] = set()
    pending_writes: set[str] = set()
    for t in stmts:
        t = insert_barriers(t)
        if _is_thread_work(t):
            reads, writes = accesses(t)
            if pending_writes & (reads | writes) or pending_reads & writes:
                out.append(ir.Barrier())
                pending_reads, pending_writes = set(), set()
            pending_reads |= reads
            pending_writes |= writes
        out.append(t)
    return out
