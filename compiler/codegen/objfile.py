"""Reading the symbol table of the emitted object file (ELF64, little-endian).

The compiler checks every object it emits: it must not reference any symbol it does not
define itself (no libm, no compiler runtime, nothing from the host), because such a symbol
would be resolved from whatever the host process happens to provide.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SHT_SYMTAB = 2
STB_GLOBAL = 1
STT_FUNC = 2


@dataclass(frozen=True)
class Symbol:
    name: str
    binding: int
    section: int  # 0: undefined
    kind: int = 0  # STT_FUNC for a function

    @property
    def defined(self) -> bool:
        return self.section != 0


def elf_symbols(data: bytes) -> list[Symbol]:
    """Every symbol of an ELF64 little-endian object (the null symbol excluded)."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not an ELF64 little-endian object")
    (section_offset,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * entry_size) for i in range(count)]
    symbols = []
    for _name, kind, _flags, _address, offset, size, link, _info, _align, entry in sections:
        if kind != SHT_SYMTAB:
            continue
        strings = sections[link][4]
        for position in range(offset + entry, offset + size, entry):
            name_offset, info, _other, section = struct.unpack_from("<IBBH", data, position)
            start = strings + name_offset
            symbols.append(Symbol(data[start : data.index(b"\0", start)].decode(), info >> 4, section, info & 0xF))
    return symbols


def undefined_symbols(data: bytes) -> list[str]:
    """Names the object references but does not define (must be empty), sorted."""
    return sorted({s.name for s in elf_symbols(data) if not s.defined and s.name})
