"""Scratch buffers (``Allocate``): small ones of a constant size on the stack; the rest heap blocks that
each allocation site caches between calls, the functions that get and put them, the kernel's release
function that frees them when its code is unloaded, and the block that returns 1 when an allocation
fails."""

from __future__ import annotations

import llvmlite.ir as ir

from ...algebra import expr as E
from .. import ir as lir
from .machine import _I8, _I32, _I64, _PTR, _VOID, abi_size

_THREAD_SLOTS = 64  # cached scratch blocks per allocation site inside a parallel loop (a power of two)
_SLOT_STRIDE = 8  # pointers from one thread's slot to the next: one 64-byte cache line each
_HEADER = 64  # bytes before each scratch block: its capacity, and 64-byte alignment of the data
#: A buffer of a constant size up to this many bytes lives on the stack (Halide does the same): no call,
#: no atomic exchange, and LLVM may keep it in registers (a reduction's accumulators computed per vector
#: of its consumer). Bounded per function as well, so that a thread's stack (2 MB or more) is never at risk.
_STACK_BYTES = 64 * 1024
_STACK_BYTES_PER_FUNCTION = 512 * 1024


class _Scratch:
    """``_Emitter``'s scratch allocations (a mixin: it uses the emitter's builder and tables)."""

    def _s_Allocate(self, s: lir.Allocate):
        b = self.b
        item = max(abi_size(s.dtype), 1)
        if isinstance(s.size, E.Const):
            nbytes = max(int(s.size.value), 1) * item
            if nbytes <= _STACK_BYTES and self.stack_bytes + nbytes <= _STACK_BYTES_PER_FUNCTION:
                self.stack_bytes += nbytes
                slot = self.alloca(ir.ArrayType(_I8, nbytes))
                slot.align = _HEADER
                slot.type = _PTR  # an opaque pointer, as the heap's: loads and stores of any type through it
                self._with_buffer(s, slot)
                return
        # the size in bytes, its products checked: extents of a few billion each (an index scaled by a
        # large Param) multiply past 2^63, and a wrapped size would be a small block written far past its end
        n, overflow = self._checked_index(s.size)
        n = b.select(b.icmp_signed("<", n, ir.Constant(_I64, 1)), ir.Constant(_I64, 1), n)
        nbytes, more = self._checked("smul", n, ir.Constant(_I64, item))
        overflow = b.or_(overflow, more)
        slots = _THREAD_SLOTS if self.tid is not None else 1
        vt = _PTR if slots == 1 else ir.ArrayType(_PTR, slots * _SLOT_STRIDE)
        site = ir.GlobalVariable(self.m, vt, f"scratch.{s.buffer}.{len(self.sites)}")
        site.linkage = "internal"
        site.initializer = ir.Constant(vt, None)
        self.sites.append((site, slots))
        if slots > 1:  # one cached block per thread (modulo the slot count), each slot in its own cache
            # line: no contention, no churn, and no line bouncing between the cores' atomic exchanges
            lane = b.mul(b.and_(self.tid, ir.Constant(_I64, slots - 1)), ir.Constant(_I64, _SLOT_STRIDE))
            site = b.gep(site, [ir.Constant(_I32, 0), lane])
        get, ok, failed = (self.fn.append_basic_block(f"{s.buffer}.{k}") for k in ("get", "allocated", "failed"))
        b.cbranch(overflow, failed, get)
        b.position_at_end(get)
        ptr = b.call(_scratch_functions(self.m)[0], [site, nbytes])
        b.cbranch(b.icmp_unsigned("==", b.ptrtoint(ptr, _I64), ir.Constant(_I64, 0)), failed, ok)
        b.position_at_end(failed)  # which buffer, and its size (-1: past 2^63 bytes), for the MemoryError
        record = failure_record(self.m, self.shared.name)
        b.store(_buffer_name(self.m, s.buffer), b.gep(record, [ir.Constant(_I32, 0), ir.Constant(_I32, 0)]))
        b.store(b.select(overflow, ir.Constant(_I64, -1), nbytes),
                b.gep(record, [ir.Constant(_I32, 0), ir.Constant(_I32, 1)]))
        b.branch(self._fail_block())
        b.position_at_end(ok)
        self._with_buffer(s, ptr)
        b.call(_scratch_functions(self.m)[1], [site, ptr])

    def _checked_index(self, e: E.Expr) -> tuple[ir.Value, ir.Value]:
        """Scalar index ``e`` as int64, and whether one of its additions, subtractions or multiplications
        (the arithmetic of a size: products of extents) overflowed int64."""
        op = _CHECKED.get(type(e))
        if op is None or e.dtype.lanes != 1 or not e.dtype.is_int:
            return self.index(e), ir.Constant(_I1, 0)
        (a, oa), (c, oc) = self._checked_index(e.a), self._checked_index(e.b)
        value, o = self._checked(op, a, c)
        return value, self.b.or_(self.b.or_(oa, oc), o)

    def _checked(self, op: str, a: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
        """``llvm.<op>.with.overflow.i64(a, c)``: (the result, whether it overflowed)."""
        f = self.intrinsic(f"llvm.{op}.with.overflow.i64", _WITH_OVERFLOW, [_I64, _I64])
        r = self.b.call(f, [a, c])
        return self.b.extract_value(r, 0), self.b.extract_value(r, 1)

    def _with_buffer(self, s: lir.Allocate, ptr: ir.Value) -> None:
        """Emit ``s``'s body with its buffer at ``ptr``."""
        saved, saved_size = self.buffers.get(s.buffer), self.sizes.pop(s.buffer, None)
        self.buffers[s.buffer] = (ptr, s.dtype)
        if isinstance(s.size, E.Const):
            self.sizes[s.buffer] = int(s.size.value)
        self.stmt(s.body)
        self.sizes.pop(s.buffer, None)
        if saved_size is not None:
            self.sizes[s.buffer] = saved_size
        if saved is None:
            del self.buffers[s.buffer]
        else:
            self.buffers[s.buffer] = saved

    def _fail_block(self):
        if self.fail is None:
            self.fail = self.fn.append_basic_block("alloc.failed")
            here = self.b.block
            self.b.position_at_end(self.fail)
            self.b.ret(ir.Constant(_I32, 1))
            self.b.position_at_end(here)
        return self.fail


def _scratch_functions(m: ir.Module):
    """``scratch.get(site, nbytes)`` and ``scratch.put(site, data)``: each allocation site keeps the
    last block it freed and reuses it on the next call, so a kernel called repeatedly does not pay the
    operating system's page faults for fresh memory every time. Lock-free (atomic exchange): two
    threads in one site simply allocate two blocks."""
    if "scratch.get" in m.globals:
        return m.globals["scratch.get"], m.globals["scratch.put"]
    null = ir.Constant(_PTR, None)
    malloc = m.globals.get("aligned_alloc") or ir.Function(m, ir.FunctionType(_PTR, [_I64, _I64]), "aligned_alloc")
    free = m.globals.get("free") or ir.Function(m, ir.FunctionType(_VOID, [_PTR]), "free")

    get = ir.Function(m, ir.FunctionType(_PTR, [_PTR, _I64]), "scratch.get")
    get.linkage = "internal"
    # Like malloc: the block it returns is reachable through no other pointer (the site's slot was
    # emptied). Kept out of line so that LLVM sees that promise: stores to a Func's scratch buffer then
    # cannot alias loads from the inputs, and a reduction's accumulators stay in registers.
    get.return_value.attributes.add("noalias")
    get.attributes.add("noinline")
    site, nbytes = get.args
    bb = {k: get.append_basic_block(k) for k in ("entry", "check", "hit", "drop", "alloc", "fail", "fresh")}
    b = ir.IRBuilder(bb["entry"])
    is_null = lambda p: b.icmp_unsigned("==", b.ptrtoint(p, _I64), ir.Constant(_I64, 0))  # noqa: E731
    old = b.atomic_rmw("xchg", site, null, "acq_rel")
    b.cbranch(is_null(old), bb["alloc"], bb["check"])
    b.position_at_end(bb["check"])
    b.cbranch(b.icmp_unsigned(">=", b.load(old, typ=_I64), nbytes), bb["hit"], bb["drop"])
    b.position_at_end(bb["hit"])
    b.ret(b.gep(old, [ir.Constant(_I64, _HEADER)], source_etype=_I8))
    b.position_at_end(bb["drop"])
    b.call(free, [old])
    b.branch(bb["alloc"])
    b.position_at_end(bb["alloc"])
    total = b.and_(b.add(nbytes, ir.Constant(_I64, 2 * _HEADER - 1)), ir.Constant(_I64, ~(_HEADER - 1)))
    p = b.call(malloc, [ir.Constant(_I64, _HEADER), total])
    b.cbranch(is_null(p), bb["fail"], bb["fresh"])
    b.position_at_end(bb["fail"])
    b.ret(null)
    b.position_at_end(bb["fresh"])
    b.store(b.sub(total, ir.Constant(_I64, _HEADER)), p)
    b.ret(b.gep(p, [ir.Constant(_I64, _HEADER)], source_etype=_I8))

    put = ir.Function(m, ir.FunctionType(_VOID, [_PTR, _PTR]), "scratch.put")
    put.linkage = "internal"
    site, data = put.args
    entry, drop, done = (put.append_basic_block(k) for k in ("entry", "drop", "done"))
    b = ir.IRBuilder(entry)
    block = b.gep(data, [ir.Constant(_I64, -_HEADER)], source_etype=_I8)
    old = b.atomic_rmw("xchg", site, block, "acq_rel")
    b.cbranch(b.icmp_unsigned("==", b.ptrtoint(old, _I64), ir.Constant(_I64, 0)), done, drop)
    b.position_at_end(drop)
    b.call(free, [old])
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return get, put


def _emit_release(m: ir.Module, name: str, sites: list) -> None:
    """``name()`` frees every cached scratch block (called when the kernel's code is unloaded): a loop
    over each site's slots, not one block per slot (a parallel pipeline's 25 sites of 64 slots were
    1600 blocks of code that LLVM spent a second on)."""
    fn = ir.Function(m, ir.FunctionType(_VOID, []), name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    free = m.globals.get("free") or ir.Function(m, ir.FunctionType(_VOID, [_PTR]), "free")
    for site, slots in sites:
        before = b.block
        body, after = fn.append_basic_block("slot"), fn.append_basic_block("next")
        b.branch(body)
        b.position_at_end(body)
        k = b.phi(_I64)
        k.add_incoming(ir.Constant(_I64, 0), before)
        slot = site if slots == 1 else b.gep(site, [ir.Constant(_I32, 0), b.mul(k, ir.Constant(_I64, _SLOT_STRIDE))])
        old = b.atomic_rmw("xchg", slot, ir.Constant(_PTR, None), "acq_rel")
        with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(old, _I64), ir.Constant(_I64, 0))):
            b.call(free, [old])
        k_next = b.add(k, ir.Constant(_I64, 1))
        k.add_incoming(k_next, b.block)
        b.cbranch(b.icmp_unsigned("<", k_next, ir.Constant(_I64, slots)), body, after)
        b.position_at_end(after)
    b.ret_void()


