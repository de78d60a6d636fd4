"""Ragged attention (pipelines/attention.py) under its hand schedules (rows of scores padded to whole
vector tiles, and not; scores as dot products along k; vectors along the heads), the autoscheduler's
committed schedule and the rules', against the NumPy reference on random lengths that cross the tile
width (empty entries and lengths just past a multiple of 16 included): padded tiles read keys the copy of
K leaves unwritten, and none of that may reach a valid output."""

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from benchmarks.ragged import UNPADDED_ATTENTION, hand_attention
from ragsched.pipeline_file import load, tuned_schedule
from tests import ROOT

ATTENTION = load(ROOT / "pipelines" / "attention.py")
UNPADDED = {name.removeprefix("ragsched "): options for name, options in UNPADDED_ATTENTION.items()}
SCHEDULES = ("hand", *UNPADDED, "hand dot 2 rows", "committed", "rules")


@cache
def kernel(which: str):
    if which in UNPADDED:
        return hand_attention(ATTENTION, **UNPADDED[which]).compile(threads=2)
    if which == "hand dot 2 rows":
        return hand_attention(ATTENTION, scores="dot", dot_rows=2).compile(threads=2)
    if which == "committed":
        return ATTENTION.pipeline(tuned_schedule(ROOT / "schedules", "attention")).compile(threads=2)
    if which == "rules":
        return rs.Pipeline(list(ATTENTION.outputs(rs.autoschedule(ATTENTION.pipeline(), trials=0)))).compile(threads=2)
    return ATTENTION.pipeline(which).compile(threads=2)


@settings(max_examples=16, deadline=None)
@given(lengths=st.lists(st.sampled_from([0, 1, 5, 15, 16, 17, 31, 33, 40]) | st.integers(0, 40), min_size=1,
                        max_size=5),
       seed=st.integers(0, 2**16), which=st.sampled_from(SCHEDULES))
def test_attention_schedules_match_the_reference(lengths, seed, which):
    rng = np.random.default_rng(seed)

    def tokens():
        return rs.RaggedArray.from_list([rng.standard_normal((n, 8, 64)).astype(np.float32) for n in lengths],
                                        ragged_axes=[0])

    inputs = {"Q": tokens(), "K": tokens(), "V": tokens(), "lens": np.array(lengths, np.int32)}
    got = kernel(which)(**inputs)
    want = ATTENTION.reference(inputs)
    assert got.lengths.tolist() == lengths
    np.testing.assert_allclose(got.values, want.values, rtol=1e-4, atol=1e-5)


def test_an_unknown_score_schedule_is_refused():
    with pytest.raises(ValueError, match="scores='dots'; it takes 'tiles' or 'dot'"):
        hand_attention(ATTENTION, scores="dots")


def test_an_unknown_lane_choice_is_refused():
    with pytest.raises(ValueError, match="lanes='cols'; it takes 'rows' or 'heads'"):
        hand_attention(ATTENTION, lanes="cols")
