"""Compiling a Program under a schedule: lower it, then render, compile and load it through the target's
backend, once per distinct lowered kernel.

Loaded code is kept in memory (the most recent few) and compiled objects on disk (``cache``), both
keyed by the lowered kernel's listing and the backend's ``key`` for the target, so an unchanged kernel is
not compiled twice, in this process or the next. Lowered kernels are kept the same way, keyed by the
program, the schedule, the target and ragsched's source, so a cached compile does not lower again.
``Kernel`` (``runtime/kernel.py``) calls what this makes.
"""

from __future__ import annotations

import gc
import hashlib
import pickle
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..algebra import expr as E
from ..codegen import ir
from ..codegen import target as targets
from ..codegen.backend import Backend, Loaded
from ..codegen.backends import backend_for
from ..codegen.lower import lower
from ..program import Program
from ..schedule.records import StoreIn
from . import cache


def source_version_tree(root: Path) -> str:
    """A hash of every ``.py`` file under ``root``."""
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()

_MEMORY_CACHE = 64
_loaded: OrderedDict[str, Loaded] = OrderedDict()  # key -> loaded code, least recent first


def forget_loaded() -> None:
    """Empty the in-memory cache of loaded machine code: code that no Kernel uses any more is unloaded,
    and with it the scratch memory it keeps between calls (the autoscheduler's worker, which never runs
    a candidate again, would otherwise hold every candidate's buffers: gigabytes on local_laplacian), and
    the lowered kernels kept in memory."""
    _loaded.clear()
    _lowered_memory.clear()


@dataclass
class CompileStats:
    lower_s: float = 0.0
    codegen_s: float = 0.0
    llvm_s: float = 0.0  # the backend's compile step (LLVM's O3 and machine code on the CPU)
    load_s: float = 0.0
    cache: str = "miss"  # "memory", "disk" or "miss"
    lowering: str = "done"  # the lowered kernel: "done" now, or from the "memory" or "disk" cache
    wall_s: float | None = None  # the whole compile's wall time, where its steps overlapped (length classes)

    @property
    def total_s(self) -> float:
        """The compile's time: its steps' sum, or its wall time where they overlapped."""
        return self.wall_s if self.wall_s is not None else self.lower_s + self.codegen_s + self.llvm_s + self.load_s


@dataclass
class CompiledCode:
    """One lowered kernel and its loaded code, with how long each step took."""

    kernel: ir.LoweredKernel
    lowered: str  # the loop nest as text
    backend: Backend
    target: targets.CpuTarget | targets.CudaTarget
    threads: int | None
    key: str  # what the caches know it by
    loaded: Loaded | None
    stats: CompileStats = field(default_factory=CompileStats)
    _source: str | None = None

    @property
    def source(self) -> str:
        """The generated code (LLVM IR before optimisation on the CPU); rendered again when the code came
        from a cache."""
        if self._source is None:
            with E.deep_recursion():  # rendering recurses over the loop nest as lowering does
                self._source = self.backend.render(self.kernel, self.threads, self.target)
        return self._source

    @property
    def assembly(self) -> str:
        return self.backend.assembly(self.source, self.target)


def compile_program(program: Program, schedule, specialize: dict[str, int], threads: int | None,
                    target, load: bool = True) -> CompiledCode:
    """``program`` under ``schedule``, lowered, compiled for ``target`` and loaded (from a cache when the
    same kernel was compiled before). With ``load=False`` it is only lowered (unless its code is in
    memory already): ``load_code`` compiles and loads it later."""
    stats = CompileStats()
    with collector_paused():
        t0 = time.perf_counter()
        backend = backend_for(target)
        kernel, lowered, stats.lowering = _lowered(program, schedule, specialize, threads, target, backend)
        stats.lower_s = time.perf_counter() - t0
        key = cache.key_of(_listing(kernel, lowered, threads), backend.key(target))
        code = CompiledCode(kernel, lowered, backend, target, threads, key, _loaded.get(key), stats)
        if code.loaded is not None:
            _loaded.move_to_end(key)
            stats.cache = "memory"
        elif load:
            load_code(code)
    return code


def load_code(code: CompiledCode) -> None:
    """Compile and load ``code`` if it was lowered only (``compile_program(load=False)``)."""
    if code.loaded is None:
        with collector_paused(), E.deep_recursion():  # code generation recurses as lowering does
            _load(code)


