"""The tables float32 ``pow`` reduces its logarithm with. The short path (``math_calls._Math._pow_f32``):
``size`` equal intervals of the mantissa in [1, 2) (``unit_table``). The two-float path
(``_pow_f32_two_floats``, and fast math's pow): ``size`` intervals of the mantissa m in [off, 2 off), each
with 1/c rounded to float32 and -ln(1/c) in two parts, the first a multiple of 2^-16 (so that k ln2_hi +
it is exact in float32 for every exponent k); the interval around 1 has 1/c = 1 and ln c = 0, so that pow
near x = 1 loses nothing to the table. A target looks a table up in one instruction: 32 entries on
AVX-512 (vpermi2ps), 8 on AVX2 (vpermps)."""

from __future__ import annotations

import functools
import math
import struct
from typing import NamedTuple

import numpy as np

#: ln 2 in two parts, the first a multiple of 2^-16 (k ln2_hi exact for |k| < 256); the second rounded to
#: float32 (the double difference is exact to far more bits than float32 keeps)
LN2_HI = 45426 / 65536
LN2_LO = float(np.float32(math.log(2) - LN2_HI))


class Geometry(NamedTuple):
    """Where a table's intervals lie: ``size`` of them, each ``1 << bits`` float32 bit patterns (a binade
    holds 2^23), the least mantissa's bits ``off``."""
    size: int
    bits: int
    off: int


@functools.cache
def geometry(size: int) -> Geometry:
    """The ``size`` intervals (a power of two) that cover [about sqrt(1/2), about sqrt(2)) with 1.0 at the
    middle of one of them, in bits (the interval holding 1.0 is the one whose |m/c - 1| is least)."""
    bits = 23 - (size.bit_length() - 1)
    # the index of 1.0's interval: 1 - sqrt(1/2) is 0.2929 of the binade below 1, whose bits are 2^-24 apart
    centre = round(0.2929 * (1 << 24) / (1 << bits) - 0.5)
    return Geometry(size, bits, 0x3F800000 - (2 * centre + 1) * (1 << (bits - 1)))


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _near_exact_log2(v: float, spread: int = 256) -> float:
    """The float32 within ``spread`` ulps of ``v`` whose log2 is nearest a float32 (relative to that
    float32's ulp): fast math's pow reads log2(c) from a table in one float32 (``log2_table``), and where
    it nearly cancels log2(1 + z) its rounding would be y times larger in the result. Moving 1/c by 256
    ulps widens |z| by 2^-15 at most."""
    bits = np.float32(v).view(np.int32) + np.arange(-spread, spread + 1, dtype=np.int32)
    cand = bits.view(np.float32)
    exact = np.log2(cand.astype(np.float64))
    rounded = exact.astype(np.float32)
    err = np.abs(exact - rounded.astype(np.float64)) / np.spacing(np.abs(rounded)).astype(np.float64)
    return float(cand[int(np.argmin(err))])


@functools.cache
def log_table(size: int = 32) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """(1/c, hi, lo) per interval, ln(c) = -ln(1/c) = hi + lo to about 2^-41 (mpmath, imported only when a
    pow is compiled)."""
    import mpmath

    g = geometry(size)
    with mpmath.workprec(113):
        inv, hi, lo = [], [], []
        for j in range(size):
            first, end = g.off + (j << g.bits), g.off + ((j + 1) << g.bits)
            if first <= 0x3F800000 < end:
                ic = 1.0
            else:  # 1/c from the interval's ends, so that |m/c - 1| is least at both
                ic = _near_exact_log2(2.0 / (_f32(first) + _f32(end)))
            h, rest = _split16(-mpmath.log(mpmath.mpf(ic)))
            inv.append(ic)
            hi.append(h)
            lo.append(rest)
    return tuple(inv), tuple(hi), tuple(lo)


def _split16(value) -> tuple[float, float]:
    """An mpmath ``value`` as hi + lo: hi the nearest multiple of 2^-16 (a small integer times it stays
    exact in float32), lo the rest rounded to float32."""
    import mpmath

    hi = float(mpmath.nint(value * 65536)) / 65536
    return hi, float(np.float32(float(value - mpmath.mpf(hi))))


@functools.cache
def log2_table(size: int = 32) -> tuple[float, ...]:
    """log2(c) = -log2(1/c) per interval, rounded to float32 (for fast math's pow)."""
    import mpmath

    with mpmath.workprec(113):
        return tuple(float(np.float32(float(-mpmath.log(mpmath.mpf(ic), 2)))) for ic in log_table(size)[0])



@functools.cache
def unit_table(size: int = 32) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """(1/c, s, d) for ``size`` equal intervals of the mantissa m in [1, 2) (its top bits, as AVX-512's
    vgetmant leaves it), c at each interval's middle (|m/c - 1| <= 1 / (2 size)), 1/c rounded to float32;
    log2(c) = s + d, s a multiple of 2^-16 (so that k + s is exact in float32 for every exponent k: pow's y
    (k + s) then splits into two floats exactly), d rounded to float32 (|d| <= 2^-17)."""
    import mpmath

    inv, s, d = [], [], []
    with mpmath.workprec(113):
        for j in range(size):
            ic = float(np.float32(2.0 * size / (2 * size + 2 * j + 1)))
            short, rest = _split16(-mpmath.log(mpmath.mpf(ic), 2))
            inv.append(ic)
            s.append(short)
            d.append(rest)
    return tuple(inv), tuple(s), tuple(d)
