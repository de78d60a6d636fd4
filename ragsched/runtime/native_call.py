"""A repeated call's checks and argument packing in machine code, for kernels of NumPy arrays only.

A call of a small kernel through Python costs more than the kernel: building the key of its checked plan
(each array's dtype, shape and strides as Python objects), copying the plan's slots, reading each array's
data address, and the ctypes call (about 4 us for a 4-element add, NumPy's own add 0.33 us). Here one
machine-code function per argument count (the dispatcher, made with llvmlite once per process) takes the
plan and the array objects themselves: it checks that each is exactly a NumPy array with the plan's
dtype (the same descriptor object), rank, shape and strides and an aligned address, and that each output
is writeable and shares no byte with another array, reading NumPy's array struct; then it packs the
slots on its stack and calls the kernel. Anything else is a miss, and the call takes the checked path
(which gives the error, where there is one). A kernel keeps one plan for calls that allocate their
outputs and one for calls with ``out=``: the latest of each.

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
# strides, base, descr, flags (int)
OFFSETS = {"type": _P, "data": 2 * _P, "nd": 3 * _P, "dims": 4 * _P, "strides": 5 * _P, "descr": 7 * _P,
           "flags": 8 * _P}
WRITEABLE = 0x0400  # NPY_ARRAY_WRITEABLE
_FLAG_BITS = {"C_CONTIGUOUS": 0x0001, "F_CONTIGUOUS": 0x0002, "ALIGNED": 0x0100, "WRITEABLE": WRITEABLE}


def _read_ptr(address: int) -> int:
    return ctypes.c_void_p.from_address(address).value or 0


@functools.cache
def layout_checked() -> bool:
    """Whether NumPy's array struct has the fields at ``OFFSETS`` here (read back from probe arrays)."""
    if _P != 8:
        return False
    base = np.arange(24, dtype=np.float32)
    frozen = np.ones(3, np.int16)
    frozen.flags.writeable = False
    probes = (base, base[3:], base.reshape(4, 6)[:, 1:5], np.zeros((2, 3), np.float64).T, np.empty(0, np.int32),
              np.ones((2, 2, 2), np.int64)[::-1], frozen)
    for a in probes:
        flags = ctypes.c_int.from_address(id(a) + OFFSETS["flags"]).value
        if any(bool(flags & bit) != a.flags[name] for name, bit in _FLAG_BITS.items()):
            return False
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


def data_reader():
    """The fastest way to read a NumPy array's data address here: from the array struct where its layout
    checked out (0.2 us), else ``a.ctypes.data`` (1.3 us: it builds a ctypes object per call)."""
    if not layout_checked():  # pragma: no cover - another layout
        return lambda a: a.ctypes.data
    read, at = ctypes.c_void_p.from_address, OFFSETS["data"]
    return lambda a: read(id(a) + at).value or 0


class Plan:
    """A checked call's plan for the dispatcher: its slots, how many of its arrays are inputs, and per array
    (inputs, then outputs) the slot its address goes to and what it must be: rank, dtype descriptor,
    item size (the alignment asked of its address), the bytes its elements span around that address
    (an output may overlap nothing), extents and strides. Kept alive by the Kernel while it is in use."""

    def __init__(self, slots: bytes, inputs: int, arrays: list[tuple[int, np.ndarray]]):
        n = len(slots) // 8
        words = [n, id(np.ndarray), inputs, *np.frombuffer(slots, np.int64).tolist()]
        heads = len(words)
        words += [0] * len(arrays)
        for j, (slot, a) in enumerate(arrays):
            words[heads + j] = len(words)
            words += [slot, a.ndim, id(a.dtype), a.itemsize, *span(a), *a.shape, *a.strides]
        self.dtypes = [a.dtype for _, a in arrays]  # the descriptors whose addresses the plan holds stay alive
        self.words = (ctypes.c_int64 * len(words))(*words)
        self.address = ctypes.addressof(self.words)


def span(a: np.ndarray) -> tuple[int, int]:
    """The bytes an array's elements occupy, from its data address: [address + lo, address + hi)."""
    if a.size == 0:
        return 0, 0
    lo = sum(s * (n - 1) for n, s in zip(a.shape, a.strides) if s < 0)
    hi = sum(s * (n - 1) for n, s in zip(a.shape, a.strides) if s > 0) + a.itemsize
    return lo, hi


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
    ndarray, inputs = word(ir.Constant(i64, 1)), word(ir.Constant(i64, 2))
    slots = b.alloca(i64, n)
    b.call(m.declare_intrinsic("llvm.memcpy", [ptr, ptr, i64]),
           [slots, b.gep(plan, [ir.Constant(i64, 3)], source_etype=i64), b.mul(n, ir.Constant(i64, 8)),
            ir.Constant(ir.IntType(1), 0)])
    bounds = []  # per array: (first byte, end), and whether it is an output
    for j, obj in enumerate(objs):
        rec = word(b.add(n, ir.Constant(i64, 3 + j)))

        def at(k, rec=rec):
            return word(b.add(rec, ir.Constant(i64, k)))

        output = b.icmp_signed(">=", ir.Constant(i64, j), inputs)
        check(b.icmp_unsigned("==", b.ptrtoint(field(obj, "type", ptr), i64), ndarray))
        nd = b.sext(field(obj, "nd", i32), i64)
        check(b.icmp_signed("==", nd, at(1)))
        check(b.icmp_unsigned("==", b.ptrtoint(field(obj, "descr", ptr), i64), at(2)))
        data = b.ptrtoint(field(obj, "data", ptr), i64)
        check(b.icmp_unsigned("==", b.urem(data, at(3)), ir.Constant(i64, 0)))
        writeable = b.icmp_unsigned("!=", b.and_(field(obj, "flags", i32), ir.Constant(i32, WRITEABLE)),
                                    ir.Constant(i32, 0))
        check(b.or_(b.not_(output), writeable))  # an output must be writeable
        bounds.append((b.add(data, at(4)), b.add(data, at(5)), output))
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
        k = b.add(rec, b.add(d, ir.Constant(i64, 6)))
        same = b.and_(b.icmp_signed("==", b.load(b.gep(dims, [d], source_etype=i64), typ=i64), word(k)),
                      b.icmp_signed("==", b.load(b.gep(strides, [d], source_etype=i64), typ=i64),
                                    word(b.add(k, nd))))
        d.add_incoming(b.add(d, ir.Constant(i64, 1)), body)
        b.cbranch(same, loop, miss)
        b.position_at_end(done)
        b.store(data, b.gep(slots, [at(0)], source_etype=i64))
    # an output shares no byte with another array (np.may_share_memory's test); the checked path says which
    for c in range(len(bounds)):
        for a in range(c):
            (lo_a, hi_a, _), (lo_c, hi_c, out_c) = bounds[a], bounds[c]
            apart = b.or_(b.icmp_unsigned(">=", lo_a, hi_c), b.icmp_unsigned(">=", lo_c, hi_a))
            check(b.or_(b.not_(out_c), apart))
    b.ret(b.call(_Callee(kernel, ir.FunctionType(i32, [ptr])), [slots]))
    return str(m)


class _Callee:
    """A function pointer argument with the function type an indirect call through it needs (llvmlite's
    builder reads ``function_type`` of the callee; an opaque pointer has none)."""

    def __init__(self, value, function_type):
        self.value, self.function_type, self.type = value, function_type, value.type

    def get_reference(self) -> str:
        return self.value.get_reference()
