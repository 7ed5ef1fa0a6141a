"""The execution statement: layout, canonical JSON, strict parsing with field paths."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest

from attest import (
    PREDICATE_TYPE,
    PREDICATE_TYPE_V1,
    STATEMENT_TYPE,
    LinkerRecord,
    OpTrace,
    Statement,
    StatementError,
    canonical_json,
    digest_leaves,
    key_id,
    merkle_root,
    normalize_contract,
    parse_statement,
)
from tests.attest.traces import CONTRACT, make_predicate, make_statement, node_key


def statement_dict() -> dict[str, Any]:
    return make_statement(node_key("a")).to_dict()


def test_layout_is_an_in_toto_statement_with_outputs_as_subjects() -> None:
    statement = make_statement(node_key("a"))
    data = statement.to_dict()
    assert data["_type"] == STATEMENT_TYPE == "https://in-toto.io/Statement/v1"
    assert data["predicateType"] == PREDICATE_TYPE
    outputs = data["predicate"]["deterministic"]["outputs"]
    assert data["subject"] == [
        {"name": o["name"], "digest": {"sha256": o["digest"]}} for o in outputs
    ]
    assert [s["name"] for s in data["subject"]] == ["out0", "out1"]
    assert data["predicate"]["key_id"] == key_id(node_key("a"))
    trace = data["predicate"]["deterministic"]["op_trace"]
    assert trace["merkle_root"] == merkle_root(
        digest_leaves([i["digest"] for i in trace["instructions"]])
    )
    assert [i["index"] for i in trace["instructions"]] == list(range(8))


def test_canonical_json_bytes() -> None:
    statement = make_statement(node_key("a"))
    payload = statement.to_json_bytes()
    assert (
        payload == json.dumps(statement.to_dict(), sort_keys=True, separators=(",", ":")).encode()
    )
    assert b" " not in payload.replace(b"x86-64", b"")  # no separator spaces
    assert parse_statement(payload) == statement
    assert Statement.from_dict(json.loads(payload)) == statement
    assert canonical_json({"b": "\u00e9", "a": [1]}) == '{"a":[1],"b":"\u00e9"}'.encode()
    with pytest.raises(StatementError, match="floats are not allowed"):
        canonical_json({"t": 1.5})


def test_non_canonical_payload_is_rejected() -> None:
    statement = make_statement(node_key("a"))
    spaced = json.dumps(statement.to_dict(), sort_keys=True).encode()
    with pytest.raises(StatementError, match="payload: not canonical JSON"):
        parse_statement(spaced)
    assert parse_statement(spaced, require_canonical=False) == statement


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"{", "payload: not valid JSON"),
        (b"\xff", "payload: not valid UTF-8"),
        (b'{"a":1,"a":2}', "payload: not valid JSON .*duplicate key 'a'"),
        (b'{"a":NaN}', "payload: not valid JSON"),
        (b"[]", "expected an object"),
    ],
)
def test_payloads_that_are_not_statements(payload: bytes, message: str) -> None:
    with pytest.raises(StatementError, match=message):
        parse_statement(payload)


def _set(data: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    target = data
    for part in path[:-1]:
        target = target[part]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


_DELETE = object()
D = ["predicate", "deterministic"]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["_type"], "https://in-toto.io/Statement/v0.1", "^_type: expected"),
        (["predicateType"], "https://example.com/x", "^predicateType: expected"),
        (["extra"], 1, "^extra: unknown field"),
        (["predicate", "job_id"], _DELETE, r"^predicate\.job_id: missing"),
        (["predicate", "job_id"], "", r"^predicate\.job_id: must not be empty"),
        (["predicate", "job_id"], 7, r"^predicate\.job_id: expected a string, got an integer"),
        (
            ["predicate", "chain_id"],
            "1",
            r"^predicate\.chain_id: expected an integer, got a string",
        ),
        (
            ["predicate", "chain_id"],
            True,
            r"^predicate\.chain_id: expected an integer, got a boolean",
        ),
        (["predicate", "chain_id"], -1, r"^predicate\.chain_id: expected an integer in 0\.\."),
        (
            ["predicate", "contract"],
            CONTRACT.upper().replace("0X", "0x"),
            r"^predicate\.contract: expected null or 0x",
        ),
        (["predicate", "contract"], "0x1234", r"^predicate\.contract: expected null or 0x"),
        (
            ["predicate", "key_id"],
            "ab" * 31,
            r"^predicate\.key_id: expected 64 lower-case hex characters",
        ),
        (["predicate", "surprise"], 1, r"^predicate\.surprise: unknown field"),
        (
            [*D, "graph_hash"],
            "AB" * 32,
            r"^predicate\.deterministic\.graph_hash: expected 64 lower-case hex",
        ),
        (
            [*D, "binary_hash"],
            None,
            r"^predicate\.deterministic\.binary_hash: expected 64 .* got null",
        ),
        (
            [*D, "program", "hlo_hash"],
            _DELETE,
            r"^predicate\.deterministic\.program\.hlo_hash: missing",
        ),
        (
            [*D, "compiler", "passes"],
            "cse",
            r"^predicate\.deterministic\.compiler\.passes: expected a list",
        ),
        (
            [*D, "compiler", "passes", 1],
            3,
            r"^predicate\.deterministic\.compiler\.passes\[1\]: expected a string",
        ),
        (
            [*D, "compiler", "target", "cpu"],
            "",
            r"^predicate\.deterministic\.compiler\.target\.cpu: must not be empty",
        ),
        (
            [*D, "inputs", 0, "dtype"],
            "float32",
            r"^predicate\.deterministic\.inputs\[0\]\.dtype: unknown element type",
        ),
        (
            [*D, "inputs", 0, "shape", 1],
            -3,
            r"^predicate\.deterministic\.inputs\[0\]\.shape\[1\]: expected an integer at least 0",
        ),
        (
            [*D, "inputs", 1, "name"],
            "in0",
            r"^predicate\.deterministic\.inputs\[1\]\.name: duplicate name 'in0'",
        ),
        ([*D, "outputs"], [], r"^predicate\.deterministic\.outputs: must not be empty"),
        (
            [*D, "op_trace", "instructions"],
            [],
            r"^predicate\.deterministic\.op_trace\.instructions: must not be empty",
        ),
        (
            [*D, "op_trace", "instructions", 2, "index"],
            3,
            r"^predicate\.deterministic\.op_trace\.instructions\[2\]\.index: expected 2",
        ),
        (
            [*D, "op_trace", "instructions", 2, "opcode"],
            _DELETE,
            r"^predicate\.deterministic\.op_trace\.instructions\[2\]\.opcode: missing",
        ),
        (
            [*D, "op_trace", "merkle_root"],
            "0" * 64,
            r"^predicate\.deterministic\.op_trace\.merkle_root: does not match",
        ),
        (
            ["predicate", "run", "threads"],
            0,
            r"^predicate\.run\.threads: expected an integer at least 1",
        ),
        (
            ["predicate", "run", "timings_ns", "execute"],
            2.5,
            r"^predicate\.run\.timings_ns\.execute: expected an integer, got a float",
        ),
        (["subject", 0, "digest", "sha256"], "0" * 64, "^subject: must list the outputs"),
        (
            ["subject", 0, "digest", "sha512"],
            "0" * 128,
            r"^subject\[0\]\.digest\.sha512: unknown field",
        ),
        (["subject"], [], "^subject: must list the outputs"),
    ],
)
def test_strict_validation_names_the_field(path: list[Any], value: Any, message: str) -> None:
    with pytest.raises(StatementError, match=message):
        Statement.from_dict(_set(statement_dict(), path, value))


def test_construction_validates_too() -> None:
    predicate = make_predicate(node_key("a"))
    bad = replace(predicate, deterministic=replace(predicate.deterministic, graph_hash="xyz"))
    with pytest.raises(StatementError, match=r"predicate\.deterministic\.graph_hash"):
        Statement.build(bad)
    trace = predicate.deterministic.op_trace
    assert trace is not None
    wrong_root = replace(
        trace, merkle_root=OpTrace.from_instructions([("x", "add", "0" * 64)]).merkle_root
    )
    with pytest.raises(StatementError, match=r"op_trace\.merkle_root: does not match"):
        Statement.build(
            replace(predicate, deterministic=replace(predicate.deterministic, op_trace=wrong_root))
        )


def test_optional_parts() -> None:
    statement = make_statement(node_key("a"), instructions=None, chain_id=None, contract=None)
    data = statement.to_dict()["predicate"]
    assert data["deterministic"]["op_trace"] is None
    assert data["chain_id"] is None and data["contract"] is None
    assert parse_statement(statement.to_json_bytes()) == statement


def test_normalize_contract() -> None:
    checksummed = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
    assert normalize_contract(checksummed) == CONTRACT
    with pytest.raises(StatementError, match="contract"):
        normalize_contract("5fbdb2315678afecb367f032d93f642f64180aa3")


def test_a_gpu_run_records_the_gpu_and_the_cubin_linker() -> None:
    """A GPU target's statement: the linker in the compiler identity and the GPU in the run's
    host record, both optional (a CPU target's statement has neither) and strict."""
    data = statement_dict()
    assert "linker" not in data["predicate"]["deterministic"]["compiler"]
    data["predicate"]["deterministic"]["compiler"]["linker"] = {"name": "nvJitLink", "version": "13.5"}
    host = {"arch": "x86_64", "cpu_model": "AMD EPYC", "features": ["avx2"], "os": "Linux", "vxla_version": "0.1.0"}
    data["predicate"]["run"]["host"] = {**host, "gpu": {"name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132, "driver_version": "13.0"}}
    parsed = parse_statement(canonical_json(data))
    assert parsed.predicate.deterministic.compiler.linker == LinkerRecord("nvJitLink", "13.5")
    assert parsed.predicate.run.host.gpu.sm_count == 132
    assert parsed.to_dict() == data
    data["predicate"]["run"]["host"]["gpu"]["clock"] = 1980
    with pytest.raises(StatementError, match=r"predicate\.run\.host\.gpu\.clock: unknown field"):
        parse_statement(canonical_json(data))


def test_the_tensor_digest_version_is_recorded_and_an_older_trace_has_none() -> None:
    """New statements name their digests' version; a statement from before the field (none
    there) still parses, in its own canonical form, as vxla.tensor.v1; an explicit v1 too."""
    statement = make_statement(node_key("a"))
    deterministic = statement.to_dict()["predicate"]["deterministic"]
    assert deterministic["tensor_digest_version"] == "vxla.tensor.v2"
    assert statement.predicate.deterministic.digest_version == "vxla.tensor.v2"
    old = statement_dict()
    del old["predicate"]["deterministic"]["tensor_digest_version"]
    parsed = parse_statement(canonical_json(old))
    assert parsed.predicate.deterministic.tensor_digest_version is None
    assert parsed.predicate.deterministic.digest_version == "vxla.tensor.v1"
    assert parsed.to_json_bytes() == canonical_json(old)  # re-serialized without the field
    explicit = copy.deepcopy(old)
    explicit["predicate"]["deterministic"]["tensor_digest_version"] = "vxla.tensor.v1"
    assert parse_statement(canonical_json(explicit)).predicate.deterministic.digest_version == "vxla.tensor.v1"


def test_an_unknown_tensor_digest_version_is_refused_by_name() -> None:
    data = statement_dict()
    data["predicate"]["deterministic"]["tensor_digest_version"] = "vxla.tensor.v7"
    with pytest.raises(
        StatementError,
        match=r"^predicate\.deterministic\.tensor_digest_version: unknown tensor digest version 'vxla\.tensor\.v7'",
    ):
        parse_statement(canonical_json(data))
    predicate = make_predicate(node_key("a"))
    with pytest.raises(StatementError, match="vxla.tensor.v7"):
        Statement.build(replace(predicate, deterministic=replace(predicate.deterministic, tensor_digest_version="vxla.tensor.v7")))


def test_schema_1_statements_still_parse_in_their_own_form() -> None:
    """Schema 1 (predicateType .../execution/v1) named one vendor's linker,
    `nvjitlink_version`, where schema 2 has `linker`: a v1 statement parses to the same
    record, keeps its schema, and its canonical bytes are those it was signed as. Each
    schema refuses the other's field, and v1 cannot record another linker."""
    v2 = statement_dict()
    v2["predicate"]["deterministic"]["compiler"]["linker"] = {"name": "nvJitLink", "version": "13.5"}
    v1 = copy.deepcopy(v2)
    v1["predicateType"] = PREDICATE_TYPE_V1
    del v1["predicate"]["deterministic"]["compiler"]["linker"]
    v1["predicate"]["deterministic"]["compiler"]["nvjitlink_version"] = "13.5"
    old, new = parse_statement(canonical_json(v1)), parse_statement(canonical_json(v2))
    assert (old.predicate_type, new.predicate_type) == (PREDICATE_TYPE_V1, PREDICATE_TYPE)
    assert old.predicate == new.predicate
    assert old.to_json_bytes() == canonical_json(v1) and new.to_json_bytes() == canonical_json(v2)
    assert old.deterministic_dict() == v1["predicate"]["deterministic"]
    cpu_v1 = statement_dict()
    cpu_v1["predicateType"] = PREDICATE_TYPE_V1
    assert parse_statement(canonical_json(cpu_v1)).predicate == parse_statement(canonical_json(statement_dict())).predicate
    mixed = copy.deepcopy(v1)
    mixed["predicate"]["deterministic"]["compiler"]["linker"] = {"name": "nvJitLink", "version": "13.5"}
    with pytest.raises(StatementError, match=r"compiler\.linker: unknown field"):
        parse_statement(canonical_json(mixed))
    mixed = copy.deepcopy(v2)
    mixed["predicate"]["deterministic"]["compiler"]["nvjitlink_version"] = "13.5"
    with pytest.raises(StatementError, match=r"compiler\.nvjitlink_version: unknown field"):
        parse_statement(canonical_json(mixed))
    other = replace(new.predicate.deterministic.compiler, linker=LinkerRecord("amd-lld", "22.1"))
    predicate = replace(new.predicate, deterministic=replace(new.predicate.deterministic, compiler=other))
    with pytest.raises(StatementError, match="cannot record linker 'amd-lld'"):
        Statement(new.subject, predicate, PREDICATE_TYPE_V1)
    unknown = copy.deepcopy(v2)
    unknown["predicateType"] = "https://vxla.dev/attestation/execution/v3"
    with pytest.raises(StatementError, match="predicateType"):
        parse_statement(canonical_json(unknown))
