"""Type promotion is NumPy's (NEP 50), whatever order results were asked and cached in."""

from __future__ import annotations

import itertools

import numpy as np

from ragsched.algebra import types as T

WEAK = [True, False, 0, 3, -1, 300, 2.5, 0.0, -1e300]


def test_result_type_is_numpys_for_every_pair_of_types_and_weak_scalars():
    operands = list(T.ALL_TYPES) + WEAK
    for a, b in itertools.product(operands, repeat=2):
        if not isinstance(a, T.DType) and not isinstance(b, T.DType):
            continue
        want = np.result_type(*[o.np if isinstance(o, T.DType) else o for o in (a, b)])
        assert T.result_type(a, b) == T.as_dtype(want), (a, b)


def test_result_type_tells_weak_bools_ints_and_floats_apart():
    """0, False and 0.0 are one dict key; their result types differ (a cache keyed by them would not)."""
    assert T.result_type(T.int8, 0.0) == T.float64
    assert T.result_type(T.int8, 0) == T.int8
    assert T.result_type(T.bool_, 0) == T.int64
    assert T.result_type(T.bool_, False) == T.bool_
    assert T.result_type(T.int8, np.int16(3)) == T.int16  # a NumPy scalar is typed, not weak
