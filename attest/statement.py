"""The execution trace: an in-toto Statement v1 whose predicate describes one execution.

JSON layout (every hash is 64 lower-case hex characters)::

    {"_type": "https://in-toto.io/Statement/v1",
     "subject": [{"name": "out0", "digest": {"sha256": <tensor digest>}}, ...],
     "predicateType": "https://vxla.dev/attestation/execution/v2",
     "predicate": {
       "job_id": str, "chain_id": int | null, "contract": "0x" + 40 hex | null,
       "key_id": <the signing node's key id>,
       "deterministic": {                       # what two honest nodes must agree on
         "program": {"source_hash", "hlo_hash"},
         "compiler": {"vxla_version", "numerics_contract", "pipeline_id", "passes": [str],
                      "target": {"triple", "cpu", "features"},
                      "llvmlite_version", "llvm_version", "opt_level",
                      "linker": {"name", "version"} (targets an external program
                                                     links only, e.g. nvJitLink)},
         "graph_hash", "binary_hash",
         "inputs":  [{"name", "dtype", "shape": [int], "digest"}],
         "outputs": [{"name", "dtype", "shape": [int], "digest"}],
         "op_trace": null | {"merkle_root",
                             "instructions": [{"index", "name", "opcode", "digest"}]},
         "tensor_digest_version": "vxla.tensor.v2"},   # absent: vxla.tensor.v1
       "run": {"threads": int, "timings_ns": {str: int}}}}   # run metadata, never compared

The subject lists exactly the outputs (name and digest, same order). `op_trace` is present
when the run traced at op level: instructions in schedule order, indices 0..n-1, and
`merkle_root` is the root (see `attest.merkle`) over their digests. The thread count is the
non-binding part of the compiler identity, so it sits in `run`. `tensor_digest_version` names
the version of every tensor digest the statement holds (inputs, outputs, op trace;
attest/digests.py): a verifier recomputes digests with that version. Traces made before it was
recorded have none and their digests are `vxla.tensor.v1`; a version this vxla does not know
is refused, named. Timings are integer
nanoseconds: floats are not allowed anywhere, because their JSON text is not canonical
across implementations.

Schema versions, by predicateType: v2 (written now) and v1, which this vxla still reads and
verifies. They differ in one field of the compiler record: v1 named one vendor's linker,
`"nvjitlink_version": str` (GPU targets only), where v2 has the generic `linker`. A parsed
statement keeps its version (`Statement.predicate_type`), so its canonical bytes, and the
signature over them, are those it was signed as.

Parsing is strict: wrong types, missing or unknown fields, bad hex, inconsistent subject or
Merkle root all raise `StatementError` naming the field path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from attest.digests import (
    _TYPE_NAMES,
    TENSOR_DIGEST_V1,
    TENSOR_DIGEST_VERSION,
    known_digest_version,
)
from attest.errors import DigestVersionError, StatementError
from attest.merkle import digest_leaves, merkle_root
from attest.records import (
    Record,
    any_string,
    at_least,
    codec,
    hex64,
    integer,
    items,
    kind,
    obj,
    record,
    string,
)

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE_V1 = "https://vxla.dev/attestation/execution/v1"
PREDICATE_TYPE = "https://vxla.dev/attestation/execution/v2"
# Schema 1's one vendor field, and the linker it named.
_V1_LINKER_FIELD = "nvjitlink_version"
_V1_LINKER = "nvJitLink"

_CONTRACT = re.compile(r"0x[0-9a-f]{40}")
_ANY_CASE_CONTRACT = re.compile(r"0x[0-9a-fA-F]{40}")
_DTYPES = frozenset(_TYPE_NAMES.values())
_MAX_CHAIN_ID = 2**256  # EVM chain ids are uint256


# ---------------------------------------------------------------------------------------------
# Canonical JSON


def _reject_floats(value: Any) -> None:
    """Raises StatementError, naming the path, if `value` holds a float or a key that is not a
    string. One pass without paths (a statement has thousands of values); the paths are
    worked out only for the value refused."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            if any(type(key) is not str for key in item):
                break
            pending.extend(item.values())
        elif kind is list or kind is tuple:
            pending.extend(item)
        elif not (kind is str or kind is int or kind is bool or item is None):
            break  # a float, or a value of another kind: walked below, with paths
    else:
        return
    _refuse_at_path(value, "$")