def release_symbol(kernel_name: str) -> str:
    return f"{kernel_name}.release"


_RECORD = ir.LiteralStructType([_PTR, _I64])
_I1 = ir.IntType(1)
_WITH_OVERFLOW = ir.LiteralStructType([_I64, _I1])
_CHECKED = {E.Mul: "smul", E.Add: "sadd", E.Sub: "ssub"}


def failure_record(m: ir.Module, kernel_name: str) -> ir.GlobalVariable:
    """``{ptr name, i64 bytes}``: the buffer an allocation of the kernel last failed to get, and its size
    (written where one fails, read after the kernel returned 1; two threads failing at once leave one)."""
    name = f"{kernel_name}.alloc.failed"
    g = m.globals.get(name)
    if g is None:
        g = ir.GlobalVariable(m, _RECORD, name)
        g.linkage = "internal"
        g.initializer = ir.Constant(_RECORD, None)
    return g


def _buffer_name(m: ir.Module, buffer: str) -> ir.GlobalVariable:
    name = f"alloc.name.{buffer}"
    g = m.globals.get(name)
    if g is None:
        text = bytearray(buffer.encode() + b"\0")
        g = ir.GlobalVariable(m, ir.ArrayType(_I8, len(text)), name)
        g.global_constant, g.linkage = True, "internal"
        g.initializer = ir.Constant(ir.ArrayType(_I8, len(text)), text)
    return g


def emit_failure_accessor(m: ir.Module, kernel_name: str) -> None:
    """``failure_symbol(kernel_name)() -> ptr``: the address of the kernel's failure record."""
    fn = ir.Function(m, ir.FunctionType(_PTR, []), failure_symbol(kernel_name))
    ir.IRBuilder(fn.append_basic_block("entry")).ret(failure_record(m, kernel_name))


def failure_symbol(kernel_name: str) -> str:
    return f"{kernel_name}.failure"
