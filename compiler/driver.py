"""The compile driver: HLO text or a Program in, Executable out, through the compile cache."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from attest.digests import sha256_hex, text_digest
from compiler import cache as compile_cache
from compiler.codegen import (
    batch_norm,
    buffer_assignment,
    control_flow,
    data_movement,
    dot_conv,
    elementwise,
    fft,
    grid,
    kernel_library,
    linalg,
    llvm_workers,
    mathlib_ir,
    random_bits,
    reductions,
    sort_gather_scatter,
)
from compiler.codegen.backend import Backend, MachineCode, WholeModule
from compiler.codegen.backends import backend_for
from compiler.codegen.dot_conv import COMMON_GEMM_TYPES, gemm_library
from compiler.codegen.elementwise import vector_width
from compiler.codegen.kernel import KernelModule
from compiler.codegen.lower import Emitter, Lowering, lower_module
from compiler.codegen.objfile import undefined_symbols
from compiler.codegen.plan import KernelStep, Plan, binary_hash, finest_split
from compiler.codegen.target import compile_ir
from compiler.config import CompilerConfig, load_config
from compiler.errors import BackendError, ExecutionError
from compiler.hlo.commitment import GraphCommitment, commit_graph
from compiler.hlo.ir import Module
from compiler.hlo.opcodes import family_modules
from compiler.hlo.printer import canonical_copy, canonical_names, canonical_text
from compiler.passes.base import PassObserver
from compiler.passes.pipeline import pipeline_named
from compiler.program import Program, load_program
from compiler.runtime import emulated_grid
from compiler.runtime.executable import Executable
from compiler.runtime.loader import load_object

if TYPE_CHECKING:
    import numpy as np

# The codegen module of each op family (compiler/hlo/opcodes.py FAMILIES), whose EMITTERS
# emit that family's opcodes (parameters are bound by the lowering itself).
FAMILY_MODULES = family_modules(batch_norm, control_flow, data_movement, dot_conv, elementwise, fft, linalg, random_bits, reductions, sort_gather_scatter)
EMITTERS: dict[str, Emitter] = {
    opcode: emit for module in FAMILY_MODULES.values() for opcode, emit in module.EMITTERS.items()
}


def optimize(
    program: Program, config: CompilerConfig, observer: PassObserver | None = None
) -> Module:
    """A copy of the program's module rewritten by the config's pass pipeline (the program's
    own module is never changed). The copy is the module of the canonical text, made without
    parsing it again. `observer` sees the module after every pass."""
    return pipeline_named(config.pipeline).run(canonical_copy(program.module), observer)


def graph_commitment(
    program: Program, config: CompilerConfig, inputs: Sequence[np.ndarray] | None = None
) -> GraphCommitment:
    """The graph commitment a job posts (docs/disputes.md): graphRoot and traceLeaves of the
    optimized module, whose records are the op-level trace's instructions. Only the pass
    pipeline runs (no lowering, no machine code), and it does not depend on the target, so
    every target of one pipeline commits to the same graph. Each record binds its
    instruction's element program (compiler/reference/steps), which a step referee
    evaluates one step of; with the job's `inputs`, the programs of the instructions that
    read them too (each input's digest in the program), so a job's commitment depends on its
    inputs."""
    # The reference loads on first use, not with every compile.
    from compiler.reference.steps import program_digests

    module = optimize(program, config)
    return commit_graph(module, program_digests(module, inputs))


def leaf_of(
    program: Program,
    config: CompilerConfig,
    index: int,
    trace_values: Mapping[int, Sequence[np.ndarray]],
    inputs: Sequence[np.ndarray],
    *,
    trace_digests: Mapping[int, str] | None = None,
) -> tuple[list[np.ndarray], str]:
    """A committee member's re-execution of record `index` of the program's graph commitment
    (docs/disputes.md): the config's pipeline runs, then compiler.reference.leaf evaluates
    that one instruction from the served `trace_values` and the job's `inputs`. Returns its
    flat output values and the digest to vote (the op-trace leaf's digest, or for index n the
    result digest). A member deciding several leaves of one job optimizes once and calls
    `evaluate_leaf` itself."""
    # The reference loads on first use, not with every compile.
    from compiler.reference.leaf import evaluate_leaf, leaf_count, leaf_digest, result_leaf_digest

    module = optimize(program, config)
    values = evaluate_leaf(module, index, trace_values, inputs, trace_digests=trace_digests)
    digest = result_leaf_digest(values) if index == leaf_count(module) else leaf_digest(values)
    return values, digest


def generate(
    program: Program,
    config: CompilerConfig,
    observer: PassObserver | None = None,
    backend: Backend | None = None,
) -> tuple[str, Plan, str]:
    """LLVM IR text, the plan and the optimized graph's text for a program. The graph text is
    the canonical text of the optimized module followed by its buffer assignment. `backend`:
    what runs the kernels, by default the config's target's (compiler/codegen/backend.py)."""
    kernels, plan, graph_text = _generated(program, config, observer, backend or backend_for(config))
    return kernels.ir_text(), plan, graph_text


def _generated(
    program: Program,
    config: CompilerConfig,
    observer: PassObserver | None,
    backend: Backend,
    code: MachineCode | None = None,
) -> tuple[KernelModule, Plan, str]:
    """`generate`'s module before it is printed, with the plan and the graph text. `code`
    is attached to the module before the lowering starts."""
    optimized, lowering, plan = _lowered(program, config, observer, code.attach if code is not None else None)
    graph_text = canonical_text(optimized) + buffer_assignment.describe(plan)
    backend.emit_entry(lowering.kernels, plan)
    return lowering.kernels, plan, graph_text


def optimized_plan(program: Program, config: CompilerConfig) -> tuple[Module, Plan]:
    """The optimized module and its plan with buffers assigned, as `generate` makes them
    (no machine code): what a picture of the graph shows (node/graphs.py)."""
    optimized, _, plan = _lowered(program, config, None)
    return optimized, plan


def user_source(program: Program, config: CompilerConfig, instruction: str) -> str | None:
    """The user's source of the optimized module's `instruction` (its canonical name, as
    op-level traces, divergence reports and a compiled run's error name it), as the HLO's
    metadata says; None where it says nothing. Optimizes again: for a message, not for a
    run's path."""
    optimized, _ = optimized_plan(program, config)
    for computation in sorted(optimized.computations, key=lambda c: c is not optimized.entry):  # the entry's names first
        names = canonical_names(computation)
        found = next((i for i in computation.instructions if names[id(i)] == instruction), None)
        if found is not None:
            return found.location.user if found.location is not None else None
    return None


def where_it_stopped(error: ExecutionError, program: Program, config: CompilerConfig) -> str:
    """` (%instruction is the user's source)` for a compiled run stopped at an instruction
    (`error.instruction`: a loop's limit, a deadline), where the HLO's metadata names that
    source; empty otherwise. What vxla run and a node's failed job add to the error."""
    if error.instruction is None:
        return ""
    source = user_source(program, config, error.instruction)
    return f" (%{error.instruction} is {source})" if source else ""


def _lowered(
    program: Program,
    config: CompilerConfig,
    observer: PassObserver | None,
    attach: Callable[[KernelModule], None] | None = None,
) -> tuple[Module, Lowering, Plan]:
    optimized = optimize(program, config, observer)
    lowering, plan = lower_module(optimized, config, EMITTERS, attach=attach)
    if config.schedule_perturbation:
        plan.steps = finest_split(plan.steps)
    assignment = buffer_assignment.assign(plan, lowering.in_place)
    plan = buffer_assignment.apply(plan, assignment)
    plan.no_reuse_bytes = assignment.no_reuse_bytes
    return optimized, lowering, plan


# A program of this many instructions is likely to be compiled in several parts: the LLVM
# worker processes start with its compile, not when its parts are ready.
PRESTART_INSTRUCTIONS = 200


def _instructions(module: Module) -> int:
    return sum(len(computation.instructions) for computation in module.computations)


class CompileStage(str):
    """A compilation's stage in words, as `compile_program`'s `progress` hears it, with what
    a listener may act on without reading the words: `phase` ("optimizing" or "codegen") and,
    when the stage says a pass has just run, that pass's name (`ran`)."""

    phase: str
    ran: str | None

    def __new__(cls, words: str, phase: str, ran: str | None = None) -> CompileStage:
        stage = super().__new__(cls, words)
        stage.phase, stage.ran = phase, ran
        return stage


def compile_program(
    program: Program,
    config: CompilerConfig | None = None,
    *,
    threads: int = 0,
    cache_dir: str | Path | None | bool = None,
    progress: Callable[[str], None] | None = None,
) -> Executable:
    """Compiles a verified program (or loads it from the compile cache). `threads`: the
    executable's default worker threads (0: the machine's cores; results never depend on it).
    `progress` hears each stage of a compilation (not of a cache hit) as it starts, in words."""
    config = config or load_config()
    cache = compile_cache.open_cache(cache_dir)
    key = compile_cache.cache_key(program.hlo_hash, config)
    entry = cache.get(key) if cache is not None else None
    if entry is None:
        backend = backend_for(config)
        if backend.compiles_in_parts and _instructions(program.module) >= PRESTART_INSTRUCTIONS:
            llvm_workers.prestart()
        tell = progress or (lambda stage: None)
        tell(CompileStage(f"optimizing ({config.pipeline} pipeline)", "optimizing"))

        def observer(count: int, name: str, module: Module) -> None:
            tell(CompileStage(f"optimizing: {name} ({count} pass runs so far)", "optimizing", ran=name))

        code = backend.machine_code(config, cache)
        try:
            # LLVM starts on the first kernels while the rest are lowered (partition.py).
            _, plan, graph_text = _generated(program, config, observer if progress else None, backend, code)
            kernels = len({step.kernel for step in plan.steps if isinstance(step, KernelStep)})
            tell(CompileStage(f"generating machine code for {config.cpu}: {kernels} kernels, {len(plan.steps)} steps", "codegen"))
            object_bytes = code.finish()
        except BaseException:
            code.abandon()
            raise
        entry = compile_cache.Entry(
            object_bytes, plan, text_digest(graph_text), binary_hash(object_bytes, plan)
        )
        if cache is not None:
            cache.put(key, entry)
    if cache is not None:
        cache.remember_hlo_hash(program.source_hash, program.hlo_hash)
    hashes = {
        "hlo_hash": program.hlo_hash,
        "graph_hash": entry.graph_hash,
        "binary_hash": entry.binary_hash,
    }
    return Executable(program, config, entry.plan, entry.object_bytes, hashes, threads=threads)


def compile(
    source: str | bytes,
    *,
    target: str | None = None,
    config: CompilerConfig | None = None,
    threads: int = 0,
    cache_dir: str | Path | None | bool = None,
) -> Executable:  # noqa: A001
    """Compiles HLO text with the pinned configuration (configs/compiler.toml), optionally
    for another target CPU. Text this compiler verified before is not parsed again when the
    compile cache holds its executable (the cache's source index names its hlo_hash)."""
    config = config or load_config()
    if target is not None:
        config = config.with_target(cpu=target)
    data = source.encode("utf-8") if isinstance(source, str) else source
    cache = compile_cache.open_cache(cache_dir)
    hlo_hash = cache.recall_hlo_hash(sha256_hex(data)) if cache is not None else None
    program = Program.recalled(data, hlo_hash) if hlo_hash is not None else load_program(data)
    return compile_program(program, config, threads=threads, cache_dir=cache_dir)


def prepare_libraries(config: CompilerConfig | None = None, *, cache_dir: str | Path | None | bool = None) -> list[str]:
    """Compiles the kernel libraries most programs call (compiler/codegen/kernel_library.py:
    the f32 and f64 gemm, and the exact paths of the binary32 functions with a fast path at
    the target's vector width and one lane) for the config's CPU target, unless this process
    or the compile cache has them, and keeps them there: a program's first compile then
    compiles only its own kernels. Returns the libraries' names (none for a GPU target,
    whose kernels hold all their code)."""
    config = config or load_config()
    if not config.architecture.links_libraries:
        return []
    store = compile_cache.open_cache(cache_dir)
    uses = [gemm_library(config, acc_type) for acc_type in COMMON_GEMM_TYPES]
    uses += mathlib_ir.exact_libraries(config, (vector_width(config), 1))
    libraries = [use.made(config) for use in uses]
    missing = [library for library in libraries if kernel_library.compiled(library, store) is None]
    if missing:
        compilation = llvm_workers.Compilation(config)  # the libraries at once, in worker processes
        for library in missing:
            compilation.submit(library.ir_text())
        for library, object_bytes in zip(missing, compilation.finish(), strict=True):
            kernel_library.remember(library, object_bytes, store)
    return [library.name for library in libraries]


# A GPU target's kernels and grid bodies with host grid entries, compiled for a host CPU.
HOST_GRID = Backend(
    "host-grid",
    lambda kernels, plan: grid.emit_grid(kernels, plan, grid.HostGrid()),
    lambda config, store: WholeModule(config, compile_ir),
    undefined_symbols,
)


def compile_emulated_grid(
    program: Program, config: CompilerConfig, block_size: int | None = None
) -> Executable:
    """An executable of `program` for GPU target `config` whose grid runs on this host's CPU
    (compiler/runtime/emulated_grid.py; `block_size`: see EmulatedDevice): for tests of the
    grid logic without a GPU. It names the GPU target but runs host code, so its binary_hash
    is of the host object (and the plan), and no statement is ever made of it."""
    if config.runs_on_host:
        raise ValueError(f"{config.cpu} is not a GPU target: its code runs on the host already")
    kernels, plan, graph_text = _generated(program, config, None, HOST_GRID)
    host = emulated_grid.host_config()
    object_bytes = HOST_GRID.emit_binary(kernels, host)
    missing = HOST_GRID.unresolved_symbols(object_bytes)
    if missing:
        raise BackendError(
            f"emulated grid object references symbols it does not define: {', '.join(missing)}"
        )
    hashes = {
        "hlo_hash": program.hlo_hash,
        "graph_hash": text_digest(graph_text),
        "binary_hash": binary_hash(object_bytes, plan),
    }
    device = emulated_grid.EmulatedDevice(load_object(object_bytes, host), block_size)
    return Executable(
        program, config, plan, object_bytes, hashes, threads=1, device=device, emulated=True
    )
