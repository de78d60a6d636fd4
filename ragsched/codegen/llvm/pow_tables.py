"""The table float32 ``pow`` reduces its logarithm with (``math_calls._Math._pow_f32``): 32 intervals of
the mantissa m in [OFF, 2 OFF), each with 1/c rounded to float32 and -ln(1/c) in two parts, the first a
multiple of 2^-16 (so that k ln2_hi + it is exact in float32 for every exponent k). The interval around
1 has 1/c = 1 and ln c = 0, so that pow near x = 1 loses nothing to the table."""

from __future__ import annotations

import functools
import math
import struct

import numpy as np

#: bits of the least mantissa: the interval holding 1.0 is centred on it in bits (1.0 = OFF + 18.5 2^18)
OFF = 0x3F360000
BITS = 18  # each interval spans 2^18 float32 bit patterns: 32 intervals in a binade's 2^23
SIZE = 32
#: ln 2 in two parts, the first a multiple of 2^-16 (k ln2_hi exact for |k| < 256); the second rounded to
#: float32 (the double difference is exact to far more bits than float32 keeps)
LN2_HI = 45426 / 65536
LN2_LO = float(np.float32(math.log(2) - LN2_HI))


def _f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@functools.cache
def log_table() -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """(1/c, hi, lo) per interval, ln(c) = -ln(1/c) = hi + lo to about 2^-41 (mpmath, imported only when a
    pow is compiled)."""
    import mpmath

    with mpmath.workprec(113):
        inv, hi, lo = [], [], []
        for j in range(SIZE):
            first, end = OFF + (j << BITS), OFF + ((j + 1) << BITS)
            if first <= 0x3F800000 < end:
                ic = 1.0
            else:  # 1/c from the interval's ends, so that |m/c - 1| is least at both
                ic = float(np.float32(2.0 / (_f32(first) + _f32(end))))
            lnc = -mpmath.log(mpmath.mpf(ic))
            h = float(mpmath.nint(lnc * 65536)) / 65536
            inv.append(ic)
            hi.append(h)
            lo.append(float(np.float32(float(lnc - mpmath.mpf(h)))))
    return tuple(inv), tuple(hi), tuple(lo)


@functools.cache
def log2_table() -> tuple[float, ...]:
    """log2(c) = -log2(1/c) per interval, rounded to float32 (for fast math's pow)."""
    import mpmath

    with mpmath.workprec(113):
        return tuple(float(np.float32(float(-mpmath.log(mpmath.mpf(ic), 2)))) for ic in log_table()[0])
