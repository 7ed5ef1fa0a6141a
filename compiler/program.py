"""A submitted program: the bytes the user gave, the verified module, and its two hashes.

source_hash is the SHA-256 of the submitted bytes (what was sent); hlo_hash is the SHA-256 of
the canonical text (what it means: formatting, names and metadata do not change it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property

from attest.digests import sha256_hex, text_digest
from compiler.hlo import HloParseError, canonical_text, load_module
from compiler.hlo.errors import SourceLocation
from compiler.hlo.ir import Module
from compiler.hlo.shape import Shape


@dataclass
class Program:
    """A verified HLO module with the identity of its source."""

    source: bytes
    module: Module

    @cached_property
    def source_hash(self) -> str:
        return sha256_hex(self.source)

    @cached_property
    def canonical_text(self) -> str:
        return canonical_text(self.module)

    @cached_property
    def hlo_hash(self) -> str:
        return text_digest(self.canonical_text)

    @property
    def parameter_shapes(self) -> list[Shape]:
        return [p.shape for p in self.module.entry.parameters]

    @property
    def result_shape(self) -> Shape:
        return self.module.entry.root.shape

    def opcode_counts(self) -> dict[str, int]:
        """Instructions per opcode over the computations reachable from the entry, sorted by
        opcode."""
        counts: Counter[str] = Counter()
        for computation in self.module.reachable_computations():
            counts.update(i.opcode for i in computation.post_order())
        return dict(sorted(counts.items()))


def load_program(source: bytes | str) -> Program:
    """Decodes, parses and verifies HLO text; raises HloError naming line and column."""
    data = source.encode("utf-8") if isinstance(source, str) else source
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise HloParseError("the module is not UTF-8 text", SourceLocation(line, column)) from None
    return Program(data, load_module(text))
