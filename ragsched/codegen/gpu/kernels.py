"""Splitting a lowered loop nest into host code and GPU kernels (Halide's ``InjectHostDevBufferCopies``
and ``FuseGPUThreadLoops`` in one pass, for one memory space).

Every nest of ``gpu_block`` loops becomes a kernel, launched where the nest was; host code keeps the
lets, allocations (device global memory) and serial loops around them. Host statements that touch
memory outside any GPU loop (the offset tables of a flattened ragged loop, an update over an RDom only)
run as a kernel of one thread, so that all data stays on the device. Inside a kernel, thread loops map
onto ``threadIdx`` (the innermost on x), a buffer allocated between the block and thread loops lives in
shared memory, one allocated inside the thread loops in registers, and block-level work outside any
thread loop runs on one thread. Where these rules cannot hold (a thread loop of data-dependent extent, a
block loop whose extent depends on another GPU loop, shared memory of unknown size) the pass refuses with
a message naming the loop or the Func.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ...algebra import expr as E
from ...algebra import types as T
from ...algebra.bounds import constant_upper_bound
from ...algebra.types import DType
from .. import ir
from ..ir import ForKind

I64 = T.ADDRESS
AXES = "xyz"
MAX_THREADS = 1024
WARP = 32
#: the updates gpu_lanes reduces, with the value a lane starts from
_REDUCTIONS = {E.Add: "sum", E.Max: "max", E.Min: "min"}
MAX_SHARED_BYTES = 48 * 1024  # static shared memory per block


def thread_index(axis: int) -> E.Var:
    return E.Var(f"threadIdx.{AXES[axis]}", I64)


def block_index(axis: int) -> E.Var:
    return E.Var(f"blockIdx.{AXES[axis]}", I64)


@dataclass(frozen=True)
class DeviceKernel:
    """One ``__global__`` function. ``body`` binds the block variables from ``blockIdx`` first; thread
    loops stay ``For`` loops of kind GPU_THREAD, each on the axis ``thread_axes`` gives it."""

    name: str
    body: ir.Stmt
    block_dims: tuple[int, int, int]
    thread_axes: tuple[tuple[str, int], ...]
    buffers: tuple[tuple[str, DType], ...]  # global buffers it reads or writes
    scalars: tuple[tuple[str, DType], ...]  # host values it uses
    shared: tuple[tuple[str, DType, int], ...]  # shared buffers: name, type, elements
    local: tuple[tuple[str, DType, int], ...]  # per-thread arrays


@dataclass(frozen=True)
class GpuProgram:
    """What a GPU backend renders: host statements with ``Launch`` nodes, and the kernels they launch."""

    name: str
    host: ir.Stmt
    kernels: tuple[DeviceKernel, ...]
    buffer_types: tuple[tuple[str, DType], ...]  # every global buffer: arguments and host allocations

    def kernel(self, name: str) -> DeviceKernel:
        return next(k for k in self.kernels if k.name == name)


def _has_gpu_loop(s: ir.Stmt) -> bool:
    return any(isinstance(t, ir.For) and t.kind in (ForKind.GPU_BLOCK, ForKind.GPU_THREAD) for t in ir.walk_stmts(s))


def _has_thread_loop(s: ir.Stmt) -> bool:
    return any(isinstance(t, ir.For) and t.kind in (ForKind.GPU_THREAD, ForKind.GPU_LANE) for t in ir.walk_stmts(s))


def _touches_memory(s: ir.Stmt) -> bool:
    return any(isinstance(t, ir.Store) for t in ir.walk_stmts(s))


def split_kernels(lk: ir.LoweredKernel, memory: dict[str, str] | None = None) -> GpuProgram:
    """``lk``'s body as host code and kernels; ``memory`` gives the memory a Func's buffer was asked to
    live in (``store_in``), checked against where the buffer is allocated."""
    return _Splitter(lk, dict(memory or {})).run()


class _Splitter:
    def __init__(self, lk: ir.LoweredKernel, memory: dict[str, str]):
        self.lk = lk
        self.memory = memory
        self.kernels: list[DeviceKernel] = []
        self.types = {a.name: a.dtype for a in lk.arguments if a.is_buffer}
        self.host_buffers = set(self.types)
        self.count = itertools.count()

    def run(self) -> GpuProgram:
        host = self.host(self.lk.body)
        return GpuProgram(self.lk.name, host, tuple(self.kernels),
                          tuple((n, self.types[n]) for n in sorted(self.host_buffers)))

    # -- host side
    def host(self, s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.Block):
            return ir.block(*(self.host(t) for t in s.stmts))
        if isinstance(s, ir.Produce):
            return ir.Produce(s.name, self.host(s.body))
        if isinstance(s, ir.LetStmt):
            return ir.LetStmt(s.name, s.value, self.host(s.body))
        if isinstance(s, ir.Allocate):
            mem = self.memory.get(s.buffer, "global")
            if mem != "global":
                raise ValueError(f"Func {s.buffer}: store_in({mem!r}) needs its buffer inside a GPU kernel "
                                 "(compute_at or store_at a gpu_blocks loop for shared memory, a gpu_threads loop for "
                                 "registers); it is allocated outside every GPU loop")
            self.types[s.buffer] = s.dtype
            self.host_buffers.add(s.buffer)
            return ir.Allocate(s.buffer, s.dtype, s.size, self.host(s.body))
        if isinstance(s, ir.For) and s.kind == ForKind.GPU_BLOCK:
            return self.kernel(s)
        if isinstance(s, ir.For) and s.kind != ForKind.GPU_THREAD and _has_gpu_loop(s):
            return ir.For(s.var, s.min, s.extent, s.kind, self.host(s.body))
        if isinstance(s, ir.IfThenElse) and _has_gpu_loop(s):
            return ir.IfThenElse(s.cond, self.host(s.then), None if s.otherwise is None else self.host(s.otherwise))
        if not _touches_memory(s) and not _has_gpu_loop(s):
            return s
        return self.kernel(s)  # thread loops without blocks, or host work on device memory: one block

    # -- a kernel
    def kernel(self, s: ir.Stmt) -> ir.Stmt:
        name = f"{self.lk.name}_k{len(self.kernels)}".replace(".", "_")
        chain, lets, body = [], [], s
        while True:
            if isinstance(body, ir.For) and body.kind == ForKind.GPU_BLOCK:
                chain.append((body, list(lets)))
                lets.clear()
                body = body.body
            elif isinstance(body, ir.LetStmt) and _has_block_loop(body.body):
                lets.append((body.name, body.value))
                body = body.body
            else:
                break
        if len(chain) > 3:
            raise ValueError(f"loops {', '.join(f.var for f, _ in chain)}: a GPU grid has at most three block loops")
        inner_names: set[str] = set()
        grid: list[E.Expr] = []
        for loop, before in chain:
            for n, _ in before:
                inner_names.add(n)
            used = E.free_vars(loop.extent) & inner_names
            if used:
                raise ValueError(f"GPU block loop {loop.var} has extent {loop.extent}, which depends on "
                                 f"{sorted(used)[0]} (an outer GPU loop): a grid's extents are fixed at launch; a "
                                 "ragged loop can be a GPU loop only when flattened (fuse(b, i)) or as the loop over "
                                 "entries")
            inner_names.add(loop.var)
            grid.append(loop.extent)
        device = self.bind_blocks(chain, lets, body, name)
        kernel = self.finish(name, device)
        self.kernels.append(kernel)
        extents = list(reversed(grid)) + [E.const(1, I64)] * (3 - len(grid))
        return ir.Launch(name, tuple(extents))

    def bind_blocks(self, chain, lets, body, name) -> ir.Stmt:
        device = self.device(body, name, in_threads=False)
        for n, v in reversed(lets):
            device = ir.LetStmt(n, v, device)
        depth = len(chain)
        for k in range(depth - 1, -1, -1):
            loop, before = chain[k]
            device = ir.LetStmt(loop.var, E.add(loop.min, block_index(depth - 1 - k)), device)
            for n, v in reversed(before):
                device = ir.LetStmt(n, v, device)
        return device

    def device(self, s: ir.Stmt, kname: str, in_threads: bool, lets: dict | None = None) -> ir.Stmt:
        lets = {} if lets is None else lets
        if isinstance(s, ir.Block):
            return ir.block(*(self.device(t, kname, in_threads, lets) for t in s.stmts))
        if isinstance(s, ir.For) and s.kind == ForKind.GPU_BLOCK:
            raise ValueError(f"GPU block loop {s.var} is inside other device code: the block loops of a kernel must be "
                             "nested directly in each other, outside everything else")
        if isinstance(s, ir.For) and s.kind == ForKind.GPU_LANE:
            return self.device(warp_reduction(s), kname, in_threads, lets)
        if isinstance(s, ir.For) and s.kind == ForKind.GPU_THREAD and not isinstance(s.extent, E.Const):
            bound = _constant_bound(s.extent, lets)
            if bound is not None:  # a guarded tile's region: as many threads as its largest, the rest idle
                inside = E.lt(E.Var(s.var, I64), E.add(s.min, E.Cast(s.extent, I64) if s.extent.dtype != I64
                                                       else s.extent))
                return ir.For(s.var, s.min, bound, s.kind,
                              ir.IfThenElse(inside, self.device(s.body, kname, True, lets)))
        if isinstance(s, ir.For) and s.kind == ForKind.GPU_THREAD:
            if not isinstance(s.extent, E.Const):
                raise ValueError(f"GPU thread loop {s.var} has extent {s.extent}, which is not a constant: a "
                                 "block's threads are fixed at launch; split the loop by a constant factor (gpu_tile), "
                                 "or flatten a ragged loop (fuse(b, i)) before mapping it to threads")
            return ir.For(s.var, s.min, s.extent, s.kind, self.device(s.body, kname, True, lets))
        if not in_threads and not _has_thread_loop(s) and _touches_memory(s):
            # block-level work outside the thread loops: one thread does it
            return ir.For(f"{kname}.single{next(self.count)}", E.const(0, I64), E.const(1, I64), ForKind.GPU_THREAD,
                          self.device(s, kname, True, lets))
        if isinstance(s, ir.For):
            if s.kind == ForKind.PARALLEL:
                raise ValueError(f"loop {s.var} is parallel inside a GPU kernel; use gpu_threads")
            return ir.For(s.var, s.min, s.extent, s.kind, self.device(s.body, kname, in_threads, lets))
        if isinstance(s, ir.LetStmt):
            return ir.LetStmt(s.name, s.value, self.device(s.body, kname, in_threads, {**lets, s.name: s.value}))
        if isinstance(s, ir.Produce):
            return ir.Produce(s.name, self.device(s.body, kname, in_threads, lets))
        if isinstance(s, ir.IfThenElse):
            return ir.IfThenElse(s.cond, self.device(s.then, kname, in_threads, lets),
                                 None if s.otherwise is None else self.device(s.otherwise, kname, in_threads, lets))
        if isinstance(s, ir.Allocate):
            where = "register" if in_threads else "shared"
            asked = self.memory.get(s.buffer, "global")
            if asked not in ("global", where):
                level = "GPU thread" if in_threads else "GPU block (outside its thread loops)"
                raise ValueError(f"Func {s.buffer}: store_in({asked!r}), but its buffer is allocated at a {level} "
                                 f"level, where it lives in {where} memory; move its store level")
            size = s.size if isinstance(s.size, E.Const) else _constant_bound(s.size, lets)
            if size is None:
                raise ValueError(f"Func {s.buffer}: its buffer inside a GPU kernel ({where} memory) has size {s.size}, "
                                 "which is not a constant; bound() its extents or compute it at a loop of constant "
                                 "extent")
            self.types[s.buffer] = s.dtype
            return ir.Allocate(s.buffer, s.dtype, size, self.device(s.body, kname, in_threads, lets))
        return s

    def finish(self, name: str, body: ir.Stmt) -> DeviceKernel:
        from .barriers import insert_barriers

        axes: dict[str, int] = {}
        dims = [1, 1, 1]

        def assign(s: ir.Stmt) -> int:
            """Thread loops below ``s`` (deepest chain); gives each thread loop its axis."""
            if isinstance(s, ir.For) and s.kind == ForKind.GPU_THREAD:
                below = assign(s.body)
                if below > 2:
                    raise ValueError(f"GPU thread loop {s.var}: a block has at most three thread dimensions")
                axes[s.var] = below
                dims[below] = max(dims[below], int(s.extent.value))
                return below + 1
            kids = [s.body] if isinstance(s, (ir.For, ir.LetStmt, ir.Allocate, ir.Produce)) else (
                list(s.stmts) if isinstance(s, ir.Block) else
                [s.then] + ([s.otherwise] if s.otherwise is not None else []) if isinstance(s, ir.IfThenElse) else [])
            return max((assign(k) for k in kids), default=0)

        assign(body)
        lanes = [v for v in axes if v.endswith(".lane")]
        if lanes and (dims[0] % WARP or any(axes[v] for v in lanes)):
            raise ValueError(f"kernel {name}: the warp lanes of gpu_lanes ({', '.join(lanes)}) must be the innermost "
                             f"thread loop of a block {WARP}k threads wide in x; its other thread loops make it "
                             f"{dims[0]} wide")
        if dims[0] * dims[1] * dims[2] > MAX_THREADS:
            raise ValueError(f"kernel {name}: its thread loops need {dims[0]}x{dims[1]}x{dims[2]} threads per block, "
                             f"more than the GPU's {MAX_THREADS}; use smaller thread tiles")
        body = _guard_idle_axes(body, axes, dims)
        body = insert_barriers(body)
        shared, local = [], []
        for s, in_threads in _allocations(body):
            (local if in_threads else shared).append((s.buffer, s.dtype, int(s.size.value)))
        smem = sum(n * max(1, t.bits // 8) for _, t, n in shared)
        if smem > MAX_SHARED_BYTES:
            raise ValueError(f"kernel {name}: its shared buffers ({', '.join(n for n, _, _ in shared)}) take "
                             f"{smem} bytes, more than the {MAX_SHARED_BYTES} a block may have; use smaller tiles")
        free, buffers = ir.free_symbols(body)
        inside = {n for n, _, _ in shared} | {n for n, _, _ in local}
        scalars = tuple(sorted((n, t) for n, t in free.items() if not n.startswith(("threadIdx.", "blockIdx."))))
        globals_ = tuple(sorted((n, self.types[n]) for n in buffers - inside))
        return DeviceKernel(name, body, tuple(dims), tuple(sorted(axes.items())), globals_, scalars, tuple(shared),
                            tuple(local))


def _constant_bound(size: E.Expr, lets: dict) -> E.Const | None:
    """A constant at least ``size`` (with the lets in scope put in): the region of a tile with a guarded
    tail is ``max(min(rest, x + 16) - x, 0)`` long, at most 16."""
    e = size
    for _ in range(16):
        names = E.free_vars(e) & lets.keys()
        if not names:
            break
        e = E.substitute(e, {n: lets[n] for n in names})
    hi = constant_upper_bound(e)
    # a bound from a loaded length's type (2^31 - 1: a ragged row) is no thread count or storage
    return None if hi is None or hi >= 2**31 - 1 else E.const(max(hi, 1), I64)


def warp_reduction(loop: ir.For) -> ir.Stmt:
    """A ``gpu_lanes`` loop (``for r: f[i] = f[i] op e(r)``, op a sum, max or min) as 32 lanes: lane l
    combines points l, l + 32, ... in a register, the lanes combine their registers with shuffles
    (``warp_sum`` and the like, all lanes at once), and lane 0 updates ``f[i]``."""
    lets, body = [], loop.body
    while isinstance(body, ir.LetStmt):
        lets.append((body.name, body.value))
        body = body.body
    store = body
    op = type(store.value) if isinstance(store, ir.Store) else None
    target = None
    if op in _REDUCTIONS:
        for own, e in ((store.value.a, store.value.b), (store.value.b, store.value.a)):
            if isinstance(own, E.Load) and own.buffer == store.buffer and own.index == store.index:
                target = e
                break
    bound = {loop.var} | {n for n, _ in lets}
    if target is None or E.free_vars(store.index) & bound:
        raise ValueError(f"gpu_lanes loop {loop.var}: its update must be f[...] = f[...] + e, max(f[...], e) or "
                         "min(f[...], e), with f's index not depending on the loop (a reduction whose points may be "
                         f"combined in any order); got {body}".strip())
    t = store.value.dtype
    if t.name not in ("float32", "float64", "int32", "int64", "uint32", "uint64"):
        raise ValueError(f"gpu_lanes loop {loop.var}: a warp shuffles 32- and 64-bit values, not {t}")
    kind = _REDUCTIONS[op]
    lane = E.Var(f"{loop.var}.lane", I64)
    k = E.Var(f"{loop.var}.k", I64)
    acc = f"{loop.var}.acc"
    zero = E.const(0, I64)
    mine = E.Load(acc, zero, t)
    end = E.add(loop.min, loop.extent)
    step: ir.Stmt = ir.Store(acc, zero, op(mine, target))
    for n, v in reversed(lets):
        step = ir.LetStmt(n, v, step)
    point = E.add(E.add(loop.min, E.Mul(k, E.const(WARP, I64))), lane)
    strided = ir.For(k.name, zero, E.FloorDiv(E.add(loop.extent, E.const(WARP - 1, I64)), E.const(WARP, I64)),
                     ForKind.SERIAL, ir.LetStmt(loop.var, point, ir.IfThenElse(E.lt(E.Var(loop.var, I64), end), step)))
    start = ir.Store(acc, zero, _identity(kind, t))
    combine = ir.Store(acc, zero, E.Call(f"warp_{kind}", (mine,), t))
    update = ir.IfThenElse(E.EQ(lane, zero), ir.Store(store.buffer, store.index,
                                                       op(E.Load(store.buffer, store.index, t), mine)))
    body = ir.Allocate(acc, t, E.const(1, I64), ir.block(start, strided, combine, update))
    return ir.For(lane.name, zero, E.const(WARP, I64), ForKind.GPU_THREAD, body)


def _identity(kind: str, t: DType) -> E.Const:
    if kind == "sum":
        return E.const(0, t)
    if t.is_float:
        return E.const(float("-inf") if kind == "max" else float("inf"), t)
    lo, hi = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.is_signed else (0, (1 << t.bits) - 1)
    return E.const(lo if kind == "max" else hi, t)


def _has_block_loop(s: ir.Stmt) -> bool:
    return any(isinstance(t, ir.For) and t.kind == ForKind.GPU_BLOCK for t in ir.walk_stmts(s))


def _allocations(s: ir.Stmt, in_threads: bool = False):
    """(Allocate, inside thread loops) for every allocation of a kernel body."""
    if isinstance(s, ir.Allocate):
        yield s, in_threads
    if isinstance(s, ir.For):
        yield from _allocations(s.body, in_threads or s.kind == ForKind.GPU_THREAD)
    elif isinstance(s, ir.Block):
        for t in s.stmts:
            yield from _allocations(t, in_threads)
    elif isinstance(s, (ir.LetStmt, ir.Allocate, ir.Produce)):
        yield from _allocations(s.body, in_threads)
    elif isinstance(s, ir.IfThenElse):
        yield from _allocations(s.then, in_threads)
        if s.otherwise is not None:
            yield from _allocations(s.otherwise, in_threads)


def _guard_idle_axes(s: ir.Stmt, axes: dict[str, int], dims: list[int]) -> ir.Stmt:
    """Each outermost thread loop runs only on the threads whose indices on the axes it does not use are
    0: a nest over x alone must not run once per y as well."""
    if isinstance(s, ir.For) and s.kind == ForKind.GPU_THREAD:
        used = {axes[t.var] for t in ir.walk_stmts(s) if isinstance(t, ir.For) and t.kind == ForKind.GPU_THREAD}
        idle = [a for a in range(3) if a not in used and dims[a] > 1]
        if not idle:
            return s
        cond = E.EQ(thread_index(idle[0]), E.const(0, I64))
        for a in idle[1:]:
            cond = E.And(cond, E.EQ(thread_index(a), E.const(0, I64)))
        return ir.IfThenElse(cond, s)
    if isinstance(s, ir.Block):
        return ir.block(*(_guard_idle_axes(t, axes, dims) for t in s.stmts))
    if isinstance(s, ir.For):
        return ir.For(s.var, s.min, s.extent, s.kind, _guard_idle_axes(s.body, axes, dims))
    if isinstance(s, ir.LetStmt):
        return ir.LetStmt(s.name, s.value, _guard_idle_axes(s.body, axes, dims))
    if isinstance(s, ir.Allocate):
        return ir.Allocate(s.buffer, s.dtype, s.size, _guard_idle_axes(s.body, axes, dims))
    if isinstance(s, ir.Produce):
        return ir.Produce(s.name, _guard_idle_axes(s.body, axes, dims))
    if isinstance(s, ir.IfThenElse):
        return ir.IfThenElse(s.cond, _guard_idle_axes(s.then, axes, dims),
                             None if s.otherwise is None else _guard_idle_axes(s.otherwise, axes, dims))
    return s
