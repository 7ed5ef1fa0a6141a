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

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE_V1 = "https://vxla.dev/attestation/execution/v1"
PREDICATE_TYPE = "https://vxla.dev/attestation/execution/v2"
# Schema 1's one vendor field, and the linker it named.
_V1_LINKER_FIELD = "nvjitlink_version"
_V1_LINKER = "nvJitLink"

_HEX64 = re.compile(r"[0-9a-f]{64}")
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


# ---------------------------------------------------------------------------------------------
# Field checks (each names the full path of the field it checks)


def _obj(value: Any, path: str, required: Sequence[str], optional: Sequence[str] = ()) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise StatementError(path, f"expected an object, got {_kind(value)}")
    unknown = sorted(set(value) - set(required) - set(optional))
    if unknown:
        raise StatementError(f"{path}.{unknown[0]}" if path else unknown[0], "unknown field")
    for name in required:
        if name not in value:
            raise StatementError(f"{path}.{name}" if path else name, "missing")
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise StatementError(path, f"expected a string, got {_kind(value)}")
    if not value:
        raise StatementError(path, "must not be empty")
    return value


def _hex64(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise StatementError(path, f"expected 64 lower-case hex characters, got {_kind(value)}")
    if not _HEX64.fullmatch(value):
        raise StatementError(path, f"expected 64 lower-case hex characters, got {value!r}")
    return value


def _int(value: Any, path: str, minimum: int, limit: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StatementError(path, f"expected an integer, got {_kind(value)}")
    if value < minimum or (limit is not None and value >= limit):
        bound = f"at least {minimum}" if limit is None else f"in {minimum}..{limit - 1}"
        raise StatementError(path, f"expected an integer {bound}, got {value}")
    return value


def _list(value: Any, path: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise StatementError(path, f"expected a list, got {_kind(value)}")
    return value


def _unique_names(items: Sequence[Any], path: str) -> None:
    seen: set[str] = set()
    for i, item in enumerate(items):
        if item.name in seen:
            raise StatementError(f"{path}[{i}].name", f"duplicate name {item.name!r}")
        seen.add(item.name)


def normalize_contract(address: str) -> str:
    """A contract address as stored in statements: "0x" + 40 lower-case hex characters
    (accepts any letter case, e.g. an EIP-55 checksummed address)."""
    if not isinstance(address, str) or not _ANY_CASE_CONTRACT.fullmatch(address):
        raise StatementError(
            "contract", f"expected 0x followed by 40 hex characters, got {address!r}"
        )
    return address.lower()


# ---------------------------------------------------------------------------------------------
# The parts of the statement


@dataclass(frozen=True)
class Subject:
    """An in-toto subject: one output tensor by name and SHA-256 tensor digest."""

    name: str
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "digest": {"sha256": self.sha256}}

    @classmethod
    def from_dict(cls, data: Any, path: str = "subject") -> Subject:
        obj = _obj(data, path, ("name", "digest"))
        digest = _obj(obj["digest"], f"{path}.digest", ("sha256",))
        return cls(
            name=_str(obj["name"], f"{path}.name"),
            sha256=_hex64(digest["sha256"], f"{path}.digest.sha256"),
        )


@dataclass(frozen=True)
class ProgramRecord:
    """The program: hash of the source as submitted, and of its canonical HLO text."""

    source_hash: str
    hlo_hash: str

    def to_dict(self) -> dict[str, Any]:
        return {"source_hash": self.source_hash, "hlo_hash": self.hlo_hash}

    @classmethod
    def from_dict(cls, data: Any, path: str = "program") -> ProgramRecord:
        obj = _obj(data, path, ("source_hash", "hlo_hash"))
        return cls(
            source_hash=_hex64(obj["source_hash"], f"{path}.source_hash"),
            hlo_hash=_hex64(obj["hlo_hash"], f"{path}.hlo_hash"),
        )


@dataclass(frozen=True)
class Target:
    """The code generation target: LLVM triple, CPU name and feature string."""

    triple: str
    cpu: str
    features: str

    def to_dict(self) -> dict[str, Any]:
        return {"triple": self.triple, "cpu": self.cpu, "features": self.features}

    @classmethod
    def from_dict(cls, data: Any, path: str = "target") -> Target:
        obj = _obj(data, path, ("triple", "cpu", "features"))
        features = obj["features"]
        if not isinstance(features, str):  # may be empty: a CPU name alone can pin the features
            raise StatementError(f"{path}.features", f"expected a string, got {_kind(features)}")
        return cls(
            triple=_str(obj["triple"], f"{path}.triple"),
            cpu=_str(obj["cpu"], f"{path}.cpu"),
            features=features,
        )


@dataclass(frozen=True)
class LinkerRecord:
    """The program that linked the code object that runs and is hashed, and its release."""

    name: str
    version: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}

    @classmethod
    def from_dict(cls, data: Any, path: str = "linker") -> LinkerRecord:
        obj = _obj(data, path, ("name", "version"))
        return cls(name=_str(obj["name"], f"{path}.name"), version=_str(obj["version"], f"{path}.version"))


@dataclass(frozen=True)
class CompilerIdentity:
    """Everything that pins the compiled binary: versions, pipeline, target."""

    vxla_version: str
    numerics_contract: str
    pipeline_id: str
    passes: tuple[str, ...]
    target: Target
    llvmlite_version: str
    llvm_version: str
    opt_level: int
    # Targets an external program links only (absent for the rest): that linker.
    linker: LinkerRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {
            "vxla_version": self.vxla_version,
            "numerics_contract": self.numerics_contract,
            "pipeline_id": self.pipeline_id,
            "passes": list(self.passes),
            "target": self.target.to_dict(),
            "llvmlite_version": self.llvmlite_version,
            "llvm_version": self.llvm_version,
            "opt_level": self.opt_level,
        }
        if self.linker is not None:
            data["linker"] = self.linker.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Any, path: str = "compiler") -> CompilerIdentity:
        names = (
            "vxla_version",
            "numerics_contract",
            "pipeline_id",
            "passes",
            "target",
            "llvmlite_version",
            "llvm_version",
            "opt_level",
        )
        obj = _obj(data, path, names, optional=("linker",))
        passes = _list(obj["passes"], f"{path}.passes")
        return cls(
            vxla_version=_str(obj["vxla_version"], f"{path}.vxla_version"),
            numerics_contract=_str(obj["numerics_contract"], f"{path}.numerics_contract"),
            pipeline_id=_str(obj["pipeline_id"], f"{path}.pipeline_id"),
            passes=tuple(_str(p, f"{path}.passes[{i}]") for i, p in enumerate(passes)),
            target=Target.from_dict(obj["target"], f"{path}.target"),
            llvmlite_version=_str(obj["llvmlite_version"], f"{path}.llvmlite_version"),
            llvm_version=_str(obj["llvm_version"], f"{path}.llvm_version"),
            opt_level=_int(obj["opt_level"], f"{path}.opt_level", 0),
            linker=LinkerRecord.from_dict(obj["linker"], f"{path}.linker") if "linker" in obj else None,
        )


