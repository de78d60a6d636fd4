"""The emitter: the loop IR as LLVM IR, one function at a time. ``_Emitter`` dispatches expressions and
statements and emits scalar arithmetic, conversions and control flow; memory and predication
(``vector_memory``), math calls (``math``), parallel loops (``parallel``) and scratch buffers
(``scratch``) are its mixins. ``emit_module`` emits a kernel's whole module."""

from __future__ import annotations

import math
from contextlib import contextmanager

import llvmlite.ir as ir
import numpy as np

from ...algebra import expr as E
from ...algebra import types as T
from ...algebra.types import DType
from .. import ir as lir
from .. import target as targets
from ..passes.batch_reductions import batch_lane_reductions
from ..passes.register_accumulators import register_accumulators
from ..passes.transpose_loads import transpose_strided_loads
from .machine import _F64, _I32, _I64, _PTR, _initialized, data_layout, ll_type, type_suffix
from .math_calls import _Math
from .parallel import _gomp_loaded, _Parallel, _Shared
from .scratch import _emit_release, _Scratch, emit_failure_accessor, release_symbol
from .vector_memory import _VectorMemory

_FLAGS = ("contract",)  # let LLVM form FMAs; no reassociation unless a schedule asks for it


class _Emitter(_VectorMemory, _Math, _Parallel, _Scratch):
    """Emits one function body; keeps the symbol table of the statement being emitted. Memory access and
    predication, math calls, parallel loops and scratch buffers come from the mixins."""

    def __init__(self, module: ir.Module, fn: ir.Function, shared: _Shared, in_parallel: bool = False):
        self.m, self.fn = module, fn
        entry = fn.append_basic_block("entry")  # stack slots only; code starts in "start"
        self.b = ir.IRBuilder(fn.append_basic_block("start"))
        self._allocas = ir.IRBuilder(entry)
        self._allocas.position_before(self._allocas.branch(self.b.block))
        self.syms: dict[str, tuple[ir.Value, DType]] = {}
        self.buffers: dict[str, tuple[ir.Value, DType]] = {}
        self.sizes: dict[str, int] = {}  # elements of the allocations of a constant size
        self.fail = None  # block that returns 1 (allocation failure)
        self.shared = shared
        self.sites = shared.sites
        self.in_parallel = in_parallel  # inside an outlined parallel loop: nested ones run serially
        self.mask = None  # the active lanes (<n x i1>) inside a predicated IfThenElse
        self.tid = None  # in an outlined parallel loop: the thread's number (i64), to pick scratch slots
        self.stack_bytes = 0  # scratch buffers this function keeps on its stack
        self.depth = 0  # loops around the statement being emitted
        self.outline_serial = False  # the kernel's own function: its outermost serial loops are outlined
        # values of the expressions emitted for the current statement, by expression (equal ones built
        # apart too): a node shared by many parents (bounds that refer to bounds, composed stage after
        # stage) is emitted once, not once per path; (value, its block, the mask it was emitted under)
        self._memo: dict[E.Expr, tuple] = {}

    # -- helpers
    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        g = self.m.globals.get(name)
        if g is None:
            g = ir.Function(self.m, ir.FunctionType(ret, args), name)
        return g

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
        hit = self._memo.get(e)
        if hit is not None and hit[1] is self.b.block and hit[2] is self.mask:
            return hit[0]  # emitted in this block for this statement (so it dominates here), same lanes
        method = getattr(self, f"_e_{type(e).__name__}", None)
        if method is None:
            raise TypeError(f"the LLVM backend cannot emit {type(e).__name__}: {e}")
        v = method(e)
        self._memo[e] = (v, self.b.block, self.mask)
        return v

    def _e_Const(self, e: E.Const):
        return ir.Constant(ll_type(e.dtype), e.value if not e.dtype.is_bool else int(bool(e.value)))

    def _e_Var(self, e: E.Var):
        if e.name not in self.syms:
            raise KeyError(f"internal error: unbound symbol {e.name}")
        v, t = self.syms[e.name]
        return self.convert(v, t, e.dtype)

    @contextmanager
    def _bound(self, name: str, value: ir.Value, t: DType):
        """``name`` bound to ``value`` (of type ``t``) inside the block, the binding it shadows back after."""
        saved = self.syms.get(name)
        self.syms[name] = (value, t)
        try:
            yield
        finally:
            if saved is None:
                del self.syms[name]
            else:
                self.syms[name] = saved

    def _e_Let(self, e: E.Let):
        self._memo.clear()  # a name bound anew: nodes that use it mean something else now
        with self._bound(e.name, self.expr(e.value), e.value.dtype):
            out = self.expr(e.body)
        self._memo.clear()
        return out

    def _e_Ramp(self, e: E.Ramp):
        base = self.splat(self.expr(e.base), e.lanes)
        stride = self.splat(self.expr(e.stride), e.lanes)
        iota = ir.Constant(ll_type(e.dtype), list(range(e.lanes)))
        return self.b.add(base, self.b.mul(stride, iota))

    def _e_Broadcast(self, e: E.Broadcast):
        return self.splat(self.expr(e.value), e.lanes)

    def _e_Cast(self, e: E.Cast):
        src, dst = e.value.dtype, e.dtype
        if src.is_float and src.name != "float16" and dst.is_int and _fits(_clamp_range(e.value), dst):
            return self._clamped_cast(self.expr(e.value), src, dst)
        return self.convert(self.expr(e.value), src, dst)

    def _clamped_cast(self, v: ir.Value, src: DType, dst: DType) -> ir.Value:
        """Float to int of a value clamped by constants inside the int's range (``u8(clamp(x, 0, 255))``):
        no saturation to test, only NaN, which becomes 0 before one plain conversion (a saturating one
        was a branch or four selects a value; a histogram's bin was twenty instructions a pixel)."""
        b = self.b
        v = b.select(b.fcmp_unordered("uno", v, v), ir.Constant(ll_type(src), 0.0), v)  # (a vector: a splat)
        return b.fptosi(v, ll_type(dst)) if dst.is_signed else b.fptoui(v, ll_type(dst))

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

    def _positive_constant_divisor(self, e):
        """(a, c, the int c) when the divisor is a positive integer constant (a splat for a vector):
        the common case (tiles, sliding windows' ring buffers), which needs none of the checks for 0 and
        -1 and, for a power of two, no division at all."""
        if e.dtype.is_float or e.dtype.is_bool:
            return None
        a, d = self._binary_operands(e)
        c = d.constant if isinstance(d, ir.Constant) else None
        if isinstance(c, (list, tuple)):
            values = {getattr(x, "constant", x) for x in c}
            c = values.pop() if len(values) == 1 else None
        if not isinstance(c, int) or isinstance(c, bool) or c <= 0:
            return None
        return a, d, c

    def _e_FloorDiv(self, e: E.FloorDiv):
        if e.dtype.is_float:
            return self._float_floordiv(e)
        b = self.b
        t = ll_type(e.dtype)
        known = self._positive_constant_divisor(e)
        if known is not None:
            a, d, c = known
            if not e.dtype.is_signed:
                return b.udiv(a, d)
            if c & (c - 1) == 0:  # floor division by 2^k is an arithmetic shift
                return b.ashr(a, ir.Constant(a.type, c.bit_length() - 1))
            return b.sub(b.sdiv(a, d), b.zext(b.icmp_signed("<", b.srem(a, d), ir.Constant(a.type, 0)), t))
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
        known = self._positive_constant_divisor(e)
        if known is not None:
            a, d, c = known
            if not e.dtype.is_signed:
                return b.urem(a, d)
            if c & (c - 1) == 0:  # the floor modulus by 2^k is the low bits (two's complement)
                return b.and_(a, ir.Constant(a.type, c - 1))
            r = b.srem(a, d)
            return b.select(b.icmp_signed("<", r, zero), b.add(r, d), r)
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
        return self._minmax_values(a, c, e.dtype, which)

    def _minmax_values(self, a, c, t: DType, which: str):
        if t.is_bool:
            return self.b.and_(a, c) if which == "min" else self.b.or_(a, c)
        if t.is_float:
            return self._float_minmax(a, c, t, which)
        name = f"llvm.{'s' if t.is_signed else 'u'}{which}.{type_suffix(t)}"
        lt = ll_type(t)
        return self.b.call(self.intrinsic(name, lt, [lt, lt]), [a, c])

    def _float_minmax(self, a, c, t: DType, which: str):
        ka, kc = _float_constant(a), _float_constant(c)
        if ka is not None and kc is None:  # the constant second
            a, c, ka, kc = c, a, None, ka
        if ka is None and kc is not None and not math.isnan(kc):
            return self._float_minmax_constant(a, c, kc, which)
        return self._float_minmax_any(a, c, t, which)

    def _float_minmax_constant(self, a, c, const: float, which: str):
        """``max(a, c)`` (``min``) of a constant c that is not NaN: one compare and select (x86 one maxps),
        with ``_float_minmax_any``'s results: a where a is NaN, -0 where the two are zeros of either sign
        (so a tie picks a when c is +0, else c: equal nonzero floats have the same bits)."""
        b = self.b
        tie_to_a = const == 0.0 and math.copysign(1.0, const) > 0
        op = (">=" if tie_to_a else ">") if which == "max" else ("<=" if tie_to_a else "<")
        return b.select(b.fcmp_unordered(op, a, c), a, c)

    def _float_minmax_any(self, a, c, t: DType, which: str):
        """NumPy's maximum (minimum): NaN where either operand is NaN, else the larger (smaller). As the
        bitwise or of a > c ? a : c and c > a ? c : a (each one x86 maxps, which gives its second operand
        where either is NaN): where they differ one is a NaN, which the or keeps, or they are +0 and -0,
        which it makes -0 (NumPy's sign of that zero depends on the operands' order). Three independent
        instructions; llvm.maximum, which also orders the zeros, is five dependent ones on AVX2 (a
        reduction of maxima in registers ran at a third of the speed of Halide's)."""
        b = self.b
        native = self._x86_minmax(t, which)
        if native is not None:
            first, second = native(a, c), native(c, a)
        else:
            op = ">" if which == "max" else "<"
            first = b.select(b.fcmp_ordered(op, a, c), a, c)
            second = b.select(b.fcmp_ordered(op, c, a), c, a)
        it = ll_type((T.int64 if t.scalar().bits == 64 else T.int32 if t.scalar().bits == 32 else T.int16)
                     .with_lanes(t.lanes))
        return b.bitcast(b.or_(b.bitcast(first, it), b.bitcast(second, it)), ll_type(t))

    _X86_MINMAX = {(32, 128): "sse.{}.ps", (64, 128): "sse2.{}.pd", (32, 256): "avx.{}.ps.256",
                   (64, 256): "avx.{}.pd.256", (32, 512): "avx512.{}.ps.512", (64, 512): "avx512.{}.pd.512"}

    def _x86_minmax(self, t: DType, which: str):
        """x86's maxps (minps, and the pd forms) as a function of two vectors of type ``t``, or None where the
        target has none that divides it into a power of two of parts. The select it stands for, ``a > c ?
        a : c``, is the same instruction, but LLVM turns a pair of them with a reduction's accumulator into
        compares and blends (five instructions and a spill a step: a maximum over a disk of offsets ran 1.15x
        slower)."""
        bits, lanes = t.scalar().bits, t.lanes
        fits = [w for w in (512, 256, 128) if w <= self.shared.vector_bits and (bits, w) in self._X86_MINMAX
                and lanes >= 2 and (lanes * bits) % w == 0 and ((lanes * bits // w) & (lanes * bits // w - 1)) == 0]
        if not fits:
            return None
        b, width = self.b, fits[0]
        step = width // bits
        vt = ll_type(t.with_lanes(step))
        rounding = [ir.Constant(_I32, 4)] if width == 512 else []  # the current rounding mode
        fn = self.intrinsic("llvm.x86." + self._X86_MINMAX[bits, width].format(which), vt,
                            [vt, vt] + [_I32] * len(rounding))

        def part(v, k):
            if step == lanes:
                return v
            return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                                    ir.Constant(ir.VectorType(_I32, step), list(range(k, k + step))))

        def native(x, y):
            parts = [b.call(fn, [part(x, k), part(y, k)] + rounding) for k in range(0, lanes, step)]
            while len(parts) > 1:  # concatenated in pairs
                n = 2 * parts[0].type.count
                parts = [b.shuffle_vector(parts[k], parts[k + 1], ir.Constant(ir.VectorType(_I32, n), list(range(n))))
                         for k in range(0, len(parts), 2)]
            return parts[0]

        return native

    def _e_VectorReduce(self, e: E.VectorReduce):
        """The lanes combined pairwise, halves of the vector at a time (log2(lanes) shuffles and ops);
        an odd lane left over at some step is combined at the end."""
        b, t = self.b, e.value.dtype
        v, n, rest = self.expr(e.value), t.lanes, []
        while n > 1:
            half = n // 2
            if n % 2:
                rest.append(b.extract_element(v, ir.Constant(_I32, n - 1)))
            if half == 1:
                lo, hi = (b.extract_element(v, ir.Constant(_I32, k)) for k in (0, 1))
            else:
                lo, hi = (b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                                           ir.Constant(ir.VectorType(_I32, half), list(range(k, k + half))))
                          for k in (0, half))
            v, n = self._combine(e.op, lo, hi, t.with_lanes(half)), half
        for x in rest:
            v = self._combine(e.op, v, x, t.scalar())
        return v

    def _e_Shuffle(self, e: E.Shuffle):
        """One ``shufflevector`` of one or two vectors (``passes/transpose_loads`` and
        ``passes/batch_reductions`` make them)."""
        if len(e.args) > 2:
            raise ValueError(f"a shuffle of {len(e.args)} vectors: the LLVM backend emits those of one or two")
        a = self.expr(e.args[0])
        c = self.expr(e.args[1]) if len(e.args) == 2 else ir.Constant(a.type, ir.Undefined)
        return self.b.shuffle_vector(a, c, ir.Constant(ir.VectorType(_I32, len(e.indices)), list(e.indices)))

    def _combine(self, op: str, a, c, t: DType):
        """``op`` (a VectorReduce's) of two values of type ``t``."""
        b = self.b
        if op in ("min", "max"):
            return self._minmax_values(a, c, t, op)
        if op in ("and", "or"):
            return (b.and_ if op == "and" else b.or_)(a, c)
        if t.is_float:
            return (b.fadd if op == "add" else b.fmul)(a, c, flags=_FLAGS)
        return (b.add if op == "add" else b.mul)(a, c)

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

    # -- statements
    def stmt(self, s: lir.Stmt) -> None:
        self._memo.clear()  # stores and new bindings come between statements
        getattr(self, f"_s_{type(s).__name__}")(s)

    def _s_Block(self, s: lir.Block):
        for t in s.stmts:
            self.stmt(t)

    def _s_Produce(self, s: lir.Produce):
        self.stmt(s.body)

    def _s_LetStmt(self, s: lir.LetStmt):
        with self._bound(s.name, self.expr(s.value), s.value.dtype):
            self.stmt(s.body)

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

    # -- loops
    def _s_For(self, s: lir.For):
        if isinstance(s.extent, E.Const) and s.extent.value <= 1:
            # none or one iteration (a Func's loop of extent 1 at a consumer's loop, a rest loop left empty): no loop
            # for LLVM's loop passes to walk, each of which visits every loop (an eighth of the loops of one
            # tuned 7-stage image pipeline)
            if s.extent.value == 1:
                with self._bound(s.var, self.index(s.min), T.ADDRESS):
                    self.stmt(s.body)
            return
        if (s.kind is lir.ForKind.PARALLEL and not self.in_parallel and self.mask is None
                and self.shared.threads != 1 and _gomp_loaded()):
            self._parallel_for(s)
            return
        if self.outline_serial and self.depth == 0 and self.mask is None and not _has_parallel(s.body):
            self._serial_outlined(s)
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
        self.depth += 1
        with self._bound(var, i, T.ADDRESS):
            self.stmt(body_stmt)
        self.depth -= 1
        nxt = b.add(i, ir.Constant(_I64, 1))
        i.add_incoming(nxt, b.block)
        b.branch(header)
        b.position_at_end(done)


def _straight_line(fn: ir.Function) -> bool:
    """Whether ``fn`` has no loop (no phi: the emitter's loops carry their counter in one). The kernel's
    function is then left unoptimised (``optnone``): with its loops outlined, it is the regions' bounds,
    allocations and calls, run once a call, and O3 on it (smin/smax chains over every Func's bounds: 5000
    lines in a 10-level pyramid) took 0.1-0.4 s of LLVM. Cold compile, in turns, two runs each: a tuned
    image pyramid 2.10 -> 1.94 s (LLVM 1.07 -> 0.90), a default one 0.89 -> 0.84, local_laplacian's
    default 1.27 -> 1.20, five others within 2%; run time 0.99-1.02x (small inputs called 100-1000
    times: per call, the same within 1%)."""
    return not any(isinstance(i, ir.PhiInstr) for blk in fn.blocks for i in blk.instructions)


def _has_parallel(s: lir.Stmt) -> bool:
    return any(isinstance(t, lir.For) and t.kind is lir.ForKind.PARALLEL for t in lir.walk_stmts(s))


def _slot_type(a: lir.Argument) -> ir.Type:
    if a.is_buffer:
        return _PTR
    return _F64 if a.dtype.is_float else _I64


def pow_table_size(t) -> int:
    """Entries of the table float32 ``pow`` reduces its logarithm by on CPU target ``t``: as many as one
    instruction looks up (AVX-512's vpermi2ps 32, AVX2's vpermps 8), 0 where none does (float64 code)."""
    return 32 if t.has("avx512f") else 8 if t.has("avx2") else 0


def avx512_instructions(t) -> frozenset[str]:
    """The AVX-512 instructions the math functions take on CPU target ``t``, at every register width:
    ``scalef`` and ``getexp`` (vgetexp and vgetmant: AVX512F, VL for 256 and 128 bits), ``fpclass``
    (AVX512DQ, and VL); none elsewhere."""
    vl = t.has("avx512vl")
    return frozenset(n for n, need in (("scalef", "avx512f"), ("getexp", "avx512f"), ("fpclass", "avx512dq"))
                     if vl and t.has(need))


def x86_vector_bits(t) -> int:
    """The widest x86 vector registers target ``t`` has (512, 256, 128), 0 where it is not x86."""
    return 512 if t.has("avx512f") else 256 if t.has("avx") else 128 if t.has("sse2") else 0


def emit_module(kernel: lir.LoweredKernel, threads: int | None = None, target=None) -> str:
    """LLVM IR text of ``kernel`` for ``target`` (see the package docstring for the calling convention).
    Parallel loops use at most ``threads`` threads (None: libgomp's default, OMP_NUM_THREADS or every
    core; 1: they run serially, without libgomp)."""
    t = targets.parse(target)
    m = ir.Module(name=kernel.name)
    m.triple, m.data_layout = _initialized(), data_layout(t)
    params = [_slot_type(a) for a in kernel.arguments]
    impl = ir.Function(m, ir.FunctionType(_I32, params), f"{kernel.name}.impl")
    impl.linkage = "internal"
    shared = _Shared(kernel.name, threads, getattr(t, "fast_math", False), pow_table_size(t), x86_vector_bits(t),
                     avx512_instructions(t))
    em = _Emitter(m, impl, shared)
    em.outline_serial = True
    for a, p in zip(kernel.arguments, impl.args, strict=True):
        p.name = a.name
        if a.is_buffer:
            p.add_attribute("noalias")
            em.buffers[a.name] = (p, a.dtype)
        else:
            em.syms[a.name] = (p, T.float64 if a.dtype.is_float else T.int64)
    em.stmt(batch_lane_reductions(transpose_strided_loads(register_accumulators(kernel.body))))
    em.b.ret(ir.Constant(_I32, 0))
    if _straight_line(impl):  # (its loops are outlined: bounds, allocations and calls, run once a call)
        impl.attributes.add("noinline")
        impl.attributes.add("optnone")

    entry = ir.Function(m, ir.FunctionType(_I32, [_PTR]), kernel.name)
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    vals = []
    for k, t in enumerate(params):
        slot = b.gep(entry.args[0], [ir.Constant(_I64, k)], source_etype=_I64)
        vals.append(b.load(slot, typ=t))
    b.ret(b.call(impl, vals))
    _emit_release(m, release_symbol(kernel.name), shared.sites)
    emit_failure_accessor(m, kernel.name)
    text = str(m)
    _take_apart(m)
    return text


def _take_apart(m: ir.Module) -> None:
    """Cut the links from ``m`` to its functions, from them to their blocks and from blocks to their
    instructions, each of which links back to its parent: left as cycles, the module (80K objects for a
    large kernel) waited for Python's cycle collector, which then spent 0.1 s on it; cut, refcounting
    frees it at once."""
    for g in m.globals.values():
        for block in getattr(g, "blocks", ()):
            block.instructions = []
            block.terminator = None
        if isinstance(g, ir.Function):
            g.blocks = []
    m.globals.clear()


def _float_constant(v: ir.Value) -> float | None:
    """The value of an LLVM float constant, scalar or splat; None for anything else."""
    if not isinstance(v, ir.Constant):
        return None
    c = v.constant
    if isinstance(c, list):
        values = {x.constant if isinstance(x, ir.Constant) else x for x in c}
        if len(values) != 1:
            return None
        c = values.pop()
    return float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else None


def _clamp_range(e: E.Expr) -> tuple[float | None, float | None]:
    """Constant bounds of a float expression made by min and max with constants (a clamp), each None when
    not known; NaN passes through min and max and is not counted."""
    tp = type(e)
    if tp is E.Broadcast:
        return _clamp_range(e.value)
    if tp is E.Const:
        v = float(e.value)
        return (None, None) if math.isnan(v) else (v, v)
    if tp is E.Min or tp is E.Max:
        (a0, a1), (b0, b1) = _clamp_range(e.a), _clamp_range(e.b)
        if tp is E.Min:
            return (None if a0 is None or b0 is None else min(a0, b0),
                    a1 if b1 is None else b1 if a1 is None else min(a1, b1))
        return (a0 if b0 is None else b0 if a0 is None else max(a0, b0),
                None if a1 is None or b1 is None else max(a1, b1))
    return None, None


def _fits(bounds: tuple[float | None, float | None], dst: DType) -> bool:
    """Whether every float in ``bounds`` truncates to a value of ``dst`` (no saturation needed)."""
    lo, hi = bounds
    if lo is None or hi is None:
        return False
    bits = dst.bits - 1 if dst.is_signed else dst.bits
    lo_int, end = (-(1 << bits) if dst.is_signed else 0), float(1 << bits)
    return lo > lo_int - 1 and hi < end
