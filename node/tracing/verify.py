"""Checking a signed trace by recompiling and re-executing it: the envelope's signatures,
the recorded compiler configuration, the program, graph and binary hashes (recompiled for
the recorded target), then a re-execution on a target this host runs, compared output by
output and op by op with `attest.first_divergence`. Every digest is recomputed with the tensor
digest version the trace names (`vxla.tensor.v1` for a trace made before the version was
recorded); a version this vxla does not know fails the statement check, named.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import attest
from attest import (
    CompilerIdentity,
    Divergence,
    Envelope,
    EnvelopeError,
    OpTrace,
    Statement,
    TensorRecord,
    VerificationError,
    digest_leaves,
    verify_inclusion,
    verify_signatures,
)
from attest.verify import TrustedKeys
from compiler.api import (
    PIPELINES,
    CompilerConfig,
    ConfigError,
    Executable,
    ExecutionError,
    HloError,
    Program,
    TargetNotRunnable,
    TracedRun,
    compile_program,
    load_config,
    load_program,
    machine_threads,
    pipeline_named,
    runnable_cpus,
    this_host,
    user_source,
    validate_target,
)
from node.tracing.statement import (
    TraceInputError,
    build_statement,
    checked_inputs,
    numerics_contract_name,
    tensor_records,
    vxla_version,
)


@dataclass(frozen=True)
class Check:
    """One verification check: a short name (signatures, hlo_hash, outputs, ...), whether it
    passed, and a message saying what was compared or what failed."""

    name: str
    ok: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "message": self.message}


@dataclass(frozen=True)
class FirstDivergence:
    """The first instruction where the trace and the re-execution differ, with both digests;
    `proofs_ok` says both inclusion proofs verified against the respective Merkle roots."""

    index: int
    name: str
    opcode: str
    recorded_digest: str | None
    reexecuted_digest: str | None
    proofs_ok: bool
    source: str | None = None  # the user's source of the instruction, where the HLO says

    def line(self) -> str:
        """E.g. "instruction 12 fusion.7 (fusion; jit(f)/dot_general at model.py:7): <digest> != <digest>"."""
        about = self.opcode + (f"; {self.source}" if self.source else "")
        return (
            f"instruction {self.index} {self.name} ({about}): "
            f"{self.recorded_digest or 'absent'} != {self.reexecuted_digest or 'absent'}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "opcode": self.opcode,
            "recorded_digest": self.recorded_digest,
            "reexecuted_digest": self.reexecuted_digest,
            "source": self.source,
            "proofs_ok": self.proofs_ok,
        }


@dataclass
class VerifyReport:
    """Everything `verify_trace` checked, in order, plus what it could not check."""

    checks: list[Check] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)
    statement: Statement | None = None
    first_divergence: FirstDivergence | None = None
    divergence: Divergence | None = None
    re_executed: bool = False  # the module ran on the trace's inputs and its outputs were compared
    # The re-execution's own (unsigned) statement, when it ran: what a submitter disputes a
    # chain job's result with (node.sdk Job.verify(dispute=True)).
    reexecution: Statement | None = None
    # The disputes a verify(dispute=True) opened and played, as node.chain.disputes
    # DisputeSummary.to_dict() gives them.
    disputes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every check passed (and at least one ran)."""
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def verified(self) -> bool:
        """True when every check passed and the result itself was checked by re-executing:
        only then does the trace's result hold. `ok` without it says what was checked (the
        signatures, maybe the compilation) passed, and nothing about the outputs."""
        return self.ok and self.re_executed

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def add(self, name: str, ok: bool, message: str) -> bool:
        self.checks.append(Check(name, ok, message))
        return ok

    def to_dict(self) -> dict[str, Any]:
        predicate = None if self.statement is None else self.statement.predicate
        return {
            "ok": self.ok,
            "verified": self.verified,
            "re_executed": self.re_executed,
            "job_id": None if predicate is None else predicate.job_id,
            "chain_id": None if predicate is None else predicate.chain_id,
            "contract": None if predicate is None else predicate.contract,
            "key_id": None if predicate is None else predicate.key_id,
            "checks": [c.to_dict() for c in self.checks],
            "not_checked": list(self.not_checked),
            "first_divergence": None
            if self.first_divergence is None
            else self.first_divergence.to_dict(),
        }


