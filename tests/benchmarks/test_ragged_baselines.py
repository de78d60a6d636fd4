"""The baselines of the ragged benchmark (benchmarks/ragged.py, benchmarks/encoder.py) compute what the
pipelines compute, on lengths with empty and one-token sequences: a baseline that computed something
else would make its timing meaningless. PyTorch's need the bench extra."""

import importlib.util

import numpy as np
import pytest

from benchmarks.ragged import _max_error, workloads
from ragsched.pipeline_file import load
from tests import ROOT

LENS = np.array([5, 1, 0, 9, 3, 2, 7, 4, 6, 1], np.int32)  # more than 8: two sorted chunks
HAVE_TORCH = importlib.util.find_spec("torch") is not None


@pytest.mark.parametrize("part", sorted(workloads()))
def test_every_baseline_matches_the_reference(part):
    work = workloads()[part]
    inputs = work.make_inputs(LENS, np.random.default_rng(1))
    want = load(ROOT / "pipelines" / f"{work.pipeline}.py").reference(inputs).to_list()
    checked = 0
    for name, (fn, flops) in work.variants(LENS).items():
        if name.startswith("PyTorch") and not HAVE_TORCH:
            continue
        got = fn(*work.baseline_args(inputs))
        assert [len(g) for g in got] == LENS.tolist(), name
        assert _max_error(got, want) < 1e-4, name
        assert flops >= work.useful_flops(LENS), name
        checked += 1
    assert checked >= (2 if HAVE_TORCH else 1)  # the linear layer has one baseline without PyTorch
