"""Which backend compiles for a target: the one place that names the backends (the seam they implement is
``codegen/backend.py``)."""

from __future__ import annotations

from . import target as targets
from .backend import Backend
from .cuda.backend import CUDA_BACKEND
from .llvm.backend import LLVM_BACKEND


def backend_for(target) -> Backend:
    """The backend that compiles for ``target`` (a target string, a ``CpuTarget`` or a ``CudaTarget``):
    LLVM for CPUs, CUDA for GPUs (and for the GPU emulator)."""
    t = targets.parse(target)  # refuses what no backend compiles for
    return CUDA_BACKEND if targets.is_gpu(t) else LLVM_BACKEND
