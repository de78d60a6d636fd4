"""LLVM backend: the loop IR as LLVM IR (llvmlite), optimised at O3 for the host CPU, as object code.

A kernel is one function ``i32 name(ptr args)``: ``args`` is an array of 8-byte slots, one per
``LoweredKernel.arguments`` entry (buffer addresses, int64 scalars, float64 Params). It unpacks the
slots and calls ``name.impl`` whose buffer parameters are ``noalias``, so LLVM vectorizes without
runtime alias checks. It returns 0, or 1 when an allocation failed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ..algebra import expr as E
from ..algebra import types as T
from ..algebra.types import DType
from . import ir as lir

_I1, _I8, _I32, _I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
_F16, _F32, _F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
_PTR = ir.PointerType()
_VOID = ir.VoidType()
_FLOAT_TYPES = {"float16": _F16, "float32": _F32, "float64": _F64}
_FLOAT_SUFFIX = {"float16": "f16", "float32": "f32", "float64": "f64"}
_FLAGS = ("contract",)  # let LLVM form FMAs; no reassociation unless a schedule asks for it

_lock = threading.Lock()


# ------------------------------------------------------------------------------------- target
@functools.cache
def host_target():
    """(target machine, triple, cpu, features) of the machine we run on."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    for lib in ("m", "c"):
        path = ctypes.util.find_library(lib)
        if path:
            llvm.load_library_permanently(path)
    triple = llvm.get_process_triple()
    cpu = llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten()
    return _new_target_machine(triple, cpu, features), triple, cpu, features


def _new_target_machine(triple, cpu, features):
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu, features=features, opt=3, reloc="pic", codemodel="jitdefault")


def target_key() -> str:
    _, triple, cpu, features = host_target()
    return f"{triple}|{cpu}|{features}|llvm{'.'.join(map(str, llvm.llvm_version_info))}"


def ll_type(t: DType) -> ir.Type:
    """Register type of a scalar DType (bool is i1 in registers, i8 in memory)."""
    if t.is_bool:
        base: ir.Type = _I1
    elif t.is_float:
        base = _FLOAT_TYPES[t.name]
    else:
        base = ir.IntType(t.bits)
    return base if t.lanes == 1 else ir.VectorType(base, t.lanes)


def mem_type(t: DType) -> ir.Type:
    return _I8 if t.is_bool else ll_type(t)