_paused = [0]  # compiles under way that paused the cycle collector
_paused_lock = threading.Lock()


@contextmanager
def collector_paused():
    """Python's cycle collector off while a kernel compiles: lowering and code generation make hundreds of
    thousands of short-lived objects, and the collector's full passes over everything alive (the
    simplifier's memos among it) took 3-5% of a large compile (0.2 s of the encoder's 3.9). What the
    compile leaves in cycles is collected after it, as usual. Nested and concurrent compiles count."""
    with _paused_lock:
        if _paused[0] == 0:
            _paused.append(gc.isenabled())
            gc.disable()
        _paused[0] += 1
    try:
        yield
    finally:
        with _paused_lock:
            _paused[0] -= 1
            if _paused[0] == 0 and _paused.pop():
                gc.enable()


def _lowered(program: Program, schedule, specialize: dict[str, int], threads: int | None, target,
             backend: Backend) -> tuple[ir.LoweredKernel, str, str]:
    """The lowered kernel and its listing: from the caches when this program, schedule and target were
    lowered before by this version of ragsched (a cached compile then costs a lookup, not a lowering), else
    lowered now and kept."""
    front = _front_key(program, schedule, specialize, threads, target, backend)
    hit, how = _lowered_memory.get(front), "memory"
    if hit is None:
        payload, how = cache.load(front, "lowered"), "disk"
        if payload is not None:
            try:
                with E.deep_recursion():
                    hit = pickle.loads(payload)
            except Exception:  # written by another version of Python or of a dependency: lower again
                hit = None
    if hit is None:
        how = "done"
        kernel = lower(program, schedule, specialize=specialize, loop_kinds=backend.capabilities(target).loop_kinds,
                       target_text=f"{target.text} ({backend.name})")
        _check_capabilities(kernel, schedule, backend, target)
        hit = (kernel, str(kernel.body))
        try:
            with E.deep_recursion():
                cache.store(front, pickle.dumps(hit, protocol=pickle.HIGHEST_PROTOCOL), "lowered")
        except Exception:  # a tree too deep to pickle: it is only a cache
            pass
    _lowered_memory[front] = hit
    _lowered_memory.move_to_end(front)
    while len(_lowered_memory) > _MEMORY_CACHE:
        _lowered_memory.popitem(last=False)
    return (*hit, how)


_lowered_memory: OrderedDict[str, tuple] = OrderedDict()  # front key -> (kernel, listing)


def _front_key(program: Program, schedule, specialize: dict[str, int], threads: int | None, target,
               backend: Backend) -> str:
    """What the lowered kernel is cached by: the program, the schedule, the target and ragsched's source."""
    return cache.key_of("lowered", repr(program), repr(tuple(schedule or ())), repr(sorted(specialize.items())),
                        str(threads), target.text, backend.key(target), _ragsched_source())


def lowered_before(program: Program, schedule, specialize: dict[str, int], threads: int | None, target) -> bool:
    """Whether this program and schedule were lowered for ``target`` before (in memory or on disk): then a
    compile of it is a lookup, with nothing to hand to another process."""
    front = _front_key(program, schedule, specialize, threads, target, backend_for(target))
    return front in _lowered_memory or cache.has(front, "lowered")


@lru_cache(maxsize=1)
def _ragsched_source() -> str:
    """A hash of every module of ragsched: a lowering cached by other code is not reused."""
    return source_version_tree(Path(__file__).resolve().parent.parent)


def _check_capabilities(kernel: ir.LoweredKernel, schedule, backend: Backend, target) -> None:
    """Refuse, before any code is made, a memory the target's backend does not have (``store_in(Shared)``
    compiled for a CPU)."""
    caps = backend.capabilities(target)  # loop kinds: checked by lower()
    for d in schedule or ():
        if isinstance(d, StoreIn) and d.memory not in caps.memory:
            raise ValueError(f"Func {d.func}: store_in({d.memory!r}): target {target.text} ({backend.name}) keeps "
                             f"buffers in {', '.join(caps.memory)} memory only")


def _listing(kernel: ir.LoweredKernel, lowered: str, threads: int | None) -> str:
    args = "\n".join(f"arg {a.name} {a.dtype} {'buffer' if a.is_buffer else 'scalar'}" for a in kernel.arguments)
    return f"kernel {kernel.name}\nthreads {threads}\n{args}\n{lowered}"