@dataclass(frozen=True)
class TensorRecord:
    """An input or output tensor: name, HLO element type, dimensions, tensor digest."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    digest: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "digest": self.digest,
        }

    @classmethod
    def from_dict(cls, data: Any, path: str = "tensor") -> TensorRecord:
        obj = _obj(data, path, ("name", "dtype", "shape", "digest"))
        dtype = _str(obj["dtype"], f"{path}.dtype")
        if dtype not in _DTYPES:
            raise StatementError(
                f"{path}.dtype",
                f"unknown element type {dtype!r} (one of {', '.join(sorted(_DTYPES))})",
            )
        shape = _list(obj["shape"], f"{path}.shape")
        return cls(
            name=_str(obj["name"], f"{path}.name"),
            dtype=dtype,
            shape=tuple(_int(d, f"{path}.shape[{i}]", 0) for i, d in enumerate(shape)),
            digest=_hex64(obj["digest"], f"{path}.digest"),
        )


@dataclass(frozen=True)
class InstructionRecord:
    """One traced instruction: position in the schedule, name, opcode, output digest."""

    index: int
    name: str
    opcode: str
    digest: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "opcode": self.opcode,
            "digest": self.digest,
        }

    @classmethod
    def from_dict(cls, data: Any, path: str = "instruction") -> InstructionRecord:
        obj = _obj(data, path, ("index", "name", "opcode", "digest"))
        return cls(
            index=_int(obj["index"], f"{path}.index", 0),
            name=_str(obj["name"], f"{path}.name"),
            opcode=_str(obj["opcode"], f"{path}.opcode"),
            digest=_hex64(obj["digest"], f"{path}.digest"),
        )


@dataclass(frozen=True)
class OpTrace:
    """Op-level trace: per-instruction digests in schedule order and their Merkle root."""

    merkle_root: str
    instructions: tuple[InstructionRecord, ...]

    @classmethod
    def from_instructions(cls, instructions: Sequence[tuple[str, str, str]]) -> OpTrace:
        """Build from (name, opcode, digest) triples in schedule order; computes indices and root."""
        records = tuple(
            InstructionRecord(index=i, name=name, opcode=opcode, digest=digest)
            for i, (name, opcode, digest) in enumerate(instructions)
        )
        root = merkle_root(digest_leaves([record.digest for record in records]))
        return cls(merkle_root=root, instructions=records)

    @property
    def digests(self) -> list[str]:
        """The per-instruction digests in schedule order (the Merkle leaves, as hex)."""
        return [record.digest for record in self.instructions]

    def to_dict(self) -> dict[str, Any]:
        return {
            "merkle_root": self.merkle_root,
            "instructions": [r.to_dict() for r in self.instructions],
        }

    @classmethod
    def from_dict(cls, data: Any, path: str = "op_trace") -> OpTrace:
        obj = _obj(data, path, ("merkle_root", "instructions"))
        items = _list(obj["instructions"], f"{path}.instructions")
        if not items:
            raise StatementError(
                f"{path}.instructions", "must not be empty (use op_trace null for no op-level data)"
            )
        records = tuple(
            InstructionRecord.from_dict(item, f"{path}.instructions[{i}]")
            for i, item in enumerate(items)
        )
        for i, record in enumerate(records):
            if record.index != i:
                raise StatementError(
                    f"{path}.instructions[{i}].index",
                    f"expected {i} (schedule order), got {record.index}",
                )
        root = _hex64(obj["merkle_root"], f"{path}.merkle_root")
        expected = merkle_root(digest_leaves([r.digest for r in records]))
        if root != expected:
            raise StatementError(
                f"{path}.merkle_root",
                f"does not match the instructions' digests (expected {expected})",
            )
        return cls(merkle_root=root, instructions=records)


@dataclass(frozen=True)
class Execution:
    """The deterministic part of the predicate: what two honest nodes must agree on.

    `tensor_digest_version`: the version of its tensor digests, None for a trace made before
    the version was recorded (written without the field; its digests are vxla.tensor.v1).
    `digest_version` is the version either way."""

    program: ProgramRecord
    compiler: CompilerIdentity
    graph_hash: str
    binary_hash: str
    inputs: tuple[TensorRecord, ...]
    outputs: tuple[TensorRecord, ...]
    op_trace: OpTrace | None = None
    tensor_digest_version: str | None = TENSOR_DIGEST_VERSION

    @property
    def digest_version(self) -> str:
        """The tensor digest version of the statement's digests."""
        return self.tensor_digest_version or TENSOR_DIGEST_V1

    def to_dict(self) -> dict[str, Any]:
        data = {
            "program": self.program.to_dict(),
            "compiler": self.compiler.to_dict(),
            "graph_hash": self.graph_hash,
            "binary_hash": self.binary_hash,
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
            "op_trace": None if self.op_trace is None else self.op_trace.to_dict(),
        }
        if self.tensor_digest_version is not None:
            data["tensor_digest_version"] = self.tensor_digest_version
        return data

    @classmethod
    def from_dict(cls, data: Any, path: str = "deterministic") -> Execution:
        names = (
            "program",
            "compiler",
            "graph_hash",
            "binary_hash",
            "inputs",
            "outputs",
            "op_trace",
        )
        obj = _obj(data, path, names, optional=("tensor_digest_version",))
        version = None
        if "tensor_digest_version" in obj:
            version = _str(obj["tensor_digest_version"], f"{path}.tensor_digest_version")
            try:
                known_digest_version(version)
            except DigestVersionError as error:
                raise StatementError(f"{path}.tensor_digest_version", str(error)) from None
        inputs = tuple(
            TensorRecord.from_dict(t, f"{path}.inputs[{i}]")
            for i, t in enumerate(_list(obj["inputs"], f"{path}.inputs"))
        )
        outputs = tuple(
            TensorRecord.from_dict(t, f"{path}.outputs[{i}]")
            for i, t in enumerate(_list(obj["outputs"], f"{path}.outputs"))
        )
        if not outputs:
            raise StatementError(f"{path}.outputs", "must not be empty")
        _unique_names(inputs, f"{path}.inputs")
        _unique_names(outputs, f"{path}.outputs")
        return cls(
            program=ProgramRecord.from_dict(obj["program"], f"{path}.program"),
            compiler=CompilerIdentity.from_dict(obj["compiler"], f"{path}.compiler"),
            graph_hash=_hex64(obj["graph_hash"], f"{path}.graph_hash"),
            binary_hash=_hex64(obj["binary_hash"], f"{path}.binary_hash"),
            inputs=inputs,
            outputs=outputs,
            op_trace=None
            if obj["op_trace"] is None
            else OpTrace.from_dict(obj["op_trace"], f"{path}.op_trace"),
            tensor_digest_version=version,
        )


