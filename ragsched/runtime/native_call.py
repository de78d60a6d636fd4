"""A repeated call's checks and argument packing in machine code, for kernels of NumPy arrays only.

A call of a small kernel through Python costs more than the kernel: building the key of its checked plan
(each array's dtype, shape and strides as Python objects), copying the plan's slots, reading each array's
data address, and the ctypes call (about 4 us for a 4-element add, NumPy's own add 0.33 us). Here one
machine-code function per argument count (the dispatcher, made with llvmlite once per process) takes the
plan and the array objects themselves: it checks that each is exactly a NumPy array with the plan's
dtype (the same descriptor object), rank, shape and strides and an aligned address, reading NumPy's
array struct, packs the slots on its stack and calls the kernel; anything else is a miss, and the call
takes the checked path.

The struct's field offsets are NumPy's ABI (``PyArrayObject_fields``: the object header, then ``data``,
``nd``, ``dimensions``, ``strides``, ``base``, ``descr``); they are checked at first use against the
values Python reports for a few arrays, and where any differs the dispatcher is not used.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

#: what a dispatcher returns when the arrays do not match its plan (kernels return 0, or 1 when out of memory)
MISS = -7777
#: the most arrays a dispatcher takes (inputs and outputs together)
MAX_ARRAYS = 8

_P = ctypes.sizeof(ctypes.c_void_p)
# PyArrayObject_fields on a 64-bit CPython: ob_refcnt, ob_type, data, nd (int, padded), dimensions,
# strides, base, descr
OFFSETS = {"type": _P, "data": 2 * _P, "nd": 3 * _P, "dims": 4 * _P, "strides": 5 * _P, "descr": 7 * _P}


def _read_ptr(address: int) -> int:
    return ctypes.c_void_p.from_address(address).value or 0


@functools.cache
def layout_checked() -> bool:
    """Whether NumPy's array struct has the fields at ``OFFSETS`` here (read back from probe arrays)."""
    if _P != 8:
        return False
    base = np.arange(24, dtype=np.float32)
    probes = (base, base[3:], base.reshape(4, 6)[:, 1:5], np.zeros((2, 3), np.float64).T, np.empty(0, np.int32),
              np.ones((2, 2, 2), np.int64)[::-1])
    for a in probes:
        at = id(a)
        nd = ctypes.c_int.from_address(at + OFFSETS["nd"]).value
        if nd != a.ndim or _read_ptr(at + OFFSETS["type"]) != id(type(a)) or \
                _read_ptr(at + OFFSETS["data"]) != a.ctypes.data or _read_ptr(at + OFFSETS["descr"]) != id(a.dtype):
            return False
        dims = (ctypes.c_ssize_t * nd).from_address(_read_ptr(at + OFFSETS["dims"]))
        strides = (ctypes.c_ssize_t * nd).from_address(_read_ptr(at + OFFSETS["strides"]))
        if tuple(dims) != a.shape or tuple(strides) != a.strides:
            return False
    return True


class Plan:
    """A checked call's plan for the dispatcher: its slots, and per array (inputs, then outputs) the slot
    its address goes to and what it must be. Kept alive by the Kernel while it is in use."""

    def __init__(self, slots: bytes, arrays: list[tuple[int, np.ndarray]]):
        n = len(slots) // 8
        words = [n, id(np.ndarray), *np.frombuffer(slots, np.int64).tolist()]
        heads = len(words)
        words += [0] * len(arrays)
        for j, (slot, a) in enumerate(arrays):
            words[heads + j] = len(words)
            words += [slot, a.ndim, id(a.dtype), a.itemsize, *a.shape, *a.strides]
        self.dtypes = [a.dtype for _, a in arrays]  # the descriptors whose addresses the plan holds stay alive
        self.words = (ctypes.c_int64 * len(words))(*words)
        self.address = ctypes.addressof(self.words)


@functools.cache
def dispatcher(arity: int):
    """The dispatcher for ``arity`` arrays: ``f(plan address, kernel address, *arrays) -> int``."""
    import llvmlite.binding as llvm

    from ..codegen import target as targets
    from ..codegen.llvm.machine import _lock, _new_target_machine

    tm = _new_target_machine(targets.runnable(None))
    with _lock:
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(_dispatcher_ir(arity)), tm)
        engine.finalize_object()
        address = engine.get_function_address(f"ragsched_dispatch_{arity}")
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, *[ctypes.py_object] * arity)(address)
    fn._engine = engine  # the code lives as long as the function object
    return fn


