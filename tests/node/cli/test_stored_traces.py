"""Traces signed in statement schema 1 (tests/fixtures/traces, made by tools/stored_traces.py
with the vxla that wrote that schema) still verify: `vxla verify` reads the older schema,
rebuilds the recorded compiler (a GPU trace's linker from schema 1's vendor field),
recompiles and checks graph_hash and binary_hash, and re-executes on this host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attest import PREDICATE_TYPE_V1, Envelope, LinkerRecord, parse_statement
from compiler.targets import NVJITLINK_VERSION
from harness.fixture_data import Fixture
from node.cli import main

TRACES = Path(__file__).resolve().parents[2] / "fixtures" / "traces"
MLP = Fixture("mlp_softmax")


@pytest.mark.parametrize("name", ["cpu", "gpu"])
def test_a_schema_1_trace_verifies(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    trace = TRACES / f"{name}.v1.json"
    payload = Envelope.from_json(trace.read_text()).payload
    assert json.loads(payload)["predicateType"] == PREDICATE_TYPE_V1
    statement = parse_statement(payload)
    compiler = json.loads(payload)["predicate"]["deterministic"]["compiler"]
    if name == "gpu":
        assert compiler["nvjitlink_version"] == NVJITLINK_VERSION and "linker" not in compiler
        assert statement.predicate.deterministic.compiler.linker == LinkerRecord("nvJitLink", NVJITLINK_VERSION)
    else:
        assert "nvjitlink_version" not in compiler and statement.predicate.deterministic.compiler.linker is None
    capsys.readouterr()
    argv = ["verify", str(trace), "--module", str(MLP.directory / "module.hlo"), "--inputs", *map(str, MLP.input_paths()),
            "--trusted-key", str(TRACES / "node.pub"), "--json"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    checks = {check["name"]: check for check in report["checks"]}
    assert report["verified"], json.dumps(report["checks"])
    for check in ("signatures", "statement", "compiler", "graph_hash", "binary_hash", "outputs", "op_trace"):
        assert checks[check]["ok"], checks[check]
