"""Running a GPU program: its host code (Python, ``emulate.compile_host``) on the kernel's argument slots,
launching its kernels on a GPU through CuPy or in the emulator. The runtime calls ``run(slots, buffers)``
(the ``Loaded`` protocol of ``codegen/backend.py``, with the arrays themselves: a GPU kernel's buffers are
not host addresses)."""

from __future__ import annotations

import struct

import numpy as np

from .. import ir
from .emulate import EmulatedProgram, compile_host
from .kernels import GpuProgram

_F64, _I64 = struct.Struct("d"), struct.Struct("q")


def scalars_from_slots(arguments: tuple[ir.Argument, ...], slots) -> dict:
    """The scalar arguments by name, from the int64 slots the runtime packs (floats as float64 bits)."""
    out = {}
    for k, a in enumerate(arguments):
        if a.is_buffer:
            continue
        v = int(slots[k])
        out[a.name] = _F64.unpack(_I64.pack(v))[0] if a.dtype.is_float else v
    return out


class EmulatedLoaded:
    """A GPU program loaded into the emulator."""

    function = None

    def __init__(self, program: GpuProgram, kernel: ir.LoweredKernel):
        self.arguments = kernel.arguments
        self.program = EmulatedProgram(program, [a.name for a in kernel.arguments if not a.is_buffer])

    def run(self, slots, buffers: dict) -> int:
        self.program.run(buffers, scalars_from_slots(self.arguments, slots))
        return 0


class CupyLoaded:
    """A GPU program's cubin loaded on the current CUDA device through CuPy; calls run on CuPy's current
    stream."""

    function = None

    def __init__(self, cubin: bytes, program: GpuProgram, kernel: ir.LoweredKernel):
        import cupy

        self.cupy = cupy
        self.module = cupy.cuda.function.Module()
        self.module.load(cubin)
        self.kernels = {k.name: (k, self.module.get_function(k.name)) for k in program.kernels}
        self.arguments = kernel.arguments
        self.host = compile_host(program, [a.name for a in kernel.arguments if not a.is_buffer])

    def run(self, slots, buffers: dict) -> int:
        self.host(_CupyHost(self, buffers), scalars_from_slots(self.arguments, slots))
        return 0


class _CupyHost:
    def __init__(self, loaded: CupyLoaded, buffers: dict):
        self.loaded = loaded
        self.buffers = dict(buffers)

    def alloc(self, name, dtype, size):
        self.buffers[name] = self.loaded.cupy.empty(max(int(size), 1), dtype)

    def read(self, name, index):
        i = int(index)
        v = self.buffers[name].ravel()[i:i + 1].get()[0]  # one value copied back (a slice: an array in CuPy)
        return int(v) if v.dtype.kind in "iu" else v

    def launch(self, name, grid, scalars):
        k, fn = self.loaded.kernels[name]
        grid = tuple(int(g) for g in grid)
        if min(grid) <= 0:
            return
        args = [self.buffers[n] for n, _ in k.buffers]
        args += [np.dtype(t.np).type(scalars[n]) for n, t in k.scalars]
        fn(grid, tuple(k.block_dims), tuple(args))
