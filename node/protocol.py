"""The protocol between nodes, submitters and the contracts, defined once: the digests a job
is named by on chain (program and inputs manifest), the result digest a node commits to and
its sealed commitment, and the digests of a node's statement and envelope.

  statement digest  SHA-256 of the statement's deterministic part: equal for every honest
                    execution of a job (the job store's and API's `statement_digest`).
  envelope digest   SHA-256 of a node's signed DSSE envelope (its own key, signature and
                    timings): what the node reveals on chain, the contracts' `traceDigest`.

The body of a local job request (`POST /v1/jobs`) is defined here too, as `JobRequest`: the
node validates requests against it and the SDK builds them with it.
"""

import base64
import json
from collections.abc import Sequence
from typing import Any

from eth_abi import encode as abi_encode
from eth_utils import keccak, to_checksum_address
from pydantic import BaseModel, Field

from attest import Statement
from attest.digests import sha256_hex, tuple_digest
from attest.statement import canonical_json

# The most .npy bytes, all inputs together, that a local job request (POST /v1/jobs) may carry
# inline as base64 instead of naming uploaded blobs: a small job is then one request. The
# node's body limit leaves room for them.
INLINE_INPUT_BYTES = 64 * 1024


# The node's API takes its body as this model, so a body whose fields do not have these types
# is refused (422) before any check of the node's own runs; the rules between fields (one of
# module or module_digest, inputs or input_data) are the node's (node/daemon/api.py). The
# docstring is the schema's description in the node's OpenAPI document.
class JobRequest(BaseModel):
    """POST /v1/jobs: the module as text or as the digest of a stored blob, and the inputs in
    parameter order: as digests of stored .npy blobs, or (small ones) as the .npy bytes."""

    module: str | None = Field(default=None, description="HLO text")
    module_digest: str | None = Field(default=None, description="SHA-256 of a stored module blob")
    inputs: list[str] = Field(default_factory=list, description="SHA-256 of each stored .npy input")
    input_data: list[str] = Field(
        default_factory=list,
        description=f"instead of inputs: each input's .npy bytes in base64, at most {INLINE_INPUT_BYTES} bytes in all",
    )
    redundancy: int = Field(default=1, description="must be 1: jobs for several nodes are posted on chain")

    @classmethod
    def inline(cls, module_text: str, input_npy: Sequence[bytes], redundancy: int = 1) -> "JobRequest":
        """A request that carries the module and the inputs themselves (each input's .npy
        bytes, in base64): a small job in one request."""
        encoded = [base64.b64encode(data).decode("ascii") for data in input_npy]
        return cls(module=module_text, input_data=encoded, redundancy=redundancy)

    @classmethod
    def stored(cls, module_text: str, input_digests: Sequence[str], redundancy: int = 1) -> "JobRequest":
        """A request that names inputs already uploaded as blobs, by digest."""
        return cls(module=module_text, inputs=list(input_digests), redundancy=redundancy)

    def body(self) -> dict[str, Any]:
        """The JSON body to send: the fields this request was given and no others, so a
        request never names both forms of the inputs (the node refuses that)."""
        return self.model_dump(exclude_unset=True)


def is_digest(text: str) -> bool:
    """True for a lower-case hex SHA-256."""
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def inputs_manifest(input_digests: Sequence[str]) -> bytes:
    """The inputs manifest blob: canonical JSON `{"inputs": [...]}` of the input blob digests
    in parameter order. Its blob digest is the job's on-chain `inputsDigest`."""
    for digest in input_digests:
        if not is_digest(digest):
            raise ValueError(f"input digest {digest!r} is not a lower-case hex SHA-256")
    return json.dumps({"inputs": list(input_digests)}, separators=(",", ":"), sort_keys=True).encode()


def parse_manifest(data: bytes) -> list[str]:
    """The input digests of a manifest blob; ValueError if it is not one."""
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"inputs manifest is not JSON: {error}") from None
    if not isinstance(value, dict) or set(value) != {"inputs"} or not isinstance(value["inputs"], list):
        raise ValueError('inputs manifest must be {"inputs": [digest, ...]}')
    digests = value["inputs"]
    if not all(isinstance(d, str) and is_digest(d) for d in digests):
        raise ValueError("inputs manifest: every input must be a lower-case hex SHA-256")
    if inputs_manifest(digests) != data:
        raise ValueError("inputs manifest is not in canonical form")
    return digests


def chain_digests(module_bytes: bytes, input_digests: Sequence[str]) -> tuple[bytes, bytes]:
    """(programDigest, inputsDigest) to post on chain for this module and these inputs."""
    return bytes.fromhex(sha256_hex(module_bytes)), bytes.fromhex(sha256_hex(inputs_manifest(input_digests)))


def result_digest_of(output_digests: list[str]) -> bytes:
    """The result digest a node commits to: the tuple digest (`attest.digests.tuple_digest`)
    of the output tensors' digests, in the order of the flattened result tuple. It depends
    only on the output bits, so every honest node reaches the same one."""
    return bytes.fromhex(tuple_digest(list(output_digests)))


def envelope_digest_of(envelope_json: str) -> bytes:
    """The envelope digest a node reveals (the contracts' traceDigest): SHA-256 of its DSSE envelope's JSON text. It names
    the node's own signed trace (key and signature included), so it differs between nodes."""
    return bytes.fromhex(sha256_hex(envelope_json.encode("utf-8")))


def statement_digest(statement: Statement) -> str:
    """The statement digest: of the statement's deterministic part (program, compiler, hashes, inputs,
    outputs, op trace): equal for every honest execution of the same job, unlike the
    envelope, whose run metadata (timings) differs from run to run."""
    return sha256_hex(canonical_json(statement.deterministic_dict()))


def seal_of(node: str, job_id: int, result_digest: bytes, op_trace_root: bytes) -> bytes:
    """The sealed commitment keccak256(abi.encode(node, jobId, resultDigest, opTraceRoot)), as
    the contract computes it in `sealOf`: it binds the op-trace root too, so a node cannot pick
    its execution commitment after seeing another's."""
    return keccak(
        abi_encode(
            ["address", "uint256", "bytes32", "bytes32"],
            [to_checksum_address(node), job_id, result_digest, op_trace_root],
        )
    )
