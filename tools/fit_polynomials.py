"""Print the polynomial coefficients that the LLVM backend's vector math hard-codes, fitted here by
Chebyshev approximation (near-minimax) in 40-digit arithmetic: rerun it to check or change them.

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


def main() -> None:
    s_max = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)  # |(m - 1) / (m + 1)| for m in [sqrt(1/2), sqrt(2)]
    # pow's log2: log2(m) = s g(s^2), s = (m - 1) / (m + 1), g(z) = 2 atanh(sqrt z) / (sqrt(z) ln 2)
    fit("pow: log2 series g(z)", lambda z: 2 * (mp.atanh(mp.sqrt(z)) / mp.sqrt(z) if z else 1) / mp.log(2),
        [0, s_max ** 2], 4)
    fit("pow: 2^r", lambda r: 2 ** r, [-0.5, 0.5], 6)


if __name__ == "__main__":
    main()
