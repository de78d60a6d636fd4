"""The dispatcher of repeated calls (``runtime/native_call.py``): machine code that checks a call's
arrays against the latest checked plan and runs the kernel. It must never give a wrong answer: any array
that differs from the plan (shape, strides, dtype, alignment, type, a subclass) takes the checked path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.runtime import native_call


def _kernel():
    H, W = rs.Size("H"), rs.Size("W")
    a, b = rs.Input("a", rs.float32, [H, W]), rs.Input("b", rs.float32, [H, W])
    y, x = rs.vars("y x")
    f = rs.Func("f", shape=[H, W])
    f[y, x] = a[y, x] * 2.0 + b[y, x]
    return rs.Pipeline([f]).compile()


K = _kernel()


class Sub(np.ndarray):
    pass


def _variant(kind: str, a: np.ndarray) -> np.ndarray:
    """``a``'s values as another kind of array the dispatcher must not take for the plan's."""
    if kind == "transposed":
        return np.ascontiguousarray(a.T).T
    if kind == "strided":
        big = np.zeros((a.shape[0], 2 * a.shape[1]), np.float32)
        big[:, ::2] = a
        return big[:, ::2]
    if kind == "unaligned":
        raw = np.zeros(a.size * 4 + 1, np.uint8)[1:].view(np.float32)  # an address one byte off
        raw[:] = a.ravel()
        return raw.reshape(a.shape)
    if kind == "subclass":
        return a.view(Sub)
    if kind == "readonly":
        c = a.copy()
        c.flags.writeable = False
        return c
    return a.copy()


def test_the_layout_check_passes_here_and_the_dispatcher_is_used():
    assert native_call.layout_checked()
    a, b = np.ones((3, 5), np.float32), np.arange(15, dtype=np.float32).reshape(3, 5)
    np.testing.assert_array_equal(K(a=a, b=b), 2 + b)
    assert K._native is not None
    for _ in range(3):
        np.testing.assert_array_equal(K(a=a, b=b), 2 + b)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 9),
                          st.sampled_from(["plain", "transposed", "strided", "unaligned", "subclass", "readonly"]),
                          st.sampled_from(["plain", "transposed", "strided"]),
                          st.sampled_from([None, "plain", "transposed", "strided", "unaligned", "readonly", "is_b",
                                           "b_reversed"])),
                min_size=1, max_size=8),
       st.randoms(use_true_random=False))
def test_every_call_gives_the_reference_whatever_came_before(calls, rng):
    for h, w, kind_a, kind_b, kind_out in calls:
        a = np.array([[rng.random() for _ in range(w)] for _ in range(h)], np.float32)
        b = np.array([[rng.random() for _ in range(w)] for _ in range(h)], np.float32)
        args = {"a": _variant(kind_a, a), "b": _variant(kind_b, b)}
        if kind_out is None:
            got = K(**args)
        elif kind_out in ("is_b", "b_reversed"):  # an output over an input: refused, whatever came before
            with pytest.raises(ValueError, match="overlaps the input b"):
                K(**args, out=args["b"] if kind_out == "is_b" else args["b"][::-1])
            continue
        elif kind_out == "readonly":
            with pytest.raises(ValueError, match="read-only"):
                K(**args, out=_variant("readonly", np.zeros((h, w), np.float32)))
            continue
        else:
            out = _variant(kind_out, np.full((h, w), np.nan, np.float32))
            got = K(**args, out=out)
            assert got is out
        assert type(got) is np.ndarray and got.shape == (h, w)
        np.testing.assert_allclose(got, a * 2 + b, rtol=1e-6)


def test_a_miss_after_the_plan_is_still_checked():
    a = np.ones((2, 3), np.float32)
    K(a=a, b=a)
    try:
        K(a=np.ones((2, 4), np.float32), b=a)
    except ValueError as err:
        assert "disagrees" in str(err)
    else:
        raise AssertionError("shapes that disagree were not refused")
    try:
        K(a=np.ones((2, 3)), b=a)
    except TypeError as err:
        assert "dtype" in str(err)
    else:
        raise AssertionError("a float64 argument was not refused")