def _dispatcher_ir(arity: int) -> str:
    import llvmlite.ir as ir

    i32, i64, ptr = ir.IntType(32), ir.IntType(64), ir.PointerType()
    m = ir.Module(f"ragsched_dispatch_{arity}")
    fn = ir.Function(m, ir.FunctionType(i32, [ptr, ptr] + [ptr] * arity), f"ragsched_dispatch_{arity}")
    plan, kernel, objs = fn.args[0], fn.args[1], fn.args[2:]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    miss = fn.append_basic_block("miss")
    ir.IRBuilder(miss).ret(ir.Constant(i32, MISS))

    def word(k):
        return b.load(b.gep(plan, [k], source_etype=i64), typ=i64)

    def field(obj, name, typ):
        return b.load(b.gep(obj, [ir.Constant(i64, OFFSETS[name])], source_etype=ir.IntType(8)), typ=typ)

    def check(ok):
        nxt = fn.append_basic_block("ok")
        b.cbranch(ok, nxt, miss)
        b.position_at_end(nxt)

    n = word(ir.Constant(i64, 0))
    slots = b.alloca(i64, n)
    template = b.gep(plan, [ir.Constant(i64, 2)], source_etype=i64)
    b.call(m.declare_intrinsic("llvm.memcpy", [ptr, ptr, i64]),
           [slots, template, b.mul(n, ir.Constant(i64, 8)), ir.Constant(ir.IntType(1), 0)])
    ndarray = word(ir.Constant(i64, 1))
    for j, obj in enumerate(objs):
        rec = word(b.add(n, ir.Constant(i64, 2 + j)))
        check(b.icmp_unsigned("==", b.ptrtoint(field(obj, "type", ptr), i64), ndarray))
        nd = b.sext(field(obj, "nd", i32), i64)
        check(b.icmp_signed("==", nd, word(b.add(rec, ir.Constant(i64, 1)))))
        check(b.icmp_unsigned("==", b.ptrtoint(field(obj, "descr", ptr), i64), word(b.add(rec, ir.Constant(i64, 2)))))
        data = b.ptrtoint(field(obj, "data", ptr), i64)
        check(b.icmp_unsigned("==", b.urem(data, word(b.add(rec, ir.Constant(i64, 3)))), ir.Constant(i64, 0)))
        dims, strides = field(obj, "dims", ptr), field(obj, "strides", ptr)
        # each dimension's extent and stride against the plan's
        head = b.block
        loop, body, done = (fn.append_basic_block(s) for s in ("dims", "dim", "dims_done"))
        b.branch(loop)
        b.position_at_end(loop)
        d = b.phi(i64)
        d.add_incoming(ir.Constant(i64, 0), head)
        b.cbranch(b.icmp_signed("<", d, nd), body, done)
        b.position_at_end(body)
        at = b.add(rec, b.add(d, ir.Constant(i64, 4)))
        same = b.and_(b.icmp_signed("==", b.load(b.gep(dims, [d], source_etype=i64), typ=i64), word(at)),
                      b.icmp_signed("==", b.load(b.gep(strides, [d], source_etype=i64), typ=i64),
                                    word(b.add(at, nd))))
        step = b.add(d, ir.Constant(i64, 1))
        d.add_incoming(step, body)
        b.cbranch(same, loop, miss)
        b.position_at_end(done)
        b.store(data, b.gep(slots, [word(rec)], source_etype=i64))
    b.ret(b.call(_Callee(kernel, ir.FunctionType(i32, [ptr])), [slots]))
    return str(m)


class _Callee:
    """A function pointer argument with the function type an indirect call through it needs (llvmlite's
    builder reads ``function_type`` of the callee; an opaque pointer has none)."""

    def __init__(self, value, function_type):
        self.value, self.function_type, self.type = value, function_type, value.type

    def get_reference(self) -> str:
        return self.value.get_reference()
