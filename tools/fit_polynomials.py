"""Print the polynomial coefficients that the LLVM backend's vector math hard-codes, fitted here in
40-digit arithmetic, and the constants it splits into two parts: rerun it to check or change them.

pow's and the float64 functions' polynomials are Chebyshev fits (near-minimax). The float32 functions'
are minimax fits for the relative error of the function's result (a Remez exchange on a dense grid),
with their coefficients rounded to float32 one at a time from the lowest degree, the higher ones
refitted after each rounding (so that they make up for it).

    python tools/fit_polynomials.py
"""

from __future__ import annotations

import struct

import mpmath as mp

mp.mp.dps = 40


def fit(name: str, f, interval, degree: int) -> None:
    coefs, err = mp.chebyfit(f, interval, degree + 1, error=True)
    low_first = [float(c) for c in reversed(coefs)]
    print(f"{name} (degree {degree} on [{mp.nstr(interval[0], 6)}, {mp.nstr(interval[1], 6)}], "
          f"max abs error {mp.nstr(err, 3)}):")
    print("    (" + ", ".join(repr(c) for c in low_first) + ")")


def split(name: str, value, bits: int = 53) -> None:
    """``value`` as hi + lo: hi rounded to ``bits`` significant bits (fewer than 53 leave trailing zeros,
    so that hi times a small integer is exact), lo the double nearest the rest."""
    hi = float(mp.ldexp(mp.nint(mp.ldexp(value, bits - 1 - int(mp.floor(mp.log(abs(value), 2))))),
                        int(mp.floor(mp.log(abs(value), 2))) - bits + 1))
    print(f"{name}: hi {hi!r} ({bits} bits), lo {float(value - hi)!r}")


def _no_cancellation(f):
    """``f`` in 120 digits: the fitted functions subtract their leading terms."""
    def g(v):
        with mp.workdps(120):
            return +f(mp.mpf(v))
    return g


def _rounded(value, bits: int):
    """``value`` rounded to ``bits`` significant bits (to nearest, ties to even)."""
    value = mp.mpf(value)
    if not value:
        return value
    e = int(mp.floor(mp.log(abs(value), 2)))
    return mp.ldexp(mp.nint(mp.ldexp(value, bits - 1 - e)), e - bits + 1)


def _text(value, bits: int) -> str:
    """The shortest decimal that reads back as ``value`` (a float with ``bits`` significant bits): as
    the backend reads it, a Python float, rounded to float32 for a float32 constant."""
    if bits == 53:
        return repr(float(value))
    for digits in range(6, 12):
        text = f"{float(value):.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == float(value):
            return text
    raise AssertionError(value)


def _minimax(ts, gs, ws, terms: int, tol=1e-6):
    """The polynomial with ``terms`` coefficients (lowest degree first) that minimizes max |w (g - p)|
    over the points ``ts`` (values ``gs``, positive weights ``ws``), and that maximum: the Remez
    exchange with one point at a time (the level of the reference rises at each step), from
    Chebyshev-spaced reference points."""
    powers = [[t ** k for k in range(terms)] for t in ts]
    ref = [round(k * (len(ts) - 1) / terms) for k in range(terms + 1)]
    for _ in range(5000):
        a = mp.matrix(terms + 1, terms + 1)
        for row, i in enumerate(ref):  # p(t_i) + (-1)^row E / w_i = g_i
            for k in range(terms):
                a[row, k] = powers[i][k]
            a[row, terms] = (-1) ** row / ws[i]
        sol = mp.lu_solve(a, mp.matrix([gs[i] for i in ref]))
        coefs, level = [sol[k] for k in range(terms)], abs(sol[terms])
        err = [w * (g - mp.fsum(c * v for c, v in zip(coefs, row))) for row, g, w in zip(powers, gs, ws)]
        j = max(range(len(ts)), key=lambda i: abs(err[i]))
        if abs(err[j]) <= level * (1 + tol) or j in ref:
            return coefs, abs(err[j])
        # j replaces the reference point next to it whose error has its sign, or, beyond the ends, shifts in
        pos = sum(1 for i in ref if i < j)
        same = [(err[i] > 0) == (err[j] > 0) for i in ref]
        if pos == 0:
            ref = [j] + ref[1:] if same[0] else [j] + ref[:-1]
        elif pos == len(ref):
            ref = ref[:-1] + [j] if same[-1] else ref[1:] + [j]
        else:
            ref[pos - 1 if same[pos - 1] else pos] = j
    raise AssertionError("the exchange did not converge")


