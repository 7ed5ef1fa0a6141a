"""The HLO frontend: IR, text parser, canonical printer and shape verifier."""

from __future__ import annotations

from compiler.hlo.errors import HloError, HloParseError, HloUnsupportedError, HloVerifyError
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.parser import parse_module, parse_shape
from compiler.hlo.printer import canonical_text
from compiler.hlo.verifier import verify_module


def load_module(text: str) -> Module:
    """Parses and verifies HLO text; raises HloError (with line and column) on any problem."""
    module = parse_module(text)
    verify_module(module)
    return module


__all__ = [
    "Computation",
    "HloError",
    "HloParseError",
    "HloUnsupportedError",
    "HloVerifyError",
    "Instruction",
    "Module",
    "canonical_text",
    "load_module",
    "parse_module",
    "parse_shape",
    "verify_module",
]
