"""Whether a second thread or process would find a core idle: compiles split their work only then."""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def spare_core() -> bool:
    """Fewer threads running on the machine now (Linux's ``procs_running``, this one included) than the
    cores this process may use. Where every core is busy (tests in parallel processes, a tuning's workers
    compiling side by side) a second thread only takes turns with the others."""
    n = cores()
    if n < 2:
        return False
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"procs_running "):
                    return int(line.split()[1]) < n
    except OSError:
        pass
    return True
