"""The GPU emulator: runs a lowered GPU kernel on the CPU with CUDA's semantics, and checks what a GPU
would not check.

Each block runs in turn; its threads are Python generators (``pyrender``) that the emulator runs up to
the next barrier one after the other, so a value a thread reads without a barrier after another thread
wrote it is caught, not made right by the order of execution. Every load and store checks its index
against the buffer (``OutOfBoundsError``); every access is recorded per address with the thread, block
and barrier interval that made it, and two accesses by threads with no barrier between them, one of them
a write, raise ``RaceError``: within a block between barriers, across blocks always (blocks never
synchronise). A pure definition's store (``Store.point``) that writes the value already there is not a
race: overlapping tiles (``tail="shift"``) write the same values twice on a GPU too. Shared and register
buffers start as NaN (integers as a large sentinel), so a read of something never written shows in the
result.
"""

from __future__ import annotations

import inspect

import numpy as np

from ...algebra.f2 import offset_conflicts
from .. import ir
from .kernels import DeviceKernel, GpuProgram
from .pyrender import SCOPE, PyWriter


class RaceError(RuntimeError):
    """Two GPU threads touched one address, one of them writing, with no barrier between them."""


class OutOfBoundsError(IndexError):
    """A GPU thread read or wrote outside a buffer."""


class DivergentBarrierError(RuntimeError):
    """The threads of one block met different numbers of barriers."""


