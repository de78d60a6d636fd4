"""LLVM backend: the loop IR as LLVM IR (llvmlite), optimised at O3 for the host CPU, as object code.

A kernel is one function ``i32 name(ptr args)``: ``args`` is an array of 8-byte slots, one per
``LoweredKernel.arguments`` entry (buffer addresses, int64 scalars, float64 Params). It unpacks the
slots and calls ``name.impl`` whose buffer parameters are ``noalias``, so LLVM vectorizes without
runtime alias checks. It returns 0, or 1 when an allocation failed.

Vector expressions (``Ramp``, ``Broadcast``, any node whose dtype has lanes, produced by
``passes.vectorize``) become LLVM vector instructions. An ``IfThenElse`` with a vector condition
predicates its body: the code runs unmasked when every lane is active, masked (masked loads and
stores) when some are, and not at all when none are. A ``For`` of kind PARALLEL is outlined and run
through libgomp's ``GOMP_parallel`` (see ``_Emitter._parallel_for``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

from ..algebra import expr as E
from ..algebra import types as T
from ..algebra.types import DType
from . import ir as lir
from . import target as targets
from .target import CpuTarget

_I1, _I8, _I32, _I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
_F16, _F32, _F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
_PTR = ir.PointerType()
_VOID = ir.VoidType()
_FLOAT_TYPES = {"float16": _F16, "float32": _F32, "float64": _F64}
_FLOAT_SUFFIX = {"float16": "f16", "float32": "f32", "float64": "f64"}
_FLAGS = ("contract",)  # let LLVM form FMAs; no reassociation unless a schedule asks for it

_lock = threading.Lock()


def _clamped_ramp(idx: E.Expr):
    """(ramp, lo, hi, offset or None) when ``idx`` is ``clamp(ramp(b, 1, n), lo, hi)`` plus broadcasts."""
    terms, stack = [], [idx]
    while stack:
        e = stack.pop()
        if isinstance(e, E.Add):
            stack += [e.a, e.b]
        else:
            terms.append(e)
    clamps = [e for e in terms if not isinstance(e, E.Broadcast)]
    if len(clamps) != 1:
        return None
    c = clamps[0]
    if isinstance(c, E.Min) and isinstance(c.a, E.Max):
        inner, hi, lo = c.a.a, c.b, c.a.b
    elif isinstance(c, E.Max) and isinstance(c.a, E.Min):
        inner, lo, hi = c.a.a, c.b, c.a.b
    else:
        return None
    if not (isinstance(inner, E.Ramp) and isinstance(inner.stride, E.Const) and inner.stride.value == 1
            and isinstance(lo, E.Broadcast) and isinstance(hi, E.Broadcast)):
        return None
    offset = None
    for e in terms:
        if e is not c:
            offset = e.value if offset is None else E.Add(offset, e.value)
    return inner, lo.value, hi.value, offset


# ------------------------------------------------------------------------------------- target
@functools.cache
def _initialized() -> str:
    """Initialise LLVM's native target once; returns this process's triple."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # libgcc_s: LLVM calls its soft-float helpers, e.g. __truncdfhf2 for float64 -> float16
    for lib in ("m", "c", "gcc_s"):
        path = ctypes.util.find_library(lib)
        if path:
            llvm.load_library_permanently(path)
    return llvm.get_process_triple()


@functools.cache
def _machine(t: CpuTarget):
    """The (shared) target machine that optimises and emits code for ``t``."""
    return _new_target_machine(t)


def _new_target_machine(t: CpuTarget):
    return llvm.Target.from_triple(_initialized()).create_target_machine(
        cpu=t.cpu, features=t.features, opt=3, reloc="pic", codemodel="jitdefault")


def natural_vector_size(dtype: DType, target=None) -> int:
    """Lanes of ``dtype`` in one native vector register of ``target`` (default: ``RAGSCHED_CPU`` or this
    CPU; Halide's ``natural_vector_size``): the vector width a hand schedule should use there."""
    return targets.parse(target).natural_vector_size(dtype)


def target_key(target=None) -> str:
    t = targets.parse(target)
    return f"{_initialized()}|{t.cpu}|{t.features}|llvm{'.'.join(map(str, llvm.llvm_version_info))}"


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
    """Memory type: bool is stored as i8 (one byte per lane for vectors)."""
    if not t.is_bool:
        return ll_type(t)
    return _I8 if t.lanes == 1 else ir.VectorType(_I8, t.lanes)


def type_suffix(t: DType, memory: bool = False) -> str:
    """The overload suffix LLVM mangles into intrinsic names: ``f32``, ``i1``, ``v8f32``, ``v8i8``."""
    if t.is_float:
        s = _FLOAT_SUFFIX[t.name]
    elif t.is_bool:
        s = "i8" if memory else "i1"
    else:
        s = f"i{t.bits}"
    return s if t.lanes == 1 else f"v{t.lanes}{s}"


def _lanes(v: ir.Value) -> int:
    return v.type.count if isinstance(v.type, ir.VectorType) else 1