@dataclass(frozen=True)
class RunMetadata:
    """Run metadata, signed but never compared: thread count, timings in nanoseconds and the
    host that ran (absent in traces of vxla versions before it was recorded)."""

    threads: int
    timings_ns: Mapping[str, int] = field(default_factory=dict)
    host: HostRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"threads": self.threads, "timings_ns": dict(self.timings_ns)}
        if self.host is not None:
            out["host"] = self.host.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any, path: str = "run") -> RunMetadata:
        required = ("threads", "timings_ns")
        obj = _obj({k: v for k, v in data.items() if k != "host"} if isinstance(data, Mapping) else data, path, required)
        timings = obj["timings_ns"]
        if not isinstance(timings, Mapping):
            raise StatementError(f"{path}.timings_ns", f"expected an object, got {_kind(timings)}")
        host = data.get("host")
        return cls(
            threads=_int(obj["threads"], f"{path}.threads", 1),
            timings_ns={
                _str(k, f"{path}.timings_ns"): _int(v, f"{path}.timings_ns.{k}", 0)
                for k, v in sorted(timings.items())
            },
            host=None if host is None else HostRecord.from_dict(host, f"{path}.host"),
        )


@dataclass(frozen=True)
class GpuRecord:
    """The GPU a run of a GPU target used: its name, compute capability ("9.0"), number of
    streaming multiprocessors and the CUDA driver's version ("13.0")."""

    name: str
    compute_capability: str
    sm_count: int
    driver_version: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "compute_capability": self.compute_capability, "sm_count": self.sm_count, "driver_version": self.driver_version}

    @classmethod
    def from_dict(cls, data: Any, path: str = "run.host.gpu") -> GpuRecord:
        obj = _obj(data, path, ("name", "compute_capability", "sm_count", "driver_version"))
        return cls(
            name=_str(obj["name"], f"{path}.name"),
            compute_capability=_str(obj["compute_capability"], f"{path}.compute_capability"),
            sm_count=_int(obj["sm_count"], f"{path}.sm_count", 1),
            driver_version=_str(obj["driver_version"], f"{path}.driver_version"),
        )