def parse_envelope(envelope_text: str | bytes) -> Envelope:
    """The DSSE envelope in `envelope_text`; TraceInputError if it is not one at all."""
    try:
        return Envelope.from_json(envelope_text)
    except EnvelopeError as error:
        raise TraceInputError(f"not a signed trace: {error}") from None


def _check_envelope(
    report: VerifyReport,
    envelope: Envelope,
    trusted_keys: TrustedKeys,
    job_id: str | None,
    chain_id: int | None,
    contract: str | None,
) -> Statement | None:
    """Signatures, then the statement, then the job binding (each its own check, all done by
    attest so the rules live in one place)."""
    try:
        _, signers = verify_signatures(envelope, trusted_keys)
    except VerificationError as error:
        report.add("signatures", False, str(error))
        return None
    report.add(
        "signatures",
        True,
        f"{len(signers)} valid signature(s) by trusted key(s) "
        + ", ".join(k[:16] for k in signers),
    )
    try:
        statement = attest.verify(envelope, trusted_keys)
    except VerificationError as error:
        report.add("statement", False, str(error))
        return None
    report.statement = statement
    report.add(
        "statement", True, f"well-formed execution statement for job {statement.predicate.job_id!r}"
    )
    if job_id is None and chain_id is None and contract is None:
        report.not_checked.append("job binding (give --job-id, --chain-id or --contract)")
        return statement
    try:
        attest.verify(envelope, trusted_keys, job_id=job_id, chain_id=chain_id, contract=contract)
    except VerificationError as error:
        report.add("job binding", False, str(error))
        return None
    wanted = ", ".join(
        f"{k} {v}"
        for k, v in (("job_id", job_id), ("chain_id", chain_id), ("contract", contract))
        if v is not None
    )
    report.add("job binding", True, wanted)
    return statement


def recorded_config(identity: CompilerIdentity) -> CompilerConfig:
    """The CompilerConfig a trace's compiler identity records, as this vxla rebuilds it.

    Raises ConfigError naming the field when this compiler cannot reproduce it (another
    pipeline id or pass list, numerics contract, LLVM or llvmlite version, unknown target).
    A different vxla_version alone is not refused: the hashes decide whether it matters.
    """
    ours = CompilerConfig()
    names = [
        name
        for name in sorted(PIPELINES)
        if pipeline_named(name).pipeline_id == identity.pipeline_id
    ]
    if not names:
        raise ConfigError(
            f"compiler.pipeline_id {identity.pipeline_id[:16]}... is not a pipeline of this vxla ({vxla_version()})"
        )
    pipeline = names[0]
    passes = tuple(pipeline_named(pipeline).pass_names())
    if identity.passes != passes:
        raise ConfigError(
            f"compiler.passes: recorded {list(identity.passes)}, pipeline {pipeline!r} here runs {list(passes)}"
        )
    for name, recorded, here in (
        (
            "numerics_contract",
            identity.numerics_contract,
            numerics_contract_name(ours.contract_version),
        ),
        ("llvm_version", identity.llvm_version, ours.llvm_version),
        ("llvmlite_version", identity.llvmlite_version, ours.llvmlite_version),
    ):
        if recorded != here:
            raise ConfigError(f"compiler.{name}: recorded {recorded}, this vxla has {here}")
    config = CompilerConfig(
        triple=identity.target.triple,
        cpu=identity.target.cpu,
        features=identity.target.features,
        opt_level=identity.opt_level,
        pipeline=pipeline,
        pipeline_id=identity.pipeline_id,
        linker=identity.linker.name if identity.linker is not None else "",
        linker_version=identity.linker.version if identity.linker is not None else "",
    )
    validate_target(config)
    return config