def _refuse_at_path(value: Any, path: str) -> None:
    if isinstance(value, float):
        raise StatementError(path, "floats are not allowed in canonical JSON")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise StatementError(path, f"object key {key!r} is not a string")
            _refuse_at_path(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _refuse_at_path(item, f"{path}[{i}]")


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no spaces, UTF-8 (non-ASCII not escaped).

    Floats are refused (their text form differs between implementations), so the same
    value always has the same bytes.
    """
    _reject_floats(value)
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # Duplicate keys would let two parsers see two different statements.
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_json(data: bytes | str, what: str) -> Any:
    """Parse JSON strictly (no duplicate keys, no NaN/Infinity); errors name `what`."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        return json.loads(
            text, object_pairs_hook=_no_duplicate_keys, parse_constant=_refuse_constant
        )
    except UnicodeDecodeError as error:
        raise StatementError(
            what, f"not valid UTF-8 ({error.reason} at byte {error.start})"
        ) from error
    except (ValueError, RecursionError) as error:
        raise StatementError(what, f"not valid JSON ({error})") from error


def normalize_contract(address: str) -> str:
    """A contract address as stored in statements: "0x" + 40 lower-case hex characters
    (accepts any letter case, e.g. an EIP-55 checksummed address)."""
    if not isinstance(address, str) or not _ANY_CASE_CONTRACT.fullmatch(address):
        raise StatementError(
            "contract", f"expected 0x followed by 40 hex characters, got {address!r}"
        )
    return address.lower()


# ---------------------------------------------------------------------------------------------
# The parts of the statement, each declared once (attest/records.py derives their JSON)


def _unique_names(records: Sequence[Any], path: str) -> None:
    seen: set[str] = set()
    for i, entry in enumerate(records):
        if entry.name in seen:
            raise StatementError(f"{path}[{i}].name", f"duplicate name {entry.name!r}")
        seen.add(entry.name)


def _sha256_of(value: Any, path: str) -> str:
    return hex64(obj(value, path, ("sha256",))["sha256"], f"{path}.sha256")


@record
class Subject(Record):
    """An in-toto subject: one output tensor by name and SHA-256 tensor digest."""

    PATH = "subject"
    name: str
    sha256: str = field(metadata=codec(_sha256_of, lambda digest: {"sha256": digest}, key="digest"))


@record
class ProgramRecord(Record):
    """The program: hash of the source as submitted, and of its canonical HLO text."""

    PATH = "program"
    source_hash: str = field(metadata=codec(hex64))
    hlo_hash: str = field(metadata=codec(hex64))


@record
class Target(Record):
    """The code generation target: LLVM triple, CPU name and feature string (which may be
    empty: a CPU name alone can pin the features)."""

    PATH = "target"
    triple: str
    cpu: str
    features: str = field(metadata=codec(any_string))


@record
class LinkerRecord(Record):
    """The program that linked the code object that runs and is hashed, and its release."""

    PATH = "linker"
    name: str
    version: str


@record
class CompilerIdentity(Record):
    """Everything that pins the compiled binary: versions, pipeline, target."""

    PATH = "compiler"
    vxla_version: str
    numerics_contract: str
    pipeline_id: str
    passes: tuple[str, ...]
    target: Target
    llvmlite_version: str
    llvm_version: str
    opt_level: int
    # Targets an external program links only (absent for the rest): that linker.
    linker: LinkerRecord | None = field(default=None, metadata=codec(optional=True))


def _dtype(value: Any, path: str) -> str:
    dtype = string(value, path)
    if dtype not in _DTYPES:
        raise StatementError(path, f"unknown element type {dtype!r} (one of {', '.join(sorted(_DTYPES))})")
    return dtype


@record
class TensorRecord(Record):
    """An input or output tensor: name, HLO element type, dimensions, tensor digest."""

    PATH = "tensor"
    name: str
    dtype: str = field(metadata=codec(_dtype))
    shape: tuple[int, ...]
    digest: str = field(metadata=codec(hex64))


