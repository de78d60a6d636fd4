"""LLVM itself, shared by the rest of the backend: initialising it, the target machine for each CPU
target, the cache key of a target, how DTypes map to LLVM types, and the lock that serialises LLVM's
optimiser, code generator and JIT across threads."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ...algebra.types import DType
from .. import target as targets
from ..target import CpuTarget

_I1, _I8, _I32, _I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
_F16, _F32, _F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
_PTR = ir.PointerType()
_VOID = ir.VoidType()
_FLOAT_TYPES = {"float16": _F16, "float32": _F32, "float64": _F64}
_FLOAT_SUFFIX = {"float16": "f16", "float32": "f32", "float64": "f64"}

_lock = threading.Lock()


# ------------------------------------------------------------------------------------- target
@functools.cache
def _initialized() -> str:
    """Initialise LLVM's native target once; returns this process's triple."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # libgcc_s: LLVM calls its soft-float helpers, e.g. __truncdfhf2 for float64 -> float16
    for lib, soname in (("m", "libm.so.6"), ("c", "libc.so.6"), ("gcc_s", "libgcc_s.so.1")):
        load_shared_library(lib, soname)
    return llvm.get_process_triple()


def load_shared_library(lib: str, soname: str) -> bool:
    """Make the C library ``lib``'s symbols visible to loaded kernels: by its usual ``soname`` first (a
    dlopen, microseconds), else where ``ctypes.util.find_library`` finds it (which runs ``ldconfig -p``:
    milliseconds a library, paid by every process that compiles or loads a cached kernel)."""
    def load(name: str | None) -> bool:
        try:
            return name is not None and llvm.load_library_permanently(name) is None
        except RuntimeError:
            return False

    return load(soname) or load(ctypes.util.find_library(lib))


@functools.cache
def _machine(t: CpuTarget):
    """The (shared) target machine that optimises and emits code for ``t``."""
    return _new_target_machine(t)


def _new_target_machine(t: CpuTarget):
    """The small code model: a kernel's code and constants are linked into one block of memory (JITLink,
    ``load.LoadedObject``), so addresses within an object are 32-bit offsets from the code; calls into
    another object (a kernel's parts, ``load.py``) or a library go through stubs the linker makes. The
    large model ("jitdefault" on x86-64) loaded every constant through a 64-bit address and crashed
    MCJIT, which loaded kernels before, where one engine held two objects that call each other."""
    return llvm.Target.from_triple(_initialized()).create_target_machine(
        cpu=t.cpu, features=t.features, opt=3, reloc="pic", codemodel="small")


def natural_vector_size(dtype: DType, target=None) -> int:
    """Lanes of ``dtype`` in one native vector register of ``target`` (default: ``RAGSCHED_CPU`` or this
    CPU; Halide's ``natural_vector_size``): the vector width a hand schedule should use there."""
    return targets.parse(target).natural_vector_size(dtype)


def target_key(target=None) -> str:
    t = targets.parse(target)
    fast = "|fast_math" if getattr(t, "fast_math", False) else ""
    return f"{_initialized()}|{t.cpu}|{t.features}|llvm{'.'.join(map(str, llvm.llvm_version_info))}{fast}"


def ll_type(t: DType) -> ir.Type:
    """Register type of a scalar DType (bool is i1 in registers, i8 in memory)."""
    if t.is_bool:
        base: ir.Type = _I1
    elif t.is_float:
        base = _FLOAT_TYPES[t.name]
    else:
        base = ir.IntType(t.bits)
    return base if t.lanes == 1 else ir.VectorType(base, t.lanes)


def mem_type(t: DType) -> ir.Type:
    """Memory type: bool is stored as i8 (one byte per lane for vectors)."""
    if not t.is_bool:
        return ll_type(t)
    return _I8 if t.lanes == 1 else ir.VectorType(_I8, t.lanes)


@functools.cache
def abi_size(t: DType) -> int:
    """Bytes of ``t`` in memory on this host, asked of LLVM once per type: the question parses a module,
    and any call into LLVM waits while another thread's compile holds llvmlite's lock (seconds)."""
    return mem_type(t).get_abi_size(_machine(targets.host()).target_data)


@functools.cache
def data_layout(t: CpuTarget) -> str:
    """``t``'s data layout, asked of LLVM once per target (``abi_size``'s reason)."""
    return str(_machine(t).target_data)


def type_suffix(t: DType, memory: bool = False) -> str:
    """The overload suffix LLVM mangles into intrinsic names: ``f32``, ``i1``, ``v8f32``, ``v8i8``."""
    if t.is_float:
        s = _FLOAT_SUFFIX[t.name]
    elif t.is_bool:
        s = "i8" if memory else "i1"
    else:
        s = f"i{t.bits}"
    return s if t.lanes == 1 else f"v{t.lanes}{s}"


def _lanes(v: ir.Value) -> int:
    return v.type.count if isinstance(v.type, ir.VectorType) else 1
