"""The LLVM CPU backend behind the seam (``codegen/backend.py``): the loop IR as LLVM IR, O3 machine code,
linked into the process by ORC's JITLink."""

from __future__ import annotations

import functools
from pathlib import Path

from .. import ir
from .. import target as targets
from ..backend import Backend, Capabilities, source_version
from .emit import emit_module
from .load import LoadedObject, assembly, optimize_to_object
from .machine import target_key

_KINDS = frozenset({ir.ForKind.SERIAL, ir.ForKind.PARALLEL, ir.ForKind.VECTORIZED, ir.ForKind.UNROLLED})


class LlvmBackend(Backend):
    name = "llvm"
    compiles_beside_python = True

    def capabilities(self, target) -> Capabilities:
        return Capabilities(targets.parse(target).vector_bits, _KINDS)

    def target_id(self, target) -> str:
        return target_key(target)

    @functools.cached_property
    def version(self) -> str:
        return source_version(Path(__file__).parent)  # every module of this package

    def render(self, kernel: ir.LoweredKernel, threads, target) -> str:
        return emit_module(kernel, threads, target)

    def compile(self, source: str, target) -> bytes:
        return optimize_to_object(source, target)

    def load(self, obj: bytes, kernel: ir.LoweredKernel, target) -> LoadedObject:
        return LoadedObject(obj, kernel.name, target)

    def assembly(self, source: str, target) -> str:
        return assembly(source, target)


LLVM_BACKEND = LlvmBackend()