def load_code_started(code: CompiledCode, here: bool = False) -> Callable[[], None]:
    """Start making ``code``'s machine code, if it was lowered only: rendered here, then compiled and
    loaded on a thread of its own where the backend's compiler lets Python run meanwhile
    (``Backend.compiles_beside_python``: LLVM's optimiser releases the GIL), so that the caller lowers the
    next kernel of a pipeline (a length class) while LLVM works on this one. Returns the function that
    waits for it (and raises what it raised). ``here``: rendered now, then compiled on the thread that
    calls that function, after the kernels started before it (for the last of them, which nothing
    follows: the caller would only wait)."""
    if code.loaded is not None:
        return lambda: None
    with collector_paused(), E.deep_recursion():
        if not code.backend.compiles_beside_python:
            _load(code)
            return lambda: None
        if _from_disk(code):
            return lambda: None
        _render(code)
    if here:
        before = _compiling[0]
        return lambda: _remember(code, _compiled_after(before, code))
    out: list = []

    def work(before: threading.Thread | None):
        try:
            out.append(_compiled_after(before, code))
        except BaseException as e:  # noqa: BLE001 (raised on the caller's thread, by finish)
            out.append(e)

    with _compiling_lock:
        worker = threading.Thread(target=work, args=(_compiling[0],), name="ragsched-compile")
        _compiling[0] = worker
        worker.start()

    def finish():
        worker.join()
        if isinstance(out[0], BaseException):
            raise out[0]
        _remember(code, out[0])

    return finish


def _compiled_after(before: threading.Thread | None, code: CompiledCode) -> Loaded:
    """``_compiled(code)`` once ``before`` (the compile started before it) is done: kernels are compiled
    and loaded in the order they were started."""
    if before is not None:
        before.join()
    with collector_paused():
        return _compiled(code)


#: the thread started last by ``load_code_started`` (each waits for the one before: a thread, not a pool,
#: so that a forked process is left none that it would wait on)
_compiling: list[threading.Thread | None] = [None]
_compiling_lock = threading.Lock()


def _load(code: CompiledCode) -> None:
    if not _from_disk(code):
        _render(code)
        _remember(code, _compiled(code))


def _from_disk(code: CompiledCode) -> bool:
    """Whether ``code``'s object was in the disk cache, and is loaded now."""
    t0 = time.perf_counter()
    obj = cache.load(code.key)
    if obj is None:
        return False
    try:
        loaded = code.backend.load(obj, code.kernel, code.target)
    except Exception:  # a foreign or damaged entry: rebuilt by the caller
        return False
    code.stats.cache, code.stats.load_s = "disk", time.perf_counter() - t0
    _remember(code, loaded)
    return True


def _render(code: CompiledCode) -> None:
    t0 = time.perf_counter()
    code._source = code.backend.render(code.kernel, code.threads, code.target)
    code.stats.codegen_s = time.perf_counter() - t0


def _compiled(code: CompiledCode) -> Loaded:
    """``code``'s rendered source compiled, loaded and stored in the disk cache (no Python objects of the
    caches touched: this may run on another thread)."""
    stats, backend = code.stats, code.backend
    t0 = time.perf_counter()
    obj = backend.compile(code._source, code.target)
    t1 = time.perf_counter()
    loaded = backend.load(obj, code.kernel, code.target)
    cache.store(code.key, obj)
    stats.llvm_s, stats.load_s, stats.cache = t1 - t0, time.perf_counter() - t1, "miss"
    return loaded


def compiled_into_cache(code: CompiledCode) -> None:
    """``code``'s object made and stored in the disk cache, not loaded (``runtime/forked.py``: a process
    that only compiles for another)."""
    if code.loaded is None and cache.load(code.key) is None:
        with collector_paused(), E.deep_recursion():
            _render(code)
            cache.store(code.key, code.backend.compile(code._source, code.target))


def _remember(code: CompiledCode, loaded: Loaded) -> None:
    code.loaded = loaded
    _loaded[code.key] = loaded
    while len(_loaded) > _MEMORY_CACHE:  # kernels still in use keep their code alive themselves
        _loaded.popitem(last=False)
