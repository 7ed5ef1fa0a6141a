"""The LLVM side of the pinned target: the target machine, LLVM's optimization pipeline and
object emission for a CompilerConfig (compiler/config.py).
"""

from __future__ import annotations

from functools import lru_cache

import llvmlite.binding as llvm

from compiler.config import CompilerConfig, ConfigError


@lru_cache(maxsize=1)
def _initialize() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def target_machine(config: CompilerConfig) -> llvm.TargetMachine:
    """The LLVM target machine for `config` (position-independent code)."""
    _initialize()
    try:
        target = llvm.Target.from_triple(config.triple)
    except RuntimeError as exc:
        raise ConfigError(f"this LLVM has no target for triple {config.triple!r}: {exc}") from None
    pinned = config.target_cpu
    features = ",".join(part for part in (pinned.llvm_features, config.features) if part)
    return target.create_target_machine(cpu=pinned.processor, features=features, opt=config.opt_level, reloc="pic", codemodel="default")


def run_llvm_pipeline(module: llvm.ModuleRef, config: CompilerConfig) -> None:
    """Runs LLVM's standard pipeline at the configured level (no fast-math exists in the IR,
    so no pass may change a floating-point value)."""
    machine = target_machine(config)
    tuning = llvm.create_pipeline_tuning_options(speed_level=config.opt_level)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)


def compile_ir(ir_text: str, config: CompilerConfig) -> bytes:
    """Parses, verifies, optimizes and emits LLVM IR text as object-file bytes."""
    _initialize()
    module = llvm.parse_assembly(ir_text)
    module.triple = config.triple
    machine = target_machine(config)
    module.data_layout = str(machine.target_data)
    module.verify()
    run_llvm_pipeline(module, config)
    return machine.emit_object(module)


def assembly(ir_text: str, config: CompilerConfig) -> str:
    """The optimized assembly for IR text (for inspection and tests)."""
    _initialize()
    module = llvm.parse_assembly(ir_text)
    module.triple = config.triple
    machine = target_machine(config)
    module.data_layout = str(machine.target_data)
    run_llvm_pipeline(module, config)
    return machine.emit_assembly(module)
