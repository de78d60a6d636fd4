"""From LLVM IR to code that runs: LLVM's optimizations and machine code for a target (an object file,
or assembly to read), and the object loaded into this process with MCJIT."""

from __future__ import annotations

import ctypes
import sys

import llvmlite.binding as llvm

from .. import target as targets
from .machine import _lock, _machine, _new_target_machine
from .parallel import _gomp_loaded
from .scratch import release_symbol

#: LLVM's pass pipeline: O3 with its vectorizers, without its loop unroller. Schedules say what to unroll
#: (the unroll pass does it before LLVM sees the code); LLVM's own unrolling of the loops left made 5 to 8
#: times the code, and most of the compile time (a 7x7-window pipeline: 5 s of LLVM with it, 1.1 s without).
PASSES = {"speed_level": 3, "loop_vectorization": True, "slp_vectorization": True, "loop_unrolling": False}


def _optimize(mod, tm) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=PASSES["speed_level"])
    pto.loop_vectorization = PASSES["loop_vectorization"]
    pto.slp_vectorization = PASSES["slp_vectorization"]
    pto.loop_unrolling = PASSES["loop_unrolling"]
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


def optimize_to_object(ir_text: str, target=None) -> bytes:
    """LLVM's optimizations (``PASSES``) for ``target``'s CPU, then machine code as an object file."""
    tm = _machine(targets.parse(target))
    with _lock:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        _optimize(mod, tm)
        return tm.emit_object(mod)


def assembly(ir_text: str, target=None) -> str:
    """Optimised assembly for ``target``, for inspection (``f.compile().assembly``)."""
    tm = _machine(targets.parse(target))
    with _lock:
        mod = llvm.parse_assembly(ir_text)
        _optimize(mod, tm)
        return tm.emit_assembly(mod)


class LoadedObject:
    """Machine code loaded into this process. It lives as long as a Kernel uses it; then its cached
    scratch memory is freed and its code unloaded."""

    def __init__(self, obj: bytes, symbol: str, target=None):
        _gomp_loaded()  # before linking: parallel loops call GOMP_parallel
        tm = _new_target_machine(targets.runnable(target))  # the engine owns (and frees) its target machine
        self.engine = None
        with _lock:
            self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.engine.finalize_object()
            addr = self.engine.get_function_address(symbol)
            release = self.engine.get_function_address(release_symbol(symbol))
        if not addr or not release:
            raise RuntimeError(f"compiled object has no function {symbol}")
        self.function = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(addr)
        self._release = ctypes.CFUNCTYPE(None)(release)
        self.address = addr

    def __del__(self, _finalizing=sys.is_finalizing):  # bound now: at exit the module's globals may be gone
        if getattr(self, "engine", None) is not None and not _finalizing():
            self._release()
            with _lock:
                self.engine.close()
            self.engine = None
