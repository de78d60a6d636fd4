"""The LLVM code generator's settings per module: loop strength reduction runs unless a function of the
optimized module computes more addresses than ``LSR_MAX_ADDRESSES``, and code made without it computes
the same results."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched import reference
from ragsched.codegen.llvm import load as L
from ragsched.runtime import compiler


def _stencil():
    """A 5x5 weighted stencil of a clamped input, vectorized: some 25 addresses a point."""
    H, W = rs.Size("H"), rs.Size("W")
    img = rs.Input("img", rs.float32, [H, W])
    y, x = rs.Var("y"), rs.Var("x")
    f = rs.Func("f", shape=[H, W])
    f[y, x] = sum((10 + 3 * dy + dx) * img[rs.clamp(y + dy, 0, H - 1), rs.clamp(x + dx, 0, W - 1)]
                  for dy in range(-2, 3) for dx in range(-2, 3))
    f.vectorize(x, 8)
    return f


def test_strength_reduction_runs_below_the_address_limit_and_not_above(monkeypatch):
    """Seen in the machine code: without strength reduction the loop's addresses differ."""
    source = _stencil().compile().source
    with_lsr = L.assembly(source)
    monkeypatch.setattr(L, "LSR_MAX_ADDRESSES", 0)
    without = L.assembly(source)
    assert without != with_lsr
    monkeypatch.undo()  # and the option is back on for the next module
    assert L.assembly(source) == with_lsr


@pytest.mark.parametrize("limit", [0, None])
def test_code_without_strength_reduction_computes_the_same(monkeypatch, tmp_path, limit):
    if limit is not None:
        monkeypatch.setattr(L, "LSR_MAX_ADDRESSES", limit)
    monkeypatch.setenv("RAGSCHED_CACHE_DIR", str(tmp_path))  # compiled here, not taken from a cache
    compiler.forget_loaded()
    img = np.random.default_rng(3).random((19, 45), dtype=np.float32)
    f = _stencil()
    got = f.compile()(img=img)
    np.testing.assert_allclose(got, reference.run(f, img=img), rtol=1e-5)
    compiler.forget_loaded()


def test_loops_of_one_iteration_are_not_emitted_as_loops():
    # g computed at f's innermost loop: its loops over y and x run once each; neither is a loop in the
    # LLVM IR (LLVM's loop passes visit every loop), and the result is the same
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    g = rs.Func("once_g")
    g[y, x] = img[y, x] * 2.0
    f = rs.Func("once_f", shape=[H, W])
    f[y, x] = g[y, x] + 1.0
    g.compute_at(f, x)
    k = f.compile(threads=1)
    assert "for once_g.s0.x in [once_f.s0.x, once_f.s0.x + 1)" in k.lowered  # as lowering leaves it
    assert "once_g.s0.x.head" not in k.llvm_ir and "once_f.s0.x.head" in k.llvm_ir
    a = np.arange(40, dtype=np.float32).reshape(5, 8)
    np.testing.assert_array_equal(k(img=a), a * 2 + 1)
