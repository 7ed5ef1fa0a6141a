"""node.tracing: the statement of a run, the recorded compiler configuration, and
verify_trace's report (without the command line)."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from attest import (
    CompilerIdentity,
    Statement,
    key_id,
    sign_statement,
    tensor_digest,
    verify,
)
from attest.keys import generate_private_key
from compiler.config import CompilerConfig, ConfigError, load_config
from compiler.driver import compile_program
from compiler.passes.pipeline import pipeline_named
from compiler.program import load_program
from compiler.runtime.executable import Fault
from harness.fixture_data import Fixture
from node.tracing.statement import (
    TraceInputError,
    build_statement,
    checked_inputs,
    compiler_identity,
    default_job_id,
    tensor_records,
)
from node.tracing.verify import recorded_config, verify_trace

MLP = Fixture("mlp_softmax")
KEY = generate_private_key()
OTHER_KEY = generate_private_key()


def _statement(fixture: Fixture, *, op_level: bool = True, fault: Fault | None = None, key=KEY, **options) -> Statement:  # noqa: ANN001, ANN003
    program = load_program(fixture.module_text)
    executable = compile_program(program, load_config())
    inputs = [np.load(p, allow_pickle=False) for p in fixture.input_paths()]  # as the CLI reads them
    run = executable.run_traced(*inputs, fault=fault) if op_level or fault else executable.run(*inputs)
    binding = {"job_id": "job-1", "chain_id": 5, "contract": None} | options
    return build_statement(
        program, executable, inputs, run, key_id=key_id(key), threads=1, timings_ns={"execute": 1}, op_level=op_level, **binding
    )


def _signed(statement: Statement, key=KEY) -> str:  # noqa: ANN001
    return sign_statement(statement, key).to_json()


def test_the_statement_records_the_program_compiler_tensors_and_instructions() -> None:
    statement = _statement(MLP)
    program = load_program(MLP.module_text)
    executable = compile_program(program, load_config())
    traced = executable.run_traced(*MLP.inputs())
    predicate = statement.predicate
    recorded = predicate.deterministic
    assert (predicate.job_id, predicate.chain_id, predicate.contract, predicate.key_id) == ("job-1", 5, None, key_id(KEY))
    assert (recorded.program.source_hash, recorded.program.hlo_hash) == (program.source_hash, program.hlo_hash)
    assert (recorded.graph_hash, recorded.binary_hash) == (executable.hashes["graph_hash"], executable.hashes["binary_hash"])
    config = load_config()
    assert recorded.compiler.pipeline_id == config.pipeline_id
    assert list(recorded.compiler.passes) == pipeline_named(config.pipeline).pass_names()
    assert (recorded.compiler.target.triple, recorded.compiler.target.cpu) == (config.triple, config.cpu)
    assert (recorded.compiler.llvm_version, recorded.compiler.llvmlite_version) == (config.llvm_version, config.llvmlite_version)
    assert [t.digest for t in recorded.inputs] == [tensor_digest(a) for a in MLP.inputs()]
    assert [t.digest for t in recorded.outputs] == [tensor_digest(a) for a in traced.outputs]
    assert [s.sha256 for s in statement.subject] == [t.digest for t in recorded.outputs]
    assert recorded.op_trace is not None
    assert [(r.name, r.opcode, r.digest) for r in recorded.op_trace.instructions] == traced.instructions
    # Signed and checked by attest, unchanged.
    assert verify(_signed(statement), [KEY.public_key()]) == statement


def test_two_runs_agree_on_everything_compared() -> None:
    first, second = _statement(MLP), _statement(MLP)
    assert first.predicate.compared_dict() == second.predicate.compared_dict()
    assert _statement(MLP, op_level=False).predicate.deterministic.op_trace is None


def test_bf16_inputs_from_npy_files_are_recorded_as_bf16() -> None:
    fixture = Fixture("bf16_mlp")
    recorded = _statement(fixture).predicate.deterministic
    declared = [spec["dtype"] for spec in fixture.meta["inputs"]]
    assert [t.dtype for t in recorded.inputs] == declared
    assert "bf16" in declared
    assert [t.digest for t in recorded.inputs] == [tensor_digest(a) for a in fixture.inputs()]
    assert any(a.dtype == ml_dtypes.bfloat16 for a in fixture.inputs())


def test_the_default_job_id_depends_on_program_and_inputs() -> None:
    program = load_program(MLP.module_text)
    inputs = MLP.inputs()

    def job_of(arrays: list[np.ndarray]) -> str:
        return default_job_id(program, tensor_records(checked_inputs(program, arrays), "in"))

    job = job_of(inputs)
    assert job.startswith("local-") and job == job_of([a.copy() for a in inputs])
    changed = [a.copy() for a in inputs]
    changed[0].reshape(-1)[0] += 1
    assert job_of(changed) != job


def test_the_optimization_level_is_recorded_and_rebuilt() -> None:
    config = dataclasses.replace(load_config(), opt_level=2)
    program = load_program(MLP.module_text)
    executable = compile_program(program, config, cache_dir=False)
    statement = build_statement(program, executable, MLP.inputs(), executable.run(*MLP.inputs()), job_id="j", chain_id=None,
                                contract=None, key_id=key_id(KEY), threads=1, timings_ns={}, op_level=False)  # fmt: skip
    identity = statement.predicate.deterministic.compiler
    assert identity.opt_level == 2
    assert recorded_config(identity) == config


def test_no_statement_is_made_of_a_schedule_perturbed_build() -> None:
    """The test-only perturbed schedule (tests/codegen/test_contention.py) gives the right
    bits, but its compiler identity is no verifier's: nothing of it is signed."""
    program = load_program(MLP.module_text)
    executable = compile_program(program, load_config().with_schedule_perturbation(), cache_dir=False)
    outputs = executable.run(*MLP.inputs(), threads=2, schedule_seed=5)
    with pytest.raises(ValueError, match="schedule-perturbed"):
        build_statement(program, executable, MLP.inputs(), outputs, job_id="j", chain_id=None,
                        contract=None, key_id=key_id(KEY), threads=2, timings_ns={}, op_level=False)  # fmt: skip


