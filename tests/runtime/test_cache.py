"""The disk cache of compiled code: a second process loads instead of compiling; a damaged entry is
rebuilt, never fatal."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

import ragsched as rs
from ragsched.runtime import cache

SCRIPT = textwrap.dedent("""
    import numpy as np, ragsched as rs
    N = rs.Size("N"); x = rs.Var("x")
    a = rs.Input("a", rs.float32, [N])
    f = rs.Func("cached_f", shape=[N]); f[x] = a[x] * 2 + 1
    k = f.compile()
    assert np.array_equal(k(a=np.arange(5, dtype=np.float32)), np.arange(5) * 2 + 1)
    print(k.stats.cache, k.stats.lowering)
""")


def _run(tmp_path) -> str:
    env = dict(os.environ, RAGSCHED_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    return out.stdout.split()[0]


def test_second_process_loads_from_disk(tmp_path):
    """Without lowering again either: the lowered kernel is cached too."""
    env = dict(os.environ, RAGSCHED_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(2)]
    assert runs == [["miss", "done"], ["disk", "disk"]]
    for lowered in tmp_path.rglob("*.lowered"):  # a damaged lowered kernel: lowered again, never fatal
        lowered.write_bytes(lowered.read_bytes()[:100] + b"garbage")
    assert _run(tmp_path) == "disk"


def test_corrupt_entry_is_rebuilt(tmp_path):
    assert _run(tmp_path) == "miss"
    entries = list(tmp_path.rglob("*.o"))
    assert len(entries) == 1
    data = entries[0].read_bytes()
    entries[0].write_bytes(data[: len(data) // 2] + b"garbage")  # truncated and damaged
    assert _run(tmp_path) == "miss"
    assert _run(tmp_path) == "disk"
    entries[0].write_bytes(b"")  # empty
    assert _run(tmp_path) == "miss"


def test_unwritable_cache_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("RAGSCHED_CACHE_DIR", str(blocker / "sub"))
    cache.store("ab" * 32, b"payload")  # must not raise
    assert cache.load("ab" * 32) is None


def test_payload_roundtrip(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSCHED_CACHE_DIR", str(tmp_path))
    key = cache.key_of("x", "y")
    payload = np.arange(100, dtype=np.uint8).tobytes()
    cache.store(key, payload)
    assert cache.load(key) == payload


def test_evicted_code_is_unloaded_safely(monkeypatch):
    """Past the in-memory limit, code no kernel uses is unloaded (scratch memory freed); kernels still
    held keep working, and compiling continues (each engine owns its own target machine)."""
    import gc

    import ragsched as rs
    from ragsched.runtime import compiler as K

    monkeypatch.setattr(K, "_MEMORY_CACHE", 3)
    n = rs.Size("N")
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [n])
    kept = []
    for i in range(10):
        g = rs.Func("g")
        g[x] = a[x] * float(i)
        f = rs.Func("f", shape=[n])
        f[x] = g[x] + g[x] + 1  # g is an intermediate buffer: a scratch allocation
        k = f.compile()
        np.testing.assert_array_equal(k(a=np.ones(5, np.float32)), 2 * i + 1)
        if i % 2 == 0:
            kept.append((i, k))
        if i % 4 == 3:  # (a full collection takes a second in a test worker's heap: not every kernel)
            gc.collect()
    gc.collect()
    assert len(K._loaded) <= 3
    for i, k in kept:
        np.testing.assert_array_equal(k(a=np.ones(7, np.float32)), 2 * i + 1)


def test_the_source_of_a_cached_kernel_is_emitted_however_deep_its_loop_nest():
    """A kernel found in the cache is emitted only when its source is asked for; that emission recurses
    over the loop nest as compiling does, so it must not depend on the caller's recursion limit (a cached
    local_laplacian raised RecursionError from ``kernel.source``)."""
    import inspect
    import sys

    x = rs.Var("x")
    a = rs.Input("a", rs.float32, [rs.Size("n")])
    f = rs.Func("chain0")
    f[x] = a[x]
    for k in range(1, 40):
        g = rs.Func(f"chain{k}")
        g[x] = f[x] + 1
        f = g
    f.compile()
    cached = f.compile()
    assert cached.stats.cache == "memory"
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 60)  # far less than the nest of 40 Funcs' lets needs
    try:
        text = cached.source
    finally:
        sys.setrecursionlimit(old)
    assert "define" in text


LAZY_SCRIPT = textwrap.dedent("""
    import numpy as np, ragsched as rs
    N = rs.Size("N"); x = rs.Var("x")
    a = rs.Input("a", rs.float32, [N])
    g = rs.Func("lazy_g"); g[x] = a[x] * 3
    f = rs.Func("lazy_f", shape=[N]); f[x] = g[x] + 1
    g.compute_root()
    k = f.compile()
    assert np.array_equal(k(a=np.arange(5, dtype=np.float32)), np.arange(5) * 3 + 1)
    before = "body" in k.kernel.__dict__
    assert "for" in k.loop_nest() and str(k.kernel.body) == k.lowered
    print(k.stats.lowering, before, "body" in k.kernel.__dict__)
""")


def test_a_cached_kernel_unpickles_its_loop_nest_only_when_asked(tmp_path):
    """A compile served by the disk cache needs the kernel's arguments, not its body (most of its nodes):
    the body stays pickled until something reads it, then is the body that was stored."""
    env = dict(os.environ, RAGSCHED_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", LAZY_SCRIPT], env=env, capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(2)]
    assert runs == [["done", "True", "True"], ["disk", "False", "True"]]


PICKLE_SCRIPT = textwrap.dedent("""
    import pickle, sys
    from ragsched.algebra import expr as E
    from ragsched.algebra import types as T
    e = E.Add(E.Mul(E.Var("x"), E.Const(2.5, T.float32.with_lanes(1))), E.Var("y", T.float32))
    sys.stdout.buffer.write(pickle.dumps(e))
""")


def test_an_expression_unpickled_from_another_process_equals_the_same_built_here():
    """Nodes cache their hash, and a string's or a type's hash differs between processes: a node restored
    with the writer's hash compared unequal to the same node built here, and missed in every dict."""
    import pickle

    from ragsched.algebra import expr as E
    from ragsched.algebra import types as T

    env = dict(os.environ, PYTHONHASHSEED="random")
    data = subprocess.run([sys.executable, "-c", PICKLE_SCRIPT], env=env, capture_output=True, check=True).stdout
    here = E.Add(E.Mul(E.Var("x"), E.Const(2.5, T.float32)), E.Var("y", T.float32))
    there = pickle.loads(data)
    assert there == here and hash(there) == hash(here)
    assert {here: 1}.get(there) == 1 and {here.a.a: 1}.get(there.a.a) == 1
