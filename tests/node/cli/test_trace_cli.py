"""Signed traces through the command line: `vxla keys init`, `vxla run --trace` and
`vxla verify`, on every fixture, with injected faults, tampered files and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attest import (
    Envelope,
    Predicate,
    Statement,
    b64decode,
    b64encode,
    digest_leaves,
    key_id,
    merkle_root,
    sign_statement,
)
from attest.keys import generate_private_key, load_private_key, private_key_pem
from compiler import driver
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from compiler.runtime.executable import Fault
from harness.fixture_data import FIXTURE_NAMES, Fixture
from harness.hlo_fragments import layered_module
from harness.sampling import share_of
from harness.targets import session_cache
from node.cli import main

MLP = Fixture("mlp_softmax")
CHAIN_ID = 31337
CONTRACT = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


class Keys:
    """One trusted node key pair and one untrusted pair, shared by the tests of this module."""

    def __init__(self, base: Path) -> None:
        self.dir = base / "trusted"
        self.other_dir = base / "untrusted"
        assert main(["keys", "init", "--dir", str(self.dir)]) == 0
        assert main(["keys", "init", "--dir", str(self.other_dir)]) == 0
        self.private = self.dir / "node.key"
        self.public = self.dir / "node.pub"
        self.other_private = self.other_dir / "node.key"
        self.other_public = self.other_dir / "node.pub"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return Keys(tmp_path_factory.mktemp("keys"))


def _module(fixture: Fixture) -> str:
    return str(fixture.directory / "module.hlo")


def _inputs(fixture: Fixture) -> list[str]:
    return [str(p) for p in fixture.input_paths()]


def _run_trace(fixture: Fixture, trace: Path, keys: Keys, *extra: str) -> None:
    argv = ["run", _module(fixture), *_inputs(fixture), "--trace", str(trace), "--key", str(keys.private), "--json", *extra]
    assert main(argv) == 0
    assert trace.exists()


def _verify(capsys: pytest.CaptureFixture[str], trace: Path, keys: Keys | None, *extra: str, fixture: Fixture | None = MLP) -> tuple[int, dict]:
    """Runs vxla verify --json (against `fixture`'s module and inputs unless None); returns
    the exit status and the JSON report (empty for a usage error)."""
    capsys.readouterr()
    argv = ["verify", str(trace), "--json", *extra]
    if keys is not None:
        argv += ["--trusted-key", str(keys.public)]
    if fixture is not None:
        argv += ["--module", _module(fixture), "--inputs", *_inputs(fixture)]
    status = main(argv)
    out = capsys.readouterr().out
    return status, json.loads(out) if out else {}


def _failed(report: dict) -> dict[str, str]:
    return {c["name"]: c["message"] for c in report["checks"] if not c["ok"]}


@pytest.fixture(scope="module")
def honest_trace(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An op-level trace of mlp_softmax bound to a chain and contract."""
    trace = tmp_path_factory.mktemp("honest") / "trace.json"
    _run_trace(MLP, trace, keys, "--op-level", "--job-id", "job-7", "--chain-id", str(CHAIN_ID), "--contract", CONTRACT)
    return trace


# ---------------------------------------------------------------------------------------------
# Round trip (on a rotating third of the fixtures: harness/sampling.py) and fault injection


@pytest.mark.parametrize("name", share_of(FIXTURE_NAMES, 3, "trace round trip"))
def test_round_trip_verifies_on_the_fixtures(name: str, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixture = Fixture(name)
    trace = tmp_path / "trace.json"
    _run_trace(fixture, trace, keys, "--op-level")
    status, report = _verify(capsys, trace, keys, fixture=fixture)
    assert status == 0, report
    assert report["ok"] and report["first_divergence"] is None
    names = [c["name"] for c in report["checks"]]
    assert names == ["signatures", "statement", "source_hash", "hlo_hash", "compiler", "graph_hash", "binary_hash", "inputs", "target", "outputs", "op_trace"]
    assert [p for p in tmp_path.iterdir()] == [trace]  # written atomically: no temporary left


def _visible_fault(fixture: Fixture) -> tuple[Fault, int]:
    """An instruction in the middle of the schedule and a bit whose flip changes its digest
    (a bit can be invisible, e.g. in a NaN's payload), with its schedule index."""
    executable = compile_program(load_program(fixture.module_text), load_config(), cache_dir=session_cache())
    honest = executable.run_traced(*fixture.inputs())
    points = [p for p in executable.plan.trace_points if executable.plan.buffers[p.buffers[0]].kind == "arena"]
    target = points[len(points) // 2]
    index = [record[0] for record in honest.instructions].index(target.name)
    size = executable.plan.buffers[target.buffers[0]].nbytes * 8
    for bit in sorted({b % size for b in (5, 30, 62, 7, size - 2, size // 2 + 3)}):
        faulty = executable.run_traced(*fixture.inputs(), fault=Fault(target.name, bit))
        if faulty.instructions[index][2] != honest.instructions[index][2]:
            return Fault(target.name, bit), index
    raise AssertionError(f"{fixture.name}: no candidate bit of {target.name} changed its digest")


# The fault through the command line on fixtures of each kind of structure: a while loop, a
# conditional, a scan, fusions and dots, sort and tuples, special values (a flipped bit may
# hide in a NaN's payload) and narrow floats. That a fault shows first at its instruction
# is held on every fixture by tests/runtime/test_op_trace.py; what `vxla verify` does with
# a trace that diverges does not depend on the fixture.
FAULT_FIXTURES = ["fori_loop", "conditional", "scan", "transformer_block", "topk_sampling", "special_values", "f16_bf16"]


@pytest.mark.parametrize("name", FAULT_FIXTURES)
def test_an_injected_fault_is_named_as_the_first_divergence(name: str, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fixture = Fixture(name)
    fault, index = _visible_fault(fixture)
    trace = tmp_path / "faulty.json"
    _run_trace(fixture, trace, keys, "--op-level", "--fault", f"{fault.instruction}:{fault.bit}")
    status, report = _verify(capsys, trace, keys, fixture=fixture)
    assert status == 1, report
    first = report["first_divergence"]
    assert first is not None, report
    assert (first["index"], first["name"]) == (index, fault.instruction)
    assert first["proofs_ok"] is True and first["recorded_digest"] != first["reexecuted_digest"]
    assert f"instruction {index} {fault.instruction} (" in _failed(report)["op_trace"]
    # Everything upstream of execution still matches: the fault is in the run, not the code.
    assert {"signatures", "hlo_hash", "graph_hash", "binary_hash", "inputs"}.isdisjoint(_failed(report))


def test_the_human_report_prints_the_first_divergence(keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fault, index = _visible_fault(MLP)
    trace = tmp_path / "faulty.json"
    _run_trace(MLP, trace, keys, "--op-level", "--fault", f"{fault.instruction}:{fault.bit}")
    capsys.readouterr()
    argv = ["verify", str(trace), "--trusted-key", str(keys.public), "--module", _module(MLP), "--inputs", *_inputs(MLP)]
    assert main(argv) == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("first divergence: "))
    assert line.startswith(f"first divergence: instruction {index} {fault.instruction} (")
    digests = line.split("): ", 1)[1].split(" != ")
    assert len(digests) == 2 and all(len(d) == 64 for d in digests) and digests[0] != digests[1]
    assert "result: DIFFERENT" in out


# ---------------------------------------------------------------------------------------------
# Tampering


def _envelope_data(trace: Path) -> dict:
    return json.loads(trace.read_text())


def _write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("position", [0, 1, 100, -2, -1])
def test_a_changed_payload_byte_is_rejected(position: int, honest_trace: Path, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _envelope_data(honest_trace)
    payload = bytearray(b64decode(data["payload"], "payload"))
    payload[position] ^= 0x01
    data["payload"] = b64encode(bytes(payload))
    status, report = _verify(capsys, _write(tmp_path / "t.json", data), keys)
    assert status == 1
    assert _failed(report) == {"signatures": _failed(report)["signatures"]}
    assert "signature 0" in _failed(report)["signatures"] and "invalid" in _failed(report)["signatures"]


@pytest.mark.parametrize("position", [0, 31, 63])
def test_a_changed_signature_byte_is_rejected(position: int, honest_trace: Path, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _envelope_data(honest_trace)
    signature = bytearray(b64decode(data["signatures"][0]["sig"], "sig"))
    signature[position] ^= 0x80
    data["signatures"][0]["sig"] = b64encode(bytes(signature))
    status, report = _verify(capsys, _write(tmp_path / "t.json", data), keys)
    assert status == 1
    assert "invalid" in _failed(report)["signatures"]


def _statement(trace: Path) -> Statement:
    return Statement.from_json_bytes(Envelope.from_json(trace.read_text()).payload)


def _resigned(trace: Path, change, private_key_path: Path, out: Path) -> Path:  # noqa: ANN001
    """The trace's statement with `change` applied to its predicate data, signed again by the
    key in `private_key_path` (whose id becomes the predicate's key_id)."""
    key = load_private_key(private_key_path)
    data = _statement(trace).predicate.to_dict()
    change(data)
    op_trace = data["deterministic"]["op_trace"]
    if op_trace is not None:  # keep the statement well-formed: the root follows the digests
        op_trace["merkle_root"] = merkle_root(digest_leaves([i["digest"] for i in op_trace["instructions"]]))
    data["key_id"] = key_id(key)
    statement = Statement.build(Predicate.from_dict(data))
    out.write_text(sign_statement(statement, key).to_json())
    return out


def _set(path: str, value: object):  # noqa: ANN202
    def change(data: dict) -> None:
        *parents, last = path.split(".")
        target = data
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value

    return change


OTHER_HASH = "ab" * 32


def test_a_changed_predicate_signed_by_an_untrusted_key_is_rejected(honest_trace: Path, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    forged = _resigned(honest_trace, _set("deterministic.binary_hash", OTHER_HASH), keys.other_private, tmp_path / "t.json")
    status, report = _verify(capsys, forged, keys)
    assert status == 1
    assert "unknown key id (not a trusted key)" in _failed(report)["signatures"]


def test_a_trace_by_an_unknown_key_is_rejected(honest_trace: Path, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    argv = ["verify", str(honest_trace), "--json", "--trusted-key", str(keys.other_public)]
    assert main(argv) == 1
    report = json.loads(capsys.readouterr().out)
    assert "unknown key id" in _failed(report)["signatures"]


@pytest.mark.parametrize(
    ("path", "value", "check", "fragment"),
    [
        ("deterministic.program.source_hash", OTHER_HASH, "source_hash", OTHER_HASH),
        ("deterministic.program.hlo_hash", OTHER_HASH, "hlo_hash", OTHER_HASH),
        ("deterministic.compiler.pipeline_id", "pipeline.v0", "compiler", "pipeline_id"),
        ("deterministic.compiler.llvm_version", "11.0.0", "compiler", "llvm_version"),
        ("deterministic.compiler.numerics_contract", "numerics.v0", "compiler", "numerics_contract"),
        ("deterministic.compiler.passes.0", "nothing", "compiler", "passes"),
        ("deterministic.compiler.target.cpu", "x86-64-v2", "binary_hash", "recompiling"),
        ("deterministic.graph_hash", OTHER_HASH, "graph_hash", OTHER_HASH),
        ("deterministic.binary_hash", OTHER_HASH, "binary_hash", OTHER_HASH),
        ("deterministic.inputs.1.digest", OTHER_HASH, "inputs", "in1"),
        ("deterministic.inputs.0.shape", [8, 15], "inputs", "in0"),
        ("deterministic.outputs.1.digest", OTHER_HASH, "outputs", "out1"),
        ("deterministic.op_trace.instructions.3.digest", OTHER_HASH, "op_trace", "instruction 3 "),
        ("deterministic.op_trace.instructions.0.opcode", "add", "op_trace", "instruction 0 "),
    ],
)
def test_a_changed_field_signed_by_the_trusted_key_fails_re_execution(
    path: str, value: object, check: str, fragment: str, honest_trace: Path, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A dishonest trusted node can sign anything: recompiling and re-executing catches it.
    forged = _resigned(honest_trace, _set(path, value), keys.private, tmp_path / "t.json")
    status, report = _verify(capsys, forged, keys)
    assert status == 1, report
    failed = _failed(report)
    assert check in failed, failed
    assert fragment in failed[check]


def test_without_re_execution_a_trace_is_not_called_verified(honest_trace: Path, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trusted key signed outputs that are wrong: without the module, verify checks the
    signatures only and says so, with exit 3 (it used to print "verified" and exit 0); with
    the module but no inputs it checks the compilation and says the outputs are not checked;
    with both it finds the outputs differ."""
    forged = _resigned(honest_trace, _set("deterministic.outputs.1.digest", OTHER_HASH), keys.private, tmp_path / "t.json")
    status, report = _verify(capsys, forged, keys, fixture=None)
    assert status == 3 and report["ok"] and not report["verified"] and not report["re_executed"]
    assert report["result"].startswith("signatures valid, not re-executed")
    capsys.readouterr()
    assert main(["verify", str(forged), "--trusted-key", str(keys.public)]) == 3
    out = capsys.readouterr().out
    assert "result: signatures valid, not re-executed" in out and "result: verified" not in out
    status, report = _verify(capsys, forged, keys, "--module", _module(MLP), fixture=None)
    assert status == 3 and not report["verified"], report
    assert {c["name"] for c in report["checks"]} >= {"hlo_hash", "graph_hash", "binary_hash"}
    assert report["result"].startswith("compilation verified, not re-executed")
    assert any("give the inputs" in item for item in report["not_checked"])
    status, report = _verify(capsys, forged, keys)
    assert status == 1 and "outputs" in _failed(report) and not report["verified"]
    status, report = _verify(capsys, honest_trace, keys)
    assert status == 0 and report["verified"] and report["re_executed"] and report["result"] == "verified"


def test_verify_with_the_cache_compiles_a_program_once(honest_trace: Path, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--cache DIR: the first verify compiles into DIR, the second takes the program from it
    (no lowering at all) and verifies the same; without --cache nothing is written there."""
    cache = tmp_path / "cache"
    status, report = _verify(capsys, honest_trace, keys, "--cache", str(cache))
    assert status == 0 and report["verified"], report
    assert any(cache.glob("*.o"))

    def no_compile(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("compiled again")

    monkeypatch.setattr(driver, "_generated", no_compile)
    again, second = _verify(capsys, honest_trace, keys, "--cache", str(cache))
    assert again == 0 and second["checks"] == report["checks"]
    with pytest.raises(AssertionError, match="compiled again"):
        _verify(capsys, honest_trace, keys)


def test_job_binding_is_checked(honest_trace: Path, keys: Keys, capsys: pytest.CaptureFixture[str]) -> None:
    binding = ["--job-id", "job-7", "--chain-id", str(CHAIN_ID), "--contract", CONTRACT.lower()]
    status, report = _verify(capsys, honest_trace, keys, *binding)
    assert status == 0 and "job binding" in [c["name"] for c in report["checks"]]
    for extra, fragment in (
        (["--job-id", "job-8"], "predicate.job_id"),
        (["--chain-id", "1"], "predicate.chain_id"),
        (["--contract", "0x" + "11" * 20], "predicate.contract"),
    ):
        status, report = _verify(capsys, honest_trace, keys, *extra)
        assert status == 1
        assert fragment in _failed(report)["job binding"]


def test_other_inputs_are_named(honest_trace: Path, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changed = np.load(MLP.input_paths()[0]).copy()
    changed.reshape(-1)[0] += 1
    path = tmp_path / "in0.npy"
    np.save(path, changed)
    argv = ["--module", _module(MLP), "--inputs", str(path), *_inputs(MLP)[1:]]
    status, report = _verify(capsys, honest_trace, keys, *argv, fixture=None)
    assert status == 1
    message = _failed(report)["inputs"]
    assert "input digest" in message and "in0" in message and "in1" not in message
    assert set(_failed(report)) == {"inputs"}


def test_a_trace_of_another_module_names_hlo_hash(honest_trace: Path, keys: Keys, capsys: pytest.CaptureFixture[str]) -> None:
    status, report = _verify(capsys, honest_trace, keys, fixture=Fixture("cnn"))
    assert status == 1
    assert "hlo_hash" in _failed(report)
    assert "graph_hash" not in [c["name"] for c in report["checks"]]


def test_outputs_only_trace_reports_outputs_without_an_instruction(keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fault, _ = _visible_fault(MLP)
    trace = tmp_path / "t.json"
    _run_trace(MLP, trace, keys, "--fault", f"{fault.instruction}:{fault.bit}")
    assert _statement(trace).predicate.deterministic.op_trace is None
    status, report = _verify(capsys, trace, keys)
    assert status == 1
    assert set(_failed(report)) == {"outputs"} and report["first_divergence"] is None


# ---------------------------------------------------------------------------------------------
# Keys, default directories and passphrases


def test_keys_init_default_dir_and_verify_with_default_trusted_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VXLA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VXLA_KEY_PASSPHRASE", raising=False)
    capsys.readouterr()
    assert main(["keys", "init"]) == 0
    out = capsys.readouterr().out
    key_dir = tmp_path / "home" / "keys"
    assert str(key_dir / "node.key") in out and str(key_dir / "node.pub") in out and "key_id" in out
    before = (key_dir / "node.key").read_bytes()
    assert main(["keys", "init"]) == 2
    assert "refusing to overwrite" in capsys.readouterr().err
    assert (key_dir / "node.key").read_bytes() == before
    trace = tmp_path / "t.json"
    assert main(["run", _module(MLP), *_inputs(MLP), "--trace", str(trace), "--key", str(key_dir / "node.key")]) == 0
    status, report = _verify(capsys, trace, None)
    assert status == 0, report


def test_an_encrypted_key_signs_with_its_passphrase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("VXLA_KEY_PASSPHRASE", raising=False)
    secret = tmp_path / "passphrase"
    secret.write_text("correct horse\n")
    assert main(["keys", "init", "--dir", str(tmp_path / "k"), "--passphrase-file", str(secret)]) == 0
    assert b"ENCRYPTED" in (tmp_path / "k" / "node.key").read_bytes()
    trace = tmp_path / "t.json"
    base = ["run", _module(MLP), *_inputs(MLP), "--trace", str(trace), "--key", str(tmp_path / "k" / "node.key")]
    assert main([*base, "--passphrase-file", str(secret)]) == 0
    trace.unlink()
    monkeypatch.setenv("VXLA_KEY_PASSPHRASE", "correct horse")
    assert main(base) == 0
    capsys.readouterr()
    # The signature holds; with nothing re-executed that is all verify says (exit 3).
    assert main(["verify", str(trace), "--trusted-key", str(tmp_path / "k" / "node.pub")]) == 3
    assert "result: signatures valid, not re-executed" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# Bad input: exit 2, a message, nothing written


@pytest.fixture(scope="module")
def encrypted_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("encrypted") / "node.key"
    path.write_bytes(private_key_pem(generate_private_key(), b"right"))
    return path


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ([], "--trace needs --key"),
        (["--key", "{missing}"], "cannot read key file"),
        (["--key", "{encrypted}"], "a passphrase is needed"),
        (["--key", "{encrypted}", "--passphrase-file", "{wrong}"], "wrong passphrase"),
        (["--key", "{encrypted}", "--passphrase-file", "{missing}"], "--passphrase-file"),
        (["--key", "{key}", "--fault", "fusion.5"], "INSTRUCTION:BIT"),
        (["--key", "{key}", "--fault", "fusion.5:x"], "INSTRUCTION:BIT"),
        (["--key", "{key}", "--fault", ":3"], "INSTRUCTION:BIT"),
        (["--key", "{key}", "--fault", "nope:3"], "no traced instruction 'nope'"),
        (["--key", "{key}", "--chain-id", "-1"], "--chain-id"),
        (["--key", "{key}", "--contract", "0x1234"], "--contract"),
        (["--key", "{key}", "--backend", "reference"], "llvm backend"),
        (["--key", "{key}", "--job-id", ""], "--job-id must not be empty"),
    ],
)
def test_bad_run_input_exits_2_and_writes_nothing(
    extra: list[str], fragment: str, keys: Keys, encrypted_key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VXLA_KEY_PASSPHRASE", raising=False)
    wrong = tmp_path / "wrong"
    wrong.write_text("wrong\n")
    names = {"missing": str(tmp_path / "missing.key"), "encrypted": str(encrypted_key), "wrong": str(wrong), "key": str(keys.private)}
    before = set(tmp_path.iterdir())
    argv = ["run", _module(MLP), *_inputs(MLP), "--trace", str(tmp_path / "t.json"), "--out", str(tmp_path / "o.npz")]
    argv += [a.format(**names) for a in extra]
    capsys.readouterr()
    assert main(argv) == 2
    assert fragment in capsys.readouterr().err
    assert set(tmp_path.iterdir()) == before


def test_key_without_trace_is_refused(keys: Keys, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", _module(MLP), *_inputs(MLP), "--key", str(keys.private)]) == 2
    assert "needs --trace" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda d, t: [str(d / "missing.json")], "no such file"),
        (lambda d, t: [str(_text(d / "x.json", "{not json"))], "not a signed trace"),
        (lambda d, t: [str(_text(d / "x.json", '{"payload": "AA=="}'))], "not a signed trace"),
        (lambda d, t: [str(t), "--module", str(d / "missing.hlo")], "no such file"),
        (lambda d, t: [str(t), "--inputs", *_inputs(MLP)], "--inputs needs --module"),
        (lambda d, t: [str(t), "--module", _module(MLP), "--inputs", _inputs(MLP)[0]], "takes 5 inputs, got 1"),
        (lambda d, t: [str(t), "--module", _module(MLP), "--inputs", *_inputs(MLP)[:4], str(d / "no.npy")], "no such file"),
        (lambda d, t: [str(t), "--trusted-key", str(d / "missing.pub")], "cannot read key file"),
        (lambda d, t: [str(t), "--chain-id", "x"], "--chain-id"),
    ],
)
def test_bad_verify_input_exits_2(make, fragment: str, honest_trace: Path, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    argv = ["verify", *make(tmp_path, honest_trace)]
    if "--trusted-key" not in argv:
        argv += ["--trusted-key", str(keys.public)]
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert fragment in captured.err and captured.out == ""


def test_verify_without_any_trusted_key_exits_2(honest_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("VXLA_HOME", str(tmp_path))
    assert main(["verify", str(honest_trace)]) == 2
    assert "no trusted keys" in capsys.readouterr().err


def _text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_help_texts_name_the_trace_options(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, words in (
        (["run", "--help"], ["--trace", "--key", "--op-level", "--fault", "for tests and demos", "--job-id", "--chain-id", "--contract"]),
        (["verify", "--help"], ["--module", "--inputs", "--trusted-key", "Exit status", "first instruction"]),
        (["keys", "init", "--help"], ["--dir", "--passphrase-file", "Refuses to overwrite"]),
    ):
        assert main(argv) == 0
        out = " ".join(capsys.readouterr().out.split())
        for word in words:
            assert word in out, (argv, word)


def test_run_with_a_trace_binds_and_digests_each_tensor_once(tmp_path: Path, keys: Keys, monkeypatch: pytest.MonkeyPatch) -> None:
    """`vxla run --trace`: the job id, the statement and the printed report share one digest
    of each input and output, and the inputs are bound to the module's types once."""
    import node.tracing.statement as statement_module
    from compiler.program import Program

    digests: list[tuple[int, ...]] = []
    binds: list[int] = []
    digest, bind = statement_module.tensor_digest, Program.bind
    monkeypatch.setattr(statement_module, "tensor_digest", lambda array, *rest: digests.append(array.shape) or digest(array, *rest))
    monkeypatch.setattr(Program, "bind", lambda self, arrays: binds.append(len(arrays)) or bind(self, arrays))
    trace = tmp_path / "trace.json"
    _run_trace(MLP, trace, keys)
    statement = Statement.from_json_bytes(Envelope.from_json(trace.read_text()).payload)
    deterministic = statement.predicate.deterministic
    assert len(digests) == len(deterministic.inputs) + len(deterministic.outputs) and binds == [len(MLP.input_paths())]
    assert statement.predicate.job_id.startswith("local-")


def test_the_first_divergence_names_the_users_source(keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Where the HLO's metadata says (JAX's op names), the first differing instruction is
    named with the user's code it came from, in the report and its line."""
    module = tmp_path / "layers.hlo"
    module.write_text(layered_module(3))
    inputs = [np.random.default_rng(n).standard_normal((4, 8) if n == 0 else (8, 8)).astype(np.float32) for n in range(4)]
    paths = []
    for number, array in enumerate(inputs):
        paths.append(str(tmp_path / f"in{number}.npy"))
        np.save(paths[-1], array)
    executable = compile_program(load_program(module.read_text()), load_config(), cache_dir=session_cache())
    honest = executable.run_traced(*inputs)
    target, bit = next(
        (name, bit) for name, _, digest in honest.instructions if name.startswith("fusion") for bit in (3, 30, 61)
        if executable.run_traced(*inputs, fault=Fault(name, bit)).instructions != honest.instructions
    )  # fmt: skip
    trace = tmp_path / "faulty.json"
    assert main(["run", str(module), *paths, "--trace", str(trace), "--key", str(keys.private), "--json", "--op-level", "--fault", f"{target}:{bit}"]) == 0
    capsys.readouterr()
    status = main(["verify", str(trace), "--json", "--trusted-key", str(keys.public), "--module", str(module), "--inputs", *paths])
    report = json.loads(capsys.readouterr().out)
    assert status == 1
    first = report["first_divergence"]
    assert first["name"] == target and first["source"] is not None and first["source"].startswith("jit(apply)/Model/block_"), first
    assert f"{first['source']}" in _failed(report)["op_trace"] and "at model.py:1" in first["source"]
    # vxla graph --traces says it too.
    honest_trace = tmp_path / "honest.json"
    assert main(["run", str(module), *paths, "--trace", str(honest_trace), "--key", str(keys.private), "--json", "--op-level"]) == 0
    capsys.readouterr()
    assert main(["graph", str(module), "--traces", str(honest_trace), str(trace), "--dot", str(tmp_path / "g.dot")]) == 0
    assert f"{target} ({first['source']})" in capsys.readouterr().err