def test_the_recorded_config_is_rebuilt_exactly() -> None:
    config = load_config()
    assert recorded_config(compiler_identity(config)) == config
    none = config.with_pipeline("none")
    assert recorded_config(compiler_identity(none)) == none


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"pipeline_id": "f" * 64}, "pipeline_id"),
        ({"passes": ("only-one",)}, "compiler.passes"),
        ({"llvm_version": "3.4"}, "llvm_version: recorded 3.4"),
        ({"llvmlite_version": "0.1"}, "llvmlite_version"),
        ({"numerics_contract": "numerics.v99"}, "numerics_contract"),
    ],
)
def test_a_config_this_compiler_cannot_reproduce_is_refused(change: dict, fragment: str) -> None:
    identity = dataclasses.replace(compiler_identity(load_config()), **change)
    with pytest.raises(ConfigError, match=fragment):
        recorded_config(identity)


def test_an_unknown_target_cpu_is_refused() -> None:
    identity: CompilerIdentity = compiler_identity(load_config())
    identity = dataclasses.replace(identity, target=dataclasses.replace(identity.target, cpu="pentium-pro"))
    with pytest.raises(ConfigError, match="unknown CPU"):
        recorded_config(identity)


def test_verify_trace_reports_every_check() -> None:
    report = verify_trace(_signed(_statement(MLP)), [KEY.public_key()], module_source=MLP.module_text, inputs=MLP.inputs(), job_id="job-1", chain_id=5)
    assert report.ok, report.checks
    assert [c.name for c in report.checks] == [
        "signatures", "statement", "job binding", "source_hash", "hlo_hash", "compiler", "graph_hash", "binary_hash", "inputs", "target", "outputs", "op_trace",
    ]  # fmt: skip
    assert report.to_dict()["ok"] is True and report.not_checked == []


def test_verify_trace_without_module_checks_only_the_envelope() -> None:
    report = verify_trace(_signed(_statement(MLP)), [KEY.public_key()])
    assert report.ok and [c.name for c in report.checks] == ["signatures", "statement"]
    assert any("program" in item for item in report.not_checked)


def test_verify_trace_without_inputs_checks_the_compilation() -> None:
    report = verify_trace(_signed(_statement(MLP)), [KEY.public_key()], module_source=MLP.module_text)
    assert report.ok and [c.name for c in report.checks][-2:] == ["graph_hash", "binary_hash"]
    assert any("inputs and outputs" in item for item in report.not_checked)


def test_a_fault_gives_the_first_divergence_with_proofs() -> None:
    program = load_program(MLP.module_text)
    executable = compile_program(program, load_config())
    honest = executable.run_traced(*MLP.inputs())
    name = honest.instructions[2][0]
    faulty = _statement(MLP, fault=Fault(name, 3))
    report = verify_trace(_signed(faulty), [KEY.public_key()], module_source=MLP.module_text, inputs=MLP.inputs())
    assert not report.ok
    first = report.first_divergence
    assert first is not None and (first.index, first.name, first.proofs_ok) == (2, name, True)
    assert first.recorded_digest == faulty.predicate.deterministic.op_trace.instructions[2].digest
    assert first.reexecuted_digest == honest.instructions[2][2]
    assert first.line().startswith(f"instruction 2 {name} (")


