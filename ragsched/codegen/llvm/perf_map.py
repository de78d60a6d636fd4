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


def record(addresses: dict[str, int], obj: bytes) -> None:
    """Each function of object file ``obj``, loaded where ``addresses`` (its exported symbols' addresses)
    say: "start size name" lines (hex). A local function is placed by an exported symbol of its section
    (a section is loaded whole)."""
    target = path()
    if target is None:
        return
    lines = []
    for sym in (symbols := elf.symbols(obj)):
        if sym.kind == elf.STT_FUNC and sym.size and sym.name:
            address = addresses.get(sym.name) or _by_section(addresses, symbols, sym)
            if address:
                lines.append(f"{address:x} {sym.size:x} {sym.name}\n")
    with open(target, "a") as f:
        f.writelines(lines)


def _by_section(addresses: dict[str, int], symbols: list[elf.Symbol], sym: elf.Symbol) -> int | None:
    known = next((s for s in symbols if s.section == sym.section and addresses.get(s.name)), None)
    return None if known is None else addresses[known.name] + sym.value - known.value
