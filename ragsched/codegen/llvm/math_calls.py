"""Math calls for the emitter (``E.Call``: abs, exp, log, sqrt, ...): LLVM intrinsics where LLVM has
them, libm lane by lane where not, and a vector float32 ``exp`` of our own."""

from __future__ import annotations

from functools import partial

import llvmlite.ir as ir

from ...algebra import expr as E
from ...algebra import types as T
from ...algebra.types import DType
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
            return self._pow_f32(args[0], args[1], t)
        if name in ("sin", "cos") and t.scalar().name == "float32":
            return self._sincos_f32(args[0], t, name)
        if name == "erf" and t.scalar().name == "float32":
            return self._erf_f32(args[0], t)
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

        f = partial(self.splat_const, t)

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
        y = self._scale_by_pow2_f32(y, b.fptosi(n, it), t)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _log_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """float32 log in vector instructions (LLVM would call libm's logf once per lane): Cephes' method,
        x = m 2^e with m in [sqrt(1/2), sqrt(2)), log(m) from a degree-9 polynomial in m - 1, e ln 2 added in
        two parts. The same code for scalars, so a vectorized loop gives the scalar loop's bits."""
        b = self.b
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ll_type(t), [ll_type(t)] * 3)
        m, tail, ef = self._log_parts_f32(x, t)
        y = b.call(fma, [ef, f(-2.12194440e-4), tail])
        y = b.fadd(m, y)
        return self._log_special_cases(x, b.call(fma, [ef, f(0.693359375), y]), t)

    def _log2_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """float32 log2: log's reduction and polynomial, then e + (m + tail) log2(e), with log2(e) - 1
        multiplied separately (Cephes' log2f) so that the large terms are added exactly."""
        b = self.b
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ll_type(t), [ll_type(t)] * 3)
        m, tail, ef = self._log_parts_f32(x, t)
        log2e_minus_1 = f(0.44269504088896340736)
        z = b.call(fma, [m, log2e_minus_1, b.fmul(tail, log2e_minus_1)])
        y = b.fadd(b.fadd(b.fadd(z, tail), m), ef)
        return self._log_special_cases(x, y, t)

    def _log_parts_f32(self, x: ir.Value, t: DType):
        """(m - 1, tail, e) with log(x) = e ln 2 + (m - 1) + tail, x = m 2^e, m in [sqrt(1/2), sqrt(2)):
        subnormal inputs are scaled by 2^25 first; the tail is Cephes' degree-9 polynomial less its
        linear term."""
        b, lanes = self.b, t.lanes
        ft, it = ll_type(t), ll_type(T.int32.with_lanes(lanes))

        f, i = partial(self.splat_const, t), partial(self.splat_const, T.int32.with_lanes(lanes))

        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft, ft, ft])
        tiny = b.fcmp_ordered("<", x, f(1.17549435e-38))  # subnormal (or not positive: fixed at the end)
        xs = b.select(tiny, b.fmul(x, f(33554432.0)), x)
        bits = b.bitcast(xs, it)
        e = b.sub(b.ashr(bits, i(23)), b.select(tiny, i(126 + 25), i(126)))
        m = b.bitcast(b.or_(b.and_(bits, i(0x007FFFFF)), i(0x3F000000)), ft)  # in [0.5, 1)
        small = b.fcmp_ordered("<", m, f(0.707106781186547524))
        e = b.sub(e, b.select(small, i(1), i(0)))
        m = b.fsub(b.select(small, b.fadd(m, m), m), f(1.0))
        z = b.fmul(m, m)
        p = f(7.0376836292e-2)
        for c in (-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                  2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1):
            p = b.call(fma, [p, m, f(c)])
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
        """float32 exp2 in vector instructions: Cephes' exp2f, 2^x = 2^n 2^r with n = round(x), r = x - n
        exact, a degree-6 polynomial for 2^r on [-1/2, 1/2]; 2^n applied in two halves as in exp."""
        b, lanes = self.b, t.lanes
        ft = ll_type(t)
        f = partial(self.splat_const, t)
        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft, ft, ft])
        xc = b.select(b.fcmp_ordered("<", x, f(-152.0)), f(-152.0), x)  # NaN stays: fixed at the end
        xc = b.select(b.fcmp_ordered(">", xc, f(129.0)), f(129.0), xc)
        xc = b.select(b.fcmp_unordered("uno", x, x), f(0.0), xc)
        n = b.call(self.intrinsic(f"llvm.floor.{type_suffix(t)}", ft, [ft]), [b.fadd(xc, f(0.5))])
        r = b.fsub(xc, n)
        p = f(1.535336188319500e-4)
        for c in (1.339887440266574e-3, 9.618437357674640e-3, 5.550332471162809e-2, 2.402264791363012e-1,
                  6.931472028550421e-1):
            p = b.call(fma, [p, r, f(c)])
        y = b.call(fma, [p, r, f(1.0)])
        y = self._scale_by_pow2_f32(y, b.fptosi(n, ll_type(T.int32.with_lanes(lanes))), t)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _scale_by_pow2_f32(self, y: ir.Value, k: ir.Value, t: DType) -> ir.Value:
        """y 2^k for k in [-152, 130], in two halves, so that results that are subnormal or overflow come
        out right (one power of two that large or small is not a normal float)."""
        b = self.b
        i = partial(self.splat_const, T.int32.with_lanes(t.lanes))
        half = b.ashr(k, i(1))

        def pow2(e: ir.Value) -> ir.Value:  # 2^e for e in [-76, 65]: a normal float
            return b.bitcast(b.shl(b.add(e, i(127)), i(23)), ll_type(t))

        return b.fmul(b.fmul(y, pow2(half)), pow2(b.sub(k, half)))

    def _tanh_f32(self, x: ir.Value, t: DType) -> ir.Value:
        """float32 tanh in vector instructions: Cephes' odd polynomial for |x| < 0.625, elsewhere
        sign(x) (1 - 2 / (e^{2|x|} + 1)) with the vector exp (an overflowing exp gives 1)."""
        b = self.b
        ft = ll_type(t)

        f = partial(self.splat_const, t)

        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft, ft, ft])
        fabs = self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ft, [ft])
        copysign = self.intrinsic(f"llvm.copysign.{type_suffix(t)}", ft, [ft, ft])
        ax = b.call(fabs, [x])
        z = b.fmul(x, x)
        p = f(-5.70498872745e-3)
        for c in (2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1):
            p = b.call(fma, [p, z, f(c)])
        small = b.call(fma, [b.fmul(p, z), x, x])
        e = self._exp_f32(b.fadd(ax, ax), t)
        large = b.call(copysign, [b.fsub(f(1.0), b.fdiv(f(2.0), b.fadd(e, f(1.0)))), x])
        y = b.select(b.fcmp_ordered("<", ax, f(0.625)), small, large)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def _pow_f32(self, x: ir.Value, y: ir.Value, t: DType) -> ir.Value:
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

        def estrin(v, coefs):  # sum coefs[k] v^k in pairs: a chain of log2(degree) steps, not degree
            terms, power = [d(c) for c in coefs], v
            while len(terms) > 1:
                terms = [b.call(dfma, [terms[k + 1], power, terms[k]]) if k + 1 < len(terms) else terms[k]
                         for k in range(0, len(terms), 2)]
                power = b.fmul(power, power) if len(terms) > 1 else power
            return terms[0]

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
        g = estrin(b.fmul(s, s), (2.885390081789987, 0.9617966734515485, 0.5770835660048659,
                                  0.41167376623771057, 0.3407120415619086))
        log2x = b.call(dfma, [s, g, b.sitofp(e, dt)])
        # 2^t = 2^n 2^r, t clamped where float32 overflows or underflows anyway, r = t - n exact
        tt = b.fmul(b.fpext(y, dt), log2x)
        tt = b.select(b.fcmp_ordered(">", tt, d(200.0)), d(200.0), tt)
        tt = b.select(b.fcmp_ordered("<", tt, d(-200.0)), d(-200.0), tt)
        # n = round(t) by adding 1.5 2^52, which leaves n in the low bits; n << 52 is 2^n's exponent field
        shifted = b.fadd(tt, d(6755399441055744.0))
        n = b.fsub(shifted, d(6755399441055744.0))
        q = estrin(b.fsub(tt, n), (1.0, 0.6931472067028326, 0.24022650922288757, 0.05550327226670302,
                                   0.009618056678524637, 0.0013400428177615838, 0.0001546144469856913))
        scale = b.shl(b.bitcast(shifted, lt), self.splat_const(T.int64.with_lanes(lanes), 52))
        fast = b.fptrunc(b.bitcast(b.add(b.bitcast(q, lt), scale), dt), ft)
        # the lanes this does not take, from the bits: x not positive and normal, or y not finite
        xbits, ybits = b.bitcast(x, it), b.bitcast(y, it)
        not_fast = b.or_(b.icmp_unsigned(">=", b.sub(xbits, i32(0x00800000)), i32(0x7F000000)),
                         b.icmp_unsigned("==", b.and_(ybits, i32(0x7F800000)), i32(0x7F800000)))

        def c99_cases():
            """Zero and negative x as C99 (and NumPy) has them; y == 0 and x == 1 give 1 already."""
            ay = b.call(fabs, [y])
            odd_x = b.or_(b.fcmp_unordered("<", ax, f(1.17549435e-38)), b.fcmp_ordered("==", ax, f(float("inf"))))
            odd_x = b.and_(odd_x, b.fcmp_unordered("!=", ax, f(0.0)))  # NaN, infinite or subnormal x
            odd = b.or_(odd_x, b.fcmp_unordered("==", ay, f(float("inf"))))  # or NaN or infinite y
            magnitude = b.select(b.fcmp_ordered("==", ax, f(0.0)),
                                 b.select(b.fcmp_ordered("<", y, f(0.0)), f(float("inf")), f(0.0)), fast)
            y_int = b.fcmp_ordered("==", b.call(self.intrinsic(f"llvm.floor.{sfx}", ft, [ft]), [y]), y)
            big = b.fcmp_ordered(">=", ay, f(16777216.0))  # every float32 this large is even
            odd_y = b.and_(b.and_(y_int, b.not_(big)), b.icmp_unsigned(
                "!=", b.and_(b.fptosi(b.select(big, f(0.0), y), it), i32(1)), i32(0)))
            signed = b.select(odd_y, b.call(self.intrinsic(f"llvm.copysign.{sfx}", ft, [ft, ft]),
                                            [magnitude, x]), magnitude)
            out = b.select(b.and_(b.fcmp_ordered("<", x, f(0.0)), b.not_(y_int)), f(float("nan")), signed)
            out = b.select(b.fcmp_ordered("==", y, f(0.0)), f(1.0), out)
            return self._branch_if_any(odd, out, lambda: self._libm_lanes(odd, out, [x, y], "powf", t),
                                       "pow.libm")

        return self._branch_if_any(not_fast, fast, c99_cases, "pow.cases")

    def _sincos_f32(self, x: ir.Value, t: DType, which: str) -> ir.Value:
        """float32 sin or cos in vector instructions, as FreeBSD's sinf/cosf: x reduced by pi/2 in float64
        (pi/2 in two parts: exact for |x| < 2^28 pi/2), then sin's or cos's float64 polynomial on the rest
        as the quadrant asks. Lanes beyond 4e8 (and infinities) take the C library's sinf or cosf, in a
        branch that runs only when some lane needs it."""
        b, lanes = self.b, t.lanes
        ft = ll_type(t)
        dt = ll_type(T.float64.with_lanes(lanes))
        it = ll_type(T.int32.with_lanes(lanes))

        f, d = partial(self.splat_const, t), partial(self.splat_const, T.float64.with_lanes(lanes))
        i = partial(self.splat_const, T.int32.with_lanes(lanes))

        sfx, dsfx = type_suffix(t), type_suffix(T.float64.with_lanes(lanes))
        dfma = self.intrinsic(f"llvm.fma.{dsfx}", dt, [dt, dt, dt])
        ax = b.call(self.intrinsic(f"llvm.fabs.{sfx}", ft, [ft]), [x])
        big = b.fcmp_unordered(">=", ax, f(4.0e8))  # or NaN: the C library too (it keeps the NaN)
        xd = b.fpext(b.select(big, f(0.0), x), dt)
        n = b.call(self.intrinsic(f"llvm.rint.{dsfx}", dt, [dt]), [b.fmul(xd, d(6.36619772367581382433e-01))])
        r = b.call(dfma, [n, d(-1.57079631090164184570e+00), xd])
        r = b.call(dfma, [n, d(-1.58932547735281966916e-08), r])
        z = b.fmul(r, r)
        w = b.fmul(z, z)
        zr = b.fmul(z, r)
        sin_r = b.fadd(b.fadd(r, b.fmul(zr, b.call(dfma, [z, d(0.0083333293858894631756),
                                                          d(-0.166666666416265235595)]))),
                       b.fmul(b.fmul(zr, w), b.call(dfma, [z, d(0.0000027183114939898219064),
                                                           d(-0.000198393348360966317347)])))
        cos_r = b.fadd(b.fadd(b.call(dfma, [z, d(-0.499999997251031003120), d(1.0)]),
                              b.fmul(w, d(0.0416666233237390631894))),
                       b.fmul(b.fmul(w, z), b.call(dfma, [z, d(0.0000243904487962774090654),
                                                          d(-0.00138867637746099294692)])))
        q = b.and_(b.fptosi(n, it), i(3))
        if which == "cos":
            q = b.and_(b.add(q, i(1)), i(3))  # cos(x) = sin(x + pi/2)
        odd = b.icmp_unsigned("!=", b.and_(q, i(1)), i(0))
        negative = b.icmp_unsigned("!=", b.and_(q, i(2)), i(0))
        v = b.select(odd, cos_r, sin_r)
        fast = b.fptrunc(b.select(negative, b.fneg(v), v), ft)
        # the lanes the reduction cannot take: the C library, only when some lane is one of them
        return self._lanes_from_libm(big, fast, [x], f"{which}f", t, which)

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
        b.cbranch(any_set, slow_block, done)
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
        """float32 erf in vector instructions, Cephes' erff: an odd polynomial for |x| < 1, else
        1 - e^{-x^2} P(1/x^2) / |x| with one of two rational fits (|x| below or above 2), the sign of x."""
        b = self.b
        ft = ll_type(t)

        f = partial(self.splat_const, t)

        fma = self.intrinsic(f"llvm.fma.{type_suffix(t)}", ft, [ft, ft, ft])

        def poly(v, coefs):
            acc = f(coefs[0])
            for k in coefs[1:]:
                acc = b.call(fma, [acc, v, f(k)])
            return acc

        ax = b.call(self.intrinsic(f"llvm.fabs.{type_suffix(t)}", ft, [ft]), [x])
        z = b.fmul(x, x)
        near = b.fmul(x, poly(z, (7.853861353153693e-5, -8.010193625184903e-4, 5.188327685732524e-3,
                                  -2.685381193529856e-2, 1.128358514861418e-1, -3.761262582423300e-1,
                                  1.128379165726710e0)))
        axc = b.select(b.fcmp_ordered("<", ax, f(1.0)), f(1.0), ax)  # the far formula on |x| >= 1 only
        q = b.fdiv(f(1.0), axc)
        y = b.fmul(q, q)
        p_mid = poly(y, (2.326819970068386e-2, -1.387039388740657e-1, 3.687424674597105e-1, -5.824733027278666e-1,
                         6.210004621745983e-1, -4.944515323274145e-1, 3.404879937665872e-1, -2.741127028184656e-1,
                         5.638259427386472e-1))
        p_far = poly(y, (-1.047766399936249e1, 1.297719955372516e1, -7.495518717768503e0, 2.921019019210786e0,
                         -1.015265279202700e0, 4.218463358204948e-1, -2.820767439740514e-1, 5.641895067754075e-1))
        p = b.select(b.fcmp_ordered("<", axc, f(2.0)), p_mid, p_far)
        erfc = b.fmul(b.fmul(self._exp_f32(b.fneg(b.fmul(axc, axc)), t), q), p)
        far = b.call(self.intrinsic(f"llvm.copysign.{type_suffix(t)}", ft, [ft, ft]), [b.fsub(f(1.0), erfc), x])
        out = b.select(b.fcmp_ordered("<", ax, f(1.0)), near, far)
        return b.select(b.fcmp_unordered("uno", x, x), x, out)
