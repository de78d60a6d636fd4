"""Whether every lane, or some lane, of a bool vector is true, as one scalar condition where the vector's
shape allows it. A comparison of a signed 32/64-bit ramp (which does not wrap: no overflow, Halide's
rule) with a broadcast holds on a prefix or a suffix of the lanes, so the comparison of one end lane
decides it: a vector tail's guard then costs what a scalar loop bound does, and a pass can hoist it out
of a loop like any scalar guard (``codegen/passes/unswitch.py``)."""

from __future__ import annotations

from . import expr as E


def lanes_test(e: E.Expr, which: str) -> E.Expr | None:
    """A scalar condition equal to "``which`` ("every" or "some") lane of ``e`` is true", or None where
    ``e`` is not comparisons of ramps with broadcasts (joined by ``&`` for every, ``|`` for some)."""
    if isinstance(e, (E.And, E.Or)) and (which == "every") == isinstance(e, E.And):
        a, b = lanes_test(e.a, which), lanes_test(e.b, which)
        return None if a is None or b is None else type(e)(a, b)
    if isinstance(e, (E.LT, E.LE)):
        ramp_left = isinstance(e.a, E.Ramp)
        ramp, other = (e.a, e.b) if ramp_left else (e.b, e.a)
        if (isinstance(ramp, E.Ramp) and isinstance(other, E.Broadcast) and isinstance(ramp.stride, E.Const)
                and ramp.stride.value != 0 and ramp.dtype.is_signed and ramp.dtype.bits >= 32):
            rising = (not ramp_left) == (ramp.stride.value > 0)  # false lanes first, then true ones
            k = 0 if (which == "every") == rising else ramp.lanes - 1
            lane = E.Add(ramp.base, E.Const(k * ramp.stride.value, ramp.base.dtype))
            return type(e)(lane, other.value) if ramp_left else type(e)(other.value, lane)
    return None
