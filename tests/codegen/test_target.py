"""Compiling for a named CPU: ``compile(target="cpu:x86-64-v3")`` and ``RAGSCHED_CPU``; a level this host
cannot run is refused before any code is loaded."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.codegen import target as targets


def _scaled():
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, 1)
    f = rs.Func("f", shape=[a.shape[0]])
    f[x] = a[x] * 2.0 + 1.0
    return f


def test_targets_parse_and_bad_ones_are_refused_by_name():
    assert targets.parse("cpu:x86-64-v3").vector_bits == 256
    assert targets.parse("cpu:x86-64-v4").natural_vector_size(rs.float32) == 16
    assert targets.parse("cpu:x86-64").natural_vector_size(rs.float64) == 2
    assert targets.parse("cpu:host") == targets.host()
    with pytest.raises(ValueError, match="cpu:znver9: unknown CPU.*x86-64-v3"):
        targets.parse("cpu:znver9")
    with pytest.raises(ValueError, match="'gpu' is not supported"):
        targets.parse("gpu")
    with pytest.raises(TypeError, match="target must be a string"):
        targets.parse(3)


def test_the_environment_pins_the_default_target(monkeypatch):
    monkeypatch.setenv(targets.ENV, "x86-64-v3")
    assert rs.natural_vector_size(rs.float32) == 8 and rs.natural_vector_size("float64") == 4
    assert rs.natural_vector_size(rs.float32, target="cpu:host") == targets.host().natural_vector_size(rs.float32)
    monkeypatch.setenv(targets.ENV, "pentium")
    with pytest.raises(ValueError, match="RAGSCHED_CPU='pentium' names no CPU"):
        rs.natural_vector_size(rs.float32)


@pytest.mark.parametrize("level", list(targets.LEVELS))
def test_a_kernel_compiled_for_a_level_this_host_runs_computes_the_same(level):
    if not targets.can_run(targets.level(level)):
        with pytest.raises(ValueError, match=f"target cpu:{level} needs CPU features this host"):
            _scaled().compile(target=f"cpu:{level}")
        return
    f = _scaled()
    lanes = rs.natural_vector_size(rs.float32, target=f"cpu:{level}")
    f.vectorize("x", lanes)
    kern = f.compile(target=f"cpu:{level}")
    assert kern.target == targets.level(level) and f"<{lanes} x float>" in kern.source
    a = np.arange(100, dtype=np.float32)
    np.testing.assert_array_equal(kern(a=a), a * 2 + 1)


def test_a_level_the_host_lacks_is_refused_before_code_is_loaded(monkeypatch):
    monkeypatch.setattr(targets, "host_features", lambda: frozenset({"sse2"}))
    assert targets.missing_features(targets.level("x86-64-v3"))[:2] == ["avx", "avx2"]
    with pytest.raises(ValueError, match="target cpu:x86-64-v3 needs CPU features this host .* lacks: avx, avx2"):
        _scaled().compile(target="cpu:x86-64-v3")
    with pytest.raises(ValueError, match="cpu:x86-64-v4 needs CPU features"):
        rs.autoschedule(_scaled(), target="cpu:x86-64-v4", trials=0)


def test_kernels_for_two_targets_are_cached_apart():
    f = _scaled()
    first = f.compile(target="cpu:x86-64")
    second = f.compile(target="cpu:host")
    again = f.compile(target="cpu:x86-64")
    assert first.stats.cache == "miss" and second.stats.cache == "miss" and again.stats.cache == "memory"
    assert "ymm" not in first.assembly and "zmm" not in first.assembly  # SSE2 only: 128-bit registers