def minimax(name: str, g, weight, interval, degree: int, bits: int = 24) -> None:
    """Print the coefficients (lowest degree first, with ``bits`` significant bits: 24 for float32, 53 for
    float64) of the degree-``degree`` polynomial p that minimizes max |weight(t) (g(t) - p(t))| on
    ``interval``, and that error (the weight makes it the function's relative error). g and the weight
    are evaluated in 120 digits (g subtracts leading terms) on 600 Chebyshev-spaced points, less those
    where the weight vanishes. Coefficient k is rounded after refitting k..degree with 0..k-1 fixed:
    there p = p_fixed + t^k q, so q is fitted to (g - p_fixed) / t^k with the weight |weight t^k|."""
    a, b = (mp.mpf(v) for v in interval)
    ts, gs, ws = [], [], []
    for i in range(600):
        t = (a + b) / 2 - (b - a) / 2 * mp.cos(mp.pi * i / 599)
        with mp.workdps(120):
            w = abs(weight(t)) if abs(t) > mp.mpf(10) ** -30 else mp.mpf(0)
            if w > mp.mpf(10) ** -30:
                ts.append(t)
                gs.append(+g(t))
                ws.append(+w)
    best = _minimax(ts, gs, ws, degree + 1)[1]
    fixed: list = []
    for k in range(degree + 1):
        rest = [(v - mp.fsum(c * t ** i for i, c in enumerate(fixed))) / t ** k for t, v in zip(ts, gs)]
        fixed.append(_rounded(_minimax(ts, rest, [w * abs(t) ** k for t, w in zip(ts, ws)], degree + 1 - k)[0][0],
                              bits))
    err = max(w * abs(v - mp.fsum(c * t ** i for i, c in enumerate(fixed))) for t, v, w in zip(ts, gs, ws))
    print(f"{name} (degree {degree} on [{mp.nstr(a, 6)}, {mp.nstr(b, 6)}], relative error "
          f"2^{float(mp.log(err, 2)):.1f}; 2^{float(mp.log(best, 2)):.1f} before rounding to {bits} bits):")
    print("    (" + ", ".join(_text(c, bits) for c in fixed) + ")")


def split32(name: str, value) -> None:
    """``value`` as hi + lo in float32: hi the nearest float32, lo the float32 nearest the rest."""
    hi = _rounded(value, 24)
    print(f"{name} (float32): hi {_text(hi, 24)}, lo {_text(_rounded(value - hi, 24), 24)}")


