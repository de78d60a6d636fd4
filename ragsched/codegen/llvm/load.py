"""From LLVM IR to code that runs: LLVM's optimizations and machine code for a target (an object file,
or assembly to read), and the objects linked into this process by ORC's JITLink."""

from __future__ import annotations

import ctypes
import functools
import itertools
import re
import sys
import threading
from contextlib import contextmanager

import llvmlite.binding as llvm

from .. import elf
from .. import target as targets
from ..cores import spare_core as _spare_core
from . import perf_map
from .machine import _lock, _machine, _new_target_machine
from .parallel import _gomp_loaded
from .scratch import failure_symbol, release_symbol
from .split import split_outlined

#: LLVM's pass pipeline: O3 with its vectorizers, without its loop unroller. Schedules say what to unroll
#: (the unroll pass does it before LLVM sees the code); LLVM's own unrolling of the loops left made 5 to 8
#: times the code, and most of the compile time (a 7x7-window pipeline: 5 s of LLVM with it, 1.1 s without).
PASSES = {"speed_level": 3, "loop_vectorization": True, "slp_vectorization": True, "loop_unrolling": False}

#: the cost limit of O3's non-trivial loop unswitching (LLVM's default 50; 1 lets none through, 0 is
#: refused). It copied whole loop nests to hoist a guard, most often a vector tail's, which
#: ``passes/unswitch.py`` now hoists before LLVM sees the code; with the limit at 50 it was a quarter to a
#: third of the optimiser's time on the largest kernels (a tuned 6-level pyramid's: 1.35 -> 0.96 s), and the
#: code it made ran no faster (the default and tuned schedules of the held-out and bundled pipelines,
#: timed in turns). O2, which runs none, ran two of them 1.10-1.12x slower.
UNSWITCH_THRESHOLD = 1


#: LLVM's loop strength reduction (a code generator pass) takes time superlinear in the addresses one loop
#: computes: on functions of thousands of them after O3 (whole pipelines inlined into one loop nest: 3000
#: in a 6-stage stencil chain) it was 60-80% of the compile (2.2 s of 2.8), where the code it made ran no
#: faster (timed 0.98-1.02x on the three such functions measured). Functions with more than this many
#: getelementptrs are emitted without it. The limit was 1300 until a 10-level pyramid's default schedule
#: (1223 in one function) spent 0.94 s of its 4.4 s of LLVM in it and ran as fast without it (0.97-1.04x,
#: each order timed); below 1000, LSR took 0.05-0.56 s where measured, and the GEMM hand schedules (150-390
#: addresses) ran 0.5-1.5% faster with it. It was 1000 until an image pyramid's default and tuned schedules
#: (884 and 883: 43 outlined loops of 20 addresses each, LSR 15-20 ms a loop) spent 0.7 s and 0.2 s of LLVM
#: in it, and a stencil chain's hand schedule (807) 0.2-1 s, all three as fast without it (0.97, 1.01 and
#: 1.00x, in turns, median of 11). Measured across the 66 default, hand and tuned schedules of every bundled
#: and held-out pipeline, no other has more than 520, where LSR did make some code faster (by up to 17%)
LSR_MAX_ADDRESSES = 700


def _most_addresses(*mods) -> int:
    """The most getelementptr instructions in one function of the optimized module (from its text: a
    walk through LLVM's instruction objects takes 6 times longer), the kernel's outermost serial loops
    (outlined, ``K.serN.loop``) counted with the kernel's function, where they were emitted until they
    were outlined (LSR's time grows with the loops as much as with one function's addresses: 33 such
    loops apart took 3.8 s of LLVM where one function of them took 1.5)."""
    most = kernel = 0
    for fn in "\n".join(map(str, mods)).split("\ndefine ")[1:]:
        head = fn[: fn.find("(")]
        n = fn.count("getelementptr")
        if _SERIAL_LOOP.search(head) or head.endswith('.impl"') or head.endswith(".impl"):
            kernel += n
        else:
            most = max(most, n)
    return max(most, kernel)


_SERIAL_LOOP = re.compile(r"\.ser\d+\.loop\"?$")


@contextmanager
def _optimizer_options():
    """``UNSWITCH_THRESHOLD`` while LLVM optimises (an option global to the process: callers hold
    ``_lock``), LLVM's default after."""
    llvm.set_option("", f"-unswitch-threshold={UNSWITCH_THRESHOLD}")
    try:
        yield
    finally:
        llvm.set_option("", "-unswitch-threshold=50")


