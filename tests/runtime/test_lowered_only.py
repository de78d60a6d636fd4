"""A Kernel lowered only (``load=False``): a call's checks refuse its arguments before LLVM runs, the
machine code is made by ``load()`` or at the first call, and it computes what a Kernel compiled at once
does. The autoscheduler's candidates that their first call would refuse (a tile shifted past the data)
cost their lowering only."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.autosched.measure import measure_one
from ragsched.runtime import compiler
from ragsched.runtime.kernel import compile_pipeline

from .test_errors import blur


@pytest.fixture
def made(monkeypatch):
    """The keys of the kernels whose machine code is made (from LLVM or the disk cache) in the test."""
    compiler.forget_loaded()  # (a kernel in memory would not be made again)
    keys, real = [], compiler._load

    def load(code):
        keys.append(code.key)
        return real(code)

    monkeypatch.setattr(compiler, "_load", load)
    return keys


def test_a_refused_call_makes_no_machine_code(made):
    kern = compile_pipeline(rs.Pipeline([blur()]), load=False)
    img = np.arange(100, dtype=np.float32).reshape(10, 10)
    with pytest.raises(ValueError, match=r"reads img along dimension 0 from index 0 to 11.*extent 10"):
        kern.check(img=img, out_shape=(10, 8))
    with pytest.raises(TypeError, match="missing argument.*img"):
        kern.check()
    with pytest.raises(TypeError, match="argument img has dtype float64"):
        kern.check(img=img.astype(np.float64), out_shape=(8, 8))
    assert kern.check(img=img, out_shape=(8, 8)) is None
    assert made == []
    got = kern(img=img, out_shape=(8, 8))  # made at the first call
    assert len(made) == 1
    np.testing.assert_array_equal(got, blur().compile()(img=img, out_shape=(8, 8)))
    with pytest.raises(ValueError, match=r"reads img along dimension 1"):
        kern(img=img, out_shape=(8, 9))


def test_load_makes_the_code_once(made):
    kern = compile_pipeline(rs.Pipeline([blur()]), load=False)
    kern.load()
    kern.load()
    assert len(made) == 1
    img = np.ones((6, 7), np.float32)
    np.testing.assert_allclose(kern(img=img), 1.0, rtol=1e-6)
    assert len(made) == 1


def test_a_candidate_its_call_refuses_is_not_compiled(made):
    """A tile of 16 rows shifted inwards over an output of 8 rows: refused as invalid, with the call's
    message, and no machine code made."""
    out = blur()
    out.split("y", "y", "y.i", 16, tail="shift")
    text = rs.Pipeline([out]).schedule().to_json()
    img = np.ones((10, 10), np.float32)
    expected = np.ones((8, 8), np.float32)
    result = measure_one(rs.Pipeline([blur()]).program(), {"img": img}, expected, 1, 1, text)
    assert result.status == "invalid" and "computes dimension 0 from index -8 to 7" in result.message
    assert made == []
    ok = measure_one(rs.Pipeline([blur()]).program(), {"img": img}, expected, 1, 1,
                     rs.Pipeline([blur()]).schedule().to_json())
    assert ok.status == "ok" and len(made) == 1
