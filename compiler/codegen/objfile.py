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


# A program's machine code in several objects (compiler/codegen/partition.py) is one byte
# string: this header, the number of objects, then each object after its length, in the
# parts' order. binary_hash covers those bytes, so it is defined over the ordered objects;
# a program of one part is its object alone. An ELF file starts with 0x7f "ELF", never this.
OBJECT_SET_MAGIC = b"vxla.objects.v1\n"


def pack_objects(objects: list[bytes]) -> bytes:
    """The machine code of the parts' objects, in order: the object itself when there is one."""
    if len(objects) == 1:
        return objects[0]
    framed = [len(objects).to_bytes(4, "big")]
    for data in objects:
        framed += [len(data).to_bytes(8, "big"), data]
    return OBJECT_SET_MAGIC + b"".join(framed)


def unpack_objects(data: bytes) -> list[bytes]:
    """The objects of `pack_objects`' bytes, in order (ValueError: not such bytes)."""
    if not data.startswith(OBJECT_SET_MAGIC):
        return [data]
    position = len(OBJECT_SET_MAGIC)
    count = int.from_bytes(data[position : position + 4], "big")
    position += 4
    objects = []
    for _ in range(count):
        size = int.from_bytes(data[position : position + 8], "big")
        position += 8
        objects.append(data[position : position + size])
        position += size
        if len(objects[-1]) != size:
            raise ValueError("object set ends inside an object")
    if position != len(data) or count < 2:
        raise ValueError("object set has bytes after its last object, or fewer than two objects")
    return objects


def unresolved_symbols(data: bytes) -> list[str]:
    """The names the objects of `data` reference and none of them defines as a global,
    sorted (must be empty), and every global two of them define (ambiguous: also reported)."""
    objects = unpack_objects(data)
    if len(objects) == 1:
        return undefined_symbols(data)
    defined: dict[str, int] = {}
    referenced: set[str] = set()
    for obj in objects:
        for symbol in elf_symbols(obj):
            if not symbol.name:
                continue
            if not symbol.defined:
                referenced.add(symbol.name)
            elif symbol.binding == STB_GLOBAL:
                defined[symbol.name] = defined.get(symbol.name, 0) + 1
    twice = {f"{name} (defined {count} times)" for name, count in defined.items() if count > 1}
    return sorted((referenced - set(defined)) | twice)