# ----------------------------------------------------------------------------------- emitter
class _Emitter:
    """Emits one kernel body; keeps the symbol table of the statement being emitted."""

    def __init__(self, module: ir.Module, fn: ir.Function, kernel: lir.LoweredKernel):
        self.m, self.fn = module, fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        self.syms: dict[str, tuple[ir.Value, DType]] = {}
        self.buffers: dict[str, tuple[ir.Value, DType]] = {}
        self.fail = None  # block that returns 1 (allocation failure)
        self.sites: list[ir.GlobalVariable] = []  # one cached scratch block per allocation

    # -- helpers
    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        g = self.m.globals.get(name)
        if g is None:
            g = ir.Function(self.m, ir.FunctionType(ret, args), name)
        return g

    def int_suffix(self, t: DType) -> str:
        return f"i{t.bits}" if not t.is_bool else "i1"

    # -- expressions
    def expr(self, e: E.Expr) -> ir.Value:
        method = getattr(self, f"_e_{type(e).__name__}", None)
        if method is None:
            raise TypeError(f"the LLVM backend cannot emit {type(e).__name__}: {e}")
        return method(e)

    def _e_Const(self, e: E.Const):
        return ir.Constant(ll_type(e.dtype), e.value if not e.dtype.is_bool else int(bool(e.value)))

    def _e_Var(self, e: E.Var):
        if e.name not in self.syms:
            raise KeyError(f"internal error: unbound symbol {e.name}")
        v, t = self.syms[e.name]
        return self.convert(v, t, e.dtype)

    def _e_Let(self, e: E.Let):
        saved = self.syms.get(e.name)
        self.syms[e.name] = (self.expr(e.value), e.value.dtype)
        out = self.expr(e.body)
        if saved is None:
            del self.syms[e.name]
        else:
            self.syms[e.name] = saved
        return out

    def _e_Cast(self, e: E.Cast):
        return self.convert(self.expr(e.value), e.value.dtype, e.dtype)

    def convert(self, v: ir.Value, src: DType, dst: DType) -> ir.Value:
        """NumPy casting, except float to int saturates and NaN becomes 0."""
        b = self.b
        if src == dst:
            return v
        if dst.is_bool:
            if src.is_float:
                return b.fcmp_unordered("!=", v, ir.Constant(ll_type(src), 0.0))
            return b.icmp_unsigned("!=", v, ir.Constant(ll_type(src), 0))
        if src.is_bool:
            return b.uitofp(v, ll_type(dst)) if dst.is_float else b.zext(v, ll_type(dst))
        if src.is_float and dst.is_float:
            return b.fpext(v, ll_type(dst)) if dst.bits > src.bits else b.fptrunc(v, ll_type(dst))
        if src.is_float:
            if src.name == "float16":
                v, src = b.fpext(v, _F32), T.float32
            name = f"llvm.fpto{'s' if dst.is_signed else 'u'}i.sat.i{dst.bits}.{_FLOAT_SUFFIX[src.name]}"
            return b.call(self.intrinsic(name, ll_type(dst), [ll_type(src)]), [v])
        if dst.is_float:
            return b.sitofp(v, ll_type(dst)) if src.is_signed else b.uitofp(v, ll_type(dst))
        if dst.bits < src.bits:
            return b.trunc(v, ll_type(dst))
        if dst.bits > src.bits:
            return b.sext(v, ll_type(dst)) if src.is_signed else b.zext(v, ll_type(dst))
        return v  # same width, signedness differs: same bits

    def _binary_operands(self, e):
        return self.expr(e.a), self.expr(e.b)

    def _e_Add(self, e):
        a, c = self._binary_operands(e)
        return self.b.fadd(a, c, flags=_FLAGS) if e.dtype.is_float else self.b.add(a, c)

    def _e_Sub(self, e):
        a, c = self._binary_operands(e)
        return self.b.fsub(a, c, flags=_FLAGS) if e.dtype.is_float else self.b.sub(a, c)

    def _e_Mul(self, e):
        a, c = self._binary_operands(e)
        return self.b.fmul(a, c, flags=_FLAGS) if e.dtype.is_float else self.b.mul(a, c)

    def _e_Div(self, e):
        a, c = self._binary_operands(e)
        return self.b.fdiv(a, c, flags=_FLAGS)

    def _e_Neg(self, e: E.Neg):
        v = self.expr(e.a)
        if e.dtype.is_float:
            return self.b.fneg(v)
        return self.b.sub(ir.Constant(v.type, 0), v)

    def _safe_divisor(self, e):
        """(a, b, b_is_zero, b_is_minus_one, divisor safe for sdiv/udiv)."""
        b = self.b
        a, d = self._binary_operands(e)
        t = ll_type(e.dtype)
        zero, one = ir.Constant(t, 0), ir.Constant(t, 1)
        is_zero = b.icmp_unsigned("==", d, zero)
        if e.dtype.is_signed:
            is_m1 = b.icmp_signed("==", d, ir.Constant(t, -1))
            safe = b.select(b.or_(is_zero, is_m1), one, d)
        else:
            is_m1 = None
            safe = b.select(is_zero, one, d)
        return a, d, is_zero, is_m1, safe

    def _float_floordiv(self, e: E.FloorDiv):
        """NumPy's floor_divide for floats: from fmod, so that 1.0 // 0.1 == 9.0."""
        b = self.b
        a, d = self._binary_operands(e)
        t = ll_type(e.dtype)
        zero, one = ir.Constant(t, 0.0), ir.Constant(t, 1.0)
        sfx = _FLOAT_SUFFIX[e.dtype.name]
        mod = b.frem(a, d)
        div = b.fdiv(b.fsub(a, mod), d)
        fix = b.and_(b.fcmp_ordered("!=", mod, zero),
                     b.icmp_unsigned("!=", b.fcmp_ordered("<", d, zero), b.fcmp_ordered("<", mod, zero)))
        div = b.select(fix, b.fsub(div, one), div)
        fl = b.call(self.intrinsic(f"llvm.floor.{sfx}", t, [t]), [div])
        fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), ir.Constant(t, 0.5)), b.fadd(fl, one), fl)
        quot = b.fdiv(a, d)
        signed_zero = b.call(self.intrinsic(f"llvm.copysign.{sfx}", t, [t, t]), [zero, quot])
        fl = b.select(b.fcmp_ordered("==", div, zero), signed_zero, fl)
        return b.select(b.fcmp_ordered("==", d, zero), quot, fl)

    def _e_FloorDiv(self, e: E.FloorDiv):
        if e.dtype.is_float:
            return self._float_floordiv(e)
        b = self.b
        t = ll_type(e.dtype)
        zero = ir.Constant(t, 0)
        a, d, is_zero, is_m1, safe = self._safe_divisor(e)
        if not e.dtype.is_signed:
            return b.select(is_zero, zero, b.udiv(a, safe))
        q, r = b.sdiv(a, safe), b.srem(a, safe)
        # floor: step down when the remainder is non-zero and its sign differs from the divisor's
        adjust = b.and_(b.icmp_signed("!=", r, zero),
                        b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", safe, zero)))
        q = b.sub(q, b.zext(adjust, t))
        q = b.select(is_m1, b.sub(zero, a), q)
        return b.select(is_zero, zero, q)

    def _e_Mod(self, e: E.Mod):
        b = self.b
        t = ll_type(e.dtype)
        if e.dtype.is_float:
            a, d = self._binary_operands(e)
            r = b.frem(a, d)
            zero = ir.Constant(t, 0.0)
            fix = b.and_(b.fcmp_ordered("!=", r, zero),
                         b.icmp_unsigned("!=", b.fcmp_ordered("<", r, zero), b.fcmp_ordered("<", d, zero)))
            return b.select(fix, b.fadd(r, d), r)
        zero = ir.Constant(t, 0)
        a, d, is_zero, is_m1, safe = self._safe_divisor(e)
        if not e.dtype.is_signed:
            return b.select(is_zero, zero, b.urem(a, safe))
        r = b.srem(a, safe)
        fix = b.and_(b.icmp_signed("!=", r, zero),
                     b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", safe, zero)))
        r = b.select(fix, b.add(r, safe), r)
        return b.select(b.or_(is_zero, is_m1), zero, r)

    def _minmax(self, e, which: str):
        a, c = self._binary_operands(e)
        t = e.dtype
        if t.is_bool:
            return self.b.and_(a, c) if which == "min" else self.b.or_(a, c)
        if t.is_float:
            name = f"llvm.{which}imum.{_FLOAT_SUFFIX[t.name]}"
        else:
            name = f"llvm.{'s' if t.is_signed else 'u'}{which}.{self.int_suffix(t)}"
        lt = ll_type(t)
        return self.b.call(self.intrinsic(name, lt, [lt, lt]), [a, c])

    def _e_Min(self, e):
        return self._minmax(e, "min")

    def _e_Max(self, e):
        return self._minmax(e, "max")

    def _e_BitAnd(self, e):
        return self.b.and_(*self._binary_operands(e))

    def _e_BitOr(self, e):
        return self.b.or_(*self._binary_operands(e))

    def _e_BitXor(self, e):
        return self.b.xor(*self._binary_operands(e))

    _e_And = _e_BitAnd
    _e_Or = _e_BitOr

    def _e_Not(self, e: E.Not):
        v = self.expr(e.a)
        return self.b.xor(v, ir.Constant(v.type, -1 if not e.dtype.is_bool else 1))

    def _shift(self, e, left: bool):
        b = self.b
        a, s = self._binary_operands(e)
        t = ll_type(e.dtype)
        width = ir.Constant(t, e.dtype.bits)
        in_range = b.icmp_unsigned("<", s, width)  # negative amounts count as huge, as in NumPy
        if left:
            return b.select(in_range, b.shl(a, b.select(in_range, s, ir.Constant(t, 0))), ir.Constant(t, 0))
        if e.dtype.is_signed:
            return b.ashr(a, b.select(in_range, s, ir.Constant(t, e.dtype.bits - 1)))
        return b.select(in_range, b.lshr(a, b.select(in_range, s, ir.Constant(t, 0))), ir.Constant(t, 0))

    def _e_Shl(self, e):
        return self._shift(e, True)

    def _e_Shr(self, e):
        return self._shift(e, False)

    def _compare(self, e, op: str):
        a, c = self._binary_operands(e)
        t = e.a.dtype
        if t.is_float:
            return self.b.fcmp_unordered(op, a, c) if op == "!=" else self.b.fcmp_ordered(op, a, c)
        if t.is_signed:
            return self.b.icmp_signed(op, a, c)
        return self.b.icmp_unsigned(op, a, c)

    def _e_LT(self, e):
        return self._compare(e, "<")

    def _e_LE(self, e):
        return self._compare(e, "<=")

    def _e_EQ(self, e):
        return self._compare(e, "==")

    def _e_NE(self, e):
        return self._compare(e, "!=")

    def _e_Select(self, e: E.Select):
        return self.b.select(self.expr(e.cond), self.expr(e.t), self.expr(e.f))

    def _e_Load(self, e: E.Load):
        ptr, t = self.buffers[e.buffer]
        p = self.b.gep(ptr, [self.expr(e.index)], source_etype=mem_type(t))
        v = self.b.load(p, typ=mem_type(t))
        return self.b.trunc(v, _I1) if t.is_bool else v

    def _e_Call(self, e: E.Call):
        b = self.b
        t = e.dtype
        if e.name == "abs":
            v = self.expr(e.args[0])
            if t.is_float:
                return b.call(self.intrinsic(f"llvm.fabs.{_FLOAT_SUFFIX[t.name]}", ll_type(t), [ll_type(t)]), [v])
            return b.call(self.intrinsic(f"llvm.abs.{self.int_suffix(t)}", ll_type(t), [ll_type(t), _I1]),
                          [v, ir.Constant(_I1, 0)])
        args = [self.expr(a) for a in e.args]
        work = t
        if t.name == "float16":  # compute in float32
            args = [b.fpext(a, _F32) for a in args]
            work = T.float32
        out = self._math(e.name, args, work)
        return b.fptrunc(out, _F16) if t.name == "float16" else out

    def _math(self, name: str, args, t: DType):
        b = self.b
        lt, sfx = ll_type(t), _FLOAT_SUFFIX[t.name]
        intr = {"exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "floor": "floor",
                "ceil": "ceil", "round": "roundeven", "pow": "pow", "tanh": "tanh"}
        if name in intr:
            fn = self.intrinsic(f"llvm.{intr[name]}.{sfx}", lt, [lt] * len(args))
            return b.call(fn, args)
        if name == "rsqrt":
            s = b.call(self.intrinsic(f"llvm.sqrt.{sfx}", lt, [lt]), args)
            return b.fdiv(ir.Constant(lt, 1.0), s)
        if name == "erf":
            fn = self.intrinsic("erff" if t.name == "float32" else "erf", lt, [lt])
            return b.call(fn, args)
        raise TypeError(f"the LLVM backend has no math function {name}")

    # -- statements
    def stmt(self, s: lir.Stmt) -> None:
        getattr(self, f"_s_{type(s).__name__}")(s)

    def _s_Block(self, s: lir.Block):
        for t in s.stmts:
            self.stmt(t)

    def _s_Produce(self, s: lir.Produce):
        self.stmt(s.body)

    def _s_LetStmt(self, s: lir.LetStmt):
        saved = self.syms.get(s.name)
        self.syms[s.name] = (self.expr(s.value), s.value.dtype)
        self.stmt(s.body)
        if saved is None:
            del self.syms[s.name]
        else:
            self.syms[s.name] = saved

    def _s_Store(self, s: lir.Store):
        ptr, t = self.buffers[s.buffer]
        v = self.expr(s.value)
        if t.is_bool:
            v = self.b.zext(v, _I8)
        p = self.b.gep(ptr, [self.expr(s.index)], source_etype=mem_type(t))
        self.b.store(v, p)

    def _s_IfThenElse(self, s: lir.IfThenElse):
        cond = self.expr(s.cond)
        if s.otherwise is None:
            with self.b.if_then(cond):
                self.stmt(s.then)
        else:
            with self.b.if_else(cond) as (then, otherwise):
                with then:
                    self.stmt(s.then)
                with otherwise:
                    self.stmt(s.otherwise)

    def _s_For(self, s: lir.For):
        b = self.b
        lo = self.convert(self.expr(s.min), s.min.dtype, T.ADDRESS)
        hi = b.add(lo, self.convert(self.expr(s.extent), s.extent.dtype, T.ADDRESS))
        pre = b.block
        header = self.fn.append_basic_block(f"{s.var}.head")
        body = self.fn.append_basic_block(f"{s.var}.body")
        done = self.fn.append_basic_block(f"{s.var}.done")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(_I64, name=s.var)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body, done)
        b.position_at_end(body)
        saved = self.syms.get(s.var)
        self.syms[s.var] = (i, T.ADDRESS)
        self.stmt(s.body)
        if saved is None:
            del self.syms[s.var]
        else:
            self.syms[s.var] = saved
        nxt = b.add(i, ir.Constant(_I64, 1))
        i.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(done)

    def _s_Allocate(self, s: lir.Allocate):
        b = self.b
        item = max(mem_type(s.dtype).get_abi_size(host_target()[0].target_data), 1)
        n = self.convert(self.expr(s.size), s.size.dtype, T.ADDRESS)
        n = b.select(b.icmp_signed("<", n, ir.Constant(_I64, 1)), ir.Constant(_I64, 1), n)
        nbytes = b.mul(n, ir.Constant(_I64, item))
        site = ir.GlobalVariable(self.m, _PTR, f"scratch.{s.buffer}.{len(self.sites)}")
        site.linkage = "internal"
        site.initializer = ir.Constant(_PTR, None)
        self.sites.append(site)
        ptr = b.call(_scratch_functions(self.m)[0], [site, nbytes])
        ok = self.fn.append_basic_block(f"{s.buffer}.allocated")
        b.cbranch(b.icmp_unsigned("==", b.ptrtoint(ptr, _I64), ir.Constant(_I64, 0)), self._fail_block(), ok)
        b.position_at_end(ok)
        self.buffers[s.buffer] = (ptr, s.dtype)
        self.stmt(s.body)
        del self.buffers[s.buffer]
        b.call(_scratch_functions(self.m)[1], [site, ptr])

    def _fail_block(self):
        if self.fail is None:
            self.fail = self.fn.append_basic_block("alloc.failed")
            here = self.b.block
            self.b.position_at_end(self.fail)
            self.b.ret(ir.Constant(_I32, 1))
            self.b.position_at_end(here)
        return self.fail


_HEADER = 64  # bytes before each scratch block: its capacity, and 64-byte alignment of the data


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
    """``name()`` frees every cached scratch block (called when the kernel's code is unloaded)."""
    fn = ir.Function(m, ir.FunctionType(_VOID, []), name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    free = m.globals.get("free") or ir.Function(m, ir.FunctionType(_VOID, [_PTR]), "free")
    for site in sites:
        old = b.atomic_rmw("xchg", site, ir.Constant(_PTR, None), "acq_rel")
        with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(old, _I64), ir.Constant(_I64, 0))):
            b.call(free, [old])
    b.ret_void()


