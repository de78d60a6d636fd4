"""Random expressions (hypothesis), compiled with the default schedule and checked against the NumPy
reference: every operator, every type, promotion, casts, boundary conditions and stencil offsets."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched import reference
from ragsched.runtime.interop import to_device, to_host

H, W = rs.Size("H"), rs.Size("W")
y, x = rs.Var("y"), rs.Var("x")
A = rs.Input("A", rs.float32, [H, W])
D = rs.Input("D", rs.float64, [H, W])
I = rs.Input("I", rs.int32, [H, W])
U = rs.Input("U", rs.uint8, [H, W])
S = rs.Input("S", rs.int16, [H, W])
P = rs.Param("p", rs.float32)
Q = rs.Param("q", rs.int32)

BOUNDED = {
    "clamp": rs.clamp_edge, "const": lambda i: rs.constant_exterior(i, 3), "repeat": rs.repeat_image,
    "mirror": rs.mirror_image,
}


def _read(src, bc, dy, dx):
    view = BOUNDED[bc](src)
    return view[y + dy, x + dx]


offsets = st.integers(-3, 3)


@st.composite
def int_exprs(draw, depth=3):
    """Integer-valued expressions (exact on both sides: no float-to-int casts of rounded values)."""
    try:
        return _int_expr(draw, depth)
    except ValueError:  # a Python int out of range for a small unsigned type: NumPy refuses it too
        reject()


def _int_expr(draw, depth):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(["I", "U", "S", "x", "y", "q", "const", "castA"]))
        if leaf in ("I", "U", "S"):
            src = {"I": I, "U": U, "S": S}[leaf]
            return _read(src, draw(st.sampled_from(list(BOUNDED))), draw(offsets), draw(offsets))
        if leaf == "x":
            return x
        if leaf == "y":
            return y
        if leaf == "q":
            return Q
        if leaf == "castA":
            t = draw(st.sampled_from([rs.int32, rs.int8, rs.uint16, rs.int64]))
            return rs.cast(t, A[y, x] * 40)
        return draw(st.integers(-9, 9))
    op = draw(st.sampled_from(["+", "-", "*", "//", "%", "min", "max", "select", "&", "|", "^", "neg",
                               "cast", "abs", ">>"]))
    a = draw(int_exprs(depth - 1))
    if op == "neg":
        return -rs.lang.wrap(a)
    if op == "abs":
        return rs.abs(a)
    if op == "cast":
        return rs.cast(draw(st.sampled_from([rs.int8, rs.int16, rs.int32, rs.int64, rs.uint8, rs.uint32])), a)
    b = draw(int_exprs(depth - 1))
    if isinstance(a, int) and isinstance(b, int):
        a = rs.cast(rs.int32, a)
    if op == "select":
        c = draw(int_exprs(depth - 1))
        return rs.select(rs.lang.wrap(a) < c, a, b)
    if op == ">>":
        return rs.lang.wrap(a) >> draw(st.integers(0, 40))
    return {
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b, "%": lambda: a % b,
        "min": lambda: rs.min(a, b), "max": lambda: rs.max(a, b), "&": lambda: a & b, "|": lambda: a | b,
        "^": lambda: a ^ b,
    }[op]()


@st.composite
def float_exprs(draw, depth=3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        leaf = draw(st.sampled_from(["A", "D", "p", "const", "int"]))
        if leaf == "A":
            return _read(A, draw(st.sampled_from(list(BOUNDED))), draw(offsets), draw(offsets))
        if leaf == "D":
            return _read(D, draw(st.sampled_from(list(BOUNDED))), draw(offsets), draw(offsets))
        if leaf == "p":
            return P
        if leaf == "int":
            return rs.cast(draw(st.sampled_from([rs.float32, rs.float64])), draw(int_exprs(1)))
        return draw(st.sampled_from([0.5, -1.25, 3.0, 0.1]))
    op = draw(st.sampled_from(["+", "-", "*", "/", "min", "max", "select", "exp", "sqrt", "tanh", "abs",
                               "floor", "round", "sin", "erf", "log", "cast", "pow", "%", "//", "exp2", "log2"]))
    a = draw(float_exprs(depth - 1))
    if op in ("exp", "exp2", "tanh", "sin", "erf", "floor", "round"):
        fn = getattr(rs, op)
        return fn(rs.min(a, 20.0)) if op in ("exp", "exp2") else fn(a)
    if op in ("sqrt", "log", "log2"):
        return getattr(rs, op)(rs.abs(a) + 0.5)
    if op == "abs":
        return rs.abs(a)
    if op == "cast":
        return rs.cast(draw(st.sampled_from([rs.float32, rs.float64])), a)
    b = draw(float_exprs(depth - 1))
    if isinstance(a, float) and isinstance(b, float):
        a = rs.cast(rs.float32, a)
    if op == "pow":
        return rs.pow(rs.abs(a) + 0.5, rs.min(rs.max(b, -3.0), 3.0))
    if op == "select":
        return rs.select(rs.lang.wrap(a) < b, a, b)
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / (rs.abs(b) + 0.5),
            "min": lambda: rs.min(a, b), "max": lambda: rs.max(a, b), "%": lambda: a % (rs.abs(b) + 0.5),
            "//": lambda: a // (rs.abs(b) + 0.5)}[op]()


def _inputs(seed: int, h: int, w: int):
    rng = np.random.default_rng(seed)
    return dict(
        A=rng.standard_normal((h, w)).astype(np.float32),
        D=rng.standard_normal((h, w)),
        I=rng.integers(-50, 50, (h, w)).astype(np.int32),
        U=rng.integers(0, 256, (h, w)).astype(np.uint8),
        S=rng.integers(-3000, 3000, (h, w)).astype(np.int16),
        p=np.float32(0.75), q=int(rng.integers(-5, 6)),
    )


def _check(e, seed, h, w, on_device=False, **compile_options):
    """``e`` compiled (with ``compile_options``: a target) and run against the reference; returns the Kernel.
    ``on_device``: the kernel is a GPU's, taking its dense arrays on the device (``runtime.interop``)."""
    f = rs.Func("f", shape=[H, W])
    f[y, x] = e
    pipe = rs.Pipeline([f])
    inputs = _inputs(seed, h, w)
    used = {i.name for i in pipe.program().inputs} | {p.name for p in pipe.program().params}
    inputs = {k: v for k, v in inputs.items() if k in used}
    kern = f.compile(**compile_options)
    if on_device:
        got = to_host(kern(out_shape=(h, w), **to_device(inputs)))
    else:
        got = kern(out_shape=(h, w), **inputs)
    want = reference.evaluate(pipe.program(), inputs, {"f": (h, w)})[0]
    assert got.dtype == want.dtype
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-5 if got.dtype == np.float64 else 2e-4, atol=1e-5,
                                   equal_nan=True, err_msg=str(e))
    else:
        np.testing.assert_array_equal(got, want, err_msg=str(e))
    return kern


# RAGSCHED_EXAMPLES=400 for a longer hunt than CI's
SETTINGS = settings(max_examples=int(os.environ.get("RAGSCHED_EXAMPLES", "40")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(int_exprs(), st.integers(0, 2**16), st.integers(1, 9), st.integers(1, 13))
def test_random_integer_expressions(e, seed, h, w):
    _check(rs.cast(rs.int64, 0) + e if isinstance(e, int) else e, seed, h, w)


@SETTINGS
@given(float_exprs(), st.integers(0, 2**16), st.integers(1, 9), st.integers(1, 13))
def test_random_float_expressions(e, seed, h, w):
    _check(rs.cast(rs.float32, e) if isinstance(e, float) else e, seed, h, w)
