"""Print the polynomial coefficients that the LLVM backend's vector math hard-codes, fitted here by
Chebyshev approximation (near-minimax) in 40-digit arithmetic, and the constants it splits into two
doubles: rerun it to check or change them.

    python tools/fit_polynomials.py
"""

from __future__ import annotations

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
    split("ln 2 (times an exponent)", mp.log(2), 42)
    split("ln 2", mp.log(2))
    split("log2(e)", 1 / mp.log(2))
    split("2/3", mp.mpf(2) / 3)
    split("2/pi", 2 / mp.pi)
    pio2 = mp.pi / 2  # in three doubles
    p1 = float(pio2)
    p2 = float(pio2 - p1)
    print(f"pi/2: {p1!r}, {p2!r}, {float(pio2 - p1 - p2)!r}")


if __name__ == "__main__":
    main()
