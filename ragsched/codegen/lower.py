"""Lowering: a Program and its schedule to one loop nest, the passes in order.

``_lower`` lists the passes in order (``RAGSCHED_DEBUG_LOWER=1`` prints the result of each); each lives in
a module of its own, Program passes and loop-nest passes in ``passes/``. Sizes given to ``specialize``
become constants; the copies that ``in_()`` asks for are added; inline Funcs are substituted; every other
Func is placed at its compute and store levels with the region its
consumers need (``schedule_functions``); storage is flattened into buffers (``flatten``); expressions
are simplified. Without a schedule every Func is computed at root into its own buffer, with loops in
natural order (first index outermost) and updates in order, pure Vars outside RVars (Halide's default
order).
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

from ..algebra import expr as E
from ..algebra import types as T
from ..algebra.bounds import Interval
from ..algebra.simplify import simplify
from ..program import Program
from ..schedule import Schedule
from ..schedule.resolve import resolve_schedule
from . import ir
from .flat_loops import TABLE
from .flatten import flatten, offsets_buffer
from .passes.clamped_loads import version_clamped_loads
from .passes.constant_extents import constant_loop_extents
from .passes.inline import inline_funcs
from .passes.lets import substitute_trivial_lets
from .passes.output_extents import fixed_output_extents, put_in_extents, put_in_stmt_extents
from .passes.partition import partition_vector_tails
from .passes.specialize import specialize_program
from .passes.unroll import unroll_loops
from .passes.unroll_short import unroll_short_loops
from .passes.unswitch import unswitch_loops
from .passes.vectorize import vectorize_loops
from .passes.wrap_funcs import wrap_funcs
from .ragged_domains import bound_lengths, infer_ragged_domains, lengths_inputs, max_symbol
from .ragged_reads import check_ragged_reads
from .schedule_functions import place_funcs, symbol_facts

I64 = T.ADDRESS


def _i64(v: int) -> E.Const:
    return E.Const(v, I64)


# ---------------------------------------------------------------------------------------- lower
def lower(program: Program, schedule: Schedule | None = None, specialize: dict[str, int] | None = None,
          name: str | None = None, loop_kinds=None, target_text: str = "") -> ir.LoweredKernel:
    """``loop_kinds``, when given, are the loop kinds the target's backend emits: others are refused before
    any pass rewrites them (a vectorized loop on a GPU)."""
    with E.deep_recursion():
        return _lower(program, schedule, specialize, name, loop_kinds, target_text)


def _lower(program, schedule, specialize, name, loop_kinds=None, target_text="") -> ir.LoweredKernel:
    """Halide's ``Lower.cpp``: one pass after another, Program passes first, then loop-nest passes. With
    ``RAGSCHED_DEBUG_LOWER=1`` the result of each is printed to stderr."""
    show = _Show(name or "_".join(program.outputs))
    schedule = schedule or Schedule()
    prog = show("specialize_program", specialize_program(program, dict(specialize or {})))
    prog = show("wrap_funcs", wrap_funcs(prog, schedule))
    scheds = resolve_schedule(prog, schedule)
    prog = show("inline_funcs", inline_funcs(prog, scheds))
    prog = show("infer_ragged_domains", infer_ragged_domains(prog))
    prog = show("bound_lengths", bound_lengths(prog))
    facts = symbol_facts(prog)
    facts.update({max_symbol(n).name: Interval(E.const(0, T.INDEX), None) for n in lengths_inputs(prog)})
    placed = place_funcs(prog, scheds, facts)
    fixed = fixed_output_extents(prog)
    stmt = show("place_funcs", put_in_stmt_extents(placed.stmt, fixed))
    root_lets = [(n, put_in_extents(v, fixed)) for n, v in placed.root_lets]
    for let_name, value in reversed(root_lets):
        stmt = ir.LetStmt(let_name, value, stmt)
    check_ragged_reads(stmt, prog, facts)
    output_pads = {o: m for o in prog.outputs for m in scheds[o].store_pads.values()}  # one per ragged output
    on_chip = frozenset(n for n, fs in scheds.items() if fs.memory != "global")  # sized exactly: tiles from the min
    parallel_copies = loop_kinds is not None and ir.ForKind.PARALLEL in loop_kinds
    body = show("flatten", put_in_stmt_extents(flatten(stmt, prog, placed.copied_outputs, output_pads, on_chip,
                                                       parallel_copies), fixed))
    facts = {**facts, **{n: Interval(_i64(0), None) for n in _extent_symbols(body)}}
    body = show("simplify", ir.map_stmt(body, lambda e: simplify(e, facts)))
    body = show("substitute_trivial_lets", substitute_trivial_lets(body))
    body = show("simplify", ir.map_stmt(body, lambda e: simplify(e, facts)))
    # after simplification: the simplifier is scalar-only
    body = show("constant_loop_extents", constant_loop_extents(body))
    if loop_kinds is not None:
        _refuse_loop_kinds(body, loop_kinds, target_text)
    body = show("unswitch_loops", unswitch_loops(body))
    body = show("unroll_short_loops", unroll_short_loops(body))
    body = show("unroll_loops", unroll_loops(body))
    body = show("vectorize_loops", vectorize_loops(body))
    body = show("partition_vector_tails", partition_vector_tails(body))
    body = show("version_clamped_loads", version_clamped_loads(body))
    # again, for the guards vectorizing made: a vector tail's, tested once outside the loops it is inside of
    body = show("unswitch_loops", unswitch_loops(body))
    _check_buffer_scopes(body)
    requirements = tuple(replace(c, lo=simplify(put_in_extents(c.lo, fixed), facts),
                                 hi=simplify(put_in_extents(c.hi, fixed), facts)) for c in placed.checks)
    lets = tuple((n, simplify(v, facts)) for n, v in root_lets)
    memory = tuple(sorted((n, fs.memory) for n, fs in scheds.items() if fs.memory != "global"))
    return ir.LoweredKernel(name or "_".join(prog.outputs), body, kernel_arguments(prog, body), requirements,
                            prog.outputs, lets, tuple(sorted(output_pads.items())), memory)


def _refuse_loop_kinds(body: ir.Stmt, loop_kinds, target_text: str) -> None:
    """A loop kind that the target's backend does not emit (``gpu_blocks`` on a CPU, ``vectorize`` or
    ``parallel`` in CUDA), refused naming the loop and the target."""
    gpu = {ir.ForKind.GPU_BLOCK, ir.ForKind.GPU_THREAD, ir.ForKind.GPU_LANE}
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.For) and s.kind not in loop_kinds:
            runs = ", ".join(sorted(k.value for k in loop_kinds))
            hint = ("; GPU loops need target='cuda'" if s.kind in gpu
                    else "; map the loop to gpu_blocks/gpu_threads instead" if gpu <= set(loop_kinds) else "")
            raise ValueError(f"loop {s.var} is a {s.kind.value} loop, which target {target_text} does not run (its "
                             f"loops: {runs}){hint}")


class _Show:
    """Prints each pass's result under ``RAGSCHED_DEBUG_LOWER=1`` (a Program as its Funcs' definitions, a
    loop nest as text) and returns it unchanged."""

    def __init__(self, kernel: str):
        self.kernel = kernel
        self.on = os.environ.get("RAGSCHED_DEBUG_LOWER", "") not in ("", "0")

    def __call__(self, name: str, value):
        if self.on:
            text = value if isinstance(value, ir.Stmt) else "\n".join(
                f"{f.name}[{', '.join(f.args)}] = {f.init}"
                + "".join(f"\n{f.name}[{', '.join(map(str, u.args))}] = {u.value}" for u in f.updates)
                for f in value.functions)
            print(f"--- {self.kernel}: after {name}\n{text}", file=sys.stderr)
        return value


def _check_buffer_scopes(body: ir.Stmt) -> None:
    """Refuse, naming the Func, a schedule whose loop nest reads a buffer it allocates outside that
    allocation: a Func's region computed from the positions of another Func's flat ragged loop (its
    table of entry starts, ``flat_loops``) where that table does not exist yet (a producer at root
    whose consumers run in tiles of a fused (b, i) loop). It was a KeyError in code generation."""
    tables = {s.buffer for s in ir.walk_stmts(body) if isinstance(s, ir.Allocate) and TABLE in s.buffer}

    def go(s: ir.Stmt, inside: frozenset, where: str) -> None:
        if isinstance(s, ir.Allocate):
            inside = inside | {s.buffer}
            if inside >= tables:  # (every table in scope below)
                return
        if isinstance(s, ir.LetStmt) and ".req." in s.name:
            where = f"Func {s.name.split('.req.')[0]}'s region ({s.name})"
        for e in ir.exprs_of(s):
            for n in E.walk(e):
                if isinstance(n, E.Load) and n.buffer in tables and n.buffer not in inside:
                    owner = n.buffer.split(TABLE)[0]
                    raise ValueError(
                        f"the schedule computes {where} from {n.buffer}, the table of Func {owner}'s fused "
                        f"ragged loop, which exists only while {owner} is computed: compute the Funcs whose "
                        f"regions depend on it inside {owner}'s loop nest, or do not fuse that loop")
        for t in ir.children(s):
            go(t, inside, where)

    if tables:
        go(body, frozenset(), "the kernel")


def _extent_symbols(body: ir.Stmt) -> set[str]:
    out = set()
    for s in ir.walk_stmts(body):
        for e in ir.exprs_of(s):
            out |= {v for v in E.free_vars(e) if ".extent." in v or ".stride." in v}
        if isinstance(s, ir.LetStmt) and (".extent." in s.name or ".stride." in s.name):
            out.add(s.name)
    return out


def kernel_arguments(program: Program, body: ir.Stmt) -> tuple[ir.Argument, ...]:
    """The free symbols and external buffers of ``body``, in a stable order."""
    free, used_buffers = ir.free_symbols(body)
    args = []
    for i in program.inputs:
        if i.name in used_buffers:
            args.append(ir.Argument(i.name, i.dtype, True))
    for o in program.outputs:
        args.append(ir.Argument(o, program.func(o).dtype, True))
    for x in (*program.inputs, *(program.func(o) for o in program.outputs)):
        if offsets_buffer(x.name) in used_buffers:  # a RaggedArray's entry offsets
            args.append(ir.Argument(offsets_buffer(x.name), T.int64, True))
    scalars = sorted(free.items())
    args += [ir.Argument(n, t, False) for n, t in scalars]
    return tuple(args)


__all__ = ["lower"]
