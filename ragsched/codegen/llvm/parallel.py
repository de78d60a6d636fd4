"""Parallel loops: a ``For`` of kind PARALLEL is outlined into functions of its own and run on
libgomp's threads through ``GOMP_parallel``. Also what the functions emitted for one kernel share
(``_Shared``), since outlining makes more than one."""

from __future__ import annotations

import functools

import llvmlite.ir as ir

from ...algebra import expr as E
from .. import ir as lir
from .machine import _I32, _I64, _PTR, _VOID, _initialized, load_shared_library


@functools.cache
def _gomp_loaded() -> bool:
    """libgomp, loaded into the process before any kernel object is linked (GOMP_parallel)."""
    _initialized()
    return load_shared_library("gomp", "libgomp.so.1")


class _Shared:
    """What every function emitted for one kernel shares: its name, scratch sites, thread count."""

    def __init__(self, name: str, threads: int | None, fast_math: bool = False, pow_table: int = 0,
                 vector_bits: int = 0, avx512: frozenset[str] = frozenset()):
        self.name = name
        self.threads = threads
        self.fast_math = fast_math  # the target's: float32 transcendentals by the fast code
        self.pow_table = pow_table  # entries of pow's table: as many float32s as one instruction looks up
        self.vector_bits = vector_bits  # the widest x86 vector registers (0: not x86): for maxps and minps
        self.avx512 = avx512  # AVX-512 instructions the math functions take (``emit.avx512_instructions``)
        self.sites: list[tuple[ir.GlobalVariable, int]] = []  # cached scratch blocks: (site, slots)
        self.outlined = 0  # parallel loops outlined so far (for unique function names)


def _uses(s: lir.Stmt) -> tuple[set[str], set[str]]:
    """Names of the symbols and buffers that statement ``s`` refers to."""
    names, bufs = set(), set()
    for t in lir.walk_stmts(s):
        if isinstance(t, lir.Store):
            bufs.add(t.buffer)
        for e in lir.exprs_of(t):
            for n in E.walk(e):
                if isinstance(n, E.Var):
                    names.add(n.name)
                elif isinstance(n, E.Load):
                    bufs.add(n.buffer)
    return names, bufs