@functools.cache
def _gomp_loaded() -> bool:
    """libgomp, loaded into the process before any kernel object is linked (GOMP_parallel)."""
    _initialized()
    path = ctypes.util.find_library("gomp")
    for name in ([path] if path else []) + ["libgomp.so.1"]:
        try:
            llvm.load_library_permanently(name)
            return True
        except RuntimeError:
            continue
    return False


# ----------------------------------------------------------------------------------- emitter
class _Shared:
    """What every function emitted for one kernel shares: its name, scratch sites, thread count."""

    def __init__(self, name: str, threads: int | None):
        self.name = name
        self.threads = threads
        self.sites: list[tuple[ir.GlobalVariable, int]] = []  # cached scratch blocks: (site, slots)
        self.outlined = 0  # parallel loops outlined so far (for unique function names)


class _Emitter:
    """Emits one function body; keeps the symbol table of the statement being emitted."""

    def __init__(self, module: ir.Module, fn: ir.Function, shared: _Shared, in_parallel: bool = False):
        self.m, self.fn = module, fn
        entry = fn.append_basic_block("entry")  # stack slots only; code starts in "start"
        self.b = ir.IRBuilder(fn.append_basic_block("start"))
        self._allocas = ir.IRBuilder(entry)
        self._allocas.position_before(self._allocas.branch(self.b.block))
        self.syms: dict[str, tuple[ir.Value, DType]] = {}
        self.buffers: dict[str, tuple[ir.Value, DType]] = {}
        self.fail = None  # block that returns 1 (allocation failure)
        self.shared = shared
        self.sites = shared.sites
        self.in_parallel = in_parallel  # inside an outlined parallel loop: nested ones run serially
        self.mask = None  # the active lanes (<n x i1>) inside a predicated IfThenElse
        self.tid = None  # in an outlined parallel loop: the thread's number (i64), to pick scratch slots

    # -- helpers
    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        g = self.m.globals.get(name)
        if g is None:
            g = ir.Function(self.m, ir.FunctionType(ret, args), name)
        return g

    def int_suffix(self, t: DType) -> str:
        return type_suffix(t)

    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        """``v`` (a scalar) in every one of ``lanes`` lanes."""
        if lanes == 1 or isinstance(v.type, ir.VectorType):
            return v
        vt = ir.VectorType(v.type, lanes)
        if isinstance(v, ir.Constant) and isinstance(v.constant, (bool, int, float)):
            return ir.Constant(vt, v.constant)
        x = self.b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(_I32, 0))
        return self.b.shuffle_vector(x, ir.Constant(vt, ir.Undefined),
                                     ir.Constant(ir.VectorType(_I32, lanes), [0] * lanes))

    def index(self, e: E.Expr) -> ir.Value:
        """An index expression (scalar or vector) as int64."""
        return self.convert(self.expr(e), e.dtype, T.ADDRESS.with_lanes(e.dtype.lanes))

    def alloca(self, t: ir.Type) -> ir.Value:
        """Stack space in the entry block, so that a loop does not grow the stack."""
        return self._allocas.alloca(t)

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

    def _e_Ramp(self, e: E.Ramp):
        base = self.splat(self.expr(e.base), e.lanes)
        stride = self.splat(self.expr(e.stride), e.lanes)
        iota = ir.Constant(ll_type(e.dtype), list(range(e.lanes)))
        return self.b.add(base, self.b.mul(stride, iota))

    def _e_Broadcast(self, e: E.Broadcast):
        return self.splat(self.expr(e.value), e.lanes)

    def _e_Cast(self, e: E.Cast):
        return self.convert(self.expr(e.value), e.value.dtype, e.dtype)

    def convert(self, v: ir.Value, src: DType, dst: DType) -> ir.Value:
        """NumPy casting, except float to int saturates and NaN becomes 0 (scalars or vectors)."""
        b = self.b
        if src == dst:
            return v
        if src.lanes != dst.lanes:
            v, src = self.splat(v, dst.lanes), src.with_lanes(dst.lanes)
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
                wide = T.float32.with_lanes(src.lanes)
                v, src = b.fpext(v, ll_type(wide)), wide
            if src.lanes == 1:
                name = f"llvm.fpto{'s' if dst.is_signed else 'u'}i.sat.{type_suffix(dst)}.{type_suffix(src)}"
                return b.call(self.intrinsic(name, ll_type(dst), [ll_type(src)]), [v])
            return self._saturating_vector_cast(v, src, dst)
        if dst.is_float:
            return b.sitofp(v, ll_type(dst)) if src.is_signed else b.uitofp(v, ll_type(dst))
        if dst.bits < src.bits:
            return b.trunc(v, ll_type(dst))
        if dst.bits > src.bits:
            return b.sext(v, ll_type(dst)) if src.is_signed else b.zext(v, ll_type(dst))
        return v  # same width, signedness differs: same bits

    def _saturating_vector_cast(self, v: ir.Value, src: DType, dst: DType) -> ir.Value:
        """Float to int lanes with the IR's saturation, as a clamp in float and one plain conversion.
        (LLVM's ``fpto*i.sat`` on vectors becomes a scalar loop on x86: four instructions per lane.)
        Each lane is clamped to [lowest int, largest float below the int range's end], which converts
        exactly; lanes at or past the end become the largest int and NaN lanes 0."""
        b = self.b
        bits = dst.bits - 1 if dst.is_signed else dst.bits
        lo_int, hi_int = (-(1 << bits) if dst.is_signed else 0), (1 << bits) - 1
        ft, it = ll_type(src), ll_type(dst)
        np_float = np.float32 if src.bits == 32 else np.float64
        end = float(hi_int + 1)  # a power of two: exact in any float type
        below_end = float(np.nextafter(np_float(end), np_float(0)))

        def splat_f(x: float) -> ir.Value:
            return ir.Constant(ft, [ir.Constant(ft.element, x)] * src.lanes)

        def splat_i(x: int) -> ir.Value:
            return ir.Constant(it, [ir.Constant(it.element, x)] * src.lanes)

        lowest = splat_f(float(lo_int))
        clamped = b.select(b.fcmp_ordered(">=", v, lowest), v, lowest)  # NaN -> lowest
        clamped = b.select(b.fcmp_ordered("<", clamped, splat_f(end)), clamped, splat_f(below_end))
        out = b.fptosi(clamped, it) if dst.is_signed else b.fptoui(clamped, it)
        out = b.select(b.fcmp_ordered(">=", v, splat_f(end)), splat_i(hi_int), out)
        return b.select(b.fcmp_unordered("uno", v, v), splat_i(0), out)

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

    def _float_operands(self, e):
        """(a, b, dtype to compute in): NumPy computes float16 // and % in float32, then rounds."""
        a, d = self._binary_operands(e)
        if e.dtype.name != "float16":
            return a, d, e.dtype
        wide = T.float32.with_lanes(e.dtype.lanes)
        return self.b.fpext(a, ll_type(wide)), self.b.fpext(d, ll_type(wide)), wide

    def _narrow(self, v: ir.Value, e) -> ir.Value:
        return self.b.fptrunc(v, ll_type(e.dtype)) if e.dtype.name == "float16" else v

    def _float_floordiv(self, e: E.FloorDiv):
        """NumPy's floor_divide for floats: from fmod, so that 1.0 // 0.1 == 9.0."""
        b = self.b
        a, d, work = self._float_operands(e)
        t = ll_type(work)
        zero, one = ir.Constant(t, 0.0), ir.Constant(t, 1.0)
        sfx = type_suffix(work)
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
        return self._narrow(b.select(b.fcmp_ordered("==", d, zero), quot, fl), e)

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
            a, d, work = self._float_operands(e)
            r = b.frem(a, d)
            zero = ir.Constant(ll_type(work), 0.0)
            fix = b.and_(b.fcmp_ordered("!=", r, zero),
                         b.icmp_unsigned("!=", b.fcmp_ordered("<", r, zero), b.fcmp_ordered("<", d, zero)))
            return self._narrow(b.select(fix, b.fadd(r, d), r), e)
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
            name = f"llvm.{which}imum.{type_suffix(t)}"
        else:
            name = f"llvm.{'s' if t.is_signed else 'u'}{which}.{type_suffix(t)}"
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

    # -- memory
    def _align(self, t: DType) -> int:
        return max(t.scalar().itemsize, 1)

    def _e_Load(self, e: E.Load):
        ptr, t = self.buffers[e.buffer]
        lanes = e.dtype.lanes
        if lanes == 1 or e.index.dtype.lanes == 1 or isinstance(e.index, E.Broadcast):
            idx = e.index.value if isinstance(e.index, E.Broadcast) else e.index
            p = self.b.gep(ptr, [self.index(idx)], source_etype=mem_type(t))
            v = self.b.load(p, typ=mem_type(t))
            v = self.b.trunc(v, _I1) if t.is_bool else v
            return self.splat(v, lanes)
        v = self._vector_load(ptr, t.with_lanes(lanes), e.index)
        return self.b.trunc(v, ll_type(t.with_lanes(lanes))) if t.is_bool else v

    def _vector_load(self, ptr: ir.Value, t: DType, idx: E.Expr) -> ir.Value:
        """A vector from memory: dense (one load), strided (scalar loads, or one wider load and a
        shuffle for small constant strides), or gathered (``llvm.masked.gather``, which LLVM expands
        to scalar loads on CPUs whose gather instructions are slow, such as AMD Zen)."""
        b, lanes = self.b, t.lanes
        vt, et = mem_type(t), mem_type(t.scalar())
        align = self._align(t)
        stride = idx.stride.value if isinstance(idx, E.Ramp) and isinstance(idx.stride, E.Const) else None
        mask = self.mask
        if stride == 1:
            p = b.gep(ptr, [self.index(idx.base)], source_etype=et)
            if mask is None:
                return b.load(p, typ=vt, align=align)
            fn = self.intrinsic(f"llvm.masked.load.{type_suffix(t, True)}.p0", vt, [_PTR, _I32, mask.type, vt])
            return b.call(fn, [p, ir.Constant(_I32, align), mask, ir.Constant(vt, ir.Undefined)])
        if mask is None and isinstance(idx, E.Ramp):
            base = self.index(idx.base)
            if stride is not None and stride != 0 and (lanes - 1) * abs(stride) + 1 <= 64:
                # the span of the lanes, loaded at once: never reads outside the elements the lanes read
                span = (lanes - 1) * abs(stride) + 1
                lowest = base if stride > 0 else b.add(base, ir.Constant(_I64, (lanes - 1) * stride))
                wt = ir.VectorType(et, span)
                w = b.load(b.gep(ptr, [lowest], source_etype=et), typ=wt, align=align)
                picks = [k * stride if stride > 0 else (lanes - 1 - k) * -stride for k in range(lanes)]
                return b.shuffle_vector(w, ir.Constant(wt, ir.Undefined),
                                        ir.Constant(ir.VectorType(_I32, lanes), picks))
            step = self.index(idx.stride)
            out = ir.Constant(vt, ir.Undefined)
            addr = base
            for k in range(lanes):
                out = b.insert_element(out, b.load(b.gep(ptr, [addr], source_etype=et), typ=et, align=align),
                                       ir.Constant(_I32, k))
                if k + 1 < lanes:
                    addr = b.add(addr, step)
            return out
        clamped = _clamped_ramp(idx)
        if clamped is not None:
            return self._clamped_load(ptr, t, idx, *clamped)
        return self._gather(ptr, t, idx)

    def _clamped_load(self, ptr: ir.Value, t: DType, idx: E.Expr, ramp: E.Ramp, lo: E.Expr, hi: E.Expr,
                      offset: E.Expr | None) -> ir.Value:
        """A load at ``clamp(ramp(base, 1, n), lo, hi) + offset`` (a boundary condition, vectorized): where
        the ramp lies inside [lo, hi] the clamp does nothing and one dense load does, else a gather.
        Halide gets the same by partitioning the loop around the image border; this branch is taken the
        same way on every interior iteration, so it costs about one compare."""
        b = self.b
        base, first, last = self.index(ramp.base), self.index(lo), self.index(hi)
        end = b.add(base, ir.Constant(base.type, t.lanes - 1))
        inside = b.and_(b.icmp_signed(">=", base, first), b.icmp_signed("<=", end, last))
        dense_at = ramp.base if offset is None else E.Add(ramp.base, offset)
        with b.if_else(inside) as (then, otherwise):
            with then:
                dense = self._vector_load(ptr, t, E.Ramp(dense_at, E.const(1, dense_at.dtype), t.lanes))
                dense_block = b.block
            with otherwise:
                gathered = self._gather(ptr, t, idx)
                gather_block = b.block
        phi = b.phi(dense.type)
        phi.add_incoming(dense, dense_block)
        phi.add_incoming(gathered, gather_block)
        return phi

    def _gather(self, ptr: ir.Value, t: DType, idx: E.Expr) -> ir.Value:
        b, lanes, mask = self.b, t.lanes, self.mask
        vt, et = mem_type(t), mem_type(t.scalar())
        align = self._align(t)
        ptrs = self._pointers(ptr, et, idx, lanes)
        m = mask if mask is not None else ir.Constant(ir.VectorType(_I1, lanes), 1)
        fn = self.intrinsic(f"llvm.masked.gather.{type_suffix(t, True)}.v{lanes}p0", vt,
                            [ptrs.type, _I32, m.type, vt])
        return b.call(fn, [ptrs, ir.Constant(_I32, align), m, ir.Constant(vt, ir.Undefined)])

    def _pointers(self, ptr: ir.Value, et: ir.Type, idx: E.Expr, lanes: int) -> ir.Value:
        """<lanes x ptr>: the address of each lane's element."""
        p = self.b.gep(ptr, [self.index(idx)], source_etype=et)
        p.type = ir.VectorType(_PTR, lanes)  # llvmlite types a GEP with a vector index as a scalar ptr
        return p

    def _e_Call(self, e: E.Call):
        b = self.b
        t = e.dtype
        if e.name == "abs":
            v = self.expr(e.args[0])
            if t.is_float:
                return b.call(self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ll_type(t), [ll_type(t)]), [v])
            return b.call(self.intrinsic(f"llvm.abs.{type_suffix(t)}", ll_type(t), [ll_type(t), _I1]),
                          [v, ir.Constant(_I1, 0)])
        args = [self.expr(a) for a in e.args]
        work = t
        if t.name == "float16":  # compute in float32
            work = T.float32.with_lanes(t.lanes)
            args = [b.fpext(a, ll_type(work)) for a in args]
        out = self._math(e.name, args, work)
        return b.fptrunc(out, ll_type(t)) if t.name == "float16" else out

    def _math(self, name: str, args, t: DType):
        b = self.b
        lt, sfx = ll_type(t), type_suffix(t)
        intr = {"exp": "exp", "log": "log", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "floor": "floor",
                "ceil": "ceil", "round": "roundeven", "pow": "pow", "tanh": "tanh"}
        if name == "exp" and t.scalar().name == "float32":
            return self._exp_f32(args[0], t)
        if name in intr:  # vector overloads too: LLVM calls libm lane by lane where it has no vector code
            fn = self.intrinsic(f"llvm.{intr[name]}.{sfx}", lt, [lt] * len(args))
            return b.call(fn, args)
        if name == "rsqrt":
            s = b.call(self.intrinsic(f"llvm.sqrt.{sfx}", lt, [lt]), args)
            return b.fdiv(ir.Constant(lt, 1.0), s)
        if name == "erf":
            st = t.scalar()
            fn = self.intrinsic("erff" if st.name == "float32" else "erf", ll_type(st), [ll_type(st)])
            if t.lanes == 1:
                return b.call(fn, args)
            out = ir.Constant(lt, ir.Undefined)
            for k in range(t.lanes):
                lane = b.call(fn, [b.extract_element(args[0], ir.Constant(_I32, k))])
                out = b.insert_element(out, lane, ir.Constant(_I32, k))
            return out
        raise TypeError(f"the LLVM backend has no math function {name}")

    def _exp_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """float32 exp in vector instructions (LLVM would call libm's expf once per lane): Cephes' method,
        e^x = 2^n e^r with n = round(x / ln 2) and a degree-6 polynomial for e^r on [-ln2/2, ln2/2],
        within 2 ulp of expf. The same code for scalars, so a vectorized loop gives the scalar loop's bits.
        2^n is applied in two halves, so that results that are subnormal or overflow come out right."""
        b, lanes = self.b, t.lanes
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(lanes))

        def f(v: float) -> ir.Value:
            return ir.Constant(ft, [ir.Constant(ft.element, v)] * lanes) if lanes > 1 else ir.Constant(ft, v)

        def i(v: int) -> ir.Value:
            return ir.Constant(it, [ir.Constant(it.element, v)] * lanes) if lanes > 1 else ir.Constant(it, v)

        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft, ft, ft])
        floor = self.intrinsic(f"llvm.floor.{type_suffix(t)}", ft, [ft])
        xc = b.select(b.fcmp_ordered("<", x, f(-104.0)), f(-104.0), x)  # NaN stays: fixed at the end
        xc = b.select(b.fcmp_ordered(">", xc, f(89.0)), f(89.0), xc)
        xc = b.select(b.fcmp_unordered("uno", x, x), f(0.0), xc)
        n = b.call(floor, [b.call(fma, [xc, f(1.44269504088896341), f(0.5)])])
        r = b.call(fma, [n, f(-0.693359375), xc])
        r = b.call(fma, [n, f(2.12194440e-4), r])
        p = f(1.9875691500e-4)
        for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
            p = b.call(fma, [p, r, f(c)])
        r2 = b.fmul(r, r)
        y = b.fadd(b.call(fma, [p, r2, r]), f(1.0))
        k = b.fptosi(n, it)
        half = b.ashr(k, i(1))

        def pow2(e: ir.Value) -> ir.Value:  # 2^e for e in [-75, 65]: a normal float
            return b.bitcast(b.shl(b.add(e, i(127)), i(23)), ft)

        y = b.fmul(b.fmul(y, pow2(half)), pow2(b.sub(k, half)))
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

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
        lanes = max(s.value.dtype.lanes, s.index.dtype.lanes)
        if t.is_bool:
            v = self.b.zext(v, mem_type(s.value.dtype))
        if lanes == 1:
            # under a mask too: the uniform store runs when some lane is active, as in the serial loop
            p = self.b.gep(ptr, [self.index(s.index)], source_etype=mem_type(t))
            self.b.store(v, p)
            return
        self._vector_store(ptr, t.with_lanes(lanes), s.index, self.splat(v, lanes))

    def _vector_store(self, ptr: ir.Value, t: DType, idx: E.Expr, v: ir.Value) -> None:
        """Dense (one store), strided (scalar stores in lane order), or scattered
        (``llvm.masked.scatter``: overlapping lanes are stored in lane order, as the serial loop does)."""
        b, lanes = self.b, t.lanes
        vt, et = mem_type(t), mem_type(t.scalar())
        align = self._align(t)
        mask = self.mask
        if isinstance(idx, E.Ramp) and isinstance(idx.stride, E.Const) and idx.stride.value == 1:
            p = b.gep(ptr, [self.index(idx.base)], source_etype=et)
            if mask is None:
                b.store(v, p, align=align)
                return
            fn = self.intrinsic(f"llvm.masked.store.{type_suffix(t, True)}.p0", _VOID, [vt, _PTR, _I32, mask.type])
            b.call(fn, [v, p, ir.Constant(_I32, align), mask])
            return
        if mask is None and isinstance(idx, E.Ramp):
            addr, step = self.index(idx.base), self.index(idx.stride)
            for k in range(lanes):
                p = b.gep(ptr, [addr], source_etype=et)
                b.store(b.extract_element(v, ir.Constant(_I32, k)), p, align=align)
                if k + 1 < lanes:
                    addr = b.add(addr, step)
            return
        ptrs = self._pointers(ptr, et, idx if idx.dtype.lanes > 1 else E.Broadcast(idx, lanes), lanes)
        m = mask if mask is not None else ir.Constant(ir.VectorType(_I1, lanes), 1)
        fn = self.intrinsic(f"llvm.masked.scatter.{type_suffix(t, True)}.v{lanes}p0", _VOID,
                            [vt, ptrs.type, _I32, m.type])
        b.call(fn, [v, ptrs, ir.Constant(_I32, align), m])

    def _s_IfThenElse(self, s: lir.IfThenElse):
        if s.cond.dtype.lanes > 1:
            self._predicated(s)
            return
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

    def _reduce(self, op: str, m: ir.Value) -> ir.Value:
        return self.b.call(self.intrinsic(f"llvm.vector.reduce.{op}.v{_lanes(m)}i1", _I1, [m.type]), [m])

    def _predicated(self, s: lir.IfThenElse):
        """A condition that differs between lanes. At the top level: all lanes active runs the plain
        body, some run it under the mask, none skip it; nested: under the combined mask only."""
        b = self.b
        outer = self.mask
        if outer is not None:
            cond = self.expr(s.cond)
            ones = ir.Constant(cond.type, 1)
            for m, body in ((b.and_(outer, cond), s.then), (b.and_(outer, b.xor(cond, ones)), s.otherwise)):
                if body is not None:
                    with b.if_then(self._reduce("or", m)):
                        self._under_mask(m, body)
            return
        every = self._lanes_test(s.cond, "every")
        with b.if_else(every) as (full, partial):
            with full:
                self.stmt(s.then)
            with partial:
                with b.if_then(self._lanes_test(s.cond, "some")):
                    self._under_mask(self.expr(s.cond), s.then)
        if s.otherwise is not None:
            with b.if_else(self._lanes_test(s.cond, "some")) as (partial, empty):
                with partial:
                    with b.if_then(b.not_(every)):
                        cond = self.expr(s.cond)
                        self._under_mask(b.xor(cond, ir.Constant(cond.type, 1)), s.otherwise)
                with empty:
                    self.stmt(s.otherwise)

    def _lanes_test(self, e: E.Expr, which: str) -> ir.Value:
        """Whether ``every`` lane or ``some`` lane of the bool vector ``e`` is true. A comparison of a
        signed 32/64-bit ramp (which does not wrap: no overflow, Halide's rule) with a broadcast holds
        on a prefix or a suffix of the lanes, so one scalar comparison of an end lane decides it: a
        tail guard costs what a scalar loop bound does."""
        b = self.b
        if isinstance(e, (E.And, E.Or)) and (which == "every") == isinstance(e, E.And):
            return (b.and_ if isinstance(e, E.And) else b.or_)(self._lanes_test(e.a, which),
                                                              self._lanes_test(e.b, which))
        if isinstance(e, (E.LT, E.LE)):
            ramp_left = isinstance(e.a, E.Ramp)
            ramp, other = (e.a, e.b) if ramp_left else (e.b, e.a)
            if (isinstance(ramp, E.Ramp) and isinstance(other, E.Broadcast) and isinstance(ramp.stride, E.Const)
                    and ramp.stride.value != 0 and ramp.dtype.is_signed and ramp.dtype.bits >= 32):
                rising = (not ramp_left) == (ramp.stride.value > 0)  # false lanes first, then true ones
                k = 0 if (which == "every") == rising else ramp.lanes - 1
                lane = E.Add(ramp.base, E.Const(k * ramp.stride.value, ramp.base.dtype))
                return self.expr(type(e)(lane, other.value) if ramp_left else type(e)(other.value, lane))
        return self._reduce("and" if which == "every" else "or", self.expr(e))

    def _under_mask(self, mask: ir.Value, s: lir.Stmt) -> None:
        saved, self.mask = self.mask, mask
        self.stmt(s)
        self.mask = saved

    # -- loops
    def _s_For(self, s: lir.For):
        if (s.kind is lir.ForKind.PARALLEL and not self.in_parallel and self.mask is None
                and self.shared.threads != 1 and _gomp_loaded()):
            self._parallel_for(s)
            return
        # UNROLLED and VECTORIZED loops that their passes left alone run serially
        lo = self.index(s.min)
        self._loop(s.var, lo, self.b.add(lo, self.index(s.extent)), s.body)

    def _loop(self, var: str, lo: ir.Value, hi: ir.Value, body_stmt: lir.Stmt) -> None:
        b = self.b
        pre = b.block
        header = self.fn.append_basic_block(f"{var}.head")
        body = self.fn.append_basic_block(f"{var}.body")
        done = self.fn.append_basic_block(f"{var}.done")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(_I64, name=var)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body, done)
        b.position_at_end(body)
        saved = self.syms.get(var)
        self.syms[var] = (i, T.ADDRESS)
        self.stmt(body_stmt)
        if saved is None:
            del self.syms[var]
        else:
            self.syms[var] = saved
        nxt = b.add(i, ir.Constant(_I64, 1))
        i.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(done)

    def _parallel_for(self, s: lir.For) -> None:
        """Outline the loop and run it on libgomp's threads, which take chunks of iterations as they
        finish the last (dynamic scheduling: entries of different lengths balance).

        Three functions. ``K.parN.loop(i64 first, i64 end, i64 thread, values..., ptr noalias
        buffers...)`` runs iterations [first, end) and returns 0, or 1 when an allocation failed; its
        parameters are ``noalias`` as the kernel's are, and its scratch allocations cache one block
        per thread. ``K.parN.body(ptr closure)`` is what every thread runs: it claims the next chunk
        with an atomic add on the closure's counter until none is left (about 16 chunks per thread,
        at least one iteration each) and records a failure with an atomic or. The caller fills the
        closure ``{i64 min, i64 extent, i32 failed, i64 next, values..., buffers...}`` (every symbol
        and buffer the body uses from outside) on its stack, calls ``GOMP_parallel`` and returns 1 if
        a thread failed. Parallel loops inside run serially in each thread."""
        b = self.b
        lo, n = self.index(s.min), self.index(s.extent)
        names, bufs = _uses(s.body)
        values = [(k, self.syms[k]) for k in sorted(names) if k in self.syms and k != s.var]
        buffers = [(k, self.buffers[k]) for k in sorted(bufs) if k in self.buffers]
        k = self.shared.outlined
        self.shared.outlined += 1
        stem = f"{self.shared.name}.par{k}"
        captured = [v for _, (v, _) in values] + [p for _, (p, _) in buffers]
        types = [v.type for v in captured]
        types = [_PTR if isinstance(t, ir.PointerType) else t for t in types]

        loop = ir.Function(self.m, ir.FunctionType(_I32, [_I64, _I64, _I64, *types]), f"{stem}.loop")
        loop.linkage = "internal"
        sub = _Emitter(self.m, loop, self.shared, in_parallel=True)
        sub.tid = loop.args[2]
        params = loop.args[3:]
        for (name, (_, t)), p in zip(values, params[:len(values)], strict=True):
            p.name = name
            sub.syms[name] = (p, t)
        for (name, (_, t)), p in zip(buffers, params[len(values):], strict=True):
            p.name = name
            p.add_attribute("noalias")
            sub.buffers[name] = (p, t)
        sub._loop(s.var, loop.args[0], loop.args[1], s.body)
        sub.b.ret(ir.Constant(_I32, 0))

        fields = [_I64, _I64, _I32, _I64, *types]
        closure_t = ir.LiteralStructType(fields)
        body = ir.Function(self.m, ir.FunctionType(_VOID, [_PTR]), f"{stem}.body")
        body.linkage = "internal"
        bb = ir.IRBuilder(body.append_basic_block("entry"))
        cl = body.args[0]

        def field(j):
            return bb.gep(cl, [ir.Constant(_I32, 0), ir.Constant(_I32, j)], source_etype=closure_t)

        first, count = bb.load(field(0), typ=_I64), bb.load(field(1), typ=_I64)
        omp = lambda name: bb.sext(bb.call(self.intrinsic(name, _I32, []), []), _I64)  # noqa: E731
        tid, nt = omp("omp_get_thread_num"), omp("omp_get_num_threads")
        chunk = bb.sdiv(count, bb.mul(nt, ir.Constant(_I64, 16)))
        chunk = bb.select(bb.icmp_signed("<", chunk, ir.Constant(_I64, 1)), ir.Constant(_I64, 1), chunk)
        args = [bb.load(field(4 + j), typ=t) for j, t in enumerate(types)]
        claim, run, done = (body.append_basic_block(k) for k in ("claim", "run", "done"))
        bb.branch(claim)
        bb.position_at_end(claim)
        taken = bb.atomic_rmw("add", field(3), chunk, "monotonic")
        bb.cbranch(bb.icmp_signed("<", taken, count), run, done)
        bb.position_at_end(run)
        stop = bb.add(taken, chunk)
        stop = bb.select(bb.icmp_signed("<", stop, count), stop, count)
        rc = bb.call(loop, [bb.add(first, taken), bb.add(first, stop), tid, *args])
        with bb.if_then(bb.icmp_signed("!=", rc, ir.Constant(_I32, 0))):
            bb.atomic_rmw("or", field(2), ir.Constant(_I32, 1), "monotonic")
        bb.branch(claim)
        bb.position_at_end(done)
        bb.ret_void()

        gomp = self.intrinsic("GOMP_parallel", _VOID, [_PTR, _PTR, _I32, _I32])
        closure = self.alloca(closure_t)
        slot = lambda j: b.gep(closure, [ir.Constant(_I32, 0), ir.Constant(_I32, j)])  # noqa: E731
        with b.if_then(b.icmp_signed(">", n, ir.Constant(_I64, 0))):
            for j, v in enumerate([lo, n, ir.Constant(_I32, 0), ir.Constant(_I64, 0), *captured]):
                b.store(v, slot(j))
            if self.shared.threads is None:
                nthreads = ir.Constant(_I32, 0)  # libgomp's default: OMP_NUM_THREADS, else every core
            else:
                cap = ir.Constant(_I64, self.shared.threads)
                nthreads = b.trunc(b.select(b.icmp_signed("<", n, cap), n, cap), _I32)
            b.call(gomp, [body, closure, nthreads, ir.Constant(_I32, 0)])
            ok = self.fn.append_basic_block(f"{stem}.ok")
            failed = b.load(slot(2))
            b.cbranch(b.icmp_signed("!=", failed, ir.Constant(_I32, 0)), self._fail_block(), ok)
            b.position_at_end(ok)

    def _s_Allocate(self, s: lir.Allocate):
        b = self.b
        item = max(mem_type(s.dtype).get_abi_size(_machine(targets.host()).target_data), 1)
        n = self.index(s.size)
        n = b.select(b.icmp_signed("<", n, ir.Constant(_I64, 1)), ir.Constant(_I64, 1), n)
        nbytes = b.mul(n, ir.Constant(_I64, item))
        slots = _THREAD_SLOTS if self.tid is not None else 1
        vt = _PTR if slots == 1 else ir.ArrayType(_PTR, slots)
        site = ir.GlobalVariable(self.m, vt, f"scratch.{s.buffer}.{len(self.sites)}")
        site.linkage = "internal"
        site.initializer = ir.Constant(vt, None)
        self.sites.append((site, slots))
        if slots > 1:  # one cached block per thread (modulo the slot count): no contention, no churn
            lane = b.and_(self.tid, ir.Constant(_I64, slots - 1))
            site = b.gep(site, [ir.Constant(_I32, 0), lane])
        ptr = b.call(_scratch_functions(self.m)[0], [site, nbytes])
        ok = self.fn.append_basic_block(f"{s.buffer}.allocated")
        b.cbranch(b.icmp_unsigned("==", b.ptrtoint(ptr, _I64), ir.Constant(_I64, 0)), self._fail_block(), ok)
        b.position_at_end(ok)
        saved = self.buffers.get(s.buffer)
        self.buffers[s.buffer] = (ptr, s.dtype)
        self.stmt(s.body)
        if saved is None:
            del self.buffers[s.buffer]
        else:
            self.buffers[s.buffer] = saved
        b.call(_scratch_functions(self.m)[1], [site, ptr])

    def _fail_block(self):
        if self.fail is None:
            self.fail = self.fn.append_basic_block("alloc.failed")
            here = self.b.block
            self.b.position_at_end(self.fail)
            self.b.ret(ir.Constant(_I32, 1))
            self.b.position_at_end(here)
        return self.fail