@contextmanager
def _code_generation_for(*mods):
    """Loop strength reduction off while machine code is made for ``mods`` (the parts of one kernel) if a
    function has too many addresses for it (an LLVM option, global to the process: callers hold
    ``_lock``)."""
    skip = _most_addresses(*mods) > LSR_MAX_ADDRESSES
    if skip:
        llvm.set_option("", "-disable-lsr=true")
    try:
        yield
    finally:
        if skip:
            llvm.set_option("", "-disable-lsr=false")


def _pass_builder(tm):
    pto = llvm.create_pipeline_tuning_options(speed_level=PASSES["speed_level"])
    pto.loop_vectorization = PASSES["loop_vectorization"]
    pto.slp_vectorization = PASSES["slp_vectorization"]
    pto.loop_unrolling = PASSES["loop_unrolling"]
    return llvm.create_pass_builder(tm, pto)


def _optimize(mod, tm) -> None:
    pb = _pass_builder(tm)
    pb.getModulePassManager().run(mod, pb)


def optimize_to_object(ir_text: str, target=None) -> bytes:
    """LLVM's optimizations (``PASSES``) for ``target``'s CPU, then machine code: an object file, or
    several packed together (``pack_objects``). Where the outlined loops (parallel bodies, the kernel's
    outermost serial loops) are a large part of the module and a core is idle, some are optimised in a
    second module on a second thread (``split.py``), and each part is made into machine code on its own
    thread too: two objects, which ``LoadedObject`` links into one library."""
    t = targets.parse(target)
    tm = _machine(t)
    parts = split_outlined(ir_text) if _unlocked_run is not None and _spare_core() else None
    with _lock, _optimizer_options():
        mods = None
        if parts is not None:
            try:
                mods = _optimized_in_two(*parts, t)
            except RuntimeError:  # a part that does not parse or verify: the module as one, below
                mods = None
        if mods is not None:
            with _code_generation_for(*mods):
                return pack_objects(_emitted_in_two(mods[0], tm, mods[1], _second_machine(t)))
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        _optimize(mod, tm)
        with _code_generation_for(mod):
            return tm.emit_object(mod)


_PACKED = b"ragsched objects\0"


def pack_objects(objects: list[bytes]) -> bytes:
    """Object files as one cache entry: a header, each object's length (8 bytes), then the objects."""
    return _PACKED + len(objects).to_bytes(8, "little") + \
        b"".join(len(o).to_bytes(8, "little") for o in objects) + b"".join(objects)


def unpack_objects(blob: bytes) -> list[bytes]:
    """The object files of ``blob`` (``pack_objects``'), or ``[blob]`` for one object file."""
    if not blob.startswith(_PACKED):
        return [blob]
    at = len(_PACKED)
    count = int.from_bytes(blob[at:at + 8], "little")
    sizes = [int.from_bytes(blob[at + 8 + 8 * k: at + 16 + 8 * k], "little") for k in range(count)]
    start, out = at + 8 + 8 * count, []
    for n in sizes:
        out.append(blob[start:start + n])
        start += n
    if start != len(blob):
        raise ValueError("a packed kernel's objects do not add up to its length")
    return out


#: LLVM's module pass manager called past llvmlite's lock, which serialises every call into LLVM in the
#: process (its C API shares one context by default). Two modules in contexts of their own, each with its
#: own target machine and pass builder, are independent to LLVM; the ctypes call releases the GIL.
_unlocked_run = getattr(getattr(llvm.ffi.lib, "LLVMPY_RunNewModulePassManager", None), "_cfn", None)
_unlocked_emit = getattr(getattr(llvm.ffi.lib, "LLVMPY_TargetMachineEmitToMemory", None), "_cfn", None)


def _optimized_in_two(first: str, second: str, t) -> tuple[llvm.ModuleRef, llvm.ModuleRef]:
    """``first`` optimised here while ``second`` is on another thread (in a context of its own)."""
    ctx = llvm.create_context()
    other = llvm.parse_assembly(second, context=ctx)
    other.verify()
    other_tm = _second_machine(t)
    pb = _pass_builder(other_tm)
    mpm = pb.getModulePassManager()
    mod = llvm.parse_assembly(first)
    mod.verify()
    _at_once(lambda: _optimize(mod, _machine(t)), lambda: _unlocked_run(mpm, other, pb))
    return mod, other


def _emitted_in_two(first, first_tm, second, second_tm) -> list[bytes]:
    """The object files of two modules, each in its own context with its own target machine, made at
    once on two threads (machine code is about a third of LLVM's time on a large kernel)."""
    return list(_at_once(lambda: _emitted(first_tm, first), lambda: _emitted(second_tm, second)))


