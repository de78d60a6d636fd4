"""Length classes compiled in a forked process. A pipeline with length classes has one kernel per class,
and lowering one is Python, which keeps to one core whatever the machine has: the encoder's two classes
took 1 s of lowering and 1 s of LLVM each, one after the other. With a core idle, a copy of this process
(``os.fork``: nothing imported or built again) lowers and compiles the later classes into the disk cache
while this one does the first; this one then finds their lowered kernels and objects there.

A fork is made only where it is safe and pays: on Linux, with the disk cache on, a core idle, and this
process running one Python thread (a thread holding a lock at the fork would leave the copy waiting on it for
ever). Native threads that libraries keep idle in their pools (OpenBLAS's, OpenMP's once a parallel
kernel ran) are copied as nothing: the copy runs no BLAS nor any kernel.
The copy compiles only; whatever it fails at, this process does again, and raises what it raises.
``RAGSCHED_FORK=0`` turns it off."""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings
from collections.abc import Callable

from ..codegen.cores import spare_core
from . import cache


class Forked:
    """A copy of this process running ``work()`` then exiting; ``wait()`` once it is done (or ``stop()``
    it)."""

    def __init__(self, pid: int):
        self.pid = pid

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the copy finished its work (exit status 0). After ``timeout`` seconds it is stopped and
        counted as failed (a copy stuck for ever would otherwise hold this process with it)."""
        if self.pid is None:
            return False
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.0005
        try:
            while True:
                done, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
                if done:
                    break
                if time.monotonic() > deadline:
                    self.stop()
                    return False
                time.sleep(pause)
                pause = min(2 * pause, 0.01)
        except ChildProcessError:  # reaped already (SIGCHLD ignored): done, its status unknown
            self.pid = None
            return False
        except BaseException:
            self.stop()
            raise
        self.pid = None
        return os.waitstatus_to_exitcode(status) == 0

    def stop(self) -> None:
        """End the copy now (this process failed or was interrupted): its work is not wanted."""
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        self.pid = None


def one_thread() -> bool:
    """Whether this process runs no Python thread but this one (libraries' own threads, idle in their
    pools, are no matter: the copy runs no BLAS and no parallel kernel)."""
    return threading.active_count() == 1


def can_fork() -> bool:
    """Whether a copy may be made now (``RAGSCHED_FORK=0`` says never: a process that must not fork)."""
    return os.environ.get("RAGSCHED_FORK", "1") != "0" and hasattr(os, "fork") and \
        cache.cache_dir() is not None and one_thread() and spare_core()


def forked(work: Callable[[], None]) -> Forked | None:
    """``work()`` started in a copy of this process, or None where ``can_fork`` says no (the caller does
    the work itself)."""
    if not can_fork():
        return None
    with warnings.catch_warnings():
        # Python 3.12+ warns of a fork in a process with several OS threads: here those are libraries'
        # idle pools (the module's docstring), never a Python thread
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=r".*fork\(\) may lead to deadlocks")
        pid = os.fork()
    if pid == 0:  # the copy: never returns into the caller's code, nor runs its exit handlers
        status = 1
        try:
            work()
            status = 0
        except BaseException:  # noqa: BLE001 (the parent compiles again and reports it)
            pass
        finally:
            os._exit(status)
    return Forked(pid)
