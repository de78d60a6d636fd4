"""Each kernel's resources read from the cubin (an ELF file) itself: registers, shared memory and stack
frame. ptxas's verbose log says the same, but NVRTC does not always hand it back (on one GPU machine's
NVRTC the log came back empty), while the cubin always holds them: registers and frame sizes as
attributes of the ``.nv.info`` section (each naming its kernel's symbol), static shared memory as the size
of ``.nv.shared.<kernel>``, less the 1 KiB block that sm_90 code reserves for the system in every block
that uses shared memory (such a cubin has a ``.nv.shared.reserved`` section)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .. import elf

_REGCOUNT, _FRAME_SIZE = 0x2F, 0x11  # .nv.info attributes (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE)
_SVAL = 0x04  # attribute format: a 16-bit size, then that many bytes
_RESERVED_SHARED = 1024


@dataclass(frozen=True)
class KernelResources:
    """What ptxas reports for one kernel."""

    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    stack_bytes: int


@dataclass(frozen=True)
class CubinFigures:
    registers: int
    shared_bytes: int
    stack_bytes: int


def _attributes(b: bytes, section: elf.Section):
    """(attribute, payload) records of one ``.nv.info`` section."""
    at, end = section.offset, section.offset + section.size
    while at < end:
        fmt, attr = b[at], b[at + 1]
        if fmt == _SVAL:
            size, = struct.unpack_from("<H", b, at + 2)
            yield attr, b[at + 4:at + 4 + size]
            at += 4 + size
        else:  # no value (1), or a value in the next two bytes (2, 3)
            at += 2 if fmt == 1 else 4


def figures(cubin: bytes) -> dict[str, CubinFigures]:
    """Registers, static shared memory and stack frame bytes per kernel of ``cubin``."""
    try:
        table = elf.sections(cubin)
    except ValueError as err:
        raise ValueError(f"cubin: {err}") from None
    sections = {s.name: s for s in table}
    names = [s.name for s in elf.symbols(cubin, table)]
    per: dict[str, dict[int, int]] = {}
    for attr, payload in _attributes(cubin, sections[".nv.info"]) if ".nv.info" in sections else ():
        if attr in (_REGCOUNT, _FRAME_SIZE) and len(payload) == 8:
            sym, value = struct.unpack("<II", payload)
            per.setdefault(names[sym], {})[attr] = value
    reserved = _RESERVED_SHARED if any(n.startswith(".nv.shared.reserved") for n in sections) else 0
    out = {}
    for name in (n[len(".text."):] for n in sections if n.startswith(".text.")):
        shared = sections.get(f".nv.shared.{name}")
        attrs = per.get(name, {})
        out[name] = CubinFigures(attrs.get(_REGCOUNT, 0), max(0, shared.size - reserved) if shared else 0,
                                 attrs.get(_FRAME_SIZE, 0))
    return out