def _at_once(here, there) -> tuple:
    """(``here()``, ``there()``), ``there`` run on a second thread meanwhile (LLVM past llvmlite's lock, in
    a context of its own); its exception, if any, is raised here once both are done."""
    out, failed = [None], []

    def run():
        try:
            out[0] = there()
        except BaseException as e:  # noqa: BLE001 (re-raised below, on the caller's thread)
            failed.append(e)

    worker = threading.Thread(target=run, name="ragsched-llvm")
    worker.start()
    try:
        mine = here()
    finally:
        worker.join()
    if failed:
        raise failed[0]
    return mine, out[0]


def _emitted(tm, mod) -> bytes:
    """``tm.emit_object(mod)`` without llvmlite's process-wide lock (``_unlocked_run``'s reason)."""
    if _unlocked_emit is None:
        return tm.emit_object(mod)
    with llvm.ffi.OutputString() as err:
        buffer = _unlocked_emit(tm, mod, 1, err)
        if not buffer:
            raise RuntimeError(str(err))
    try:
        return ctypes.string_at(llvm.ffi.lib.LLVMPY_GetBufferStart(buffer), llvm.ffi.lib.LLVMPY_GetBufferSize(buffer))
    finally:
        llvm.ffi.lib.LLVMPY_DisposeMemoryBuffer(buffer)


@functools.cache
def _second_machine(t):
    return _new_target_machine(t)


def assembly(ir_text: str, target=None) -> str:
    """Optimised assembly for ``target``, for inspection (``f.compile().assembly``)."""
    tm = _machine(targets.parse(target))
    with _lock, _optimizer_options():
        mod = llvm.parse_assembly(ir_text)
        _optimize(mod, tm)
        with _code_generation_for(mod):
            return tm.emit_assembly(mod)


#: symbols that loaded code links to before the process's own (name -> address): a test's counting
#: ``aligned_alloc`` and ``free``
imported_symbols: dict[str, int] = {}

_libraries = itertools.count()  # (a JIT library's name is never used again, also once it is unloaded)


@functools.cache
def _jit():
    """The process's ORC JIT, which links every kernel's objects (``LoadedObject``); libgomp loaded
    before it links any (parallel loops call GOMP_parallel)."""
    _gomp_loaded()
    return llvm.create_lljit_compiler(_new_target_machine(targets.runnable(None)), use_jit_link=True)


class _FailureRecord(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("nbytes", ctypes.c_int64)]  # scratch.failure_record's


class LoadedObject:
    """Machine code loaded into this process. It lives as long as a Kernel uses it; then its cached
    scratch memory is freed and its code unloaded.

    The objects are linked by ORC's JITLink (``_jit``), each into one block of memory with its constants,
    its data and the stubs it calls other code through. MCJIT's loader put a kernel's code and its
    constants in separate mappings, each wherever the kernel had room: in a process that held gigabytes
    of arrays, the two were once more than 2 GB apart, past the 32-bit offsets of the small code model,
    and LLVM aborted the process (a relocation out of range, 3 of 4 runs of one benchmark script that
    compiled 78 kernels of full-size images; llvmlite's own memory manager, which reserves one block,
    had no room for the table of addresses it then adds for calls into libraries)."""

    def __init__(self, obj: bytes, symbol: str, target=None):
        objects = unpack_objects(obj)
        exported = sorted({s.name for o in objects for s in elf.symbols(o)
                           if s.binding != elf.STB_LOCAL and s.section and s.name})
        self.tracker = None
        with _lock:
            library = llvm.JITLibraryBuilder()
            for o in objects:  # (one library: the parts call each other by name)
                library.add_object_img(o)
            for name, address in imported_symbols.items():
                library.import_symbol(name, address)
            library.add_current_process()  # libgomp, libm, libc
            for name in exported:
                library.export_symbol(name)
            self.tracker = library.link(_jit(), f"ragsched{next(_libraries)}")
        addresses = {name: self.tracker[name] for name in exported}
        for o in objects:
            perf_map.record(addresses, o)
        addr, release, failure = (addresses.get(n) for n in (symbol, release_symbol(symbol), failure_symbol(symbol)))
        if not addr or not release or not failure:
            raise RuntimeError(f"compiled object has no function {symbol}")
        self.function = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(addr)
        self._release = ctypes.CFUNCTYPE(None)(release)
        self._failure = ctypes.CFUNCTYPE(ctypes.c_void_p)(failure)
        self.address = addr

    def allocation_failure(self) -> tuple[str, int] | None:
        """(buffer, bytes) of the allocation the kernel last failed to make, or None."""
        record = _FailureRecord.from_address(self._failure())
        return (record.name.decode(), int(record.nbytes)) if record.name else None

    def __del__(self, _finalizing=sys.is_finalizing):  # bound now: at exit the module's globals may be gone
        if getattr(self, "tracker", None) is not None and not _finalizing():
            self._release()
            with _lock:
                self.tracker.close()  # the library unloaded
            self.tracker = None
