"""Names for the machine code ragsched loads, for Linux ``perf``: with ``RAGSCHED_PERF_MAP=1`` every
loaded object's functions (a kernel, its outlined parallel bodies, its helpers) are appended to
``/tmp/perf-<pid>.map``, perf's convention for code made at run time, so that ``perf record`` and
``perf report`` attribute samples to them instead of to unknown addresses. Another value than 1 names the
file to write."""

from __future__ import annotations

import os

from .. import elf


def path() -> str | None:
    """The map file to write, or None when ``RAGSCHED_PERF_MAP`` is unset or empty."""
    value = os.environ.get("RAGSCHED_PERF_MAP", "")
    if not value:
        return None
    return f"/tmp/perf-{os.getpid()}.map" if value == "1" else value


def record(engine, obj: bytes) -> None:
    """Each function of object file ``obj``, loaded by MCJIT ``engine``: "start size name" lines (hex)."""
    target = path()
    if target is None:
        return
    lines = []
    for sym in elf.symbols(obj):
        if sym.kind == elf.STT_FUNC and sym.size and sym.name:
            address = engine.get_function_address(sym.name)
            if address:
                lines.append(f"{address:x} {sym.size:x} {sym.name}\n")
    with open(target, "a") as f:
        f.writelines(lines)
