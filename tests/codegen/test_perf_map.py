"""RAGSCHED_PERF_MAP: every loaded function named in perf's map file, at the address it runs at."""

from __future__ import annotations

import os

import numpy as np

import ragsched as rs
from ragsched.runtime import compiler


def test_loaded_functions_are_named_for_perf(monkeypatch, tmp_path):
    target = tmp_path / "perf.map"
    monkeypatch.setenv("RAGSCHED_PERF_MAP", str(target))
    compiler.forget_loaded()  # loaded now, not taken from this process's cache
    x, y = rs.Var("x"), rs.Var("y")
    a = rs.Input("a", rs.float32, 2)
    f = rs.Func("perf_named")
    f[y, x] = a[y, x] * 2.0
    f.parallel(y)
    kern = f.compile()
    np.testing.assert_array_equal(kern(a=np.ones((3, 5), np.float32), out_shape=(3, 5)), 2.0)
    entries = [line.split() for line in target.read_text().splitlines()]
    spans = sorted((int(start, 16), int(size, 16), name) for start, size, name in entries)
    names = {name for *_, name in spans}
    assert {"perf_named", "perf_named.par0.body"} <= names
    assert (kern._code.loaded.address, "perf_named") in {(s, n) for s, _, n in spans}
    for (s0, n0, _), (s1, _, _) in zip(spans, spans[1:], strict=False):
        assert n0 > 0 and s0 + n0 <= s1  # functions do not overlap


def test_the_map_file_perf_reads(monkeypatch):
    from ragsched.codegen.llvm import perf_map

    monkeypatch.delenv("RAGSCHED_PERF_MAP", raising=False)
    assert perf_map.path() is None  # nothing written unless asked
    monkeypatch.setenv("RAGSCHED_PERF_MAP", "1")
    assert perf_map.path() == f"/tmp/perf-{os.getpid()}.map"