def _slot_type(a: lir.Argument) -> ir.Type:
    if a.is_buffer:
        return _PTR
    return _F64 if a.dtype.is_float else _I64


def emit_module(kernel: lir.LoweredKernel) -> str:
    """LLVM IR text of ``kernel`` (see the module docstring for the calling convention)."""
    tm, triple, _, _ = host_target()
    m = ir.Module(name=kernel.name)
    m.triple, m.data_layout = triple, str(tm.target_data)
    params = [_slot_type(a) for a in kernel.arguments]
    impl = ir.Function(m, ir.FunctionType(_I32, params), f"{kernel.name}.impl")
    impl.linkage = "internal"
    em = _Emitter(m, impl, kernel)
    for a, p in zip(kernel.arguments, impl.args, strict=True):
        p.name = a.name
        if a.is_buffer:
            p.add_attribute("noalias")
            em.buffers[a.name] = (p, a.dtype)
        else:
            em.syms[a.name] = (p, T.float64 if a.dtype.is_float else T.int64)
    em.stmt(kernel.body)
    em.b.ret(ir.Constant(_I32, 0))

    entry = ir.Function(m, ir.FunctionType(_I32, [_PTR]), kernel.name)
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    vals = []
    for k, t in enumerate(params):
        slot = b.gep(entry.args[0], [ir.Constant(_I64, k)], source_etype=_I64)
        vals.append(b.load(slot, typ=t))
    b.ret(b.call(impl, vals))
    _emit_release(m, release_symbol(kernel.name), em.sites)
    return str(m)


