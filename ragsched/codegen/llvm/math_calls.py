"""Math calls for the emitter (``E.Call``: abs, exp, log, sqrt, ...): LLVM intrinsics where LLVM has
them, libm lane by lane where not, and vector float32 and float64 ``exp``, ``log``, ``pow``, ``sin``, ...
of our own (LLVM would call libm once per lane for those)."""

from __future__ import annotations

from functools import partial

import llvmlite.ir as ir

from ...algebra import expr as E
from ...algebra import types as T
from ...algebra.types import DType
from . import pow_tables
from .machine import _I1, _I32, ll_type, type_suffix


class _Math:
    """``_Emitter``'s math functions (a mixin: it uses the emitter's builder and ``intrinsic``)."""

    def splat_const(self, t: DType, v) -> ir.Value:
        """The constant ``v`` of type ``t`` (all lanes of a vector type)."""
        typ = ll_type(t)
        return ir.Constant(typ, [ir.Constant(typ.element, v)] * t.lanes) if t.lanes > 1 else ir.Constant(typ, v)

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
        intr = {"exp": "exp", "log": "log", "exp2": "exp2", "log2": "log2",
                "sqrt": "sqrt", "sin": "sin", "cos": "cos", "floor": "floor",
                "ceil": "ceil", "round": "roundeven", "pow": "pow", "tanh": "tanh"}
        if self.shared.fast_math and t.scalar().name == "float32" and name in self._FAST:
            return self._fast_math_f32(name, args, t)
        if name == "exp" and t.scalar().name == "float32":
            return self._exp_f32(args[0], t)
        if name == "log" and t.scalar().name == "float32":
            return self._log_f32(args[0], t)
        if name == "log2" and t.scalar().name == "float32":
            return self._log2_f32(args[0], t)
        if name == "exp2" and t.scalar().name == "float32":
            return self._exp2_f32(args[0], t)
        if name == "tanh" and t.scalar().name == "float32":
            return self._tanh_f32(args[0], t)
        if name == "pow" and t.scalar().name == "float32":
            if self.shared.pow_table:
                return self._pow_f32(args[0], args[1], t)
            return self._pow_f32_wide(args[0], args[1], t)
        if name in ("sin", "cos") and t.scalar().name == "float32":
            return self._sincos_f32(args[0], t, name)
        if name == "erf" and t.scalar().name == "float32":
            return self._erf_f32(args[0], t)
        if name in ("exp", "exp2", "log", "log2", "tanh") and t.scalar().name == "float64":
            return getattr(self, f"_{name}_f64")(args[0], t)
        if name in ("sin", "cos") and t.scalar().name == "float64":
            return self._sincos_f64(args[0], t, name)
        if name == "pow" and t.scalar().name == "float64":
            return self._pow_f64(args[0], args[1], t)
        if name == "erf" and t.scalar().name == "float64":
            return self._erf_f64(args[0], t)
        if name in intr:  # vector overloads too: LLVM calls libm lane by lane where it has no vector code
            fn = self.intrinsic(f"llvm.{intr[name]}.{sfx}", lt, [lt] * len(args))
            return b.call(fn, args)
        if name == "rsqrt":
            s = b.call(self.intrinsic(f"llvm.sqrt.{sfx}", lt, [lt]), args)
            return b.fdiv(ir.Constant(lt, 1.0), s)
        raise TypeError(f"the LLVM backend has no math function {name}")

    # float32: polynomials fitted by tools/fit_polynomials.py (minimax for the relative error of the
    # result, each coefficient rounded to float32 and the higher ones refitted), lowest degree first; the
    # relative error of each fit (before rounding in the evaluation) as the tool prints it
    _EXP_P = (0.49999994, 0.16666521, 0.04166828, 0.008368694, 0.0013819609)  # 2^-28.2
    _EXP2_P = (0.6931472, 0.24022648, 0.0555036, 0.009618506, 0.0013390812, 0.00015326498)  # 2^-28.3
    _LOG_P = (0.33333313, -0.2500001, 0.20002072, -0.16667989, 0.14220358, -0.12406233, 0.11883547,
              -0.11670106, 0.06749286)  # 2^-30.3
    _TANH_P = (-0.3333319, 0.13329132, -0.053559963, 0.020094337, -0.0051404685)  # 2^-26.0
    _ERF_NEAR_P = (-0.3761263, 0.11283603, -0.026854202, 0.0051885983, -0.00080093986, 7.842549e-05)  # 2^-29.3
    _ERF_FAR_Q = (0.5638382, -0.27418756, 0.3403302, -0.49188945, 0.61171573, -0.5656519, 0.35193193,
                  -0.12984452, 0.021340942)  # 2^-28.5
    # sin r = r + r^3 s(r^2) and cos r = 1 - r^2/2 + r^4 c(r^2) on [-pi/4, pi/4], in float32
    _SIN_S = (-0.16666655, 0.008332189, -0.00019518285)  # 2^-27.9
    _COS_C = (0.041666646, -0.001388731, 2.4432327e-05)  # 2^-33.0
    # pi/2 in three float32s: n hi exact in the fma that subtracts it (|x - n hi| < 2 on the grid of 2^-23)
    _PI_2_F32 = (1.5707964, -4.371139e-08, -1.7151245e-15)
    # |x| below which float32 sin and cos reduce x in float32 (n < 2^16: the rest of pi/2 that its three
    # parts leave, 1e-23, times n is below 2^-60)
    _SINCOS_NEAR = 65536.0
    # evaluated in float64
    _SIN_P = (-0.16666666640786684, 0.008333329303632031, -0.00019839311877614427, 2.718117871361977e-06)  # 2^-37.5
    _COS_Q = (-0.4999999969434544, 0.04166662034262863, -0.0013886681193033621, 2.4383524631787855e-05)  # 2^-33.9
    # constants in two parts, from the same tool: hi the nearest float32, lo the float32 nearest the rest
    _LN2_F32 = (0.6931472, -1.9046542e-09)
    _TWO_OVER_SQRT_PI_F32 = (1.1283792, -5.8635383e-08)
    # pi/2 rounded to 33 bits (then x - n hi for a float32 x and n < 2^28 is a multiple of 2^-32 below 1:
    # exact in one fma), lo the double nearest the rest
    _PI_2_33 = (1.5707963267341256, 6.077100506506192e-11)

    def _horner(self, v: ir.Value, coefs, t: DType) -> ir.Value:
        """sum coefs[k] v^k (lowest degree first, v of type ``t``) by Horner's rule in fma."""
        b = self.b
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ll_type(t), [ll_type(t)] * 3)
        acc = self.splat_const(t, coefs[-1])
        for c in reversed(coefs[:-1]):
            acc = b.call(fma, [acc, v, self.splat_const(t, c)])
        return acc

    def _exp_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """float32 exp in vector instructions (LLVM would call libm's expf once per lane): e^x = 2^n e^r
        with n = round(x / ln 2), r = x - n ln 2 with ln 2 in two floats (x - n hi is exact in one fma:
        where n is not 0, |x| > 1/4, so x and n hi are multiples of 2^-25, and their difference is below
        1/2), and e^r = 1 + r + r^2 p(r), p of degree 4 fitted on [-ln2/2, ln2/2]. The same code for
        scalars, so a vectorized loop gives the scalar loop's bits. 2^n is applied in two halves, so that
        results that are subnormal or overflow come out right."""
        b, lanes = self.b, t.lanes
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(lanes))

        f = partial(self.splat_const, t)

        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft, ft, ft])
        xc = b.select(b.fcmp_ordered("<", x, f(-104.0)), f(-104.0), x)  # NaN stays, and stays NaN
        xc = b.select(b.fcmp_ordered(">", xc, f(89.0)), f(89.0), xc)
        # n = round(x / ln 2) by adding 1.5 2^23 (n in the low bits: no float -> int conversion, which
        # would be undefined at a NaN), r and so the result NaN where x is
        shifted = b.call(fma, [xc, f(1.4426950408889634), f(12582912.0)])  # log2(e)
        n = b.fsub(shifted, f(12582912.0))
        r = b.call(fma, [n, f(-self._LN2_F32[0]), xc])
        r = b.call(fma, [n, f(-self._LN2_F32[1]), r])
        p = self._horner(r, self._EXP_P, t)
        r2 = b.fmul(r, r)
        y = b.fadd(b.call(fma, [p, r2, r]), f(1.0))
        k = b.sub(b.bitcast(shifted, it), self.splat_const(T.int32.with_lanes(lanes), 0x4B400000))
        return self._scale_by_pow2(y, k, t, n)

    def _log_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """float32 log in vector instructions (LLVM would call libm's logf once per lane): x = m 2^e with m
        in [sqrt(1/2), sqrt(2)), ln(m) = u - u^2/2 + u^3 p(u), u = m - 1, p of degree 8; e ln 2 added
        with ln 2 in two floats, the larger part in the last fma. The same code for scalars, so a
        vectorized loop gives the scalar loop's bits."""
        b = self.b
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ll_type(t), [ll_type(t)] * 3)

        def value(every: bool) -> ir.Value:
            m, tail, ef = self._log_parts_f32(x, t, every)
            y = b.fadd(m, b.call(fma, [ef, f(self._LN2_F32[1]), tail]))
            return b.call(fma, [ef, f(self._LN2_F32[0]), y])

        return self._log_cases(x, value, t, "log")

    def _log2_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """float32 log2: log's reduction and polynomial, then e + (m + tail) log2(e), with log2(e) - 1
        multiplied separately so that the large terms are added exactly."""
        b = self.b
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ll_type(t), [ll_type(t)] * 3)

        def value(every: bool) -> ir.Value:
            m, tail, ef = self._log_parts_f32(x, t, every)
            log2e_minus_1 = f(0.4426950408889634)
            z = b.call(fma, [m, log2e_minus_1, b.fmul(tail, log2e_minus_1)])
            return b.fadd(b.fadd(b.fadd(z, tail), m), ef)

        return self._log_cases(x, value, t, "log2")

    def _log_cases(self, x: ir.Value, value, t: DType, label: str) -> ir.Value:
        """``value(False)``, log computed for positive normal x only, where every lane is one; else, in a
        branch, ``value(True)`` (subnormal x scaled first) with the special values (``_log_special_cases``)."""
        return self._branch_if_any(self._not_positive_normal_f32(x, t), value(False),
                                   lambda: self._log_special_cases(x, value(True), t), f"{label}.cases")

    def _not_positive_normal_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """The lanes of float32 ``x`` that are not positive, normal and finite: from the bits, in two
        integer instructions (x - 2^-126's bits, unsigned, is below 2^128's less 2^-126's only there); with
        AVX-512 (DQ and VL), one vfpclassps per register (imm 0xFF: NaN, zero, infinite, subnormal or
        negative)."""
        b = self.b
        if "fpclass" in self.shared.avx512 and t.lanes > 1:  # one vfpclassps: any class but positive normal
            w = self._register_lanes(t)
            vt = ll_type(T.float32.with_lanes(w))
            fn = self.intrinsic(f"llvm.x86.avx512.fpclass.ps.{32 * w}", ir.VectorType(_I1, w), [vt, _I32])
            return self._in_chunks([x], t.lanes, w, lambda v: b.call(fn, [v, ir.Constant(_I32, 0xFF)]))
        it = ll_type(T.int32.with_lanes(t.lanes))
        i = partial(self.splat_const, T.int32.with_lanes(t.lanes))
        return b.icmp_unsigned(">=", b.sub(b.bitcast(x, it), i(0x00800000)), i(0x7F000000))

    def _log_parts_f32(self, x: ir.Value, t: DType, subnormal: bool = True):
        """(u, tail, e) with log(x) = e ln 2 + u + tail, x = m 2^e, m in [sqrt(1/2), sqrt(2)), u = m - 1
        (exact): subnormal inputs are scaled by 2^25 first (when ``subnormal``: else x is normal); the
        tail is -u^2/2 + u^3 p(u)."""
        b, lanes = self.b, t.lanes
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(lanes))

        f, i = partial(self.splat_const, t), partial(self.splat_const, T.int32.with_lanes(lanes))

        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft, ft, ft])
        if subnormal:
            tiny = b.fcmp_ordered("<", x, f(1.17549435e-38))  # subnormal (or not positive: fixed after)
            bits = b.bitcast(b.select(tiny, b.fmul(x, f(33554432.0)), x), it)
            e = b.sub(b.ashr(bits, i(23)), b.select(tiny, i(126 + 25), i(126)))
        else:
            bits = b.bitcast(x, it)
            e = b.sub(b.ashr(bits, i(23)), i(126))
        m = b.bitcast(b.or_(b.and_(bits, i(0x007FFFFF)), i(0x3F000000)), ft)  # in [0.5, 1)
        small = b.fcmp_ordered("<", m, f(0.7071067811865476))  # sqrt(1/2)
        e = b.sub(e, b.select(small, i(1), i(0)))
        m = b.fsub(b.select(small, b.fadd(m, m), m), f(1.0))
        z = b.fmul(m, m)
        p = self._horner(m, self._LOG_P, t)
        tail = b.call(fma, [z, f(-0.5), b.fmul(b.fmul(m, z), p)])
        return m, tail, b.sitofp(e, ft)

    def _log_special_cases(self, x: ir.Value, y: ir.Value, t: DType) -> ir.Value:
        """log's value at inf (inf), 0 (-inf), negatives and NaN (NaN)."""
        b = self.b
        f = partial(self.splat_const, t)
        y = b.select(b.fcmp_ordered("==", x, f(float("inf"))), x, y)
        y = b.select(b.fcmp_ordered("==", x, f(0.0)), f(float("-inf")), y)
        return b.select(b.fcmp_unordered("<", x, f(0.0)), f(float("nan")), y)  # negative or NaN

    def _exp2_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """float32 exp2 in vector instructions: 2^x = 2^n 2^r with n = round(x), r = x - n exact,
        2^r = 1 + r p(r), p of degree 5 fitted on [-1/2, 1/2]; 2^n applied in two halves as in exp."""
        b, lanes = self.b, t.lanes
        ft = ll_type(t)
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft, ft, ft])
        xc = b.select(b.fcmp_ordered("<", x, f(-152.0)), f(-152.0), x)  # NaN stays, and stays NaN
        xc = b.select(b.fcmp_ordered(">", xc, f(129.0)), f(129.0), xc)
        shifted = b.fadd(xc, f(12582912.0))  # 1.5 2^23: round(x) in the low bits (as exp does)
        n = b.fsub(shifted, f(12582912.0))
        r = b.fsub(xc, n)
        y = b.call(fma, [self._horner(r, self._EXP2_P, t), r, f(1.0)])
        k = b.sub(b.bitcast(shifted, ll_type(T.int32.with_lanes(lanes))),
                  self.splat_const(T.int32.with_lanes(lanes), 0x4B400000))
        return self._scale_by_pow2(y, k, t, n)

    def _scale_by_pow2(self, y: ir.Value, k: ir.Value, t: DType, n: ir.Value | None = None) -> ir.Value:
        """y 2^k (k an integer vector as wide as the float) for k within twice the exponent range ([-152,
        130] for float32, [-1080, 1025] for float64), in two halves, so that results that are subnormal
        round once and those that overflow are inf (one power of two that large or small is not a normal
        float); with AVX-512, by vscalef (the same bits) from ``n``, k as a float, where given."""
        b = self.b
        if n is not None and "scalef" in self.shared.avx512:
            return self._scalef(y, n, t)
        wide = t.scalar().name == "float64"
        i = partial(self.splat_const, (T.int64 if wide else T.int32).with_lanes(t.lanes))
        half = b.ashr(k, i(1))

        def pow2(e: ir.Value) -> ir.Value:  # 2^e for e in half that range: a normal float
            return b.bitcast(b.shl(b.add(e, i(1023 if wide else 127)), i(52 if wide else 23)), ll_type(t))

        return b.fmul(b.fmul(y, pow2(half)), pow2(b.sub(k, half)))

    def _scalef(self, y: ir.Value, n: ir.Value, t: DType) -> ir.Value:
        """y 2^n for an integer-valued float ``n`` of y's type, rounded once (subnormal results too; inf
        past the range): AVX-512's vscalef, one instruction per register (its 512-bit form, or its 256- and
        128-bit ones for fewer lanes, a scalar in the lowest lane of the 128-bit one)."""
        return self._avx512_masked("scalef", [y, n], t)

    def _register_lanes(self, t: DType) -> int:
        """Lanes of one x86 instruction that covers ``t``'s lanes: t's count rounded up to a power of two,
        within what a 128-bit and a 512-bit register hold of its scalar (a scalar in a 128-bit one)."""
        per_bits = 64 if t.scalar().name == "float64" else 32
        return max(128 // per_bits, min(512 // per_bits, 1 << (t.lanes - 1).bit_length()))

    def _avx512_masked(self, name: str, args: list, t: DType, imm: int | None = None) -> ir.Value:
        """AVX-512's masked instruction ``name`` (scalef, getexp, getmant: every lane kept) of ``args`` (of
        float type ``t``), with an immediate after them where it takes one; one instruction per register
        (``_in_chunks``), the 512-bit form in the current rounding mode."""
        wide = t.scalar().name == "float64"
        w = self._register_lanes(t)
        vt, mask_t = ll_type(t.scalar().with_lanes(w)), ir.IntType(max(8, w))
        bits = w * (64 if wide else 32)
        head = [_I32] if imm is not None else []
        fn = self.intrinsic(f"llvm.x86.avx512.mask.{name}.{'pd' if wide else 'ps'}.{bits}", vt,
                            [vt] * len(args) + head + [vt, mask_t] + ([_I32] if bits == 512 else []))
        rest = [ir.Constant(_I32, imm)] if imm is not None else []
        rest += [ir.Constant(vt, None), ir.Constant(mask_t, -1)]
        rest += [ir.Constant(_I32, 4)] if bits == 512 else []  # 4: the current rounding mode
        return self._in_chunks(args, t.lanes, w, lambda *vs: self.b.call(fn, list(vs) + rest))

    def _tanh_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """float32 tanh in vector instructions: x + x^3 p(x^2) for |x| < 0.7 (p of degree 4, fitted for the
        relative error), elsewhere sign(x) (1 - 2 / (e^{2|x|} + 1)) with the vector exp (an overflowing
        exp gives 1). The split is where the worst errors of the two are least (tools/fit_polynomials.py)."""
        b = self.b
        ft = ll_type(t)

        f = partial(self.splat_const, t)

        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft, ft, ft])
        fabs = self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ft, [ft])
        copysign = self.intrinsic(f"llvm.copysign.{type_suffix(t)}", ft, [ft, ft])
        ax = b.call(fabs, [x])
        z = b.fmul(x, x)
        p = self._horner(z, self._TANH_P, t)
        small = b.call(fma, [b.fmul(p, z), x, x])
        e = self._exp_f32(b.fadd(ax, ax), t)
        large = b.call(copysign, [b.fsub(f(1.0), b.fdiv(f(2.0), b.fadd(e, f(1.0)))), x])
        y = b.select(b.fcmp_ordered("<", ax, f(0.7)), small, large)
        y = b.select(b.fcmp_ordered("==", x, f(0.0)), x, y)  # tanh(-0) is -0
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _pow_f32_wide(self, x: ir.Value, y: ir.Value, t: DType) -> ir.Value:
        """float32 pow in vector instructions: 2^{y log2 x} in float64, rounded once to float32 (so overflow
        and subnormal results round as float32 does). log2 of the mantissa from a fit in s^2, s = (m - 1) /
        (m + 1); 2^r on [-1/2, 1/2] from a fit; both evaluated by Estrin's scheme (a short dependency chain
        matters more here than the operation count; coefficients from tools/fit_polynomials.py). That path
        takes a positive normal x and a finite y; when some lane has another, a branch applies C99's
        cases for zero and negative x and calls the C library's powf for infinite, NaN or subnormal ones."""
        b, lanes = self.b, t.lanes
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(lanes))
        dt = ll_type(T.float64.with_lanes(lanes))
        lt = ll_type(T.int64.with_lanes(lanes))

        f = partial(self.splat_const, t)
        d = partial(self.splat_const, T.float64.with_lanes(lanes))
        i32 = partial(self.splat_const, T.int32.with_lanes(lanes))

        sfx, dsfx = type_suffix(t), type_suffix(T.float64.with_lanes(lanes))
        fabs = self.intrinsic(f"llvm.fabs.{sfx}", ft, [ft])
        dfma = self.intrinsic(f"llvm.fma.{dsfx}", dt, [dt, dt, dt])

        ax = b.call(fabs, [x])
        # log2|x| = e + log2(m), m in [sqrt(1/2), sqrt(2)), from the float32 bits; u = m - 1 exact
        bits = b.bitcast(ax, it)
        e = b.sub(b.lshr(bits, i32(23)), i32(127))
        m = b.bitcast(b.or_(b.and_(bits, i32(0x007FFFFF)), i32(0x3F800000)), ft)  # [1, 2)
        high = b.fcmp_ordered(">", m, f(1.41421356))
        u = b.fsub(b.select(high, b.fmul(m, f(0.5)), m), f(1.0))
        e = b.add(e, b.select(high, i32(1), i32(0)))
        ud = b.fpext(u, dt)
        s = b.fdiv(ud, b.fadd(ud, d(2.0)))
        g = self._estrin(b.fmul(s, s), (2.885390081789987, 0.9617966734515485, 0.5770835660048659,
                                        0.41167376623771057, 0.3407120415619086), T.float64.with_lanes(lanes))
        log2x = b.call(dfma, [s, g, b.sitofp(e, dt)])
        # 2^t = 2^n 2^r, t clamped where float32 overflows or underflows anyway, r = t - n exact
        tt = b.fmul(b.fpext(y, dt), log2x)
        tt = b.select(b.fcmp_ordered(">", tt, d(200.0)), d(200.0), tt)
        tt = b.select(b.fcmp_ordered("<", tt, d(-200.0)), d(-200.0), tt)
        # n = round(t) by adding 1.5 2^52, which leaves n in the low bits; n << 52 is 2^n's exponent field
        shifted = b.fadd(tt, d(6755399441055744.0))
        n = b.fsub(shifted, d(6755399441055744.0))
        q = self._estrin(b.fsub(tt, n), (1.0, 0.6931472067028326, 0.24022650922288757, 0.05550327226670302,
                                         0.009618056678524637, 0.0013400428177615838, 0.0001546144469856913),
                         T.float64.with_lanes(lanes))
        scale = b.shl(b.bitcast(shifted, lt), self.splat_const(T.int64.with_lanes(lanes), 52))
        fast = b.fptrunc(b.bitcast(b.add(b.bitcast(q, lt), scale), dt), ft)
        # the lanes this does not take, from the bits: x not positive and normal, or y not finite
        not_fast = b.or_(self._not_positive_normal_f32(x, t),
                         b.icmp_unsigned("==", b.and_(b.bitcast(y, it), i32(0x7F800000)), i32(0x7F800000)))

        return self._branch_if_any(not_fast, fast, lambda: self._pow_cases(x, y, fast, "powf", t, 1.17549435e-38),
                                   "pow.cases")

    # ln(1 + z) = z - z^2/2 + z^3 c(z), by the table's size: |z| <= 2^-6 with 32 entries (Taylor), z in
    # [-0.0556, 1/16] with 8 (tools/fit_polynomials.py: relative error of ln(1 + z) 2^-36.5)
    _POW_C = {32: (0.33333334, -0.25, 0.2), 8: (0.3333333, -0.24999943, 0.2000183, -0.16723679, 0.13903077)}

    # |u| (about |y log2(1 + z)|) up to which pow's short path keeps its bound (its error grows with it)
    _POW_SHORT_U = 0.25
    # log2(1 + z) / z for |z| <= 1 / (2 size) (tools/fit_polynomials.py)
    _POW_SHORT_Q = {32: (1.442695, -0.7213475, 0.48112658, -0.36081097),  # 2^-26.2
                    8: (1.442695, -0.721347, 0.48091102, -0.36166406, 0.2873146)}  # 2^-25.9

    def _pow_f32(self, x: ir.Value, y: ir.Value, t: DType) -> ir.Value:
        """float32 pow where a table is one instruction, the short way: x = m 2^k with m in [1, 2), log2 x =
        (k + s) + d + log2(1 + z) with 1/c and log2(c) = s + d from a table of intervals of m
        (``pow_tables.unit_table``), s a multiple of 2^-16 so that K = k + s is exact, z = m/c - 1; y log2 x
        = P + u with P = y K rounded, u = (y K - P) + y (d + log2(1 + z)), the first part exact by an fma;
        n = round(P + u), r = (P - n) + u (P - n exact) and 2^r as exp2's. Its error comes from u's
        rounding and grows with |u|, not with y log2 x: lanes with |u| above ``_POW_SHORT_U`` (y large and
        x away from the intervals' middles) or x not positive and normal take the two-float pow
        (``_pow_f32_two_floats``) in a branch taken only when some lane needs it. With AVX-512, k and m
        come from vgetexp and vgetmant (subnormal x too; a zero, negative, infinite or NaN x makes u NaN or
        infinite) and 2^n from vscalef (a subnormal result rounded once, inf past the range); elsewhere from
        the bits, and lanes with n beyond +-126 take the two-float pow as well. Against the two-float pow:
        1.4-1.7x faster; its loop over 16 lanes is 29 vector instructions besides moves (znver4), the
        two-float pow's 55, exp's 14."""
        b, lanes = self.b, t.lanes
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(lanes))
        f, i = partial(self.splat_const, t), partial(self.splat_const, T.int32.with_lanes(lanes))
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        fabs = self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ft, [ft])
        size = self.shared.pow_table
        inv_tab, s_tab, d_tab = pow_tables.unit_table(size)
        getexp = "getexp" in self.shared.avx512  # with AVX-512: k and m in one instruction each
        if getexp:  # NaN m for negative x, infinite k for zero and infinite x: u is not finite there
            m, kf = self._getmant_f32(x, t), self._getexp_f32(x, t)
        else:  # x positive and normal where the result is kept
            ix = b.bitcast(x, it)
            m = b.bitcast(b.or_(b.and_(ix, i(0x007FFFFF)), i(0x3F800000)), ft)
            kf = b.sitofp(b.sub(b.lshr(ix, i(23)), i(127)), ft)
        j = b.and_(b.lshr(b.bitcast(m, it), i(23 - (size.bit_length() - 1))), i(size - 1))
        invc, s, d = (self._table_f32(v, j, t, f"pow.unit.{name}") for v, name in
                      ((inv_tab, "invc"), (s_tab, "s"), (d_tab, "d")))
        z = b.call(fma, [m, invc, f(-1.0)])
        big = b.fadd(kf, s)  # exact
        lm = b.call(fma, [z, self._horner(z, self._POW_SHORT_Q[size], t), d])  # log2(m/c) + d, small
        p_hi = b.fmul(y, big)
        u = b.call(fma, [y, lm, b.call(fma, [y, big, b.fneg(p_hi)])])
        scalef = "scalef" in self.shared.avx512
        if scalef:
            n = b.call(self.intrinsic(f"llvm.roundeven.{type_suffix(t)}", ft, [ft]), [b.fadd(p_hi, u)])
        else:
            shifted = b.fadd(b.fadd(p_hi, u), f(12582912.0))  # round(P + u) in the low bits (exp's way)
            n = b.fsub(shifted, f(12582912.0))
        r = b.fadd(b.fsub(p_hi, n), u)
        p = b.call(fma, [self._horner(r, self._EXP2_P, t), r, f(1.0)])
        too_far = b.fcmp_unordered(">", b.call(fabs, [u]), f(self._POW_SHORT_U))
        if scalef:
            fast = self._scalef(p, n, t)
        else:
            fast = self._scale_shifted(p, shifted, t, n)
            too_far = b.or_(too_far, b.fcmp_unordered(">", b.call(fabs, [n]), f(126.0)))
        not_fast = too_far if getexp else b.or_(self._not_positive_normal_f32(x, t), too_far)
        return self._branch_if_any(
            not_fast, fast, lambda: b.select(not_fast, self._pow_f32_two_floats(x, y, t), fast), "pow.long")

    def _getmant_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """x's mantissa in [1, 2) (vgetmant, subnormal x too), NaN for negative x (-0 included)."""
        return self._avx512_masked("getmant", [x], t, 0b1000)  # interval [1, 2); sign control: NaN if negative

    def _getexp_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """floor(log2 |x|) as a float (vgetexp, subnormal x too): -inf at zero, inf at inf, NaN at NaN."""
        return self._avx512_masked("getexp", [x], t)

    def _pow_f32_two_floats(self, x: ir.Value, y: ir.Value, t: DType) -> ir.Value:
        """float32 pow in float32 vector instructions, for targets that look up a table of float32s in one
        instruction (AVX-512's vpermi2ps 32, AVX2's vpermps 8): e^{y ln x} with ln x = k ln 2 - ln(1/c) +
        ln(1 + z) in two floats. x = m 2^k, 1/c from a table of intervals of m (``pow_tables``), z = m/c - 1
        exact as two floats (|z| <= 2^-6 or 1/16), ln(1 + z) = z - z^2/2 + z^3 c(z), the large terms
        added exactly (z^2/2 in the high part, its rounding in the low), the low parts gathered; then n =
        round(y ln x / ln 2), r = y ln x - n ln 2 from fmas of y with both parts (y ln x is never rounded
        whole), e^r as exp's polynomial and 2^n from the bits. Lanes with x not positive and normal, or y
        ln x beyond +-126 ln 2 (a result near or past float32's range, or y not finite), take the float64
        pow (``_pow_f32_wide``) in a branch taken only when some lane needs it."""
        b, lanes = self.b, t.lanes
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(lanes))
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        fabs = self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ft, [ft])
        size = self.shared.pow_table
        inv, hi, lo = pow_tables.log_table(size)

        ix = b.bitcast(x, it)
        j, kf, m = self._pow_reduce_f32(ix, t, size)
        invc, lnc_hi, lnc_lo = (self._table_f32(v, j, t, f"pow.{name}") for v, name in
                                ((inv, "invc"), (hi, "lnc_hi"), (lo, "lnc_lo")))
        h = b.fmul(m, invc)
        zl = b.call(fma, [m, invc, b.fneg(h)])  # m/c - 1 = zh + zl exactly
        zh = b.fsub(h, f(1.0))
        a_hi = b.call(fma, [kf, f(pow_tables.LN2_HI), lnc_hi])  # exact
        a_lo = b.call(fma, [kf, f(pow_tables.LN2_LO), lnc_lo])
        s1 = b.fadd(a_hi, zh)  # |a_hi| >= |zh| where a_hi is not 0: s1 + e1 exact
        e1 = b.fadd(b.fsub(a_hi, s1), zh)
        zz = b.fmul(zh, zh)
        half = b.fmul(zz, f(-0.5))  # exact
        s = b.fadd(s1, half)  # |s1| >= z^2/2: s + e2 exact
        e2 = b.fadd(b.fsub(s1, s), half)
        low = b.fadd(b.fadd(b.fadd(a_lo, zl), e1), e2)
        low = b.call(fma, [b.call(fma, [zh, zh, b.fneg(zh)]), zl, low])  # z^2/2's and z^3/3's parts in zl
        low = b.call(fma, [b.call(fma, [zh, zh, b.fneg(zz)]), f(-0.5), low])  # what zz lost
        low = b.call(fma, [b.fmul(zz, zh), self._horner(zh, self._POW_C[size], t), low])
        # y ln x = y s + y low (low: up to z^3/3, which y may make large); n = round(y ln x / ln 2) from
        # the low bits of a shifted sum (exp's way)
        shifted = b.call(fma, [b.call(fma, [y, s, b.fmul(y, low)]), f(1.4426950408889634), f(12582912.0)])
        n = b.fsub(shifted, f(12582912.0))
        # r = (y s - n ln2_hi) + (y low - n ln2_lo), each part from one fma (n ln2_hi is exact)
        r = b.fadd(b.call(fma, [y, s, b.fneg(b.fmul(n, f(pow_tables.LN2_HI)))]),
                   b.call(fma, [y, low, b.fneg(b.fmul(n, f(pow_tables.LN2_LO)))]))
        p = b.fadd(b.call(fma, [self._horner(r, self._EXP_P, t), b.fmul(r, r), r]), f(1.0))
        fast = self._scale_shifted(p, shifted, t, n)
        not_fast = b.or_(self._not_positive_normal_f32(x, t),
                         b.fcmp_unordered(">", b.call(fabs, [n]), f(126.0)))
        return self._branch_if_any(not_fast, fast, lambda: b.select(not_fast, self._pow_f32_wide(x, y, t), fast),
                                   "pow.wide")

    def _pow_reduce_f32(self, ix: ir.Value, t: DType, size: int):
        """(j, k, m) for the bits ``ix`` of a positive normal float32: x = m 2^k with m in [off, 2 off) of
        the ``size`` intervals of ``pow_tables``, j the interval m falls in, k as a float."""
        b = self.b
        g = pow_tables.geometry(size)
        i = partial(self.splat_const, T.int32.with_lanes(t.lanes))
        tmp = b.sub(ix, i(g.off))
        j = b.and_(b.lshr(tmp, i(g.bits)), i(size - 1))
        kf = b.sitofp(b.ashr(tmp, i(23)), ll_type(t))
        return j, kf, b.bitcast(b.sub(ix, b.and_(tmp, i(-(1 << 23)))), ll_type(t))

    def _table_f32(self, values, j: ir.Value, t: DType, name: str) -> ir.Value:
        """``values[j]`` (32 or 8 float32 constants) for each lane of the int32 index ``j``: vpermi2ps on 16
        lanes at a time (32 entries) or vpermps on 8 (8 entries), indices padded to a whole instruction's
        for fewer lanes; a load from a constant array for a scalar."""
        b = self.b
        if t.lanes == 1:
            arr = ir.ArrayType(ll_type(T.float32), len(values))
            g = self.m.globals.get(name)
            if g is None:
                g = ir.GlobalVariable(self.m, arr, name)
                g.global_constant, g.linkage = True, "internal"
                g.initializer = ir.Constant(arr, [ir.Constant(ll_type(T.float32), v) for v in values])
            ptr = b.gep(g, [ir.Constant(_I32, 0), j], inbounds=True, source_etype=arr)
            return b.load(ptr, typ=ll_type(T.float32))
        w = 16 if len(values) == 32 else 8
        vw, iw = ll_type(T.float32.with_lanes(w)), ll_type(T.int32.with_lanes(w))

        def constants(part):
            return ir.Constant(vw, [ir.Constant(ll_type(T.float32), v) for v in part])

        if w == 16:
            permute = self.intrinsic("llvm.x86.avx512.vpermi2var.ps.512", vw, [vw, iw, vw])
            halves = [constants(values[k:k + 16]) for k in (0, 16)]

            def look(idx):
                return b.call(permute, [halves[0], idx, halves[1]])
        else:
            permute = self.intrinsic("llvm.x86.avx2.permps", vw, [vw, iw])
            table = constants(values)

            def look(idx):
                return b.call(permute, [table, idx])
        return self._in_chunks([j], t.lanes, w, look)

    def _in_chunks(self, args: list, lanes: int, w: int, op) -> ir.Value:
        """``op`` (of ``w``-lane vectors: one x86 instruction's width) applied to ``args`` (vectors of ``lanes``
        lanes, or scalars) ``w`` lanes at a time, the last chunk padded with its last lane, the results
        concatenated: target intrinsics are not legalized to other widths as LLVM's own operations are."""
        b = self.b
        if lanes == 1:
            def widened(a):
                return b.insert_element(ir.Constant(ir.VectorType(a.type, w), None), a, ir.Constant(_I32, 0))

            return b.extract_element(op(*[widened(a) for a in args]), ir.Constant(_I32, 0))
        iw = ll_type(T.int32.with_lanes(w))
        chunks = -(-lanes // w)
        parts = [op(*[a if lanes == w else
                      b.shuffle_vector(a, ir.Constant(a.type, None),
                                       ir.Constant(iw, [min(start + k, lanes - 1) for k in range(w)]))
                      for a in args])
                 for start in range(0, lanes, w)]
        parts += [ir.Constant(parts[0].type, None)] * ((1 << (chunks - 1).bit_length()) - chunks)  # a power of two
        while len(parts) > 1:  # concatenated in pairs
            width = 2 * parts[0].type.count
            parts = [b.shuffle_vector(parts[k], parts[k + 1], ir.Constant(ll_type(T.int32.with_lanes(width)),
                                                                         list(range(width))))
                     for k in range(0, len(parts), 2)]
        out = parts[0]
        if out.type.count != lanes:
            out = b.shuffle_vector(out, ir.Constant(out.type, None),
                                   ir.Constant(ll_type(T.int32.with_lanes(lanes)), list(range(lanes))))
        return out

    def _estrin(self, v: ir.Value, coefs, t: DType) -> ir.Value:
        """sum coefs[k] v^k (v of type ``t``) by Estrin's scheme, in pairs: a chain of log2(degree)
        steps, not degree (a short dependency chain matters more here than the operation count)."""
        b = self.b
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ll_type(t), [ll_type(t)] * 3)
        terms, power = [self.splat_const(t, c) for c in coefs], v
        while len(terms) > 1:
            terms = [b.call(fma, [terms[k + 1], power, terms[k]]) if k + 1 < len(terms) else terms[k]
                     for k in range(0, len(terms), 2)]
            power = b.fmul(power, power) if len(terms) > 1 else power
        return terms[0]

    def _pow_cases(self, x: ir.Value, y: ir.Value, fast: ir.Value, libm: str, t: DType,
                   subnormal: float | None = None) -> ir.Value:
        """pow where the vector path does not apply, ``fast`` being |x|^y there: zero and negative x as
        C99 (and NumPy) has them (y == 0 and x == 1 give 1 already); the C library's ``libm`` for NaN or
        infinite x or y (and x below ``subnormal``, when given, but not 0), in a branch taken only when
        some lane has one."""
        b = self.b
        ft = ll_type(t)
        f = partial(self.splat_const, t)
        sfx = type_suffix(t)
        fabs = self.intrinsic(f"llvm.fabs.{sfx}", ft, [ft])
        floor = self.intrinsic(f"llvm.floor.{sfx}", ft, [ft])
        ax, ay = b.call(fabs, [x]), b.call(fabs, [y])
        odd = b.or_(b.fcmp_unordered("==", ax, f(float("inf"))), b.fcmp_unordered("==", ay, f(float("inf"))))
        if subnormal is not None:
            odd = b.or_(odd, b.and_(b.fcmp_ordered("<", ax, f(subnormal)), b.fcmp_ordered("!=", ax, f(0.0))))
        magnitude = b.select(b.fcmp_ordered("==", ax, f(0.0)),
                             b.select(b.fcmp_ordered("<", y, f(0.0)), f(float("inf")), f(0.0)), fast)
        y_int = b.fcmp_ordered("==", b.call(floor, [y]), y)
        half_y = b.fmul(y, f(0.5))  # exact for an integer y; such a float this large is even
        odd_y = b.and_(y_int, b.fcmp_ordered("!=", b.call(floor, [half_y]), half_y))
        signed = b.select(odd_y, b.call(self.intrinsic(f"llvm.copysign.{sfx}", ft, [ft, ft]), [magnitude, x]),
                          magnitude)
        out = b.select(b.and_(b.fcmp_ordered("<", x, f(0.0)), b.not_(y_int)), f(float("nan")), signed)
        out = b.select(b.fcmp_ordered("==", y, f(0.0)), f(1.0), out)
        return self._branch_if_any(odd, out, lambda: self._libm_lanes(odd, out, [x, y], libm, t), "pow.libm")

    # float64: the same methods with the extra bits a double needs. Only the final addition (or fma) of
    # each function rounds at the result's precision: the terms before it carry their rounding errors in a
    # second double (Fast2Sum; fma for products). Coefficients and two-part constants from
    # tools/fit_polynomials.py.
    _LN2_42 = (0.6931471805598903, 5.497923018708371e-14)  # ln 2, hi with 42 bits: hi times n < 2^11 is exact
    _LN2 = (0.6931471805599453, 2.3190468138462996e-17)
    _LOG2E = (1.4426950408889634, 2.0355273740931033e-17)
    _TWO_THIRDS = (0.6666666666666666, 3.700743415417188e-17)
    _ROUND = 6755399441055744.0  # 1.5 2^52: x + _ROUND is round(x) in the low bits of the double

    def _exp_f64(self, x: ir.Value, t: DType, x_lo: ir.Value | None = None, scalef: bool = True) -> ir.Value:
        """float64 exp in vector instructions (LLVM would call libm's exp once per lane): e^x = 2^n e^(r + c)
        (``_exp_reduce_f64``), e^(r + c) from ``_exp_kernel_f64`` in two doubles, added (the one rounding
        at float64's precision), and 2^n applied in two halves, so that subnormal results round once.
        ``x_lo`` is a low part of the argument: pow's y ln x in two doubles. ``scalef=False`` keeps the two
        halves where AVX-512's vscalef would apply: float64 pow ran 6-10% slower with it, in fewer instructions
        (measured twice, in turns; why is not known), where exp and erf ran 17% and 3% faster."""
        b = self.b
        f = partial(self.splat_const, t)
        xc = b.select(b.fcmp_ordered("<", x, f(-746.0)), f(-746.0), x)  # 0 and inf beyond these
        xc = b.select(b.fcmp_ordered(">", xc, f(710.0)), f(710.0), xc)
        xc = b.select(b.fcmp_unordered("uno", x, x), f(0.0), xc)  # NaN: fixed at the end
        if x_lo is not None:  # (not where x was clamped: x_lo may be infinite there)
            x_lo = b.select(b.fcmp_ordered("==", x, xc), x_lo, f(0.0))
        k, r, c, n = self._exp_reduce_f64(xc, x_lo, t)
        h, lo = self._exp_kernel_f64(r, c, t)
        y = self._scale_by_pow2(b.fadd(h, lo), k, t, n if scalef else None)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _exp_reduce_f64(self, x: ir.Value, x_lo: ir.Value | None, t: DType):
        """(n, r, c, n as a float) with x (+ x_lo) = n ln 2 + r + c, n = round(x / ln 2) (an int64
        vector), |r| <= ln2/2: ln 2 in two parts, the first with 42 bits so that n ln2_hi is exact for |x|
        < 1400; r rounds once and c is what it lost (and x_lo)."""
        b = self.b
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ll_type(t), [ll_type(t)] * 3)
        shifted = b.call(fma, [x, f(self._LOG2E[0]), f(self._ROUND)])
        n = b.fsub(shifted, f(self._ROUND))
        r_hi = b.call(fma, [n, f(-self._LN2_42[0]), x])  # exact
        r = b.call(fma, [n, f(-self._LN2_42[1]), r_hi])
        c = b.call(fma, [n, f(-self._LN2_42[1]), b.fsub(r_hi, r)])
        return self._round_bits_f64(shifted, t), r, c if x_lo is None else b.fadd(c, x_lo), n

    def _exp2_f64(self, x: ir.Value, t: DType) -> ir.Value:
        """float64 exp2: 2^x = 2^n e^(r ln 2) with n = round(x), r = x - n exact, r ln 2 in two parts for
        exp's kernel."""
        b = self.b
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ll_type(t), [ll_type(t)] * 3)
        xc = b.select(b.fcmp_ordered("<", x, f(-1080.0)), f(-1080.0), x)  # 0 and inf beyond these
        xc = b.select(b.fcmp_ordered(">", xc, f(1025.0)), f(1025.0), xc)
        xc = b.select(b.fcmp_unordered("uno", x, x), f(0.0), xc)  # NaN: fixed at the end
        shifted = b.fadd(xc, f(self._ROUND))
        n = b.fsub(shifted, f(self._ROUND))
        r = b.fsub(xc, n)
        a = b.fmul(r, f(self._LN2[0]))
        a_lo = b.call(fma, [r, f(self._LN2[1]), b.call(fma, [r, f(self._LN2[0]), b.fneg(a)])])
        h, lo = self._exp_kernel_f64(a, a_lo, t)
        y = self._scale_by_pow2(b.fadd(h, lo), self._round_bits_f64(shifted, t), t, n)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _round_bits_f64(self, shifted: ir.Value, t: DType) -> ir.Value:
        """n (an int64 vector) from x + _ROUND = 1.5 2^52 + n: the integer subtraction of their bits (a
        vector float64 -> int64 conversion is a libcall-like sequence without AVX-512)."""
        lt = T.int64.with_lanes(t.lanes)
        return self.b.sub(self.b.bitcast(shifted, ll_type(lt)), self.splat_const(lt, 0x4338000000000000))

    def _exp_kernel_f64(self, r: ir.Value, c: ir.Value, t: DType):
        """e^(r + c) as h + lo, for |r| <= ln2/2 and |c| < 2^-40: 1 + r + (c e^r + r^2 p(r)), p of degree 10
        (its error about 2^-62), h = 1 + r rounded and lo the rest (Fast2Sum), so that adding them is the
        only rounding at float64's precision."""
        b = self.b
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ll_type(t), [ll_type(t)] * 3)
        p = self._estrin(r, (0.5, 0.1666666666666667, 0.04166666666666667, 0.00833333333332607,
                             0.0013888888888883703, 0.00019841269875048905, 2.480158732571076e-05,
                             2.755725511097889e-06, 2.755727343657049e-07, 2.510533724466521e-08,
                             2.091477283224809e-09), t)
        r2 = b.fmul(r, r)
        c = b.call(fma, [c, b.call(fma, [r2, p, r]), c])  # c e^r: pow's c may be 2^-43
        q = b.call(fma, [r2, p, c])
        h = b.fadd(f(1.0), r)
        return h, b.fadd(b.fadd(b.fsub(f(1.0), h), r), q)  # 1 + r - h is exact

    def _tanh_f64(self, x: ir.Value, t: DType) -> ir.Value:
        """float64 tanh in vector instructions: E / (E + 2) with E = e^{2|x|} - 1 in two doubles from exp's
        reduction and kernel (2^n h - 1 is exact while n <= 1, so nothing cancels near 0), the quotient
        corrected by its residual, the sign of x. |x| is clamped to 40 (tanh is 1 there)."""
        b, lanes = self.b, t.lanes
        ft = ll_type(t)
        f = partial(self.splat_const, t)
        i = partial(self.splat_const, T.int64.with_lanes(lanes))
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        ax = b.call(self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ft, [ft]), [x])
        ax = b.select(b.fcmp_ordered("<", ax, f(40.0)), ax, f(40.0))  # NaN too: fixed at the end
        k, r, c, _ = self._exp_reduce_f64(b.fadd(ax, ax), None, t)
        h, lo = self._exp_kernel_f64(r, c, t)
        scale = b.bitcast(b.shl(b.add(k, i(1023)), i(52)), ft)  # 2^n, n in [0, 116]
        e_hi = b.call(fma, [h, scale, f(-1.0)])
        e_lo = b.fmul(lo, scale)  # up to a sixth of e_hi (lo holds r^2 p(r)): carried over (Fast2Sum)
        e = b.fadd(e_hi, e_lo)
        e_hi, e_lo = e, b.fsub(e_lo, b.fsub(e, e_hi))
        big = b.call(self.intrinsic(f"llvm.maxnum.{type_suffix(t)}", ft, [ft, ft]), [e_hi, f(2.0)])
        small = b.call(self.intrinsic(f"llvm.minnum.{type_suffix(t)}", ft, [ft, ft]), [e_hi, f(2.0)])
        d = b.fadd(big, small)  # E + 2 = d + d_lo (Fast2Sum)
        d_lo = b.fadd(b.fsub(small, b.fsub(d, big)), e_lo)
        rcp = b.fdiv(f(1.0), d)
        q = b.fmul(e_hi, rcp)
        residual = b.fadd(b.call(fma, [b.fneg(q), d, e_hi]), b.call(fma, [b.fneg(q), d_lo, e_lo]))
        y = b.call(fma, [residual, rcp, q])
        y = b.call(self.intrinsic(f"llvm.copysign.{type_suffix(t)}", ft, [ft, ft]), [y, x])
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _log_f64(self, x: ir.Value, t: DType) -> ir.Value:
        """float64 log in vector instructions (LLVM would call libm's log once per lane): ``_ln_f64``'s two
        parts, added (the only rounding at the result's precision)."""
        hi, lo = self._ln_f64(x, t, precise=False)
        return self._log_special_cases(x, self.b.fadd(hi, lo), t)

    def _log2_f64(self, x: ir.Value, t: DType) -> ir.Value:
        """float64 log2: ln x in two doubles times log2(e) in two, rounded once (by the last fma), so
        that log2 of a power of two is exact."""
        b = self.b
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ll_type(t), [ll_type(t)] * 3)
        hi, lo = self._ln_f64(x, t, precise=False)
        y = b.call(fma, [hi, f(self._LOG2E[0]), b.call(fma, [lo, f(self._LOG2E[0]), b.fmul(hi, f(self._LOG2E[1]))])])
        return self._log_special_cases(x, y, t)

    def _ln_f64(self, x: ir.Value, t: DType, precise: bool):
        """ln x as hi + lo for positive x (subnormal too: scaled by 2^54 first; other x give garbage for
        the caller to replace): x = m 2^e with m in [sqrt(1/2), sqrt(2)), s = (m - 1) / (m + 1) in two
        parts, ln m = 2 atanh s = 2s + s^3 (2/3 + s^2 Q(s^2)), e ln 2 in two parts. The s^3 term is at
        most 2^-6.7 of the sum: rounded as one double it leaves about 2^-59, enough for log and log2;
        ``precise`` keeps it in two doubles as well (about 2^-63: pow's y ln x may be 745) and makes lo
        smaller than hi's last bit."""
        b, lanes = self.b, t.lanes
        ft, lt = ll_type(t), ll_type(T.int64.with_lanes(lanes))
        f, i = partial(self.splat_const, t), partial(self.splat_const, T.int64.with_lanes(lanes))
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        tiny = b.fcmp_ordered("<", x, f(2.2250738585072014e-308))  # subnormal (or not positive)
        bits = b.bitcast(b.select(tiny, b.fmul(x, f(18014398509481984.0)), x), lt)
        m = b.bitcast(b.or_(b.and_(bits, i(0x000FFFFFFFFFFFFF)), i(0x3FF0000000000000)), ft)  # [1, 2)
        high = b.fcmp_ordered(">", m, f(1.4142135623730951))
        m = b.select(high, b.fmul(m, f(0.5)), m)
        # e = exponent field (+1 where m was halved) - bias, converted by or-ing it into 2^52's mantissa
        field = b.add(b.lshr(bits, i(52)), b.zext(high, lt))
        e = b.fsub(b.bitcast(b.or_(field, i(0x4330000000000000)), ft),
                   b.select(tiny, f(4503599627370496.0 + 1023 + 54), f(4503599627370496.0 + 1023)))
        u = b.fsub(m, f(1.0))  # exact
        v = b.fadd(m, f(1.0))
        v_lo = b.fsub(m, b.fsub(v, f(1.0)))  # m + 1 - v, exact (Fast2Sum)
        rcp = b.fdiv(f(1.0), v)
        s = b.fmul(u, rcp)
        s_lo = b.fmul(b.fsub(b.call(fma, [b.fneg(s), v, u]), b.fmul(s, v_lo)), rcp)  # u / (v + v_lo) - s
        z = b.fmul(s, s)
        q = self._estrin(z, (0.4, 0.28571428571429364, 0.22222222221656232, 0.18181818335314404,
                             0.15384594970895457, 0.13334804238225345, 0.11706248540922386,
                             0.11723051028097753), t)
        cube = b.fmul(z, s)
        third_hi, third_lo = self._TWO_THIRDS
        # e ln2_hi + 2s, exactly in two doubles (Fast2Sum: |e ln 2| > |2s| unless e = 0)
        big = b.fmul(e, f(self._LN2_42[0]))
        s2 = b.fadd(s, s)
        h1 = b.fadd(big, s2)
        l1 = b.fsub(s2, b.fsub(h1, big))
        lo = b.call(fma, [e, f(self._LN2_42[1]), b.fadd(s_lo, s_lo)])
        if not precise:
            return h1, b.fadd(l1, b.call(fma, [cube, b.call(fma, [z, q, f(third_hi)]), lo]))
        z_lo = b.call(fma, [s, s, b.fneg(z)])
        cube_lo = b.fadd(b.call(fma, [z, s, b.fneg(cube)]),
                         b.call(fma, [z_lo, s, b.fmul(b.fmul(z, f(3.0)), s_lo)]))  # s^3 - cube
        tail = b.fmul(cube, f(third_hi))  # (2/3 + z Q) s^3 = tail + tail_lo
        tail_lo = b.fadd(b.call(fma, [cube, f(third_hi), b.fneg(tail)]),
                         b.call(fma, [cube, b.call(fma, [z, q, f(third_lo)]), b.fmul(cube_lo, f(third_hi))]))
        h2 = b.fadd(h1, tail)  # Fast2Sum again: |h1| > |tail|
        l2 = b.fsub(tail, b.fsub(h2, h1))
        lo = b.fadd(b.fadd(l1, l2), b.fadd(tail_lo, lo))
        hi = b.fadd(h2, lo)  # lo holds s^5 Q(s^2), up to 2^-12 of hi: carried over, lo below hi's last bit
        return hi, b.fsub(lo, b.fsub(hi, h2))

    def _pow_f64(self, x: ir.Value, y: ir.Value, t: DType) -> ir.Value:
        """float64 pow in vector instructions: e^{y ln x} with ln x in two doubles (``_ln_f64``, precise:
        within 2 ulp even where |y ln x| is near 745), y ln x in two (fma), and exp on both. That path
        takes a positive finite x (subnormal too) and a finite y; when some lane has another, a branch
        applies C99's cases for zero and negative x and calls the C library's pow for NaN or infinite
        ones."""
        b = self.b
        ft = ll_type(t)
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        fabs = self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ft, [ft])
        hi, lo = self._ln_f64(b.call(fabs, [x]), t, precise=True)
        w = b.fmul(y, hi)
        w_lo = b.call(fma, [y, lo, b.call(fma, [y, hi, b.fneg(w)])])
        fast = self._exp_f64(w, t, w_lo, scalef=False)
        inf = f(float("inf"))
        not_fast = b.not_(b.and_(b.and_(b.fcmp_ordered(">", x, f(0.0)), b.fcmp_ordered("<", x, inf)),
                                 b.fcmp_ordered("<", b.call(fabs, [y]), inf)))
        return self._branch_if_any(not_fast, fast, lambda: self._pow_cases(x, y, fast, "pow", t), "pow.cases")

    def _sincos_f32(self, x: ir.Value, t: DType, which: str) -> ir.Value:
        """float32 sin or cos in float32 vector instructions for |x| < ``_SINCOS_NEAR``: n = round(x 2/pi),
        r + r_lo = x - n pi/2 with pi/2 in three floats (x - n hi exact in one fma, n mid's product and
        the difference carried exactly by an fma and a TwoSum), then sin(r) = r + (r^3 s(r^2) + r_lo) or
        cos(r) = w + ((1 - w - r^2/2) + r^4 c(r^2) - (r r_lo + the rounding of r^2 / 2)), w = 1 - r^2/2
        rounded, as the quadrant asks: each a large term plus a small one rounded once. Lanes at or past
        that bound (and infinities, NaN) take the float64 code (``_sincos_f32_wide``) in a branch taken
        only when some lane needs it. Over every float32 below the bound, measured within the float64
        code's bound (1 ulp); 1.5x faster than it where measured (znver4, 16 lanes)."""
        b, lanes = self.b, t.lanes
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(lanes))
        f, i = partial(self.splat_const, t), partial(self.splat_const, T.int32.with_lanes(lanes))
        sfx = type_suffix(t)
        fma = self.intrinsic(f"llvm.fma.{sfx}", ft, [ft] * 3)
        ax = b.call(self.intrinsic(f"llvm.fabs.{sfx}", ft, [ft]), [x])
        far = b.fcmp_unordered(">=", ax, f(self._SINCOS_NEAR))  # or NaN
        xs = b.select(far, f(0.0), x)
        p1, p2, p3 = self._PI_2_F32
        n = b.call(self.intrinsic(f"llvm.roundeven.{sfx}", ft, [ft]), [b.fmul(xs, f(0.63661975))])
        r1 = b.call(fma, [b.fneg(n), f(p1), xs])  # exact
        m = b.fmul(n, f(p2))
        m_lo = b.call(fma, [n, f(p2), b.fneg(m)])  # n p2 = m + m_lo exactly
        r = b.fsub(r1, m)
        back = b.fsub(r, r1)  # r1 - m = r + e exactly (TwoSum: either may be the larger)
        e = b.fadd(b.fsub(r1, b.fsub(r, back)), b.fsub(b.fneg(m), back))
        r_lo = b.call(fma, [b.fneg(n), f(p3), b.fsub(e, m_lo)])
        z = b.fmul(r, r)
        sin_r = b.fadd(r, b.call(fma, [b.fmul(z, r), self._horner(z, self._SIN_S, t), r_lo]))
        half = b.fmul(z, f(0.5))
        w = b.fsub(f(1.0), half)
        small = b.call(fma, [b.fmul(z, z), self._horner(z, self._COS_C, t), b.fsub(b.fsub(f(1.0), w), half)])
        z_lo = b.call(fma, [r, r, b.fneg(z)])
        cos_r = b.fadd(w, b.fsub(small, b.call(fma, [r, r_lo, b.fmul(z_lo, f(0.5))])))
        q = b.fptosi(n, it)
        if which == "cos":
            q = b.add(q, i(1))  # cos(x) = sin(x + pi/2)
        odd = b.icmp_unsigned("!=", b.and_(q, i(1)), i(0))
        v = b.select(odd, cos_r, sin_r)
        fast = b.bitcast(b.xor(b.bitcast(v, it), b.shl(b.and_(q, i(2)), i(30))), ft)  # negated in quadrants 2, 3
        if which == "sin":  # sin(-0) is -0: the reduction made it +0
            fast = b.select(b.fcmp_ordered("==", x, f(0.0)), x, fast)
        return self._branch_if_any(far, fast, lambda: b.select(far, self._sincos_f32_wide(x, t, which), fast),
                                   f"{which}.far")

    def _sincos_f32_wide(self, x: ir.Value, t: DType, which: str) -> ir.Value:
        """float32 sin or cos in vector instructions: x reduced by pi/2 in float64, r = x - n pi/2 with
        n = round(x 2/pi) and pi/2 in two parts (x - n hi exact in one fma for |x| < 2^28 pi/2), then
        r + r^3 p(r^2) for sin(r) or 1 + r^2 q(r^2) for cos(r), as the quadrant asks, in float64 (p and q
        of degree 3, fitted for the relative error), rounded once to float32. Lanes beyond 4e8 (and
        infinities) take the C library's sinf or cosf, in a branch that runs only when some lane needs
        it."""
        b, lanes = self.b, t.lanes
        ft = ll_type(t)
        dt = ll_type(T.float64.with_lanes(lanes))
        it = ll_type(T.int32.with_lanes(lanes))
        dtype = T.float64.with_lanes(lanes)

        f, d = partial(self.splat_const, t), partial(self.splat_const, dtype)
        i = partial(self.splat_const, T.int32.with_lanes(lanes))

        sfx, dsfx = type_suffix(t), type_suffix(dtype)
        dfma = self.intrinsic(f"llvm.fma.{dsfx}", dt, [dt, dt, dt])
        ax = b.call(self.intrinsic(f"llvm.fabs.{sfx}", ft, [ft]), [x])
        big = b.fcmp_unordered(">=", ax, f(4.0e8))  # or NaN: the C library too (it keeps the NaN)
        xd = b.fpext(b.select(big, f(0.0), x), dt)
        n = b.call(self.intrinsic(f"llvm.rint.{dsfx}", dt, [dt]), [b.fmul(xd, d(0.6366197723675814))])  # 2/pi
        r = b.call(dfma, [n, d(-self._PI_2_33[0]), xd])
        r = b.call(dfma, [n, d(-self._PI_2_33[1]), r])
        z = b.fmul(r, r)
        sin_r = b.call(dfma, [b.fmul(z, r), self._estrin(z, self._SIN_P, dtype), r])
        cos_r = b.call(dfma, [z, self._estrin(z, self._COS_Q, dtype), d(1.0)])
        q = b.and_(b.fptosi(n, it), i(3))
        if which == "cos":
            q = b.and_(b.add(q, i(1)), i(3))  # cos(x) = sin(x + pi/2)
        odd = b.icmp_unsigned("!=", b.and_(q, i(1)), i(0))
        negative = b.icmp_unsigned("!=", b.and_(q, i(2)), i(0))
        v = b.select(odd, cos_r, sin_r)
        fast = b.fptrunc(b.select(negative, b.fneg(v), v), ft)
        if which == "sin":  # sin(-0) is -0: the reduction's n * pi/2 + x made it +0
            fast = b.select(b.fcmp_ordered("==", x, f(0.0)), x, fast)
        # the lanes the reduction cannot take: the C library, only when some lane is one of them
        return self._lanes_from_libm(big, fast, [x], f"{which}f", t, which)

    def _sincos_f64(self, x: ir.Value, t: DType, which: str) -> ir.Value:
        """float64 sin or cos in vector instructions: n = round(x 2/pi), r = x - n pi/2 in two doubles with
        pi/2 in three (the first product and subtraction exact in one fma, the rest by TwoSum: enough for
        the closest a double below 2^30 comes to a multiple of pi/2), then sin's or cos's polynomial on r
        as the quadrant asks, each ending in one rounding of a large term plus a small one. Lanes beyond
        2^30 (and infinities, NaN) take the C library's sin or cos, in a branch that runs only when some
        lane needs it."""
        b, lanes = self.b, t.lanes
        ft = ll_type(t)
        f, i = partial(self.splat_const, t), partial(self.splat_const, T.int64.with_lanes(lanes))
        sfx = type_suffix(t)
        fma = self.intrinsic(f"llvm.fma.{sfx}", ft, [ft] * 3)
        ax = b.call(self.intrinsic(f"llvm.fabs.{sfx}", ft, [ft]), [x])
        big = b.fcmp_unordered(">=", ax, f(1073741824.0))  # or NaN: the C library too (it keeps the NaN)
        xs = b.select(big, f(0.0), x)
        shifted = b.call(fma, [xs, f(0.6366197723675814), f(self._ROUND)])
        n = b.fsub(shifted, f(self._ROUND))
        p1, p2, p3 = 1.5707963267948966, 6.123233995736766e-17, -1.497384905065873e-33
        r1 = b.call(fma, [b.fneg(n), f(p1), xs])  # exact: a multiple of 2^-53 below 1
        t_hi = b.fmul(n, f(p2))
        t_lo = b.call(fma, [n, f(p3), b.call(fma, [n, f(p2), b.fneg(t_hi)])])
        r = b.fsub(r1, t_hi)  # r1 - t_hi exactly as r + err (TwoSum: either may be the larger)
        back = b.fsub(r, r1)
        err = b.fadd(b.fsub(r1, b.fsub(r, back)), b.fsub(b.fneg(t_hi), back))
        r_lo = b.fsub(err, t_lo)
        r_hi = b.fadd(r, r_lo)  # normalized (Fast2Sum)
        r_lo = b.fsub(r_lo, b.fsub(r_hi, r))
        z = b.fmul(r_hi, r_hi)
        # sin(r_hi + r_lo) = r_hi + (r_hi z S(z) + r_lo (1 - z/2))
        sin_s = self._estrin(z, (-0.16666666666666666, 0.008333333333333331, -0.00019841269841265063,
                                 2.7557319219337312e-06, -2.5052106231802837e-08, 1.6058531516797758e-10,
                                 -7.586691094197958e-13), t)
        sin_r = b.fadd(r_hi, b.call(fma, [b.fmul(r_hi, z), sin_s,
                                          b.call(fma, [b.fmul(z, f(-0.5)), r_lo, r_lo])]))
        # cos(r_hi + r_lo) = w + ((1 - w - z/2) + z^2 C(z) - (z_lo / 2 + r_hi r_lo)), w = 1 - z/2 rounded
        cos_c = self._estrin(z, (0.041666666666666664, -0.0013888888888887398, 2.480158729876456e-05,
                                 -2.7557317271145144e-07, 2.087614614655861e-09, -1.1382623647474604e-11), t)
        half_z = b.fmul(z, f(0.5))
        w = b.fsub(f(1.0), half_z)
        z_lo = b.call(fma, [r_hi, r_hi, b.fneg(z)])
        small = b.call(fma, [b.fmul(z, z), cos_c, b.fsub(b.fsub(f(1.0), w), half_z)])
        cos_r = b.fadd(w, b.fsub(small, b.call(fma, [r_hi, r_lo, b.fmul(z_lo, f(0.5))])))
        q = b.and_(b.bitcast(shifted, ll_type(T.int64.with_lanes(lanes))), i(3))  # n's low bits
        if which == "cos":
            q = b.and_(b.add(q, i(1)), i(3))  # cos(x) = sin(x + pi/2)
        odd = b.icmp_unsigned("!=", b.and_(q, i(1)), i(0))
        negative = b.icmp_unsigned("!=", b.and_(q, i(2)), i(0))
        v = b.select(odd, cos_r, sin_r)
        fast = b.select(negative, b.fneg(v), v)
        if which == "sin":  # sin(-0) = -0 (the sums above give +0)
            fast = b.select(b.fcmp_ordered("==", xs, f(0.0)), xs, fast)
        return self._lanes_from_libm(big, fast, [x], which, t, which)

    def _lanes_from_libm(self, special: ir.Value, fast: ir.Value, args: list, libm: str, t: DType,
                         label: str) -> ir.Value:
        """``fast``, except in the lanes where ``special`` holds: there the C library's ``libm`` on
        ``args``, in a branch taken only when some lane needs it (rare inputs cost nothing otherwise)."""
        return self._branch_if_any(special, fast, lambda: self._libm_lanes(special, fast, args, libm, t), label)

    def _branch_if_any(self, mask: ir.Value, fast: ir.Value, make_slow, label: str) -> ir.Value:
        """``fast`` when no lane of ``mask`` holds, else what ``make_slow()`` emits, in a block of its own
        that runs only then."""
        b, lanes = self.b, getattr(mask.type, "count", 1)
        any_set = mask if lanes == 1 else b.icmp_unsigned(
            "!=", b.bitcast(mask, ir.IntType(lanes)), ir.Constant(ir.IntType(lanes), 0))
        before = b.block
        slow_block = b.append_basic_block(f"{label}.slow")
        done = b.append_basic_block(f"{label}.done")
        # weighted as C's __builtin_expect(any_set, 0), so that LLVM lays the rare block out of the loop's
        # straight line (measured: the same speed within 2-6%; the constants a polynomial needs still
        # live in stack slots, for want of registers)
        b.cbranch(any_set, slow_block, done).set_weights([1, 2000])
        b.position_at_end(slow_block)
        slow = make_slow()
        slow_end = b.block
        b.branch(done)
        b.position_at_end(done)
        out = b.phi(fast.type)
        out.add_incoming(fast, before)
        out.add_incoming(slow, slow_end)
        return out

    def _libm_lanes(self, special: ir.Value, fast: ir.Value, args: list, libm: str, t: DType) -> ir.Value:
        """The C library's ``libm`` lane by lane where ``special`` holds, ``fast`` elsewhere."""
        b = self.b
        st = ll_type(t.scalar())
        fn = self.intrinsic(libm, st, [st] * len(args))
        if t.lanes == 1:
            return b.select(special, b.call(fn, args), fast)
        out = fast
        for k in range(t.lanes):
            lane = ir.Constant(_I32, k)
            value = b.call(fn, [b.extract_element(a, lane) for a in args])
            out = b.insert_element(out, b.select(b.extract_element(special, lane), value,
                                                 b.extract_element(fast, lane)), lane)
        return out

    def _erf_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """float32 erf in vector instructions: x (2/sqrt(pi) + x^2 p(x^2)) for |x| < 1 (2/sqrt(pi) in two
        floats, the larger part in the last fma), else 1 - e^{-x^2} q(1/x^2) / |x| with the sign of x (p
        of degree 5, q of degree 8 fitted on [1, 4] for erf's relative error; |x| is clamped to 4, where
        erf rounds to 1)."""
        b = self.b
        ft = ll_type(t)

        f = partial(self.splat_const, t)

        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft, ft, ft])
        ax = b.call(self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ft, [ft]), [x])
        z = b.fmul(x, x)
        c_hi, c_lo = self._TWO_OVER_SQRT_PI_F32
        near = b.call(fma, [x, f(c_hi), b.fmul(x, b.call(fma, [z, self._horner(z, self._ERF_NEAR_P, t), f(c_lo)]))])
        near = b.select(b.fcmp_ordered("==", x, f(0.0)), x, near)  # erf(-0) is -0 (x c_lo made it +0)
        axc = b.select(b.fcmp_ordered("<", ax, f(1.0)), f(1.0), ax)  # the far formula on |x| >= 1 only
        # and up to 4: erf rounds to 1 beyond (erfc(4) < 2^-25), and e^{-x^2} stays normal (beyond 9.4 it
        # would be subnormal, which costs a microcode assist on some CPUs)
        axc = b.select(b.fcmp_ordered(">", axc, f(4.0)), f(4.0), axc)
        q = b.fdiv(f(1.0), axc)
        poly = self._horner(b.fmul(q, q), self._ERF_FAR_Q, t)
        erfc = b.fmul(b.fmul(self._exp_f32(b.fneg(b.fmul(axc, axc)), t), q), poly)
        far = b.call(self.intrinsic(f"llvm.copysign.{type_suffix(t)}", ft, [ft, ft]), [b.fsub(f(1.0), erfc), x])
        out = b.select(b.fcmp_ordered("<", ax, f(1.0)), near, far)
        return b.select(b.fcmp_unordered("uno", x, x), x, out)

    # float64 erf (tools/fit_polynomials.py): erf(x) / x = 2/sqrt(pi) + z p(z) for z = x^2 below 1, and
    # erfc(x) = t e^{-x^2 + P(t - 29/64)} with t = 2 / (2 + x) for x from 1 to 6 (t in [1/4, 2/3]; the
    # map takes erfc's essential singularity at infinity to t = 0, outside the interval, and the logarithm
    # makes what is left smooth: a degree-16 fit reaches 2^-55)
    _ERF_NEAR_P_F64 = (-0.37612638903183754, 0.11283791670955111, -0.026866170645123838, 0.005223977625303518,
                       -0.0008548327010033328, 0.00012055332214716276, -1.4925622504489842e-05,
                       1.6461446656928561e-06, -1.6355118610877705e-07, 1.4692484859133263e-08,
                       -1.1500357159785296e-09, 6.174097221305255e-11)
    _ERFC_P_F64 = (-0.7344004674390714, 1.3251314180790925, 0.23976696950101287, -0.3396236217079587,
                   -0.2193800407760708, 0.23731166081575678, 0.20575091690391265, -0.2583695175407926,
                   -0.18577051001127862, 0.3412647589805307, 0.12050114651863442, -0.4587994678253392,
                   0.03974794616679524, 0.5465756273939604, -0.31699992128462934, -0.4546375666506285,
                   0.5301738791973671)
    _TWO_OVER_SQRT_PI = (1.1283791670955126, 1.533545961316588e-17)

    def _erf_f64(self, x: ir.Value, t: DType) -> ir.Value:
        """float64 erf in vector instructions: x 2/sqrt(pi) + x^3 p(z) below 1 (2/sqrt(pi) and x^3 in two
        doubles, the larger part in the last fma), else 1 - erfc(|x|) with the sign of x, erfc(a) = t e^{w},
        t = 2 / (2 + a) with its rounding error carried into w, w = -a^2 + P(t - 29/64) in two doubles
        for exp's kernel. |x| is clamped to 6, where erf rounds to 1 (erfc(6) < 2^-54); both formulas
        are computed for every lane and one is selected."""
        b = self.b
        ft = ll_type(t)
        f = partial(self.splat_const, t)
        sfx = type_suffix(t)
        fma = self.intrinsic(f"llvm.fma.{sfx}", ft, [ft] * 3)
        ax = b.call(self.intrinsic(f"llvm.fabs.{sfx}", ft, [ft]), [x])
        z = b.fmul(x, x)
        c_hi, c_lo = self._TWO_OVER_SQRT_PI
        # x^3 = x3 + x3_lo (z's rounding error too), then erf = x c_hi + (x c_lo + x^3 p(z)) rounded once
        x3 = b.fmul(x, z)
        x3_lo = b.call(fma, [x, b.call(fma, [x, x, b.fneg(z)]), b.call(fma, [x, z, b.fneg(x3)])])
        p = self._horner(z, self._ERF_NEAR_P_F64, t)
        tail = b.call(fma, [x3, p, b.call(fma, [x3_lo, p, b.fmul(x, f(c_lo))])])
        # (below 2^-960 the tail is at most 2^-56 of erf and would round as a subnormal: left out)
        tail = b.select(b.fcmp_ordered("<", ax, f(2.0 ** -960)), f(0.0), tail)
        near = b.call(fma, [x, f(c_hi), tail])
        near = b.select(b.fcmp_ordered("==", x, f(0.0)), x, near)  # erf(-0) is -0
        a = b.select(b.fcmp_ordered("<", ax, f(1.0)), f(1.0), ax)  # NaN too: fixed at the end
        a = b.select(b.fcmp_ordered("<", a, f(6.0)), a, f(6.0))
        d = b.fadd(a, f(2.0))
        d_lo = b.fsub(a, b.fsub(d, f(2.0)))  # 2 + a - d, exact (d - 2 is, for a in [1, 6])
        q = b.fdiv(f(2.0), d)
        # q (1 + rel) = 2 / (d + d_lo): rel = (2 - q d - q d_lo) / 2, ln(1 + rel) = rel to 2^-106
        rel = b.fmul(b.fsub(b.call(fma, [b.fneg(q), d, f(2.0)]), b.fmul(q, d_lo)), f(0.5))
        p = self._estrin(b.fsub(q, f(0.453125)), self._ERFC_P_F64, t)
        a2 = b.fmul(a, a)
        a2_lo = b.call(fma, [a, a, b.fneg(a2)])
        w = b.fsub(p, a2)  # Fast2Sum: a^2 >= 1 > |p|
        w_lo = b.fadd(b.fsub(b.fsub(p, b.fadd(w, a2)), a2_lo), rel)
        erfc = b.fmul(q, self._exp_f64(w, t, w_lo))
        far = b.call(self.intrinsic(f"llvm.copysign.{sfx}", ft, [ft, ft]), [b.fsub(f(1.0), erfc), x])
        out = b.select(b.fcmp_ordered("<", ax, f(1.0)), near, far)
        return b.select(b.fcmp_unordered("uno", x, x), x, out)

    # ------------------------------------------------------------------------------ fast math (float32)
    # Asked for by the target (``compile(fast_math=True)``): shorter code, looser bounds (docs/language.md).
    # Results below float32's normal range are flushed to 0 and subnormal arguments read as 0; the special
    # values (NaN, infinities, zero, negatives for log and pow) are still right. Polynomials from
    # tools/fit_polynomials.py, as the others, evaluated by Estrin's scheme (pow's chain of log, product
    # and exp2 is latency-bound: Horner's made it 1.3x slower).
    _FAST_EXP2_P = (0.69314706, 0.24022909, 0.055486184, 0.009673775, 0.0012482287, 0.00021565998)  # [0, 1], 2^-28.8
    _FAST_EXP_P = (0.50000226, 0.1666321, 0.04185437, 0.007869273, 0.0019120649)  # [0, ln 2], 2^-28.3
    _FAST_LOG_P = (0.3333391, -0.25001335, 0.19963102, -0.16577649, 0.14914481, -0.14266963, 0.08700541)  # 2^-24.9
    _FAST = ("exp", "exp2", "log", "log2", "pow")

    def _fast_math_f32(self, name: str, args, t: DType) -> ir.Value:
        if name == "pow" and "getexp" in self.shared.avx512:  # the accurate pow's short path is faster there
            return self._pow_f32(*args, t)
        if name == "pow" and self.shared.pow_table:
            return self._fast_pow_table_f32(*args, t)
        return getattr(self, f"_fast_{name}_f32")(*args, t)

    def _fast_scale(self, p: ir.Value, n: ir.Value, t: DType) -> ir.Value:
        """p 2^n for an integer-valued float n in [-126, 127] (anything, NaN included, elsewhere: the caller
        replaces those lanes): n + 1.5 2^23 leaves n in the low bits, which go to the exponent field."""
        return self._scale_shifted(p, self.b.fadd(n, self.splat_const(t, 12582912.0)), t, n)

    def _scale_shifted(self, p: ir.Value, shifted: ir.Value, t: DType, n: ir.Value | None = None) -> ir.Value:
        """p 2^n where ``shifted`` is n + 1.5 2^23 (n in its low bits, n in [-126, 127]): those bits go to
        the exponent field; with AVX-512, one vscalef from ``n`` (a float) where given."""
        b = self.b
        if n is not None and "scalef" in self.shared.avx512:
            return self._scalef(p, n, t)
        i = partial(self.splat_const, T.int32.with_lanes(t.lanes))
        bits = b.bitcast(shifted, ll_type(T.int32.with_lanes(t.lanes)))
        return b.fmul(p, b.bitcast(b.shl(b.add(bits, i(127 - 0x4B400000)), i(23)), ll_type(t)))

    def _fast_range(self, x: ir.Value, y: ir.Value, lo: float, hi: float, t: DType) -> ir.Value:
        """``y``, but 0 where x < lo and inf where x >= hi (NaN stays)."""
        b = self.b
        f = partial(self.splat_const, t)
        y = b.select(b.fcmp_ordered("<", x, f(lo)), f(0.0), y)
        return b.select(b.fcmp_ordered(">=", x, f(hi)), f(float("inf")), y)

    def _fast_exp2_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """2^x = 2^n 2^r, n = floor(x), r = x - n in [0, 1) exact, 2^r = 1 + r p(r) (degree 5)."""
        b = self.b
        ft = ll_type(t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        n = b.call(self.intrinsic(f"llvm.floor.{type_suffix(t)}", ft, [ft]), [x])
        r = b.fsub(x, n)
        p = b.call(fma, [self._estrin(r, self._FAST_EXP2_P, t), r, self.splat_const(t, 1.0)])
        return self._fast_range(x, self._fast_scale(p, n, t), -126.0, 128.0, t)

    def _fast_exp_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """e^x = 2^n e^r, n = floor(x / ln 2), r = x - n ln 2 in [0, ln 2) (ln 2 in two floats),
        e^r = 1 + r + r^2 p(r) (degree 4)."""
        b = self.b
        ft = ll_type(t)
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        n = b.call(self.intrinsic(f"llvm.floor.{type_suffix(t)}", ft, [ft]), [b.fmul(x, f(1.4426950408889634))])
        r = b.call(fma, [n, f(-self._LN2_F32[0]), x])
        r = b.call(fma, [n, f(-self._LN2_F32[1]), r])
        p = b.fadd(b.call(fma, [self._estrin(r, self._FAST_EXP_P, t), b.fmul(r, r), r]), f(1.0))
        return self._fast_range(x, self._fast_scale(p, n, t), -87.33654, 88.72284, t)

    def _fast_log_parts(self, x: ir.Value, t: DType):
        """(u, tail, e): ln x = e ln 2 + u + tail for a positive normal x, x = m 2^e, m in [sqrt(1/2),
        sqrt(2)), u = m - 1 exact, tail = -u^2/2 + u^3 p(u) (degree 6)."""
        b = self.b
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(t.lanes))
        f, i = partial(self.splat_const, t), partial(self.splat_const, T.int32.with_lanes(t.lanes))
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        bits = b.bitcast(x, it)
        m = b.bitcast(b.or_(b.and_(bits, i(0x007FFFFF)), i(0x3F800000)), ft)  # [1, 2)
        high = b.fcmp_ordered(">", m, f(1.41421356))
        e = b.add(b.sub(b.lshr(bits, i(23)), i(127)), b.zext(high, it))
        u = b.fsub(b.select(high, b.fmul(m, f(0.5)), m), f(1.0))
        z = b.fmul(u, u)
        tail = b.call(fma, [z, f(-0.5), b.fmul(b.fmul(u, z), self._estrin(u, self._FAST_LOG_P, t))])
        return u, tail, b.sitofp(e, ft)

    def _fast_log_cases(self, x: ir.Value, y: ir.Value, t: DType) -> ir.Value:
        """log's special values: inf at inf, -inf at 0 and below the normal range, NaN below 0 and at NaN."""
        b = self.b
        f = partial(self.splat_const, t)
        y = b.select(b.fcmp_ordered("==", x, f(float("inf"))), x, y)
        y = b.select(b.fcmp_ordered("<", x, f(1.17549435e-38)), f(float("-inf")), y)
        return b.select(b.fcmp_unordered("<", x, f(0.0)), f(float("nan")), y)

    def _fast_log_f32(self, x: ir.Value, t: DType) -> ir.Value:
        b = self.b
        ft = ll_type(t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        u, tail, e = self._fast_log_parts(x, t)
        y = b.call(fma, [e, self.splat_const(t, self._LN2_F32[0]), b.fadd(u, tail)])
        return self._fast_log_cases(x, y, t)

    def _fast_log2_f32(self, x: ir.Value, t: DType) -> ir.Value:
        b = self.b
        ft = ll_type(t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        u, tail, e = self._fast_log_parts(x, t)
        log2e = self.splat_const(t, 1.4426950408889634)
        return self._fast_log_cases(x, b.fadd(e, b.call(fma, [u, log2e, b.fmul(tail, log2e)])), t)

    # log2(1 + z) / z, by the table's size: |z| <= 2^-6 with 32 entries (Taylor), z in [-0.0556, 1/16] with
    # 8 (tools/fit_polynomials.py: relative error 2^-26.1)
    _LOG2_1PZ = {32: (1.442695, -0.7213475, 0.48089835, -0.36067376),
                 8: (1.442695, -0.7213474, 0.48092136, -0.36142662, 0.2823434)}

    def _fast_pow_table_f32(self, x: ir.Value, y: ir.Value, t: DType) -> ir.Value:
        """Fast math's pow where a table is one instruction (AVX-512: 32 entries, AVX2: 8): log2 |x| = k +
        log2(c) + log2(1 + z), c and log2(c) from the accurate pow's table of the mantissa (``pow_tables``),
        z = m/c - 1 (|z| <= 2^-6, or 1/16) in one fma, a polynomial of degree 4 (both polynomials by
        Estrin's scheme: 1.14x faster than Horner's on AVX2); then as ``_fast_pow_f32`` (y log2 x never
        rounded whole) with n = round(y log2 |x|) and 2^r as exp2's. Lanes with x not positive and
        normal, or n beyond [-125, 125] (y not finite, results near or past the range), take the cases in
        a branch: results past the range flushed to 0 or inf, zero, negative, infinite and NaN operands
        as the accurate pow's."""
        b, lanes = self.b, t.lanes
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(lanes))
        f, i = partial(self.splat_const, t), partial(self.splat_const, T.int32.with_lanes(lanes))
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        fabs = self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ft, [ft])
        ix = b.bitcast(b.call(fabs, [x]), it)
        size = self.shared.pow_table
        j, kf, m = self._pow_reduce_f32(ix, t, size)
        invc = self._table_f32(pow_tables.log_table(size)[0], j, t, "pow.invc")
        log2c = self._table_f32(pow_tables.log2_table(size), j, t, "pow.log2c")
        z = b.call(fma, [m, invc, f(-1.0)])
        lm = b.call(fma, [z, self._estrin(z, self._LOG2_1PZ[size], t), log2c])  # log2 of m, |lm| <= 0.53
        shifted = b.fadd(b.call(fma, [y, kf, b.fmul(y, lm)]), f(12582912.0))  # round(y log2 |x|), low bits
        n = b.fsub(shifted, f(12582912.0))
        r = b.call(fma, [y, lm, b.call(fma, [y, kf, b.fneg(n)])])
        p = b.call(fma, [self._estrin(r, self._EXP2_P, t), r, f(1.0)])
        k = b.sub(b.bitcast(shifted, it), i(0x4B400000))
        fast = self._scale_shifted(p, shifted, t, n)
        not_fast = b.or_(self._not_positive_normal_f32(x, t), b.fcmp_unordered(">", b.call(fabs, [n]), f(125.0)))

        def cases():
            # n up to 128 with p below 1 is still finite: p 2^(n - 1) 2 (inf where it is not)
            top = b.fmul(b.fmul(p, b.bitcast(b.shl(b.add(k, i(126)), i(23)), ft)), f(2.0))
            ranged = b.select(b.fcmp_ordered(">", n, f(126.0)), top, fast)
            ranged = b.select(b.fcmp_ordered(">", n, f(128.0)), f(float("inf")), ranged)
            ranged = b.select(b.fcmp_ordered("<", ranged, f(1.17549435e-38)), f(0.0), ranged)  # flushed
            ranged = b.select(b.fcmp_ordered("<", n, f(-126.0)), f(0.0), ranged)
            return self._pow_cases(x, y, ranged, "powf", t, 1.17549435e-38)

        return self._branch_if_any(not_fast, fast, cases, "pow.cases")

    def _fast_pow_f32(self, x: ir.Value, y: ir.Value, t: DType) -> ir.Value:
        """|x|^y = 2^{y log2 |x|} with log2 |x| = e + L (L = log2 m from log's parts), split as n + r: n =
        floor(y e + y L), r = y L + (y e - n) in two fmas (so t = y log2 x is never rounded whole: its
        error would be |t| 2^-24, 2^t's 0.7 |t| ulp); 2^r as exp2's. Zero, negative, subnormal, infinite
        and NaN operands take the accurate pow's cases in a branch, only when some lane has one."""
        b = self.b
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(t.lanes))
        f, i = partial(self.splat_const, t), partial(self.splat_const, T.int32.with_lanes(t.lanes))
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft] * 3)
        fabs = self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ft, [ft])
        u, tail, e = self._fast_log_parts(b.call(fabs, [x]), t)
        log2e = f(1.4426950408889634)
        L = b.call(fma, [u, log2e, b.fmul(tail, log2e)])
        n = b.call(self.intrinsic(f"llvm.floor.{type_suffix(t)}", ft, [ft]), [b.call(fma, [y, e, b.fmul(y, L)])])
        r = b.call(fma, [y, L, b.call(fma, [y, e, b.fneg(n)])])
        p = b.call(fma, [self._estrin(r, self._FAST_EXP2_P, t), r, f(1.0)])
        fast = self._fast_scale(p, n, t)
        fast = b.select(b.fcmp_ordered("<", n, f(-126.0)), f(0.0), fast)
        fast = b.select(b.fcmp_ordered(">", n, f(127.0)), f(float("inf")), fast)
        not_fast = b.or_(self._not_positive_normal_f32(x, t),
                         b.icmp_unsigned("==", b.and_(b.bitcast(y, it), i(0x7F800000)), i(0x7F800000)))
        return self._branch_if_any(not_fast, fast, lambda: self._pow_cases(x, y, fast, "powf", t, 1.17549435e-38),
                                   "pow.cases")