def poison(dtype: np.dtype, size: int) -> np.ndarray:
    if dtype.kind == "f":
        return np.full(max(size, 0), np.nan, dtype)
    if dtype.kind == "b":
        return np.ones(max(size, 0), dtype)
    return np.full(max(size, 0), np.iinfo(dtype).max // 3, dtype)


# ------------------------------------------------------------------------------------------- rendering
class _KernelWriter(PyWriter):
    def __init__(self, k: DeviceKernel):
        super().__init__({n: str(i) for i, (n, _) in enumerate(k.buffers)})
        base = len(k.buffers)
        self.buffer_slot.update({n: str(base + i) for i, (n, _, _) in enumerate(k.shared)})
        self.local = {n: i for i, (n, _, _) in enumerate(k.local)}
        self.thread_axes = dict(k.thread_axes)

    def load(self, buffer, index):
        if buffer in self.local:
            return f"M.ldl(L{self.local[buffer]}, {index}, {buffer!r})"
        return super().load(buffer, index)

    def store(self, buffer, index, value, point):
        if buffer in self.local:
            return f"M.stl(L{self.local[buffer]}, {index}, {value}, {buffer!r})"
        return super().store(buffer, index, value, point)

    def allocate(self, s: ir.Allocate, depth: int) -> None:
        if s.buffer in self.local:
            self.emit(f"L{self.local[s.buffer]} = M.new_local({self.local[s.buffer]})", depth)
        self.stmt(s.body, depth)


def render_kernel(k: DeviceKernel) -> tuple[str, dict]:
    """The kernel as the Python source of ``def kernel(M, S, b0, b1, b2, t0, t1, t2)``, and the constants
    it uses."""
    w = _KernelWriter(k)
    for n, _ in k.scalars:
        w.emit(f"{w.name(n)} = S[{n!r}]", 1)
    w.stmt(k.body, 1)
    consts = "".join(f"{c} = _C[{c!r}]\n" for c in w.consts)
    return consts + w.source("def kernel(M, S, b0, b1, b2, t0, t1, t2):"), w.consts


class _HostWriter(PyWriter):
    def __init__(self, program: GpuProgram):
        super().__init__()
        self.program = program

    def load(self, buffer, index):
        return f"R.read({buffer!r}, {index})"

    def store(self, buffer, index, value, point):  # pragma: no cover - kernels.split_kernels moves them
        raise AssertionError("host code stores nothing")

    def allocate(self, s: ir.Allocate, depth: int) -> None:
        self.emit(f"R.alloc({s.buffer!r}, {s.dtype.np.name!r}, {self.expr(s.size)})", depth)
        self.stmt(s.body, depth)

    def launch(self, s: ir.Launch, depth: int) -> None:
        k = self.program.kernel(s.kernel)
        scalars = ", ".join(f"{n!r}: {self.name(n)}" for n, _ in k.scalars)
        grid = ", ".join(self.expr(g) for g in s.grid)
        self.emit(f"R.launch({s.kernel!r}, ({grid}), {{{scalars}}})", depth)


def render_host(program: GpuProgram, scalars: list[str]) -> tuple[str, dict]:
    """The host code as the Python source of ``def host(R, S)``: ``S`` holds the kernel's scalar arguments
    by name; ``R`` allocates device buffers, reads single values back and launches kernels."""
    w = _HostWriter(program)
    for n in scalars:
        w.emit(f"{w.name(n)} = S[{n!r}]", 1)
    w.stmt(program.host, 1)
    consts = "".join(f"{c} = _C[{c!r}]\n" for c in w.consts)
    return consts + w.source("def host(R, S):"), w.consts


def load_source(src: str, consts: dict, name: str):
    scope = dict(SCOPE)
    scope["_C"] = consts
    exec(compile(src, f"<ragsched {name}>", "exec"), scope)  # noqa: S102 - generated from our own IR
    return scope


def compile_kernel(k: DeviceKernel):
    return load_source(*render_kernel(k), k.name)["kernel"]


def compile_host(program: GpuProgram, scalars: list[str]):
    return load_source(*render_host(program, scalars), program.name)["host"]


# ------------------------------------------------------------------------------------------- running
class Traffic:
    """What the emulated launches asked of global memory, counted as a GPU serves it: the accesses of one
    warp (32 consecutive threads of a block) at one load or store of the source, the n-th time each of them
    runs it, form one request, served in 32-byte sectors. A cost model's inputs (``autosched.gpu``)."""

    def __init__(self):
        self.requests: dict = {}  # (launch, block, warp, site, n) -> sectors touched
        self.launches = 0
        self.blocks = 0
        self.accesses = 0  # loads and stores of single elements, global memory
        self.shared_accesses = 0
        self.shared_requests: dict = {}  # (launch, block, warp, site, n) -> (element bits, offsets)
        self._visits: dict = {}

    @property
    def sectors(self) -> int:
        return sum(len(s) for s in self.requests.values())

    @property
    def shared_wavefronts(self) -> int:
        """Shared-memory requests, each one wavefront plus its bank conflicts (``f2.offset_conflicts``)."""
        return sum(1 + offset_conflicts(offsets, bits) for bits, offsets in self.shared_requests.values())

    def record(self, memory, k: int, i: int, site: int) -> None:
        a = memory.arrays[k]
        tx, ty, tz = memory.thread
        dx, dy, _ = memory.k.block_dims
        warp = (tx + dx * (ty + dy * tz)) // 32
        visit = (memory.block, memory.thread, site)
        n = self._visits.get(visit, 0)
        self._visits[visit] = n + 1
        key = (self.launches, memory.block, warp, site, n)
        if k >= memory.n_global:
            self.shared_accesses += 1
            self.shared_requests.setdefault(key, (a.itemsize * 8, []))[1].append(i)
            return
        self.accesses += 1
        self.requests.setdefault(key, set()).add((k, i * a.itemsize // 32))


class _Memory:
    """Loads and stores of one kernel launch, checked."""

    traffic: Traffic | None = None

    def __init__(self, k: DeviceKernel, arrays: list[np.ndarray]):
        self.k = k
        self.arrays = list(arrays) + [poison(t.np, n) for _, t, n in k.shared]
        self.names = [n for n, _ in k.buffers] + [n for n, _, _ in k.shared]
        self.ints = [a.dtype.kind in "iu" for a in self.arrays]
        self.n_global = len(arrays)
        self.global_track: dict = {}
        self.shared_track: dict = {}
        self.block = (0, 0, 0)
        self.thread = (0, 0, 0)
        self.epoch = 0

    def begin_block(self, block) -> None:
        self.block, self.epoch = block, 0
        for i, (_, t, n) in enumerate(self.k.shared):
            self.arrays[self.n_global + i] = poison(t.np, n)
        self.shared_track = {}

    def _where(self) -> str:
        return f"kernel {self.k.name}, block {self.block}, thread {self.thread}"

    def _check(self, k, i, what):
        a = self.arrays[k]
        if not 0 <= i < a.shape[0]:
            raise OutOfBoundsError(f"{self._where()} {what} {self.names[k]}[{i}], outside its {a.shape[0]} elements")
        return a

    def _unordered(self, other) -> bool:
        """Whether an access ``other`` (block, epoch, thread) may run at the same time as the current one."""
        blk, ep, th = other
        if blk != self.block:
            return True
        return ep == self.epoch and th != self.thread

    def ld(self, k, i, site=0):
        a = self._check(k, i, "reads")
        if self.traffic is not None:
            self.traffic.record(self, k, i, site)
        track = self.global_track if k < self.n_global else self.shared_track
        e = track.get((k, i))
        me = (self.block, self.epoch, self.thread)
        if e is None:
            track[(k, i)] = [None, False, [me]]
        else:
            if e[0] is not None and not e[1] and self._unordered(e[0]):
                raise RaceError(f"{self._where()} reads {self.names[k]}[{i}], which block {e[0][0]} thread "
                                f"{e[0][2]} wrote with no barrier between them")
            readers = e[2]
            if not readers or readers[-1] != me:
                readers.append(me)
                if len(readers) > 16:
                    e[2] = [r for r in readers if self._unordered(r)][-16:]
        v = a[i]
        return int(v) if self.ints[k] else v

    def st(self, k, i, v, point, site=0):
        a = self._check(k, i, "writes")
        if self.traffic is not None:
            self.traffic.record(self, k, i, site)
        old = a[i]
        a[i] = v
        if point and (a[i] == old or (old != old and a[i] != a[i])):
            return  # the same value again: overlapping tiles of a pure definition
        track = self.global_track if k < self.n_global else self.shared_track
        me = (self.block, self.epoch, self.thread)
        e = track.get((k, i))
        if e is not None:
            if e[0] is not None and self._unordered(e[0]):
                raise RaceError(f"{self._where()} writes {self.names[k]}[{i}], which block {e[0][0]} thread "
                                f"{e[0][2]} also wrote with no barrier between them")
            for r in e[2]:
                if self._unordered(r):
                    raise RaceError(f"{self._where()} writes {self.names[k]}[{i}], which block {r[0]} thread "
                                    f"{r[2]} read with no barrier between them")
        track[(k, i)] = [me, point, []]

    def new_local(self, j):
        _, t, n = self.k.local[j]
        return poison(t.np, n)

    def ldl(self, a, i, name):
        if not 0 <= i < a.shape[0]:
            raise OutOfBoundsError(f"{self._where()} reads {name}[{i}], outside its {a.shape[0]} elements")
        v = a[i]
        return int(v) if a.dtype.kind in "iu" else v

    def stl(self, a, i, v, name):
        if not 0 <= i < a.shape[0]:
            raise OutOfBoundsError(f"{self._where()} writes {name}[{i}], outside its {a.shape[0]} elements")
        a[i] = v


def run_kernel(k: DeviceKernel, fn, grid, arrays: list[np.ndarray], scalars: dict,
               traffic: Traffic | None = None) -> None:
    """One launch of ``k`` (``fn``: ``compile_kernel(k)``) on ``grid`` blocks, over flat ``arrays`` (one per
    ``k.buffers``, in order); ``traffic``, when given, counts its memory requests."""
    gx, gy, gz = (int(g) for g in grid)
    dx, dy, dz = k.block_dims
    if min(gx, gy, gz) <= 0:
        return
    M = _Memory(k, arrays)
    M.traffic = traffic
    if traffic is not None:
        traffic.launches += 1
        traffic.blocks += gx * gy * gz
    barriers = inspect.isgeneratorfunction(fn)
    threads = [(tx, ty, tz) for tz in range(dz) for ty in range(dy) for tx in range(dx)]
    with np.errstate(all="ignore"):
        for bz in range(gz):
            for by in range(gy):
                for bx in range(gx):
                    M.begin_block((bx, by, bz))
                    if not barriers:
                        for t in threads:
                            M.thread = t
                            fn(M, scalars, bx, by, bz, *t)
                        continue
                    _run_block(k, M, {t: fn(M, scalars, bx, by, bz, *t) for t in threads}, (bx, by, bz))


_WARP_OPS = {"warp_sum": lambda a, b: a + b, "warp_max": lambda a, b: b if b > a else a,
             "warp_min": lambda a, b: b if b < a else a}


def _run_block(k: DeviceKernel, M: _Memory, gens: dict, block) -> None:
    """The threads of one block, each up to its next barrier in turn, then the next barrier interval. A
    thread that yields a tuple waits at a warp collective (``warp_sum``, ...): once its warp's 32 lanes
    are all there, each gets the butterfly combination of their values (as ``__shfl_xor_sync`` does it)
    and runs on."""
    dx, dy, _ = k.block_dims
    warp_of = {t: (t[0] + dx * (t[1] + dy * t[2])) // 32 for t in gens}
    lane_of = {t: (t[0] + dx * (t[1] + dy * t[2])) % 32 for t in gens}
    while gens:
        at_barrier, done, waiting = [], [], {}
        sends: dict = {}
        active = list(gens)
        while active:
            for t in active:
                M.thread = t
                try:
                    got = gens[t].send(sends.pop(t, None))
                except StopIteration:
                    done.append(t)
                    continue
                if got is None:
                    at_barrier.append(t)
                else:
                    waiting.setdefault(warp_of[t], []).append((t, got))
            active = []
            for w, items in list(waiting.items()):
                members = [t for t in gens if warp_of[t] == w]
                if len(items) < len(members):
                    continue
                names = {got[0] for _, got in items}
                if len(names) != 1 or len(items) != 32:
                    raise DivergentBarrierError(f"kernel {k.name}, block {block}, warp {w}: its lanes meet different "
                                                f"warp collectives ({', '.join(sorted(names))}) or not all 32 do")
                combine = _WARP_OPS[names.pop()]
                vals = [None] * 32
                for t, got in items:
                    vals[lane_of[t]] = got[1]
                for o in (16, 8, 4, 2, 1):
                    vals = [combine(vals[i], vals[i ^ o]) for i in range(32)]
                for t, _ in items:
                    sends[t] = vals[lane_of[t]]
                    active.append(t)
                del waiting[w]
        if waiting:
            w = next(iter(waiting))
            raise DivergentBarrierError(f"kernel {k.name}, block {block}, warp {w}: some lanes wait at a shuffle the "
                                        "others never reach")
        if at_barrier and done:
            raise DivergentBarrierError(f"kernel {k.name}, block {block}: thread {done[0]} finished while thread "
                                        f"{at_barrier[0]} waits at a barrier")
        for t in done:
            del gens[t]
        M.epoch += 1


class EmulatedProgram:
    """A GpuProgram ready to run on NumPy arrays: ``run(buffers, scalars)``."""

    def __init__(self, program: GpuProgram, scalars: list[str]):
        self.program = program
        self.kernels = {k.name: (k, compile_kernel(k)) for k in program.kernels}
        self.host = compile_host(program, scalars)
        self.traffic: Traffic | None = None  # set to count the next runs' memory requests

    def run(self, buffers: dict[str, np.ndarray], scalars: dict) -> None:
        self.host(_EmulatedHost(self, buffers), scalars)


class _EmulatedHost:
    def __init__(self, prog: EmulatedProgram, buffers: dict[str, np.ndarray]):
        self.prog = prog
        self.buffers = {}
        for n, a in buffers.items():
            if not a.flags.c_contiguous:
                raise ValueError(f"buffer {n} is not contiguous")
            self.buffers[n] = a.reshape(-1)

    def alloc(self, name, dtype, size):
        self.buffers[name] = poison(np.dtype(dtype), max(int(size), 1))

    def read(self, name, index):
        a = self.buffers[name]
        if not 0 <= index < a.shape[0]:
            raise OutOfBoundsError(f"host code reads {name}[{index}], outside its {a.shape[0]} elements")
        v = a[index]
        return int(v) if a.dtype.kind in "iu" else v

    def launch(self, name, grid, scalars):
        k, fn = self.prog.kernels[name]
        run_kernel(k, fn, grid, [self.buffers[n] for n, _ in k.buffers], scalars, self.prog.traffic)
