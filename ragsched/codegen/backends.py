"""Which backend compiles for a target: the one place that names the backends (the seam they implement is
``codegen/backend.py``)."""

from __future__ import annotations

from . import target as targets
from .backend import Backend
from .llvm.backend import LLVM_BACKEND


def backend_for(target) -> Backend:
    """The backend that compiles for ``target`` (a target string or a ``CpuTarget``): LLVM for CPUs, the
    only targets so far."""
    targets.parse(target)  # refuses what no backend compiles for
    return LLVM_BACKEND
