"""One timing at a time per host: tuning workers that share a machine take turns to time candidates, so
that one's measurement is not the other's noise (two workers timing at once each measured the other's
load: a schedule's recorded best was 3x its time re-measured alone). Compiling is not locked.

The lock is an advisory ``flock`` on a file in the system's temporary directory, which every process of
this host sees and the kernel releases when its holder dies (a killed worker never leaves it held)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

#: the lock file; RAGSCHED_TIMING_LOCK names another (the empty string: no lock)
ENV = "RAGSCHED_TIMING_LOCK"


def lock_path() -> Path | None:
    text = os.environ.get(ENV)
    if text == "":
        return None
    return Path(text) if text else Path(tempfile.gettempdir()) / "ragsched-timing.lock"


@contextlib.contextmanager
def timing_turn():
    """Hold this host's timing lock for the block (waits while another process holds it)."""
    path = lock_path()
    try:
        import fcntl
    except ImportError:  # no flock (Windows): workers on one host are not kept apart
        fcntl = None
    if path is None or fcntl is None:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