@record
class InstructionRecord(Record):
    """One traced instruction: position in the schedule, name, opcode, output digest."""

    PATH = "instruction"
    index: int
    name: str
    opcode: str
    digest: str = field(metadata=codec(hex64))


@record
class OpTrace(Record):
    """Op-level trace: per-instruction digests in schedule order and their Merkle root."""

    PATH = "op_trace"
    merkle_root: str = field(metadata=codec(hex64))
    instructions: tuple[InstructionRecord, ...]

    @classmethod
    def from_instructions(cls, instructions: Sequence[tuple[str, str, str]]) -> OpTrace:
        """Build from (name, opcode, digest) triples in schedule order; computes indices and root."""
        records = tuple(
            InstructionRecord(index=i, name=name, opcode=opcode, digest=digest)
            for i, (name, opcode, digest) in enumerate(instructions)
        )
        root = merkle_root(digest_leaves([entry.digest for entry in records]))
        return cls(merkle_root=root, instructions=records)

    @property
    def digests(self) -> list[str]:
        """The per-instruction digests in schedule order (the Merkle leaves, as hex)."""
        return [entry.digest for entry in self.instructions]

    def check(self, path: str) -> None:
        if not self.instructions:
            raise StatementError(f"{path}.instructions", "must not be empty (use op_trace null for no op-level data)")
        for i, entry in enumerate(self.instructions):
            if entry.index != i:
                raise StatementError(f"{path}.instructions[{i}].index", f"expected {i} (schedule order), got {entry.index}")
        expected = merkle_root(digest_leaves(self.digests))
        if self.merkle_root != expected:
            raise StatementError(f"{path}.merkle_root", f"does not match the instructions' digests (expected {expected})")


def _digest_version(value: Any, path: str) -> str:
    version = string(value, path)
    try:
        known_digest_version(version)
    except DigestVersionError as error:
        raise StatementError(path, str(error)) from None
    return version


@record
class Execution(Record):
    """The deterministic part of the predicate: what two honest nodes must agree on.

    `tensor_digest_version`: the version of its tensor digests, None for a trace made before
    the version was recorded (written without the field; its digests are vxla.tensor.v1).
    `digest_version` is the version either way."""

    PATH = "deterministic"
    program: ProgramRecord
    compiler: CompilerIdentity
    graph_hash: str = field(metadata=codec(hex64))
    binary_hash: str = field(metadata=codec(hex64))
    inputs: tuple[TensorRecord, ...]
    outputs: tuple[TensorRecord, ...]
    op_trace: OpTrace | None = None
    tensor_digest_version: str | None = field(default=TENSOR_DIGEST_VERSION, metadata=codec(_digest_version, optional=True))

    @property
    def digest_version(self) -> str:
        """The tensor digest version of the statement's digests."""
        return self.tensor_digest_version or TENSOR_DIGEST_V1

    def check(self, path: str) -> None:
        if not self.outputs:
            raise StatementError(f"{path}.outputs", "must not be empty")
        _unique_names(self.inputs, f"{path}.inputs")
        _unique_names(self.outputs, f"{path}.outputs")


def _timings(value: Any, path: str) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise StatementError(path, f"expected an object, got {kind(value)}")
    return {string(name, path): integer(ns, f"{path}.{name}") for name, ns in sorted(value.items())}


@record
class GpuRecord(Record):
    """The GPU a run of a GPU target used: its name, compute capability ("9.0"), number of
    streaming multiprocessors and the CUDA driver's version ("13.0")."""

    PATH = "run.host.gpu"
    name: str
    compute_capability: str
    sm_count: int = field(metadata=codec(at_least(1)))
    driver_version: str


@record
class HostRecord(Record):
    """The machine a run happened on, for the record when a result is disputed: its
    architecture, CPU model, the CPU features that decide which targets it runs, the
    operating system and the vxla version, and for a GPU target's run the GPU. The compared
    part names the target instead."""

    PATH = "run.host"
    arch: str
    cpu_model: str
    features: tuple[str, ...]
    os: str
    vxla_version: str
    gpu: GpuRecord | None = field(default=None, metadata=codec(optional=True))