def float32_functions() -> None:
    """The float32 functions' polynomials, in float32 unless said (sin and cos evaluate theirs in float64),
    and their constants."""
    sq = mp.sqrt
    # exp: e^x = 2^n e^r, |r| <= ln2/2 (a little wider: n is rounded in float32), e^r = 1 + r + r^2 p(r)
    minimax("float32 exp: p(r) = (e^r - 1 - r) / r^2", lambda r: (mp.exp(r) - 1 - r) / r ** 2,
            lambda r: r ** 2 / mp.exp(r), [-0.347, 0.347], 4)
    # exp2: 2^x = 2^n 2^r, |r| <= 1/2 (x + 1/2 may round up), 2^r = 1 + r p(r)
    minimax("float32 exp2: p(r) = (2^r - 1) / r", lambda r: (2 ** r - 1) / r, lambda r: r / 2 ** r,
            [-0.5001, 0.5001], 5)
    # log and log2: ln(1 + u) = u - u^2/2 + u^3 p(u), u = m - 1, m in [sqrt(1/2), sqrt(2)]
    minimax("float32 log: p(u) = (ln(1 + u) - u + u^2/2) / u^3", lambda u: (mp.log1p(u) - u + u ** 2 / 2) / u ** 3,
            lambda u: u ** 3 / mp.log1p(u), [sq(0.5) - 1 - 1e-6, sq(2) - 1 + 1e-6], 8)
    # tanh below 0.7: tanh(x) = x + x^3 p(x^2); above, 1 - 2 / (e^{2x} + 1). Measured over every float32
    # in [0.25, 3]: split at 0.625 the second formula's error is 1.33 ulp, at 0.67 1.24, at 0.7 1.07 (this
    # fit's 0.90); at 0.75 this fit's is 1.22
    minimax("float32 tanh: p(z) = (tanh(x) - x) / x^3, x^2 = z", lambda z: (mp.tanh(sq(z)) - sq(z)) / sq(z) ** 3,
            lambda z: z * sq(z) / mp.tanh(sq(z)), [0, mp.mpf("0.7") ** 2], 4)
    # sin and cos, in float64, on [-pi/4, pi/4] (a little wider: n is rounded): sin r = r + r^3 p(r^2),
    # cos r = 1 + r^2 q(r^2)
    z_max = (mp.pi / 4) ** 2 * 1.0001
    minimax("float32 sin (in float64): p(z) = (sin(r) - r) / r^3, r^2 = z",
            lambda z: (mp.sin(sq(z)) - sq(z)) / sq(z) ** 3, lambda z: z * sq(z) / mp.sin(sq(z)), [0, z_max], 3, 53)
    minimax("float32 cos (in float64): q(z) = (cos(r) - 1) / r^2, r^2 = z", lambda z: (mp.cos(sq(z)) - 1) / z,
            lambda z: z / mp.cos(sq(z)), [0, z_max], 3, 53)
    # erf below 1: erf(x) = x (2/sqrt(pi) + x^2 p(x^2)), 2/sqrt(pi) in two floats; from 1 to 4:
    # erf(x) = 1 - e^{-x^2} / x q(1/x^2), weighted by e^{-x^2} / (x erf(x)): erf's relative error (the
    # backend clamps |x| to 4: erf rounds to 1 beyond)
    c0 = 2 / sq(mp.pi)
    minimax("float32 erf below 1: p(z) = (erf(x) / x - 2/sqrt(pi)) / x^2, x^2 = z",
            lambda z: (mp.erf(sq(z)) / sq(z) - c0) / z, lambda z: z * sq(z) / mp.erf(sq(z)), [0, 1], 5)
    minimax("float32 erf from 1: q(y) = erfc(x) x e^{x^2}, y = 1/x^2",
            lambda y: mp.erfc(1 / sq(y)) / sq(y) * mp.exp(1 / y), lambda y: mp.exp(-1 / y) * sq(y) / mp.erf(1 / sq(y)),
            [1 / mp.mpf(16), 1], 8)
    # fast math (compile(fast_math=True)): exp2 from n = floor(x), r in [0, 1); exp from n = floor(x / ln 2),
    # r in [0, ln 2); log's polynomial of lower degree
    minimax("fast exp2: p(r) = (2^r - 1) / r on [0, 1]", lambda r: (2 ** r - 1) / r, lambda r: r / 2 ** r,
            [-0.0001, 1.0001], 5)
    minimax("fast exp: p(r) = (e^r - 1 - r) / r^2 on [0, ln 2]", lambda r: (mp.exp(r) - 1 - r) / r ** 2,
            lambda r: r ** 2 / mp.exp(r), [-0.0001, 0.6932], 4)
    minimax("fast log: p(u) = (ln(1 + u) - u + u^2/2) / u^3", lambda u: (mp.log1p(u) - u + u ** 2 / 2) / u ** 3,
            lambda u: u ** 3 / mp.log1p(u), [sq(0.5) - 1 - 1e-6, sq(2) - 1 + 1e-6], 6)
    # pow with AVX2's 8-entry table (pow_tables.geometry(8)): z = m/c - 1 in [-0.0556, 0.0625]; the
    # accurate pow's ln(1 + z) = z - z^2/2 + z^3 c(z), fast math's log2(1 + z) = z p(z)
    z_range = [mp.mpf("-0.0557"), mp.mpf("0.0626")]
    minimax("pow, 8-entry table: c(z) = (ln(1 + z) - z + z^2/2) / z^3",
            lambda z: (mp.log1p(z) - z + z ** 2 / 2) / z ** 3, lambda z: z ** 3 / mp.log1p(z), z_range, 4)
    minimax("fast pow, 8-entry table: p(z) = log2(1 + z) / z", lambda z: mp.log1p(z) / z / mp.log(2),
            lambda z: z * mp.log(2) / mp.log1p(z), z_range, 4)
    # pow's short path: log2(1 + z) = z q(z), z = m/c - 1 for m in [1, 2) cut into 32 or 8 equal intervals
    # with c at their middles (pow_tables.unit_table): |z| <= 1/64 or 1/16
    for size, degree in ((32, 3), (8, 4)):
        minimax(f"pow's short path, {size}-entry table: q(z) = log2(1 + z) / z",
                lambda z: mp.log1p(z) / z / mp.log(2), lambda z: z * mp.log(2) / mp.log1p(z),
                [-mp.mpf(1) / (2 * size), mp.mpf(1) / (2 * size)], degree)
    split32("ln 2", mp.log(2))
    split32("2/sqrt(pi)", c0)
    print(f"log2(e): {float(1 / mp.log(2))!r}, log2(e) - 1: {float(1 / mp.log(2) - 1)!r}, "
          f"sqrt(1/2): {float(sq(0.5))!r}")
    split("pi/2 (times n < 2^28: r = x - n hi exact in one fma)", mp.pi / 2, 33)