@dataclass(frozen=True)
class HostRecord:
    """The machine a run happened on, for the record when a result is disputed: its
    architecture, CPU model, the CPU features that decide which targets it runs, the
    operating system and the vxla version, and for a GPU target's run the GPU. The compared
    part names the target instead."""

    arch: str
    cpu_model: str
    features: tuple[str, ...]
    os: str
    vxla_version: str
    gpu: GpuRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "arch": self.arch,
            "cpu_model": self.cpu_model,
            "features": list(self.features),
            "os": self.os,
            "vxla_version": self.vxla_version,
        }
        if self.gpu is not None:
            data["gpu"] = self.gpu.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Any, path: str = "run.host") -> HostRecord:
        obj = _obj(data, path, ("arch", "cpu_model", "features", "os", "vxla_version"), optional=("gpu",))
        features = obj["features"]
        if not isinstance(features, list):
            raise StatementError(f"{path}.features", f"expected a list, got {_kind(features)}")
        return cls(
            arch=_str(obj["arch"], f"{path}.arch"),
            cpu_model=_str(obj["cpu_model"], f"{path}.cpu_model"),
            features=tuple(_str(f, f"{path}.features[{i}]") for i, f in enumerate(features)),
            os=_str(obj["os"], f"{path}.os"),
            vxla_version=_str(obj["vxla_version"], f"{path}.vxla_version"),
            gpu=GpuRecord.from_dict(obj["gpu"], f"{path}.gpu") if "gpu" in obj else None,
        )


