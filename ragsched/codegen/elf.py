"""The few parts of an ELF64 (little-endian) file that ragsched reads: section headers by name, and the
symbol table (a cubin's kernels and their attributes; a CPU object's functions and sizes)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")
STT_FUNC = 2
STB_LOCAL = 0


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: int  # STT_FUNC, ...
    section: int  # its section's index (0: undefined, defined elsewhere)
    value: int
    size: int
    binding: int = 0  # STB_LOCAL (0), STB_GLOBAL (1), STB_WEAK (2)


def _string(b: bytes, at: int) -> str:
    return b[at:b.index(b"\0", at)].decode()


def sections(b: bytes) -> list[Section]:
    """The section headers of ELF file ``b``, in order."""
    if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    raw = [_SECTION.unpack_from(b, shoff + k * shentsize) for k in range(shnum)]
    names = raw[shstrndx][4]
    return [Section(_string(b, names + h[0]), h[1], h[4], h[5], h[6], h[7]) for h in raw]


def symbols(b: bytes, table: list[Section] | None = None) -> list[Symbol]:
    """The entries of ``b``'s ``.symtab``, in order (a symbol's index is its position)."""
    table = table if table is not None else sections(b)
    symtab = next(s for s in table if s.name == ".symtab")
    strings = table[symtab.link].offset
    out = []
    for k in range(symtab.size // _SYMBOL.size):
        name, info, _, shndx, value, size = _SYMBOL.unpack_from(b, symtab.offset + k * _SYMBOL.size)
        out.append(Symbol(_string(b, strings + name), info & 0xF, shndx, value, size, info >> 4))
    return out
