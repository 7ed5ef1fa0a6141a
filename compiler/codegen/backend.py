"""The seam between target-free and target-specific code generation.

Everything up to the kernels is the same for every target: the passes, the lowering of each
op family into kernels `void kernel(ptr slots, i64 begin, i64 end)` over work items, the
plan, the buffer assignment. A backend adds what runs the kernels and makes the bytes that
are hashed and run:
- CPU targets (x86-64, AArch64): the native entry that runs the plan's steps on worker
  threads (native_plan.py), compiled to ELF objects (one per part of the module,
  partition.py, made at once by llvm_workers.py) that reference no symbol but each other's;
- NVIDIA GPUs (nvptx64): a grid entry per kernel (grid.py, nvptx.py), compiled to PTX that
  must pass the contract's checks, linked to a cubin by the pinned nvJitLink.
A new target (AMD's amdgcn) is one more Backend: its GridTarget and its code-object linker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from compiler.codegen import grid, native_plan, nvptx, partition
from compiler.codegen.kernel import KernelModule
from compiler.codegen.llvm_workers import compile_parts
from compiler.codegen.objfile import pack_objects, unresolved_symbols
from compiler.codegen.plan import Plan
from compiler.config import CompilerConfig
from compiler.errors import BackendError, ConfigError


@dataclass(frozen=True)
class Backend:
    """How a target's plan runs and what its bytes are."""

    name: str
    # Adds to the module what runs the plan's kernels (it may reserve arena space in the plan).
    emit_entry: Callable[[KernelModule, Plan], None]
    # The bytes to hash and run, made from the module (kernels and entry).
    emit_binary: Callable[[KernelModule, CompilerConfig], bytes]
    # The symbols those bytes reference and nothing defines (every binary's must be none).
    unresolved_symbols: Callable[[bytes], list[str]]


def _cpu_binary(kernels: KernelModule, config: CompilerConfig) -> bytes:
    """The objects of the module's parts (partition.py), compiled at once (llvm_workers.py):
    one object for a small program, else `pack_objects` of them in order."""
    object_bytes = pack_objects(compile_parts(partition.split(kernels), config))
    missing = CPU.unresolved_symbols(object_bytes)
    if missing:
        raise BackendError(f"compiled object references symbols it does not define: {', '.join(missing)}")
    return object_bytes


def _nvptx_binary(kernels: KernelModule, config: CompilerConfig) -> bytes:
    cubin = nvptx.cubin_of(nvptx.ptx_of(kernels.ir_text(), config), config)
    missing = NVPTX.unresolved_symbols(cubin)
    if missing:
        raise BackendError(f"cubin references symbols it does not define: {', '.join(missing)}")
    return cubin


CPU = Backend("cpu", native_plan.emit_entry, _cpu_binary, unresolved_symbols)
NVPTX = Backend("nvptx", lambda kernels, plan: grid.emit_grid(kernels, plan, nvptx.NvptxGrid()), _nvptx_binary, nvptx.unresolved_symbols)
_BY_ARCH = {"x86_64": CPU, "aarch64": CPU, "nvptx64": NVPTX}


def backend_for(config: CompilerConfig) -> Backend:
    """The backend of the config's architecture."""
    if config.is_gpu and config.schedule_perturbation:
        raise ConfigError("schedule perturbation is a test setting of the CPU targets' worker threads; a GPU target has none")
    return _BY_ARCH[config.arch]