@dataclass(frozen=True)
class Predicate:
    """The execution predicate: the job it is for (replay protection), the signing node's key
    id, the deterministic part and the run metadata."""

    job_id: str
    chain_id: int | None
    contract: str | None
    key_id: str
    deterministic: Execution
    run: RunMetadata

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "chain_id": self.chain_id,
            "contract": self.contract,
            "key_id": self.key_id,
            "deterministic": self.deterministic.to_dict(),
            "run": self.run.to_dict(),
        }

    def compared_dict(self) -> dict[str, Any]:
        """What two honest nodes that ran the same job must agree on: the job binding and the
        deterministic part (not the key id, not the run metadata)."""
        return {
            "job_id": self.job_id,
            "chain_id": self.chain_id,
            "contract": self.contract,
            "deterministic": self.deterministic.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any, path: str = "predicate") -> Predicate:
        obj = _obj(data, path, ("job_id", "chain_id", "contract", "key_id", "deterministic", "run"))
        chain_id = obj["chain_id"]
        contract = obj["contract"]
        if contract is not None and (
            not isinstance(contract, str) or not _CONTRACT.fullmatch(contract)
        ):
            shown = repr(contract) if isinstance(contract, str) else _kind(contract)
            raise StatementError(
                f"{path}.contract",
                f"expected null or 0x followed by 40 lower-case hex characters, got {shown}",
            )
        return cls(
            job_id=_str(obj["job_id"], f"{path}.job_id"),
            chain_id=None
            if chain_id is None
            else _int(chain_id, f"{path}.chain_id", 0, _MAX_CHAIN_ID),
            contract=contract,
            key_id=_hex64(obj["key_id"], f"{path}.key_id"),
            deterministic=Execution.from_dict(obj["deterministic"], f"{path}.deterministic"),
            run=RunMetadata.from_dict(obj["run"], f"{path}.run"),
        )


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
    obj = _obj(data, "", ("_type", "subject", "predicateType", "predicate"))
    if obj["_type"] != STATEMENT_TYPE:
        raise StatementError("_type", f"expected {STATEMENT_TYPE!r}, got {obj['_type']!r}")
    predicate_type = obj["predicateType"]
    if predicate_type not in (PREDICATE_TYPE, PREDICATE_TYPE_V1):
        raise StatementError(
            "predicateType", f"expected {PREDICATE_TYPE!r} (or {PREDICATE_TYPE_V1!r}), got {predicate_type!r}"
        )
    subjects = tuple(
        Subject.from_dict(s, f"subject[{i}]")
        for i, s in enumerate(_list(obj["subject"], "subject"))
    )
    predicate_data = _predicate_from_v1(obj["predicate"]) if predicate_type == PREDICATE_TYPE_V1 else obj["predicate"]
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
