"""RaggedArray: packing, views and conversions round-trip for random lengths (0 and 1 included),
entry templates and storage padding; zero-copy where the layout matches; bad input is refused naming
the argument."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsched.ragged.array import RAGGED, RaggedArray

TEMPLATES = [(RAGGED,), (RAGGED, 3), (2, RAGGED, RAGGED), (RAGGED, 2, RAGGED), (4, RAGGED)]


def _entries(rng, template, lengths):
    return [rng.standard_normal(tuple(n if d is RAGGED else d for d in template)).astype(np.float32)
            for n in lengths]


@settings(max_examples=60, deadline=None)
@given(template=st.sampled_from(TEMPLATES), lengths=st.lists(st.integers(0, 6), min_size=1, max_size=6),
       pad=st.sampled_from([1, 2, 4]), seed=st.integers(0, 2**16))
def test_from_list_to_list_and_padded_round_trip(template, lengths, pad, seed):
    rng = np.random.default_rng(seed)
    arrays = _entries(rng, template, lengths)
    axes = [k for k, d in enumerate(template) if d is RAGGED]
    ra = RaggedArray.from_list(arrays, ragged_axes=axes, pad=pad)
    assert ra.batch == len(lengths) and ra.lengths.tolist() == lengths and ra.pad == pad
    # offsets: each entry's storage with the ragged dims rounded up to the padding multiple
    sizes = [int(np.prod([-(-n // pad) * pad if d is RAGGED else d for d in template])) for n in lengths]
    assert ra.offsets.tolist() == np.concatenate([[0], np.cumsum(sizes)]).tolist()
    got = ra.to_list()
    for b, (g, a) in enumerate(zip(got, arrays)):
        np.testing.assert_array_equal(g, a)
        assert g.size == 0 or np.shares_memory(g, ra.values), b  # a view, not a copy
    padded = ra.to_padded(fill=-7)
    longest = max(lengths)
    assert padded.shape == (len(lengths), *[longest if d is RAGGED else d for d in template])
    for b, n in enumerate(lengths):
        valid = tuple(slice(0, n) if d is RAGGED else slice(None) for d in template)
        np.testing.assert_array_equal(padded[b][valid], arrays[b])
        mask = np.ones(padded.shape[1:], bool)
        mask[valid] = False
        assert (padded[b][mask] == -7).all()
    again = RaggedArray.from_padded(padded, lengths, axis=tuple(k + 1 for k in axes), pad=pad)
    np.testing.assert_array_equal(again.values, ra.values)  # padding elements are zero in both
    for g, a in zip(again.to_list(), arrays):
        np.testing.assert_array_equal(g, a)
    assert ra.with_pad(pad) is ra
    repacked = ra.with_pad(3)
    assert repacked.pad == 3
    assert repacked.offsets.tolist() == RaggedArray.from_list(arrays, axes, pad=3).offsets.tolist()
    for g, a in zip(repacked.to_list(), arrays):
        np.testing.assert_array_equal(g, a)


def test_ragged_axes_are_inferred_and_shared():
    a = [np.zeros((2, 3, 3)), np.zeros((2, 5, 5))]
    ra = RaggedArray.from_list(a)
    assert ra.template == (2, RAGGED, RAGGED) and ra.lengths.tolist() == [3, 5]
    assert ra.entry_shape(1) == (2, 5, 5) and ra.padded_shape() == (2, 2, 5, 5)
    assert "entry=(2, L, L)" in repr(ra)


def test_from_padded_is_zero_copy_when_nothing_is_cut():
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    ra = RaggedArray.from_padded(x, [3, 3])
    assert np.shares_memory(ra.values, x)
    cut = RaggedArray.from_padded(x, [3, 1])
    assert not np.shares_memory(cut.values, x)
    np.testing.assert_array_equal(cut[1], x[1, :1])
    np.testing.assert_array_equal(cut[-1], x[1, :1])


@pytest.mark.parametrize("call, error, message", [
    (lambda: RaggedArray.from_padded(np.zeros((2, 3)), [1, -1]), ValueError, r"lengths\[1\] is -1"),
    (lambda: RaggedArray.from_padded(np.zeros((2, 3)), [1, 4]), ValueError,
     r"lengths\[1\] is 4 but the array has only 3"),
    (lambda: RaggedArray.from_padded(np.zeros((2, 3)), [1, 2, 3]), ValueError,
     "lengths has 3 entries but the array's batch"),
    (lambda: RaggedArray.from_padded(np.zeros((2, 3)), [1, 2], axis=0), ValueError, "axis 0 is the batch"),
    (lambda: RaggedArray.from_padded(np.zeros((2, 3, 3)), [[1, 2], [3, 1]], axis=1), ValueError,
     "lengths has 2 column"),
    (lambda: RaggedArray.from_padded(np.zeros((2, 3, 3)), [[1, 2], [3, 4]], axis=(1, 2)), ValueError,
     r"lengths\[1, 1\] is 4 but the array has only 3 in axis 2"),
    (lambda: RaggedArray.from_list([np.zeros((2, 3)), np.zeros((3, 4))], ragged_axes=[0]), ValueError,
     r"arrays\[1\] has 4 in dimension 1, arrays\[0\] has 3: only the ragged dimensions may differ"),
    (lambda: RaggedArray.from_list([np.zeros(2), np.zeros((2, 2))]), ValueError, r"arrays\[1\] has 2 dimension"),
    (lambda: RaggedArray(np.zeros(5), [2, 2], (None,)), ValueError, "values has 5 elements but lengths"),
    (lambda: RaggedArray(np.zeros(4), [2, 2], (None,), offsets=[0, 1, 4]), ValueError, "offsets disagree"),
    (lambda: RaggedArray(np.zeros(4), [2, 2], (3,)), ValueError, "no ragged dimension"),
    (lambda: RaggedArray(np.zeros(4), [[2, 2]], (None,)), ValueError, "lengths has 2 column"),
    (lambda: RaggedArray(np.zeros(4), [[[2]], [[2]]], (None,)), ValueError, "lengths must be one-dimensional"),
    (lambda: RaggedArray(np.zeros(4), [2, 2], (None,), pad=0), ValueError, "pad must be a positive int"),
    (lambda: RaggedArray(np.zeros(4), [2, 2], (None,))["x"], TypeError, "batch index"),
    (lambda: RaggedArray(np.zeros(4), [2, 2], (None,))[2], IndexError, "out of range"),
])
def test_bad_input_is_refused_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def _per_row_double():
    import ragsched as rs

    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    X = rs.Input("X", rs.float32, [B, rs.Ragged("L", lens), 4])
    b, i, n = rs.vars("b i n")
    Y = rs.Func("Y", shape=[B, rs.Ragged("L", lens), 4])
    Y[b, i, n] = X[b, i, n] * 2.0
    return Y


def test_lengths_and_offsets_cannot_be_edited_in_place():
    ra = RaggedArray.from_list([np.ones((m, 4), np.float32) for m in (3, 1, 2)], ragged_axes=[0])
    with pytest.raises(ValueError, match="read-only"):
        ra.offsets[2] = 10**8
    with pytest.raises(ValueError, match="read-only"):
        ra.lengths[0] = 9
    with pytest.raises(AttributeError):
        ra.offsets = np.zeros(4, np.int64)
    ra.values[:] = 5  # the values are data: writable
    assert ra[0][0, 0] == 5


@pytest.mark.parametrize("bad, message", [
    (lambda ra: ra._offsets.__setitem__(2, 10**8), r"argument X: offsets\[2\] is 100000000, expected 16"),
    (lambda ra: ra._offsets.__setitem__(0, 1), r"argument X: offsets\[0\] is 1, expected 0.*the first must be 0"),
    (lambda ra: ra._offsets.__setitem__(3, 20), r"argument X: offsets\[3\] is 20, expected 24"),
    (lambda ra: setattr(ra, "_values", ra._values[:-4]), r"argument X: values must be a 1-D buffer of 24 elements"),
])
def test_a_kernel_checks_offsets_against_lengths_and_values_before_it_runs(bad, message):
    """Offsets forced out of step with the lengths or the values (past the read-only flag) are refused
    with the argument's name before generated code reads the buffer: before, 10**8 crashed the process."""
    kern = _per_row_double().compile()
    lengths = np.array([3, 1, 2], np.int32)
    ra = RaggedArray.from_list([np.ones((m, 4), np.float32) for m in lengths], ragged_axes=[0])
    assert kern(X=ra, lens=lengths).to_list()[0][0, 0] == 2
    ra._offsets.flags.writeable = True
    bad(ra)
    with pytest.raises(ValueError, match=message):
        kern(X=ra, lens=lengths)
    out = RaggedArray.from_list([np.ones((m, 4), np.float32) for m in lengths], ragged_axes=[0])
    out._offsets.flags.writeable = True
    out._offsets[3] = 10**8
    with pytest.raises(ValueError, match=r"out= for Y: offsets\[3\]"):
        kern(X=RaggedArray.from_list([np.ones((m, 4), np.float32) for m in lengths], ragged_axes=[0]),
             lens=lengths, out=out)
