"""Errors of the HLO frontend. Every one names where in the text the problem is."""

from __future__ import annotations

from dataclasses import dataclass

from compiler.errors import CompilerError


@dataclass(frozen=True)
class SourceLocation:
    """A 1-based line and column in the HLO text and, where the HLO's metadata says, the
    user's source the instruction came from (`user`: JAX's op_name and file:line, said
    together; `op_name` and `position` apart). `relative`: the op_name is relative to a call
    of the computation that holds the instruction, called from several places, so that
    inlining a call puts the call's own op_name in front (compiler/hlo/source_info.py)."""

    line: int
    column: int
    user: str | None = None
    op_name: str | None = None
    position: str | None = None
    relative: bool = False

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


def from_user(location: SourceLocation | None) -> str:
    """` (the user's source)` after an instruction's name, where its location has one."""
    return f" ({location.user})" if location is not None and location.user else ""


class HloError(CompilerError, ValueError):
    """A problem with an HLO module that the user must fix: bad text, bad shapes, an op that
    the numerics contract does not cover. Always carries a message that names the problem and,
    when known, the source location and the instruction."""

    def __init__(
        self,
        message: str,
        location: SourceLocation | None = None,
        instruction: str | None = None,
    ) -> None:
        self.message = message
        self.location = location
        self.instruction = instruction
        super().__init__(self.__str__())

    def __str__(self) -> str:
        parts = []
        if self.location is not None:
            parts.append(str(self.location))
        if self.instruction is not None:
            parts.append(f"instruction %{self.instruction}{from_user(self.location)}")
        prefix = ": ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message


class HloParseError(HloError):
    """The text is not well-formed HLO."""


class HloVerifyError(HloError):
    """The module is well-formed but inconsistent (a shape that does not match its operands,
    a missing computation, a wrong operand count)."""


class HloUnsupportedError(HloError):
    """The module uses something outside the numerics contract (an opcode, an element type,
    a tiled layout, a dynamic shape)."""
