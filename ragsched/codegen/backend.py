"""The backend seam: what lowering's output goes through to become code that runs.

A backend renders a ``LoweredKernel`` as source text, compiles that to an object, and loads the object
into something the runtime calls; it declares what it can do (vector width, loop kinds, memory kinds)
and what its compiled code depends on besides the kernel (``key``, for the caches). The LLVM CPU
backend (``codegen/llvm/``) is one implementation; a CUDA backend plugs in here. ``codegen/backends.py``
chooses the backend for a target; nothing else names one.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from . import ir


@dataclass(frozen=True)
class Capabilities:
    """What generated code may use on one target."""

    vector_bits: int  # the widest vector register; 0 where there are none
    loop_kinds: frozenset[ir.ForKind]  # the loop kinds the backend emits
    memory: tuple[str, ...] = ("global",)  # where buffers may live (schedule.MEMORY_TYPES)


class Loaded(Protocol):
    """Compiled code loaded into this process: ``function(slots)`` runs the kernel on an array of int64
    argument slots (see ``LoweredKernel.arguments``) and returns 0, or nonzero when it could not run.
    The code stays loaded as long as this object lives."""

    function: Callable[[object], int]


class Backend(ABC):
    name: str
    #: whether ``compile`` may run on another thread while this one runs Python (it releases the GIL for
    #: its long work, as LLVM's optimiser does), so that a pipeline's next kernel is lowered meanwhile
    compiles_beside_python: bool = False

    @abstractmethod
    def capabilities(self, target) -> Capabilities: ...

    @abstractmethod
    def target_id(self, target) -> str:
        """The machine and compiler that code for ``target`` is made for (what its speed depends on)."""

    def key(self, target) -> str:
        """What compiled code depends on besides the kernel: ``target_id`` and the backend's own source."""
        return f"{self.target_id(target)}|{self.version}"

    @property
    @abstractmethod
    def version(self) -> str:
        """A hash of the backend's own source (``source_version``)."""

    @abstractmethod
    def render(self, kernel: ir.LoweredKernel, threads: int | None, target) -> str:
        """The kernel as source text (LLVM IR, CUDA C)."""

    @abstractmethod
    def compile(self, source: str, target) -> bytes:
        """``render``'s text as an object the backend can load (machine code, PTX)."""

    @abstractmethod
    def load(self, obj: bytes, kernel: ir.LoweredKernel, target) -> Loaded: ...

    @abstractmethod
    def assembly(self, source: str, target) -> str:
        """The optimised code as text, for inspection."""


def source_version(path) -> str:
    """A hash of a backend's own source (a module, or every module of a package directory): compiled code
    cached by an older backend is not reused."""
    path = Path(path)
    files = sorted(path.glob("*.py")) if path.is_dir() else [path]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()