def _uses(s: lir.Stmt) -> tuple[set[str], set[str]]:
    """Names of the symbols and buffers that statement ``s`` refers to."""
    names, bufs = set(), set()
    for t in lir.walk_stmts(s):
        if isinstance(t, lir.Store):
            bufs.add(t.buffer)
        for e in lir.exprs_of(t):
            for n in E.walk(e):
                if isinstance(n, E.Var):
                    names.add(n.name)
                elif isinstance(n, E.Load):
                    bufs.add(n.buffer)
    return names, bufs


_THREAD_SLOTS = 64  # cached scratch blocks per allocation site inside a parallel loop (a power of two)
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
    """``name()`` frees every cached scratch block (called when the kernel's code is unloaded)."""
    fn = ir.Function(m, ir.FunctionType(_VOID, []), name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    free = m.globals.get("free") or ir.Function(m, ir.FunctionType(_VOID, [_PTR]), "free")
    for site, slots in sites:
        for k in range(slots):
            slot = site if slots == 1 else b.gep(site, [ir.Constant(_I32, 0), ir.Constant(_I32, k)])
            old = b.atomic_rmw("xchg", slot, ir.Constant(_PTR, None), "acq_rel")
            with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(old, _I64), ir.Constant(_I64, 0))):
                b.call(free, [old])
    b.ret_void()