class _Parallel:
    """``_Emitter``'s outlining of loops (a mixin: it uses the emitter's builder and tables): parallel
    loops, and the kernel's outermost serial loops."""

    def _outlined_loop(self, s: lir.For, stem: str,
                       in_parallel: bool) -> tuple[ir.Function, list[ir.Value], list[ir.Type]]:
        """``stem.loop(i64 first, i64 end, i64 thread, values..., ptr noalias buffers...)``: loop ``s`` over
        [first, end) as a function of its own, returning 0, or 1 when an allocation failed; and the values
        and buffers of this function it is to be called with (every symbol and buffer its body uses from
        outside), with their types as parameters. ``in_parallel``: it runs on a thread of a parallel loop
        (its scratch blocks are cached one per thread, picked by ``thread``; parallel loops inside run
        serially)."""
        names, bufs = _uses(s.body)
        values = [(k, self.syms[k]) for k in sorted(names) if k in self.syms and k != s.var]
        buffers = [(k, self.buffers[k]) for k in sorted(bufs) if k in self.buffers]
        captured = [v for _, (v, _) in values] + [p for _, (p, _) in buffers]
        types = [_PTR if isinstance(v.type, ir.PointerType) else v.type for v in captured]
        loop = ir.Function(self.m, ir.FunctionType(_I32, [_I64, _I64, _I64, *types]), f"{stem}.loop")
        loop.linkage = "internal"
        sub = type(self)(self.m, loop, self.shared, in_parallel=in_parallel)
        if in_parallel:
            sub.tid = loop.args[2]
        params = loop.args[3:]
        for (name, (_, t)), p in zip(values, params[:len(values)], strict=True):
            p.name = name
            sub.syms[name] = (p, t)
        for (name, (_, t)), p in zip(buffers, params[len(values):], strict=True):
            p.name = name
            p.add_attribute("noalias")
            sub.buffers[name] = (p, t)
        sub._loop(s.var, loop.args[0], loop.args[1], s.body)
        sub.b.ret(ir.Constant(_I32, 0))
        return loop, captured, types

    def _serial_outlined(self, s: lir.For) -> None:
        """One of the kernel's outermost serial loops as a function of its own, called once: the backend
        can then optimise it apart from the kernel (``split.py``: its own module on a second thread);
        where it does not, LLVM inlines it back (an internal function called once)."""
        b = self.b
        lo = self.index(s.min)
        k = self.shared.outlined
        self.shared.outlined += 1
        loop, captured, _ = self._outlined_loop(s, f"{self.shared.name}.ser{k}", in_parallel=False)
        rc = b.call(loop, [lo, b.add(lo, self.index(s.extent)), ir.Constant(_I64, 0), *captured])
        ok = self.fn.append_basic_block(f"{self.shared.name}.ser{k}.ok")
        b.cbranch(b.icmp_signed("!=", rc, ir.Constant(_I32, 0)), self._fail_block(), ok)
        b.position_at_end(ok)

    def _parallel_for(self, s: lir.For) -> None:
        """Outline the loop and run it on libgomp's threads, which take chunks of iterations as they
        finish the last (dynamic scheduling: entries of different lengths balance).

        Three functions. ``K.parN.loop(i64 first, i64 end, i64 thread, values..., ptr noalias
        buffers...)`` runs iterations [first, end) and returns 0, or 1 when an allocation failed; its
        parameters are ``noalias`` as the kernel's are, and its scratch allocations cache one block
        per thread. ``K.parN.body(ptr closure)`` is what every thread runs: it claims the next chunk
        with an atomic add on the closure's counter until none is left (about 16 chunks per thread,
        at least one iteration each) and records a failure with an atomic or. The caller fills the
        closure ``{i64 min, i64 extent, i32 failed, i64 next, values..., buffers...}`` (every symbol
        and buffer the body uses from outside) on its stack, calls ``GOMP_parallel`` and returns 1 if
        a thread failed. Parallel loops inside run serially in each thread."""
        b = self.b
        lo, n = self.index(s.min), self.index(s.extent)
        k = self.shared.outlined
        self.shared.outlined += 1
        stem = f"{self.shared.name}.par{k}"
        loop, captured, types = self._outlined_loop(s, stem, in_parallel=True)

        fields = [_I64, _I64, _I32, _I64, *types]
        closure_t = ir.LiteralStructType(fields)
        body = ir.Function(self.m, ir.FunctionType(_VOID, [_PTR]), f"{stem}.body")
        body.linkage = "internal"
        bb = ir.IRBuilder(body.append_basic_block("entry"))
        cl = body.args[0]

        def field(j):
            return bb.gep(cl, [ir.Constant(_I32, 0), ir.Constant(_I32, j)], source_etype=closure_t)

        first, count = bb.load(field(0), typ=_I64), bb.load(field(1), typ=_I64)
        omp = lambda name: bb.sext(bb.call(self.intrinsic(name, _I32, []), []), _I64)  # noqa: E731
        tid, nt = omp("omp_get_thread_num"), omp("omp_get_num_threads")
        chunk = bb.sdiv(count, bb.mul(nt, ir.Constant(_I64, 16)))
        chunk = bb.select(bb.icmp_signed("<", chunk, ir.Constant(_I64, 1)), ir.Constant(_I64, 1), chunk)
        args = [bb.load(field(4 + j), typ=t) for j, t in enumerate(types)]
        claim, run, done = (body.append_basic_block(k) for k in ("claim", "run", "done"))
        bb.branch(claim)
        bb.position_at_end(claim)
        taken = bb.atomic_rmw("add", field(3), chunk, "monotonic")
        bb.cbranch(bb.icmp_signed("<", taken, count), run, done)
        bb.position_at_end(run)
        stop = bb.add(taken, chunk)
        stop = bb.select(bb.icmp_signed("<", stop, count), stop, count)
        rc = bb.call(loop, [bb.add(first, taken), bb.add(first, stop), tid, *args])
        with bb.if_then(bb.icmp_signed("!=", rc, ir.Constant(_I32, 0))):
            bb.atomic_rmw("or", field(2), ir.Constant(_I32, 1), "monotonic")
        bb.branch(claim)
        bb.position_at_end(done)
        bb.ret_void()

        gomp = self.intrinsic("GOMP_parallel", _VOID, [_PTR, _PTR, _I32, _I32])
        closure = self.alloca(closure_t)
        slot = lambda j: b.gep(closure, [ir.Constant(_I32, 0), ir.Constant(_I32, j)])  # noqa: E731
        with b.if_then(b.icmp_signed(">", n, ir.Constant(_I64, 0))):
            for j, v in enumerate([lo, n, ir.Constant(_I32, 0), ir.Constant(_I64, 0), *captured]):
                b.store(v, slot(j))
            if self.shared.threads is None:
                nthreads = ir.Constant(_I32, 0)  # libgomp's default: OMP_NUM_THREADS, else every core
            else:
                cap = ir.Constant(_I64, self.shared.threads)
                nthreads = b.trunc(b.select(b.icmp_signed("<", n, cap), n, cap), _I32)
            b.call(gomp, [body, closure, nthreads, ir.Constant(_I32, 0)])
            ok = self.fn.append_basic_block(f"{stem}.ok")
            failed = b.load(slot(2))
            b.cbranch(b.icmp_signed("!=", failed, ir.Constant(_I32, 0)), self._fail_block(), ok)
            b.position_at_end(ok)
