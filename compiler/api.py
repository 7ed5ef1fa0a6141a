"""The compiler's public API: what the node, the SDK, bench/ and tools/ use, and the one
module of the compiler they import (tests/test_import_direction.py holds them to it). Behind
it the compiler's rooms may move and change; these names stay.

    program = load_program(text)                       # parse, verify, canonicalize
    executable = compile_program(program, load_config().with_target(cpu="x86-64-v3"))
    outputs = executable.run(*arrays);  executable.hashes
    evaluate(program.module, arrays)                   # the reference evaluator

Names load on first use (PEP 562), so importing this module costs nothing: a command that
never compiles never loads LLVM.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# Each public name and the module that defines it.
_EXPORTS: dict[str, str] = {
    # Programs and compilation.
    "Program": "compiler.program",
    "load_program": "compiler.program",
    "bind_arguments": "compiler.program",
    "compile": "compiler.driver",
    "compile_program": "compiler.driver",
    "prepare_libraries": "compiler.driver",
    "compile_emulated_grid": "compiler.driver",
    "generate": "compiler.driver",
    "optimized_plan": "compiler.driver",
    "user_source": "compiler.driver",
    "where_it_stopped": "compiler.driver",
    "CompileStage": "compiler.driver",
    # The graph commitment a job posts (docs/disputes.md).
    "graph_commitment": "compiler.driver",
    "GraphCommitment": "compiler.hlo.commitment",
    "GraphRecord": "compiler.hlo.commitment",
    # A dispute's one instruction, re-executed by a committee member (docs/disputes.md):
    # the optimized module (`optimize`), the served values of the leaves it reads
    # (Executable.run_traced(capture=...)), its output and the digest to vote.
    "optimize": "compiler.driver",
    "leaf_of": "compiler.driver",
    "evaluate_leaf": "compiler.reference.leaf",
    "leaf_operands": "compiler.reference.leaf",
    "leaf_count": "compiler.reference.leaf",
    "leaf_digest": "compiler.reference.leaf",
    "result_leaf_digest": "compiler.reference.leaf",
    "trace_leaves": "compiler.hlo.commitment",
    # One element's steps, down to the scalar operation a dispute's contract evaluates
    # (compiler/reference/steps/, compiler/reference/scalar.py).
    "element_steps": "compiler.reference.steps",
    "StepTrace": "compiler.reference.steps",
    "StepKind": "compiler.reference.steps",
    "Uncovered": "compiler.reference.steps",
    "UNCOVERED": "compiler.reference.steps",
    "NO_PROGRAM": "compiler.reference.steps",
    "operand_sources": "compiler.reference.steps",
    "decode_program_leaf": "compiler.reference.steps.program",
    "table_entry_proof": "compiler.reference.steps.program",
    "value_leaf": "compiler.reference.steps.program",
    "ScalarOp": "compiler.reference.scalar",
    "SCALAR_TYPE_CODES": "compiler.reference.scalar",
    "evaluate_scalar": "compiler.reference.scalar",
    "scalar_bits": "compiler.reference.scalar",
    "Plan": "compiler.codegen.plan",
    "KernelStep": "compiler.codegen.plan",
    "walk_steps": "compiler.codegen.plan",
    "binary_hash": "compiler.codegen.plan",
    "PIPELINES": "compiler.passes.pipeline",
    "pipeline_named": "compiler.passes.pipeline",
    # The pinned configuration and targets.
    "CompilerConfig": "compiler.config",
    "load_config": "compiler.config",
    "WIDEST": "compiler.config",
    "target_cpu": "compiler.config",
    "validate_target": "compiler.config",
    "TARGET_CPUS": "compiler.targets",
    "NVJITLINK_VERSION": "compiler.targets",
    "ARCHITECTURES": "compiler.targets",
    # Running.
    "Executable": "compiler.runtime.executable",
    "TracedRun": "compiler.runtime.executable",
    "Fault": "compiler.runtime.executable",
    "this_host": "compiler.host",
    "runnable_cpus": "compiler.host",
    "check_runnable": "compiler.runtime.devices",
    "widest_runnable_cpu": "compiler.host",
    "machine_threads": "compiler.runtime.threads",
    "work_ranges": "compiler.runtime.threads",
    "evaluate": "compiler.reference",
    "flatten_value": "compiler.reference.evaluator",
    # The program model (read-only use: pictures, costs, traces' instruction names).
    "Module": "compiler.hlo.ir",
    "Computation": "compiler.hlo.ir",
    "Instruction": "compiler.hlo.ir",
    "Shape": "compiler.hlo.shape",
    "ArrayShape": "compiler.hlo.shape",
    "flatten": "compiler.hlo.shape",
    "default_layout": "compiler.hlo.shape",
    "parse_shape": "compiler.hlo",
    "load_module": "compiler.hlo",
    "canonical_text": "compiler.hlo",
    "canonical_names": "compiler.hlo.printer",
    "estimate_flops": "compiler.hlo.cost",
    # What the contract covers (compiler/hlo/opcodes.py).
    "SUPPORTED_OPCODES": "compiler.hlo.opcodes",
    "OPCODES": "compiler.hlo.opcodes",
    "without_debug_info": "compiler.hlo.source_info",
    "FAMILIES": "compiler.hlo.opcodes",
    "ORDER_FREE": "compiler.hlo.opcodes",
    "identity_value": "compiler.hlo.opcodes",
    # The exceptions (all derive from core.errors.VxlaError).
    "VxlaError": "core.errors",
    "CompilerError": "compiler.errors",
    "BackendError": "compiler.errors",
    "FloatingPointEnvironmentError": "compiler.errors",
    "ConfigError": "compiler.errors",
    "ExecutionError": "compiler.errors",
    "ArgumentError": "compiler.errors",
    "TargetNotRunnable": "compiler.errors",
    "DeadlineExceeded": "compiler.runtime.stops",
    "HloError": "compiler.hlo.errors",
    "HloParseError": "compiler.hlo.errors",
    "HloVerifyError": "compiler.hlo.errors",
    "HloUnsupportedError": "compiler.hlo.errors",
}
# A public name spelled otherwise where it is defined.
_DEFINED_AS = {
    "SUPPORTED_OPCODES": "SUPPORTED",
    "work_ranges": "partition",
    "walk_steps": "walk",
    "ScalarOp": "Op",
    "SCALAR_TYPE_CODES": "TYPE_CODES",
    "evaluate_scalar": "evaluate",
    "scalar_bits": "to_bits",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), _DEFINED_AS.get(name, name))
    globals()[name] = value  # loaded once
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # the names as type checkers and readers see them
    pass