@record
class RunMetadata(Record):
    """Run metadata, signed but never compared: thread count, timings in nanoseconds and the
    host that ran (absent in traces of vxla versions before it was recorded)."""

    PATH = "run"
    threads: int = field(metadata=codec(at_least(1)))
    timings_ns: Mapping[str, int] = field(default_factory=dict, metadata=codec(_timings, dict))
    host: HostRecord | None = field(default=None, metadata=codec(optional=True))


def _chain_id(value: Any, path: str) -> int | None:
    return None if value is None else integer(value, path, 0, _MAX_CHAIN_ID)


def _contract(value: Any, path: str) -> str | None:
    if value is not None and (not isinstance(value, str) or not _CONTRACT.fullmatch(value)):
        shown = repr(value) if isinstance(value, str) else kind(value)
        raise StatementError(path, f"expected null or 0x followed by 40 lower-case hex characters, got {shown}")
    return value


@record
class Predicate(Record):
    """The execution predicate: the job it is for (replay protection), the signing node's key
    id, the deterministic part and the run metadata."""

    PATH = "predicate"
    job_id: str
    chain_id: int | None = field(metadata=codec(_chain_id))
    contract: str | None = field(metadata=codec(_contract))
    key_id: str = field(metadata=codec(hex64))
    deterministic: Execution
    run: RunMetadata

    def compared_dict(self) -> dict[str, Any]:
        """What two honest nodes that ran the same job must agree on: the job binding and the
        deterministic part (not the key id, not the run metadata)."""
        return {
            "job_id": self.job_id,
            "chain_id": self.chain_id,
            "contract": self.contract,
            "deterministic": self.deterministic.to_dict(),
        }


def _compiler_path(predicate: Any) -> Mapping[str, Any] | None:
    """The compiler record of predicate data, where it is where it should be (else None:
    the strict parse names what is wrong)."""
    deterministic = predicate.get("deterministic") if isinstance(predicate, Mapping) else None
    compiler = deterministic.get("compiler") if isinstance(deterministic, Mapping) else None
    return compiler if isinstance(compiler, Mapping) else None


def _with_compiler(predicate: Mapping[str, Any], compiler: dict[str, Any]) -> dict[str, Any]:
    return {**predicate, "deterministic": {**predicate["deterministic"], "compiler": compiler}}


def _predicate_from_v1(predicate: Any) -> Any:
    """Schema 1's predicate data in schema 2's form: its `nvjitlink_version` becomes the
    `linker` it names; a `linker` field is unknown there."""
    compiler = _compiler_path(predicate)
    if compiler is None:
        return predicate
    if "linker" in compiler:
        raise StatementError("predicate.deterministic.compiler.linker", f"unknown field (schema {PREDICATE_TYPE_V1} records {_V1_LINKER_FIELD})")
    if _V1_LINKER_FIELD not in compiler:
        return predicate
    fields = {name: value for name, value in compiler.items() if name != _V1_LINKER_FIELD}
    fields["linker"] = {"name": _V1_LINKER, "version": compiler[_V1_LINKER_FIELD]}
    return _with_compiler(predicate, fields)


def _predicate_as_v1(predicate: dict[str, Any]) -> dict[str, Any]:
    """Schema 2's predicate data written in schema 1 (which can name nvJitLink only)."""
    compiler = predicate["deterministic"]["compiler"]
    if "linker" not in compiler:
        return predicate
    linker = compiler["linker"]
    if linker["name"] != _V1_LINKER:
        raise StatementError("predicate.deterministic.compiler.linker", f"schema {PREDICATE_TYPE_V1} cannot record linker {linker['name']!r}")
    fields = {name: value for name, value in compiler.items() if name != "linker"}
    fields[_V1_LINKER_FIELD] = linker["version"]
    return _with_compiler(predicate, fields)