def main() -> None:
    s_max = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)  # |(m - 1) / (m + 1)| for m in [sqrt(1/2), sqrt(2)]
    # pow (float32): log2(m) = s g(s^2), s = (m - 1) / (m + 1), g(z) = 2 atanh(sqrt z) / (sqrt(z) ln 2)
    fit("pow: log2 series g(z)", lambda z: 2 * (mp.atanh(mp.sqrt(z)) / mp.sqrt(z) if z else 1) / mp.log(2),
        [0, s_max ** 2], 4)
    fit("pow: 2^r", lambda r: 2 ** r, [-0.5, 0.5], 6)
    # float64 exp, exp2 and pow: e^r = 1 + r + r^2 p(r) on [-ln2/2, ln2/2] (a little wider: n is rounded)
    fit("float64 exp: p(r) = (e^r - 1 - r) / r^2",
        _no_cancellation(lambda r: (mp.exp(r) - 1 - r) / r ** 2 if r else mp.mpf(1) / 2), [-0.347, 0.347], 10)
    # float64 log, log2 and pow: ln(m) = 2 atanh(s) = 2s + 2/3 s^3 + s^5 Q(s^2)
    fit("float64 log: Q(z) = (2 atanh(s) - 2s - 2/3 s^3) / s^5, s^2 = z",
        _no_cancellation(lambda z: (2 * mp.atanh(mp.sqrt(z)) - 2 * mp.sqrt(z) - mp.mpf(2) / 3 * mp.sqrt(z) ** 3)
                         / mp.sqrt(z) ** 5 if z > 1e-30 else mp.mpf(2) / 5), [0, s_max ** 2], 7)
    # float64 sin and cos on [-pi/4, pi/4] (a little wider: n is rounded): sin r = r + r^3 S(r^2),
    # cos r = 1 - r^2/2 + r^4 C(r^2)
    z_max = (mp.pi / 4) ** 2 * 1.0001
    fit("float64 sin: S(z) = (sin(s) - s) / s^3, s^2 = z",
        _no_cancellation(lambda z: (mp.sin(mp.sqrt(z)) - mp.sqrt(z)) / z ** 1.5 if z > 1e-30 else -mp.mpf(1) / 6),
        [0, z_max], 6)
    fit("float64 cos: C(z) = (cos(s) - 1 + z/2) / z^2, s^2 = z",
        _no_cancellation(lambda z: (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z ** 2 if z > 1e-30 else mp.mpf(1) / 24),
        [0, z_max], 5)
    # float64 erf below 1: erf(x) / x = 2/sqrt(pi) + z p(z), z = x^2; from 1 to 6: erfc(x) = t e^{-x^2 + P(u)},
    # t = 2 / (2 + x) in [1/4, 2/3], u = t - 29/64
    c0 = 2 / mp.sqrt(mp.pi)
    fit("float64 erf below 1: p(z) = (erf(x) / x - 2/sqrt(pi)) / z, x^2 = z",
        _no_cancellation(lambda z: (mp.erf(mp.sqrt(z)) / mp.sqrt(z) - c0) / z if z > 1e-40 else -c0 / 3), [0, 1], 11)
    center, half = mp.mpf(29) / 64, mp.mpf(2) / 3 + mp.mpf(1e-6) - mp.mpf(29) / 64
    fit("float64 erf from 1: P(u) = ln(erfc(x) e^{x^2} / t), t = 2 / (2 + x) = u + 29/64",
        _no_cancellation(lambda u: mp.log(mp.erfc(2 / (u + center) - 2) * mp.exp((2 / (u + center) - 2) ** 2)
                                          / (u + center))), [-half, half], 16)
    split("2/sqrt(pi)", c0)
    split("ln 2 (times an exponent)", mp.log(2), 42)
    split("ln 2", mp.log(2))
    split("log2(e)", 1 / mp.log(2))
    split("2/3", mp.mpf(2) / 3)
    split("2/pi", 2 / mp.pi)
    pio2 = mp.pi / 2  # in three doubles
    p1 = float(pio2)
    p2 = float(pio2 - p1)
    print(f"pi/2: {p1!r}, {p2!r}, {float(pio2 - p1 - p2)!r}")
    float32_functions()


if __name__ == "__main__":
    main()
