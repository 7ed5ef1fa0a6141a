"""The statement of a run: the one place in `node` that maps compiler objects (Program,
Executable, TracedRun) onto the attest trace format. The node signs what `build_statement`
makes, and the verifier (verify.py) builds its re-execution's statement with the same
function, so the two cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import platform
from collections.abc import Mapping, Sequence

import numpy as np

import attest
from attest import (
    CompilerIdentity,
    Execution,
    GpuRecord,
    HostRecord,
    LinkerRecord,
    OpTrace,
    Predicate,
    ProgramRecord,
    RunMetadata,
    Statement,
    Target,
    TensorRecord,
    tensor_digest,
)
from attest.digests import TENSOR_DIGEST_V1, TENSOR_DIGEST_VERSION, text_digest
from compiler.api import (
    TARGET_CPUS,
    ArgumentError,
    CompilerConfig,
    Executable,
    Program,
    TracedRun,
    pipeline_named,
    this_host,
)
from core.dtypes import from_numpy
from node.errors import NodeError
from node.version import vxla_version


class TraceInputError(NodeError, ValueError):
    """Input that cannot be checked at all (not a trace, not a module, wrong inputs): a
    usage problem, not a verification failure. The message names the problem."""


@functools.cache
def host_record() -> HostRecord:
    """This machine as a trace's run part records it: the CPU features listed are those some
    pinned target needs (the ones that decide which targets this host runs)."""
    host = this_host()
    relevant = set().union(*(cpu.features for cpu in TARGET_CPUS.values() if cpu.arch == host.arch))
    return HostRecord(
        arch=host.arch,
        cpu_model=host.cpu_model,
        features=tuple(sorted(host.features & relevant)),
        os=platform.platform(),
        vxla_version=vxla_version(),
    )


def _host_with_gpu(executable: Executable) -> HostRecord:
    """This machine's record, with the GPU a GPU target's run used (signed run metadata)."""
    info = None if executable.config.runs_on_host else getattr(executable.device, "info", None)
    if info is None:
        return host_record()
    gpu = GpuRecord(name=info.name, compute_capability=info.compute_capability, sm_count=info.sm_count, driver_version=info.driver_version)
    return dataclasses.replace(host_record(), gpu=gpu)


def numerics_contract_name(contract_version: int) -> str:
    """The numerics contract as a trace names it."""
    return f"numerics.v{contract_version}"


@functools.lru_cache(maxsize=16)
def compiler_identity(config: CompilerConfig) -> CompilerIdentity:
    """The trace's compiler identity for `config` (everything that pins the binary).

    Cached per config (both are frozen): building the pipeline to list its passes is
    per-compilation work, not per-run work."""
    return CompilerIdentity(
        vxla_version=vxla_version(),
        numerics_contract=numerics_contract_name(config.contract_version),
        pipeline_id=config.pipeline_id,
        passes=tuple(pipeline_named(config.pipeline).pass_names()),
        target=Target(triple=config.triple, cpu=config.cpu, features=config.features),
        llvmlite_version=config.llvmlite_version,
        llvm_version=config.llvm_version,
        opt_level=config.opt_level,
        linker=LinkerRecord(config.linker, config.linker_version) if config.linker else None,
    )


def checked_inputs(program: Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The inputs as the module takes them (bfloat16 .npy records viewed as bfloat16);
    raises TraceInputError on a wrong count, type or shape."""
    try:
        return program.bind(inputs)
    except ArgumentError as error:
        raise TraceInputError(str(error)) from None


def tensor_records(
    arrays: Sequence[np.ndarray], prefix: str, version: str = TENSOR_DIGEST_VERSION
) -> tuple[TensorRecord, ...]:
    """`prefix`0, `prefix`1, ... records (HLO element type, dimensions, tensor digest of
    `version`)."""
    return tuple(
        TensorRecord(
            name=f"{prefix}{i}",
            dtype=from_numpy(a.dtype).name,
            shape=tuple(a.shape),
            digest=tensor_digest(a, version),
        )
        for i, a in enumerate(arrays)
    )


def default_job_id(program: Program, input_records: Sequence[TensorRecord]) -> str:
    """A job id for a run outside any job: derived from the program and the input digests
    (`tensor_records` of the bound inputs, of the current digest version), so two nodes
    running the same module on the same inputs bind their traces to the same id."""
    text = json.dumps({"hlo_hash": program.hlo_hash, "inputs": [r.digest for r in input_records]}, sort_keys=True)
    return "local-" + text_digest(text)[:16]


def build_statement(
    program: Program,
    executable: Executable,
    inputs: Sequence[np.ndarray],
    run: TracedRun | Sequence[np.ndarray],
    *,
    job_id: str,
    chain_id: int | None,
    contract: str | None,
    key_id: str,
    threads: int,
    timings_ns: Mapping[str, int],
    op_level: bool,
    input_records: Sequence[TensorRecord] | None = None,
    tensor_digest_version: str | None = TENSOR_DIGEST_VERSION,
) -> Statement:
    """The statement describing one execution of `executable` on `inputs`.

    `run` is a TracedRun (from `Executable.run_traced`) or the plain outputs. With `op_level`
    the per-instruction digests of the TracedRun go into `op_trace` (ValueError if `run` has
    none). `contract` may be in any letter case. `input_records` (from `tensor_records(
    checked_inputs(program, inputs), "in")`) spares hashing the inputs again when the caller
    already has their digests, e.g. inputs stored by digest; hashing large inputs can cost
    more than running a memory-bound model. `tensor_digest_version`: of every digest, as the
    statement records it (None: the field left out, as in traces before it, whose digests
    are vxla.tensor.v1; a verifier rebuilding such a trace's statement passes it through);
    the TracedRun's digests must be of that version (ValueError).
    """
    version = tensor_digest_version or TENSOR_DIGEST_V1
    config = executable.config
    if config.schedule_perturbation:
        # A test build: its identity is not a compiler's any verifier would rebuild.
        raise ValueError("no statement is made of a schedule-perturbed build (a test setting)")
    if executable.emulated:
        # Host code standing in for a GPU target's cubin: its binary_hash is not the target's.
        raise ValueError("no statement is made of an emulated GPU grid (a test build)")
    outputs = run.outputs if isinstance(run, TracedRun) else list(run)
    op_trace = None
    if op_level:
        if not isinstance(run, TracedRun):
            raise ValueError("op-level statement needs a TracedRun (Executable.run_traced)")
        if run.digest_version != version:
            raise ValueError(f"the run's op-trace digests are {run.digest_version}, the statement's {version}")
        # A module whose result is a parameter or constant computes nothing to trace; the
        # format says "no op-level data" with null rather than an empty list.
        op_trace = OpTrace.from_instructions(run.instructions) if run.instructions else None
    hashes = executable.hashes
    predicate = Predicate(
        job_id=job_id,
        chain_id=chain_id,
        contract=None if contract is None else attest.normalize_contract(contract),
        key_id=key_id,
        deterministic=Execution(
            program=ProgramRecord(source_hash=program.source_hash, hlo_hash=program.hlo_hash),
            compiler=compiler_identity(config),
            graph_hash=hashes["graph_hash"],
            binary_hash=hashes["binary_hash"],
            inputs=tuple(input_records)
            if input_records is not None
            else tensor_records(checked_inputs(program, inputs), "in", version),
            outputs=tensor_records(outputs, "out", version),
            op_trace=op_trace,
            tensor_digest_version=tensor_digest_version,
        ),
        run=RunMetadata(threads=threads, timings_ns=dict(timings_ns), host=_host_with_gpu(executable)),
    )
    return Statement.build(predicate)
