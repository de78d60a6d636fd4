"""Length classes compiled by a forked copy of the process (``runtime/forked.py``): the later classes come
from the disk cache the copy filled, every class computes the reference, a copy that fails leaves the
work to the parent, and no copy is made where it would not be safe (another Python thread, no cache)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ragsched.runtime import forked

ROOT = Path(__file__).resolve().parents[2]

# (in a fresh process: a test worker runs threads of its own, and then nothing is forked)
SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import ragsched as rs
    import ragsched.runtime.forked as F
    import ragsched.runtime.kernel as K
    from ragsched.reference import run
    from tests.schedule.test_by_length import _classes, _inputs, _tokens
    F.spare_core = lambda: True  # (the other test worker may be busy: fork anyway)
    if sys.argv[1] == "failing":
        def fail(kernels):
            raise RuntimeError("the copy fails")
        K._compiled_only = fail
    forks = []
    fork = F.forked
    K.forked = lambda work: forks.append(fork(work)) or forks[-1]
    s = _classes((4.0, 1), (64.0, 8), (16.0, 4))
    kern = rs.Pipeline([_tokens()], by_length=s).compile()
    right = []
    for lengths in ([1, 3, 4, 2], [12, 20, 16], [70, 50, 64]):
        inputs = _inputs(lengths)
        got, want = kern(**inputs), run(_tokens(), **inputs)
        pairs = zip(got.to_list(), want.to_list(), strict=True)
        right.append(all(np.allclose(a, b, rtol=1e-5, atol=1e-5) for a, b in pairs))
    again = rs.Pipeline([_tokens()], by_length=s).compile()  # lowered before: no copy
    assert [k.stats.cache for k in again.kernels] == ["memory"] * 3
    print(json.dumps({"forked": [f is not None for f in forks],
                      "lowering": [k.stats.lowering for k in kern.kernels],
                      "cache": [k.stats.cache for k in kern.kernels], "right": right}))
""")


def _run(tmp_path, mode: str) -> dict:
    env = dict(os.environ, RAGSCHED_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_later_classes_come_from_the_copy(tmp_path):
    """Three classes: the parent lowers and compiles the first two, the copy the third (from the disk cache
    in the parent: neither lowered nor compiled there); each computes the reference. Compiled again, it
    is made by no copy (its lowered kernels are known)."""
    r = _run(tmp_path, "working")
    assert r["forked"] == [True]
    assert r["lowering"] == ["done", "done", "disk"] and r["cache"] == ["miss", "miss", "disk"]
    assert r["right"] == [True, True, True]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_failing_copy_leaves_the_work_to_the_parent(tmp_path):
    r = _run(tmp_path, "failing")
    assert r["forked"] == [True]
    assert r["cache"] == ["miss", "miss", "miss"]  # (the copy lowered the third class: its listing cached)
    assert r["right"] == [True, True, True]


def test_no_copy_beside_another_python_thread(monkeypatch):
    monkeypatch.setattr(forked, "spare_core", lambda: True)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert forked.forked(lambda: None) is None
    finally:
        stop.set()
        t.join()


def test_no_copy_without_the_disk_cache(monkeypatch):
    monkeypatch.setattr(forked, "spare_core", lambda: True)
    monkeypatch.setattr(forked, "one_thread", lambda: True)
    monkeypatch.setenv("RAGSCHED_CACHE_DIR", "")
    assert forked.forked(lambda: None) is None


def test_no_copy_when_turned_off(monkeypatch):
    monkeypatch.setattr(forked, "spare_core", lambda: True)
    monkeypatch.setattr(forked, "one_thread", lambda: True)
    monkeypatch.setenv("RAGSCHED_FORK", "0")
    assert forked.forked(lambda: None) is None


def test_no_copy_without_a_spare_core(monkeypatch):
    monkeypatch.setattr(forked, "spare_core", lambda: False)
    monkeypatch.setattr(forked, "one_thread", lambda: True)
    assert forked.forked(lambda: None) is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_copy_reaped_by_the_system_is_waited_for(monkeypatch):
    """With SIGCHLD ignored the system reaps the copy itself: waiting then finds no child, which is no
    error (the parent compiles whatever the copy did not leave in the cache)."""
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    old = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        copy = forked.forked(lambda: None)
        assert copy is not None
        assert copy.wait() is False  # (Linux: the wait returns once the copy is gone, finding no child)
        assert copy.pid is None
    finally:
        signal.signal(signal.SIGCHLD, old)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_stuck_copy_is_stopped_after_its_time(monkeypatch):
    """A copy that never ends (stuck on a lock, say) is killed once its time is up, and counted as failed:
    the parent then compiles its classes itself."""
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    copy = forked.forked(lambda: time.sleep(60))
    assert copy is not None
    t0 = time.monotonic()
    assert copy.wait(timeout=0.3) is False
    assert time.monotonic() - t0 < 5 and copy.pid is None
    done = forked.forked(lambda: None)
    assert done.wait(timeout=30) is True  # (a copy that ends in time is waited for as before)