def _compare_hash(report: VerifyReport, name: str, recorded: str, here: str, what: str) -> bool:
    if recorded == here:
        return report.add(name, True, f"{here} ({what})")
    return report.add(name, False, f"trace has {recorded}, {what} gives {here}")


def verify_trace(
    envelope_text: str | bytes,
    trusted_keys: TrustedKeys,
    *,
    module_source: bytes | str | None = None,
    inputs: Sequence[np.ndarray] | None = None,
    job_id: str | None = None,
    chain_id: int | None = None,
    contract: str | None = None,
    threads: int = 0,
    cache_dir: bool | str | None = False,
    execute_on: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> VerifyReport:
    """Check a signed trace; returns a VerifyReport listing each check. `progress` hears the
    long stages as they start, in words: each compilation's (compiler.api.CompileStage) and
    the re-execution.

    Always: the envelope's signatures against `trusted_keys`, the statement, and (when any is
    given) the job id, chain id and contract. With `module_source`: its source_hash and
    hlo_hash, the recorded compiler configuration (refused if this vxla cannot reproduce
    it), a fresh compilation (no compile cache by default: a verifier must not trust the
    node's cached graph) checked against graph_hash and binary_hash; with `inputs` too (or
    a module without parameters): the input digests, a re-execution (op-level when the trace
    has op-level data) and the output digests, and on a difference the first diverging
    instruction with its inclusion proofs checked against both Merkle roots. `threads`: of the
    re-execution (0: the machine's cores; results never depend on it).

    The recorded target is always compiled (graph_hash and binary_hash, no run). The
    re-execution runs on `execute_on` (a CPU name) when given, else on the recorded target
    when this host can run it (the very bytes the trace names), else on the configuration's
    target, else on the best pinned target this host runs: every target computes the same
    bits, so outputs and op-level digests compare exactly whichever one ran.

    Raises TraceInputError when there is nothing to verify: not a DSSE envelope, a module
    that does not parse, inputs that do not fit the module, an `execute_on` target that is
    unknown or that this host cannot run.
    """
    threads = threads or machine_threads()
    report = VerifyReport()
    envelope = parse_envelope(envelope_text)
    program = None
    if module_source is not None:
        try:
            program = load_program(module_source)
        except HloError as error:
            raise TraceInputError(f"module: {error}") from None
    if inputs is not None and program is None:
        raise TraceInputError("inputs can only be checked against a module (give the module too)")
    arrays = None if inputs is None or program is None else checked_inputs(program, inputs)
    statement = _check_envelope(report, envelope, trusted_keys, job_id, chain_id, contract)
    if statement is None:
        return report
    if program is None:
        report.not_checked.append(
            "program, compilation and outputs (give the module and its inputs)"
        )
        return report
    recorded = statement.predicate.deterministic
    _compare_hash(
        report, "source_hash", recorded.program.source_hash, program.source_hash, "the module file"
    )
    if not _compare_hash(
        report, "hlo_hash", recorded.program.hlo_hash, program.hlo_hash, "the module"
    ):
        report.not_checked.append("compilation and outputs (the trace is of another program)")
        return report
    try:
        config = recorded_config(recorded.compiler)
    except ConfigError as error:
        report.add("compiler", False, f"cannot reproduce the recorded compiler: {error}")
        return report
    version_note = ""
    if recorded.compiler.vxla_version != vxla_version():
        version_note = (
            f"; recorded by vxla {recorded.compiler.vxla_version}, rebuilt with {vxla_version()}"
        )
    report.add(
        "compiler",
        True,
        f"pipeline {config.pipeline} {config.pipeline_id[:16]}, {config.triple} cpu={config.cpu}{version_note}",
    )
    executable = compile_program(program, config, threads=threads, cache_dir=cache_dir, progress=progress)
    graph_ok = _compare_hash(
        report, "graph_hash", recorded.graph_hash, executable.hashes["graph_hash"], "recompiling"
    )
    binary_ok = _compare_hash(
        report, "binary_hash", recorded.binary_hash, executable.hashes["binary_hash"], "recompiling"
    )
    if not (graph_ok and binary_ok):
        report.not_checked.append("outputs (the recompiled code differs from the trace's)")
        return report
    if arrays is None:
        if program.parameter_shapes:
            report.not_checked.append("inputs and outputs (give the inputs to re-execute)")
            return report
        arrays = []
    if not _check_inputs(report, recorded.inputs, tensor_records(arrays, "in", recorded.digest_version)):
        report.not_checked.append("outputs (re-execution needs the trace's inputs)")
        return report
    try:
        run_config = execution_config(config, execute_on)
    except (ConfigError, TargetNotRunnable) as error:
        raise TraceInputError(f"execution target: {error}") from None
    if run_config.cpu == config.cpu and run_config.features == config.features:
        report.add("target", True, f"executed on {config.cpu}, the trace's target")
    else:
        report.add(
            "target",
            True,
            f"executed on {run_config.cpu}; the trace's target {config.cpu} was compiled and its binary_hash checked",
        )
        executable = compile_program(program, run_config, threads=threads, cache_dir=cache_dir, progress=progress)
    if progress is not None:
        progress(f"re-executing on {run_config.cpu}")
    _reexecute(report, statement, program, executable, arrays, threads)
    return report


def execution_config(recorded: CompilerConfig, execute_on: str | None = None) -> CompilerConfig:
    """The configuration a verifier re-executes `recorded`'s trace with on this host:
    `execute_on` if given (ConfigError if unknown, TargetNotRunnable if this host cannot run
    it), else `recorded` when runnable here, else the configuration's target (the widest this
    host runs, unless it pins one), else the best pinned target this host runs. Only the
    target changes: pipeline and opt level stay."""
    host = this_host()
    if execute_on is not None:
        chosen = recorded.with_target(cpu=execute_on, features="")
        host.check(chosen)
        return chosen
    if host.can_run(recorded):
        return recorded
    default = load_config().cpu
    candidates = [default, *reversed(runnable_cpus(host))]
    for cpu in candidates:
        chosen = recorded.with_target(cpu=cpu, features="")
        if host.can_run(chosen):
            return chosen
    host.check(recorded)  # nothing runs here: raise, naming what the recorded target needs
    return recorded


def _check_inputs(
    report: VerifyReport, recorded: Sequence[TensorRecord], given: Sequence[TensorRecord]
) -> bool:
    differing = [
        f"{r.name}: trace has {r.dtype}{list(r.shape)} {r.digest}, given {g.dtype}{list(g.shape)} {g.digest}"
        for r, g in zip(recorded, given, strict=False)
        if r != g
    ]
    if len(recorded) != len(given):
        differing.append(f"trace has {len(recorded)} inputs, given {len(given)}")
    if differing:
        return report.add("inputs", False, "input digest differs: " + "; ".join(differing))
    return report.add("inputs", True, f"{len(given)} input digest(s) match")


def _reexecute(
    report: VerifyReport,
    statement: Statement,
    program: Program,
    executable: Executable,
    arrays: list[np.ndarray],
    threads: int,
) -> None:
    predicate = statement.predicate
    recorded = predicate.deterministic
    op_level = recorded.op_trace is not None
    started = time.perf_counter_ns()
    try:
        run: TracedRun | list[np.ndarray] = (
            executable.run_traced(*arrays, threads=threads, digest_version=recorded.digest_version)
            if op_level
            else executable.run(*arrays, threads=threads)
        )
    except ExecutionError as error:
        report.add("execution", False, f"re-execution failed: {error}")
        return
    elapsed = time.perf_counter_ns() - started
    report.re_executed = True
    # The re-execution's own statement, bound to the same job, so first_divergence compares
    # exactly what two honest nodes must agree on. It is never signed.
    mine = build_statement(
        program, executable, arrays, run,
        job_id=predicate.job_id, chain_id=predicate.chain_id, contract=predicate.contract,
        key_id=predicate.key_id, threads=threads, timings_ns={"execute": elapsed}, op_level=op_level,
        tensor_digest_version=recorded.tensor_digest_version,
    )  # fmt: skip
    report.reexecution = mine
    divergence = attest.first_divergence(statement, mine)
    report.divergence = divergence
    theirs, ours = recorded.outputs, mine.predicate.deterministic.outputs
    differing = [
        f"{a.name}: trace has {a.digest}, re-execution gives {b.digest}"
        for a, b in zip(theirs, ours, strict=False)
        if a != b
    ]
    if len(theirs) != len(ours):
        differing.append(f"trace has {len(theirs)} outputs, re-execution gives {len(ours)}")
    if differing:
        report.add("outputs", False, "; ".join(differing))
    else:
        report.add("outputs", True, f"{len(ours)} output digest(s) match")
    if op_level:
        _check_op_trace(
            report, recorded.op_trace, mine.predicate.deterministic.op_trace, divergence,
            lambda name: user_source(program, executable.config, name),
        )  # fmt: skip
    # Anything else the comparison found (compiler identity fields other than the version,
    # already checked above, would land here if the two ever disagreed). Executed on another
    # target, the machine code, its buffer plan and the target naturally differ; the
    # recorded ones were checked by compiling for the recorded target. So does the compiler
    # identity's target part (the target, and a GPU target's nvJitLink release): every other
    # field of it was checked against this vxla by recorded_config.
    checked: tuple[str, ...] = ("outputs", "op_trace", "compiler.vxla_version")
    if executable.config.cpu != recorded.compiler.target.cpu or executable.config.features != recorded.compiler.target.features:
        checked += ("compiler", "graph_hash", "binary_hash")
    rest = [
        d.path
        for d in divergence.differences
        if not any(d.path.startswith(f"predicate.deterministic.{c}") for c in checked)
    ]
    if rest:
        report.add("statement fields", False, "re-execution differs in " + ", ".join(rest))


def _check_op_trace(
    report: VerifyReport, theirs: OpTrace | None, ours: OpTrace | None, divergence: Divergence,
    source_of: Callable[[str], str | None] = lambda name: None,
) -> None:
    if theirs is None or ours is None:
        report.add(
            "op_trace",
            False,
            "the re-execution traced no instructions, the trace has op-level data",
        )
        return
    first = divergence.first_instruction
    if first is None:
        report.add(
            "op_trace",
            True,
            f"{len(ours.instructions)} instruction digests match, merkle_root {ours.merkle_root}",
        )
        return
    # Check both proofs against the signed root and the re-execution's root: the reported
    # digests are provably the ones each side committed to at that position.
    proofs_ok = True
    for record, proof, trace in (
        (first.left, first.left_proof, theirs),
        (first.right, first.right_proof, ours),
    ):
        if record is not None and proof is not None:
            leaf = digest_leaves([record.digest])[0]
            proofs_ok &= verify_inclusion(
                leaf, proof, trace.merkle_root, leaf_count=len(trace.instructions)
            )
    report.first_divergence = FirstDivergence(
        index=first.index, name=first.name, opcode=first.opcode,
        recorded_digest=first.left_digest, reexecuted_digest=first.right_digest, proofs_ok=proofs_ok,
        source=source_of(first.name),
    )  # fmt: skip
    proof_text = (
        "inclusion proofs verified against both roots"
        if proofs_ok
        else "INCLUSION PROOFS DO NOT VERIFY"
    )
    report.add(
        "op_trace", False, f"first divergence: {report.first_divergence.line()} ({proof_text})"
    )