def test_a_signature_by_another_key_stops_verification() -> None:
    statement = _statement(MLP, key=OTHER_KEY)
    report = verify_trace(_signed(statement, OTHER_KEY), [KEY.public_key()], module_source=MLP.module_text, inputs=MLP.inputs())
    assert not report.ok and [c.name for c in report.checks] == ["signatures"]
    assert "unknown key id" in report.checks[0].message


@pytest.mark.parametrize(
    ("text", "options", "fragment"),
    [
        ("not json", {}, "not a signed trace"),
        ('{"payloadType": "x"}', {}, "not a signed trace"),
        (None, {"inputs": []}, "give the module too"),
        (None, {"module_source": "HloModule broken\n\nENTRY {", "inputs": []}, "module:"),
        (None, {"module_source": MLP.module_text, "inputs": []}, "takes 5 inputs, got 0"),
    ],
)
def test_nothing_to_verify_raises_trace_input_error(text: str | None, options: dict, fragment: str) -> None:
    envelope = text if text is not None else _signed(_statement(MLP, op_level=False))
    with pytest.raises(TraceInputError, match=fragment):
        verify_trace(envelope, [KEY.public_key()], **options)


def test_the_re_execution_config_equals_the_recorded_one() -> None:
    # The verifier's config round-trips through CompilerConfig's own check of pipeline ids.
    identity = _statement(MLP).predicate.deterministic.compiler
    assert isinstance(recorded_config(identity), CompilerConfig)
    assert recorded_config(identity).digest() == load_config().digest()


def test_a_trace_of_the_previous_digest_version_still_verifies() -> None:
    """A trace made before the tensor digest version was recorded (no field: vxla.tensor.v1
    digests, op trace included) verifies by re-execution: the verifier digests with v1."""
    program = load_program(MLP.module_text)
    executable = compile_program(program, load_config())
    run = executable.run_traced(*MLP.inputs(), digest_version="vxla.tensor.v1")
    old = build_statement(program, executable, MLP.inputs(), run, job_id="job-1", chain_id=5, contract=None, key_id=key_id(KEY),
                          threads=1, timings_ns={}, op_level=True, tensor_digest_version=None)  # fmt: skip
    recorded = old.predicate.deterministic
    assert "tensor_digest_version" not in old.to_dict()["predicate"]["deterministic"]
    assert [t.digest for t in recorded.inputs] == [tensor_digest(a, "vxla.tensor.v1") for a in MLP.inputs()]
    assert [t.digest for t in recorded.outputs] == [tensor_digest(a, "vxla.tensor.v1") for a in run.outputs]
    assert recorded.op_trace.digests != _statement(MLP).predicate.deterministic.op_trace.digests  # v2's differ
    report = verify_trace(_signed(old), [KEY.public_key()], module_source=MLP.module_text, inputs=MLP.inputs())
    assert report.verified, report.checks
    with pytest.raises(ValueError, match="op-trace digests are vxla.tensor.v1, the statement's vxla.tensor.v2"):
        build_statement(program, executable, MLP.inputs(), run, job_id="j", chain_id=None, contract=None, key_id=key_id(KEY),
                        threads=1, timings_ns={}, op_level=True)  # fmt: skip


def test_a_trace_of_an_unknown_digest_version_is_refused_by_name() -> None:
    from attest import canonical_json, sign_payload
    from attest.errors import DigestVersionError

    data = _statement(MLP, op_level=False).to_dict()
    data["predicate"]["deterministic"]["tensor_digest_version"] = "vxla.tensor.v3"
    envelope = sign_payload(canonical_json(data), KEY).to_json()
    report = verify_trace(envelope, [KEY.public_key()], module_source=MLP.module_text, inputs=MLP.inputs())
    assert not report.ok and [c.name for c in report.checks] == ["signatures", "statement"]
    assert "unknown tensor digest version 'vxla.tensor.v3'" in report.checks[1].message
    executable = compile_program(load_program(MLP.module_text), load_config())
    with pytest.raises(DigestVersionError, match="vxla.tensor.v3"):
        executable.run_traced(*MLP.inputs(), digest_version="vxla.tensor.v3")