def _slot_type(a: lir.Argument) -> ir.Type:
    if a.is_buffer:
        return _PTR
    return _F64 if a.dtype.is_float else _I64


def emit_module(kernel: lir.LoweredKernel, threads: int | None = None, target=None) -> str:
    """LLVM IR text of ``kernel`` for ``target`` (see the module docstring for the calling convention).
    Parallel loops use at most ``threads`` threads (None: libgomp's default, OMP_NUM_THREADS or every
    core; 1: they run serially, without libgomp)."""
    tm = _machine(targets.parse(target))
    m = ir.Module(name=kernel.name)
    m.triple, m.data_layout = _initialized(), str(tm.target_data)
    params = [_slot_type(a) for a in kernel.arguments]
    impl = ir.Function(m, ir.FunctionType(_I32, params), f"{kernel.name}.impl")
    impl.linkage = "internal"
    shared = _Shared(kernel.name, threads)
    em = _Emitter(m, impl, shared)
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
    _emit_release(m, release_symbol(kernel.name), shared.sites)
    return str(m)


def release_symbol(kernel_name: str) -> str:
    return f"{kernel_name}.release"


def optimize_to_object(ir_text: str, target=None) -> bytes:
    """O3 for ``target``'s CPU, then machine code as an object file."""
    tm = _machine(targets.parse(target))
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


def assembly(ir_text: str, target=None) -> str:
    """Optimised assembly for ``target``, for inspection (``f.compile().assembly``)."""
    tm = _machine(targets.parse(target))
    with _lock:
        mod = llvm.parse_assembly(ir_text)
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return tm.emit_assembly(mod)


class LoadedObject:
    """Machine code loaded into this process. It lives as long as a Kernel uses it; then its cached
    scratch memory is freed and its code unloaded."""

    def __init__(self, obj: bytes, symbol: str, target=None):
        _gomp_loaded()  # before linking: parallel loops call GOMP_parallel
        tm = _new_target_machine(targets.runnable(target))  # the engine owns (and frees) its target machine
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

    def __del__(self, _finalizing=sys.is_finalizing):  # bound now: at exit the module's globals may be gone
        if getattr(self, "engine", None) is not None and not _finalizing():
            self._release()
            with _lock:
                self.engine.close()
            self.engine = None