def _parse(data: Any) -> tuple[tuple[Subject, ...], Predicate, str]:
    top = obj(data, "", ("_type", "subject", "predicateType", "predicate"))
    if top["_type"] != STATEMENT_TYPE:
        raise StatementError("_type", f"expected {STATEMENT_TYPE!r}, got {top['_type']!r}")
    predicate_type = top["predicateType"]
    if predicate_type not in (PREDICATE_TYPE, PREDICATE_TYPE_V1):
        raise StatementError(
            "predicateType", f"expected {PREDICATE_TYPE!r} (or {PREDICATE_TYPE_V1!r}), got {predicate_type!r}"
        )
    subjects = tuple(
        Subject.from_dict(s, f"subject[{i}]")
        for i, s in enumerate(items(top["subject"], "subject"))
    )
    predicate_data = _predicate_from_v1(top["predicate"]) if predicate_type == PREDICATE_TYPE_V1 else top["predicate"]
    predicate = Predicate.from_dict(predicate_data)
    outputs = predicate.deterministic.outputs
    expected = [(t.name, t.digest) for t in outputs]
    if [(s.name, s.sha256) for s in subjects] != expected:
        raise StatementError(
            "subject",
            "must list the outputs (predicate.deterministic.outputs) by name and digest, in order",
        )
    return subjects, predicate, predicate_type


@dataclass(frozen=True)
class Statement:
    """An in-toto Statement v1 with the vxla execution predicate.

    Construction validates the whole statement (a malformed one raises StatementError naming
    the field); build one with `Statement.build(predicate)`, which derives the subject.
    """

    subject: tuple[Subject, ...]
    predicate: Predicate
    # The schema it is written in (a parsed statement keeps the one it was signed in).
    predicate_type: str = PREDICATE_TYPE

    def __post_init__(self) -> None:
        try:
            data = self.to_dict()
        except (AttributeError, TypeError) as error:
            raise StatementError("statement", f"malformed part ({error})") from error
        _parse(data)

    @classmethod
    def build(cls, predicate: Predicate) -> Statement:
        """The statement for `predicate`, its subject being the outputs."""
        subjects = tuple(
            Subject(name=t.name, sha256=t.digest) for t in predicate.deterministic.outputs
        )
        return cls(subject=subjects, predicate=predicate)

    def to_dict(self) -> dict[str, Any]:
        """The statement as JSON-ready data."""
        predicate = self.predicate.to_dict()
        return {
            "_type": STATEMENT_TYPE,
            "subject": [s.to_dict() for s in self.subject],
            "predicateType": self.predicate_type,
            "predicate": _predicate_as_v1(predicate) if self.predicate_type == PREDICATE_TYPE_V1 else predicate,
        }

    def deterministic_dict(self) -> dict[str, Any]:
        """The predicate's deterministic part as JSON-ready data, in the statement's schema."""
        if self.predicate_type != PREDICATE_TYPE_V1:
            return self.predicate.deterministic.to_dict()
        return self.to_dict()["predicate"]["deterministic"]

    def to_json_bytes(self) -> bytes:
        """Canonical JSON bytes of the statement: what a DSSE envelope carries as payload.
        Worked out once (the statement cannot change): signing, digests and the canonical
        check of a parsed payload all ask for them."""
        encoded = self.__dict__.get("_json_bytes")
        if encoded is None:
            encoded = canonical_json(self.to_dict())
            object.__setattr__(self, "_json_bytes", encoded)
        return encoded

    @classmethod
    def from_dict(cls, data: Any) -> Statement:
        """Parse and validate a statement from JSON data (raises StatementError)."""
        subjects, predicate, predicate_type = _parse(data)
        # `_parse` has just checked everything `__post_init__` would check again.
        statement = object.__new__(cls)
        object.__setattr__(statement, "subject", subjects)
        object.__setattr__(statement, "predicate", predicate)
        object.__setattr__(statement, "predicate_type", predicate_type)
        return statement

    @classmethod
    def from_json_bytes(cls, payload: bytes | str, *, require_canonical: bool = True) -> Statement:
        """Parse a statement from JSON; with `require_canonical` the bytes must be exactly the
        canonical encoding, so each statement has one signed form."""
        statement = cls.from_dict(load_json(payload, "payload"))
        raw = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
        if require_canonical and statement.to_json_bytes() != raw:
            raise StatementError("payload", "not canonical JSON (sorted keys, no spaces, UTF-8)")
        return statement


def parse_statement(payload: bytes | str, *, require_canonical: bool = True) -> Statement:
    """Parse and validate a statement from its JSON bytes (see `Statement.from_json_bytes`)."""
    return Statement.from_json_bytes(payload, require_canonical=require_canonical)
