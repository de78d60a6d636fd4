"""Math calls for the emitter (``E.Call``: abs, exp, log, sqrt, ...): LLVM intrinsics where LLVM has
them, libm lane by lane where not, and a vector float32 ``exp`` of our own."""

from __future__ import annotations

import llvmlite.ir as ir

from ...algebra import expr as E
from ...algebra import types as T
from ...algebra.types import DType
from .machine import _I1, _I32, ll_type, type_suffix


class _Math:
    """``_Emitter``'s math functions (a mixin: it uses the emitter's builder and ``intrinsic``)."""

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
