"""The CUDA backend behind the seam (``codegen/backend.py``): a lowered kernel split into host code and GPU
kernels (``gpu.kernels``), the kernels rendered as CUDA C and compiled by NVRTC to a cubin, loaded through
CuPy on a GPU, or run by the GPU emulator when the target's device is ``"emulate"`` (the CUDA C is still
rendered, for ``Kernel.source``, but needs no NVRTC)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from .. import ir
from .. import target as targets
from ..backend import Backend, Capabilities, source_version
from ..gpu.kernels import GpuProgram, split_kernels
from ..gpu.launch import CupyLoaded, EmulatedLoaded
from .nvrtc import compile_cuda, report
from .render import render_program

_KINDS = frozenset({ir.ForKind.SERIAL, ir.ForKind.UNROLLED, ir.ForKind.GPU_BLOCK, ir.ForKind.GPU_THREAD,
                    ir.ForKind.GPU_LANE})


def gpu_program(kernel: ir.LoweredKernel) -> GpuProgram:
    return split_kernels(kernel, dict(kernel.memory))


class CudaBackend(Backend):
    name = "cuda"

    def capabilities(self, target) -> Capabilities:
        return Capabilities(0, _KINDS, ("global", "shared", "register"))

    def target_id(self, target) -> str:
        t = targets.parse(target)
        return f"cuda|{t.arch}|{t.device}"

    @functools.cached_property
    def version(self) -> str:
        here = Path(__file__).parent
        return hashlib.sha256((source_version(here) + source_version(here.parent / "gpu")).encode()).hexdigest()

    def render(self, kernel: ir.LoweredKernel, threads, target) -> str:
        return render_program(gpu_program(kernel))

    def compile(self, source: str, target) -> bytes:
        t = targets.parse(target)
        if t.device == "emulate":
            return b"emulate"  # the emulator runs the loop IR itself
        return compile_cuda(source, t.arch).cubin

    def load(self, obj: bytes, kernel: ir.LoweredKernel, target):
        program = gpu_program(kernel)
        if targets.parse(target).device == "emulate":
            return EmulatedLoaded(program, kernel)
        return CupyLoaded(obj, program, kernel)

    def assembly(self, source: str, target) -> str:
        """ptxas's report (registers, spills, shared memory per kernel): the machine code itself is a cubin.
        Where NVRTC hands back no report, the same figures read from the cubin."""
        compiled = compile_cuda(source, targets.parse(target).arch)
        return compiled.log or report(compiled.resources)


CUDA_BACKEND = CudaBackend()
