"""The LLVM side of the pinned target for a CompilerConfig (compiler/config.py): the machine
LLVM is told of, its target machine, and object and assembly emission (llvm_machine.py does
the LLVM work itself).
"""

from __future__ import annotations

import llvmlite.binding as llvm

from compiler.codegen import llvm_machine
from compiler.codegen.llvm_machine import Machine
from compiler.config import CompilerConfig, ConfigError


def machine_of(config: CompilerConfig) -> Machine:
    """What LLVM is told of `config`'s target."""
    pinned = config.target_cpu
    features = ",".join(part for part in (pinned.llvm_features, config.features) if part)
    return Machine(config.triple, pinned.processor, features, config.opt_level)


def target_machine(config: CompilerConfig) -> llvm.TargetMachine:
    """The LLVM target machine for `config` (position-independent code)."""
    try:
        return llvm_machine.target_machine(machine_of(config))
    except RuntimeError as exc:
        raise ConfigError(f"this LLVM has no target for triple {config.triple!r}: {exc}") from None


def compile_ir(ir_text: str, config: CompilerConfig) -> bytes:
    """Parses, verifies, optimizes and emits LLVM IR text as object-file bytes."""
    target_machine(config)  # a config without an LLVM target is refused by name
    return llvm_machine.object_of(ir_text, machine_of(config))


def assembly(ir_text: str, config: CompilerConfig) -> str:
    """The optimized assembly for IR text (for inspection and tests)."""
    target_machine(config)
    return llvm_machine.assembly_of(ir_text, machine_of(config))
