"""Scratch buffers (``Allocate``): small ones of a constant size on the stack; the rest heap blocks that
each allocation site caches between calls, the functions that get and put them, the kernel's release
function that frees them when its code is unloaded, and the block that returns 1 when an allocation
fails."""

from __future__ import annotations

import llvmlite.ir as ir

from ...algebra import expr as E
from .. import ir as lir
from .. import target as targets
from .machine import _I8, _I32, _I64, _PTR, _VOID, _machine, mem_type

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
        item = max(mem_type(s.dtype).get_abi_size(_machine(targets.host()).target_data), 1)
        if isinstance(s.size, E.Const):
            nbytes = max(int(s.size.value), 1) * item
            if nbytes <= _STACK_BYTES and self.stack_bytes + nbytes <= _STACK_BYTES_PER_FUNCTION:
                self.stack_bytes += nbytes
                slot = self.alloca(ir.ArrayType(_I8, nbytes))
                slot.align = _HEADER
                slot.type = _PTR  # an opaque pointer, as the heap's: loads and stores of any type through it
                self._with_buffer(s, slot)
                return
        n = self.index(s.size)
        n = b.select(b.icmp_signed("<", n, ir.Constant(_I64, 1)), ir.Constant(_I64, 1), n)
        nbytes = b.mul(n, ir.Constant(_I64, item))
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
        ptr = b.call(_scratch_functions(self.m)[0], [site, nbytes])
        ok = self.fn.append_basic_block(f"{s.buffer}.allocated")
        b.cbranch(b.icmp_unsigned("==", b.ptrtoint(ptr, _I64), ir.Constant(_I64, 0)), self._fail_block(), ok)
        b.position_at_end(ok)
        self._with_buffer(s, ptr)
        b.call(_scratch_functions(self.m)[1], [site, ptr])

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
