"""Each bundled pipeline, evaluated by ragsched.reference, matches its own plain NumPy reference()."""

import importlib

import numpy as np
import pytest

from ragsched import RaggedArray
from ragsched.reference import run

from .test_pipelines_compiled import flat_values

# name: (rtol, atol relative to the largest |value|)
PIPELINES = {
    "blur": (1e-6, 1e-7),
    "unsharp": (1e-5, 1e-6),
    "harris": (1e-4, 1e-6),
    "matmul": (1e-4, 1e-5),
    "softmax": (1e-5, 1e-7),
    "local_laplacian": (1e-5, 1e-6),
    "bilateral_grid": (1e-5, 1e-6),
    "conv_layer": (1e-4, 1e-5),
    "attention": (1e-4, 1e-6),
    "trimatmul": (1e-4, 1e-5),
    "batched_gemm": (1e-4, 1e-5),
    "image_batch": (1e-5, 1e-6),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_reference_matches_numpy(name):
    mod = importlib.import_module(f"pipelines.{name}")
    inputs = mod.example_inputs("small")
    assert all(isinstance(v, (np.ndarray, RaggedArray)) for v in inputs.values())
    outputs = mod.build()
    got = run(outputs, **inputs)
    want = mod.reference(**inputs)
    if not isinstance(outputs, (tuple, list)):
        got, want = (got,), (want,)
    rtol, atol = PIPELINES[name]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        g, w = flat_values(g, w)
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * float(np.abs(w).max()))


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_example_inputs(name):
    mod = importlib.import_module(f"pipelines.{name}")
    small = mod.example_inputs("small")
    arrays = {k: v.values if isinstance(v, RaggedArray) else v for k, v in small.items()}
    assert 1000 <= sum(v.size for v in arrays.values()) <= 200_000
    for k, v in small.items():
        shape = v.lengths.ravel() if isinstance(v, RaggedArray) else v.shape  # (a model's head sizes are what they are)
        if k != "lens":
            assert all(s % 2 == 1 for s in shape if s > 3), "small sizes are odd: they divide no tile"
    again = mod.example_inputs("small")
    for k in small:
        a, b = (x.values if isinstance(x, RaggedArray) else x for x in (small[k], again[k]))
        np.testing.assert_array_equal(a, b)  # deterministic
