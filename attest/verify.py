"""Verification of a signed execution trace (a DSSE envelope carrying a Statement)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from attest.dsse import PAYLOAD_TYPE, Envelope
from attest.errors import EnvelopeError, StatementError, VerificationError
from attest.keys import key_id
from attest.statement import Statement, normalize_contract

TrustedKeys = Mapping[str, Ed25519PublicKey] | Iterable[Ed25519PublicKey]

_ED25519_SIGNATURE_BYTES = 64


def trusted_key_map(trusted_keys: TrustedKeys) -> dict[str, Ed25519PublicKey]:
    """Trusted keys by key id, from a key-id mapping or a plain collection of public keys.

    A mapping whose label differs from the key's real id is a caller error (ValueError): a
    mislabelled key would make every check against it misleading.
    """
    result: dict[str, Ed25519PublicKey] = {}
    if isinstance(trusted_keys, Mapping):
        for label, key in trusted_keys.items():
            if key_id(key) != label:
                raise ValueError(f"trusted key labelled {label} has key id {key_id(key)}")
            result[label] = key
    else:
        for key in trusted_keys:
            result[key_id(key)] = key
    return result


def _parse_envelope(envelope: Envelope | Mapping[str, Any] | str | bytes) -> Envelope:
    if isinstance(envelope, Envelope):
        return envelope
    try:
        if isinstance(envelope, str | bytes | bytearray):
            return Envelope.from_json(envelope)
        return Envelope.from_dict(envelope)
    except EnvelopeError as error:
        raise VerificationError(str(error)) from error


def verify_signatures(
    envelope: Envelope | Mapping[str, Any] | str | bytes, trusted_keys: TrustedKeys
) -> tuple[Envelope, tuple[str, ...]]:
    """Check every signature of `envelope`; returns the envelope and the signers' key ids.

    Every signature present must verify against the trusted key of its key id, and there
    must be at least one: an unknown key id or an invalid signature rejects the envelope,
    since an envelope carrying a bad signature has been tampered with or mislabelled.
    """
    parsed = _parse_envelope(envelope)
    keys = trusted_key_map(trusted_keys)
    if not parsed.signatures:
        raise VerificationError("envelope.signatures: no signatures")
    message = parsed.pae()
    seen: set[str] = set()
    for i, signature in enumerate(parsed.signatures):
        label = f"signature {i} (keyid {signature.keyid[:16]}...)"
        if signature.keyid in seen:
            raise VerificationError(f"{label}: duplicate key id")
        seen.add(signature.keyid)
        key = keys.get(signature.keyid)
        if key is None:
            raise VerificationError(f"{label}: unknown key id (not a trusted key)")
        if len(signature.sig) != _ED25519_SIGNATURE_BYTES:
            raise VerificationError(
                f"{label}: invalid (expected 64 bytes, got {len(signature.sig)})"
            )
        try:
            key.verify(signature.sig, message)
        except InvalidSignature as error:
            raise VerificationError(f"{label}: invalid") from error
    return parsed, tuple(s.keyid for s in parsed.signatures)


def verify(
    envelope: Envelope | Mapping[str, Any] | str | bytes,
    trusted_keys: TrustedKeys,
    *,
    job_id: str | None = None,
    chain_id: int | None = None,
    contract: str | None = None,
) -> Statement:
    """Verify a signed execution trace and return its statement.

    `envelope` is an Envelope, its JSON data or its JSON text. `trusted_keys` maps key ids to
    Ed25519 public keys (or is a collection of public keys). Checks, in order: the envelope's
    structure; every signature (at least one; each must verify against a trusted key); the
    payload type; the statement (strict parse, canonical JSON); that `predicate.key_id` is
    one of the signers; and, when given, that job id, chain id and contract are the
    expected ones (replay protection). Raises VerificationError naming what failed.
    """
    parsed, signers = verify_signatures(envelope, trusted_keys)
    if parsed.payload_type != PAYLOAD_TYPE:
        raise VerificationError(
            f"payloadType: expected {PAYLOAD_TYPE!r}, got {parsed.payload_type!r}"
        )
    try:
        statement = Statement.from_json_bytes(parsed.payload)
    except StatementError as error:
        raise VerificationError(str(error)) from error
    predicate = statement.predicate
    if predicate.key_id not in signers:
        raise VerificationError(f"predicate.key_id: {predicate.key_id} did not sign this envelope")
    if job_id is not None and predicate.job_id != job_id:
        raise VerificationError(f"predicate.job_id: expected {job_id!r}, got {predicate.job_id!r}")
    if chain_id is not None and predicate.chain_id != chain_id:
        got = "null" if predicate.chain_id is None else str(predicate.chain_id)
        raise VerificationError(f"predicate.chain_id: expected {chain_id}, got {got}")
    if contract is not None:
        try:
            expected = normalize_contract(contract)
        except StatementError as error:
            raise ValueError(f"contract argument: {error.problem}") from error
        if predicate.contract != expected:
            raise VerificationError(
                f"predicate.contract: expected {expected}, got {predicate.contract or 'null'}"
            )
    return statement
