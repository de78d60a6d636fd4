"""Compile hand-built loop IR through the same path as kernels (passes, ``emit_module``,
``optimize_to_object``, ``LoadedObject``, the slot array) and call it on NumPy arrays."""

from __future__ import annotations

import ctypes
import itertools
import struct

import numpy as np

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen import llvm as backend
from ragsched.codegen.passes.partition import partition_vector_tails
from ragsched.codegen.passes.unroll import unroll_loops
from ragsched.codegen.passes.vectorize import vectorize_loops

I64 = T.ADDRESS
_names = itertools.count()


def c64(v: int) -> E.Const:
    return E.Const(v, I64)


def v64(name: str) -> E.Var:
    return E.Var(name, I64)


def load(buf: str, index: E.Expr, dtype) -> E.Load:
    return E.Load(buf, index, T.as_dtype(dtype))


class Compiled:
    """A kernel built from ``body``; call it with arrays and scalars by name. Returns the kernel's
    return code (0, or 1 when an allocation failed)."""

    def __init__(self, body: ir.Stmt, buffers: dict, scalars: dict | None = None, threads=None, passes=True):
        self.body = partition_vector_tails(vectorize_loops(unroll_loops(body))) if passes else body
        args = [ir.Argument(n, T.as_dtype(t), True) for n, t in buffers.items()]
        args += [ir.Argument(n, T.as_dtype(t), False) for n, t in (scalars or {}).items()]
        self.kernel = ir.LoweredKernel(f"k{next(_names)}", self.body, tuple(args), (), ())
        self.source = backend.emit_module(self.kernel, threads)
        self.obj = backend.LoadedObject(backend.optimize_to_object(self.source), self.kernel.name)

    @property
    def assembly(self) -> str:
        return backend.assembly(self.source)

    def __call__(self, **values) -> int:
        slots = (ctypes.c_int64 * max(len(self.kernel.arguments), 1))()
        for k, a in enumerate(self.kernel.arguments):
            v = values[a.name]
            if a.is_buffer:
                assert isinstance(v, np.ndarray) and v.dtype == a.dtype.np, a.name
                slots[k] = v.ctypes.data
            elif a.dtype.is_float:
                slots[k] = struct.unpack("q", struct.pack("d", float(v)))[0]
            else:
                slots[k] = int(v)
        return self.obj.function(slots)


def kinds(s: ir.Stmt) -> list[ir.ForKind]:
    return [t.kind for t in ir.walk_stmts(s) if isinstance(t, ir.For)]


def has_vectors(s: ir.Stmt) -> bool:
    return any(n.dtype.lanes > 1 for t in ir.walk_stmts(s) for e in ir.exprs_of(t) for n in E.walk(e))


def split_loop(n: int, var: str, width: int, kind: ir.ForKind, body_of, guard: bool = True) -> ir.Stmt:
    """``for var in [0, n)`` as ``for var.o: for var.i in [0, width) (kind): [if var < n:] body``, the
    body built by ``body_of(index)`` from the index expression ``var.o * width + var.i``."""
    o, i = f"{var}.o", f"{var}.i"
    idx = E.Add(E.Mul(v64(o), c64(width)), v64(i))
    body = body_of(idx)
    if guard:
        body = ir.IfThenElse(E.LT(idx, c64(n)), body)
    return ir.For(o, c64(0), c64(-(-n // width)), ir.ForKind.SERIAL, ir.For(i, c64(0), c64(width), kind, body))


def elementwise(n: int, width: int, kind: ir.ForKind, value_of, out: str = "out", guard: bool = True):
    """``out[x] = value_of(x)`` over [0, n), split by ``width``."""
    return split_loop(n, "x", width, kind, lambda x: ir.Store(out, x, value_of(x)), guard)


_keep = []  # guarded mappings stay alive as long as the test process


def guarded(values: np.ndarray) -> np.ndarray:
    """A copy of ``values`` (1-D) that ends exactly where an unreadable page begins: reading one
    element past its end crashes, so a test using it proves that no lane reads beyond it."""
    import ctypes.util
    import mmap

    page = mmap.PAGESIZE
    nbytes = values.nbytes
    total = -(-nbytes // page) * page + page
    m = mmap.mmap(-1, total, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.mprotect(base + total - page, page, 0) != 0:  # PROT_NONE
        raise OSError(ctypes.get_errno(), "mprotect failed")
    _keep.append(m)
    out = np.frombuffer(m, dtype=values.dtype, count=values.size, offset=total - page - nbytes)
    out[...] = values
    return out