def release_symbol(kernel_name: str) -> str:
    return f"{kernel_name}.release"


def optimize_to_object(ir_text: str) -> bytes:
    """O3 for the host CPU, then machine code as an object file."""
    tm = host_target()[0]
    with _lock:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return tm.emit_object(mod)


def assembly(ir_text: str) -> str:
    """Optimised assembly, for inspection (``f.compile().assembly``)."""
    tm = host_target()[0]
    with _lock:
        mod = llvm.parse_assembly(ir_text)
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return tm.emit_assembly(mod)


class LoadedObject:
    """Machine code loaded into this process. It lives as long as a Kernel uses it; then its cached
    scratch memory is freed and its code unloaded."""

    def __init__(self, obj: bytes, symbol: str):
        _, triple, cpu, features = host_target()
        tm = _new_target_machine(triple, cpu, features)  # the engine owns (and frees) its target machine
        self.engine = None
        with _lock:
            self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
            self.engine.finalize_object()
            addr = self.engine.get_function_address(symbol)
            release = self.engine.get_function_address(release_symbol(symbol))
        if not addr or not release:
            raise RuntimeError(f"compiled object has no function {symbol}")
        self.function = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(addr)
        self._release = ctypes.CFUNCTYPE(None)(release)
        self.address = addr

    def __del__(self):
        if getattr(self, "engine", None) is not None and not sys.is_finalizing():
            self._release()
            with _lock:
                self.engine.close()
            self.engine = None
