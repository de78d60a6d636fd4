"""Python's cycle collector is off while a kernel compiles and as it was before afterwards, also when the
compile fails, when the caller had turned it off, and when compiles nest."""

from __future__ import annotations

import gc

import pytest

import ragsched as rs
from ragsched.runtime import compiler


def _func(name: str, fail: bool = False):
    N = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [N])
    f = rs.Func(name, shape=[N])
    f[x] = a[x] * 3.0
    if fail:
        f.unroll("x")  # refused by lowering: the loop's extent is not a constant
    return f


@pytest.fixture
def collector_seen(monkeypatch):
    """gc.isenabled() as each lowering saw it."""
    seen = []
    real = compiler.lower

    def lower(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler, "lower", lower)
    return seen


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_off_during_a_compile_and_as_it_was_after(collector_seen, enabled, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSCHED_CACHE_DIR", str(tmp_path))
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        _func(f"paused_{enabled}").compile()
        assert collector_seen == [False]
        assert gc.isenabled() == enabled
        with pytest.raises(ValueError, match="cannot unroll"):
            _func(f"paused_fails_{enabled}", fail=True).compile()
        assert collector_seen == [False, False]
        assert gc.isenabled() == enabled
    finally:
        gc.enable() if was else gc.disable()


def test_nested_compiles_turn_it_back_on_once_the_outer_one_ends():
    assert gc.isenabled()
    with compiler._collector_paused():
        with compiler._collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
