"""The encoder layer (pipelines/encoder.py) compiled with its hand schedule and with the default schedule,
against its NumPy reference on random length vectors (empty and one-token sequences included): the
hand schedule's whole tiles, entry tails and parallel strips must give the same tokens."""

from functools import cache

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.pipeline_file import load
from tests import ROOT

ENCODER = load(ROOT / "pipelines" / "encoder.py")


@cache
def kernel(schedule):
    return ENCODER.pipeline(schedule).compile(threads=2)


def inputs_for(lengths, seed):
    inputs = ENCODER.inputs("small")
    rng = np.random.default_rng(seed)
    inputs["X"] = rs.RaggedArray.from_list([rng.standard_normal((n, 512)).astype(np.float32) for n in lengths],
                                           ragged_axes=[0])
    inputs["lens"] = np.array(lengths, np.int32)
    return inputs


@settings(max_examples=8, deadline=None)
@given(lengths=st.lists(st.integers(0, 14), min_size=1, max_size=6), seed=st.integers(0, 2**16),
       schedule=st.sampled_from([None, "hand"]))
def test_encoder_matches_the_reference(lengths, seed, schedule):
    inputs = inputs_for(lengths, seed)
    got = kernel(schedule)(**inputs)
    want = ENCODER.reference(inputs)
    assert got.lengths.tolist() == lengths
    np.testing.assert_allclose(got.values, want.values, rtol=1e-4, atol=1e-4)
