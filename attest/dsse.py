"""DSSE v1 envelopes signed with Ed25519.

Envelope JSON: {"payloadType": str, "payload": base64, "signatures": [{"keyid", "sig"}]}.
Signatures are over PAE(payloadType, payload) exactly as the DSSE v1 protocol defines it:
"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, lengths in ASCII decimal bytes.
We write standard base64 with padding and, as the protocol requires, read standard or
URL-safe base64 (padding optional). Key ids are required here (the protocol makes them
optional) and are `attest.keys.key_id` of the signing key.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest.errors import EnvelopeError
from attest.keys import key_id
from attest.statement import Statement

PAYLOAD_TYPE = "application/vnd.in-toto+json"

_HEX64 = re.compile(r"[0-9a-f]{64}")
_B64 = re.compile(r"[A-Za-z0-9+/\-_]*={0,2}")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding of `payload_type` (UTF-8) and `payload`."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(type_bytes), type_bytes, len(payload), payload)


def b64encode(data: bytes) -> str:
    """Standard base64 with padding (what we write)."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str, what: str) -> bytes:
    """Decode standard or URL-safe base64, padding optional; raises EnvelopeError naming `what`."""
    if not isinstance(text, str) or not _B64.fullmatch(text):
        raise EnvelopeError(f"{what}: not valid base64")
    if ("+" in text or "/" in text) and ("-" in text or "_" in text):
        raise EnvelopeError(f"{what}: not valid base64 (mixes standard and URL-safe alphabets)")
    body = text.rstrip("=")
    if len(body) % 4 == 1:
        raise EnvelopeError(f"{what}: not valid base64 (bad length)")
    padded = body.replace("-", "+").replace("_", "/") + "=" * (-len(body) % 4)
    try:
        return base64.b64decode(padded, validate=True)
    except binascii.Error as error:
        raise EnvelopeError(f"{what}: not valid base64 ({error})") from error


@dataclass(frozen=True)
class Signature:
    """One DSSE signature: the signer's key id and the raw signature bytes."""

    keyid: str
    sig: bytes

    def to_dict(self) -> dict[str, str]:
        return {"keyid": self.keyid, "sig": b64encode(self.sig)}


@dataclass(frozen=True)
class Envelope:
    """A DSSE envelope: payload bytes, payload type and the signatures over their PAE."""

    payload_type: str
    payload: bytes
    signatures: tuple[Signature, ...] = ()

    def pae(self) -> bytes:
        """The bytes every signature of this envelope signs."""
        return pae(self.payload_type, self.payload)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with the DSSE field names."""
        return {
            "payloadType": self.payload_type,
            "payload": b64encode(self.payload),
            "signatures": [s.to_dict() for s in self.signatures],
        }

    def to_json(self) -> str:
        """Envelope JSON text (sorted keys, compact, so the same envelope gives the same text)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: Any) -> Envelope:
        """Parse an envelope's JSON data strictly; raises EnvelopeError naming the field.

        Signature bytes are not checked here (see `attest.verify`).
        """
        if not isinstance(data, Mapping):
            raise EnvelopeError("envelope: expected a JSON object")
        for name in ("payloadType", "payload", "signatures"):
            if name not in data:
                raise EnvelopeError(f"envelope.{name}: missing")
        unknown = sorted(set(data) - {"payloadType", "payload", "signatures"})
        if unknown:
            raise EnvelopeError(f"envelope.{unknown[0]}: unknown field")
        payload_type = data["payloadType"]
        if not isinstance(payload_type, str):
            raise EnvelopeError("envelope.payloadType: expected a string")
        payload = b64decode(data["payload"], "payload")
        raw_signatures = data["signatures"]
        if not isinstance(raw_signatures, list):
            raise EnvelopeError("envelope.signatures: expected a list")
        signatures = []
        for i, item in enumerate(raw_signatures):
            if not isinstance(item, Mapping):
                raise EnvelopeError(f"signature {i}: expected an object")
            unknown = sorted(set(item) - {"keyid", "sig"})
            if unknown:
                raise EnvelopeError(f"signature {i}: unknown field {unknown[0]!r}")
            keyid = item.get("keyid")
            if not isinstance(keyid, str) or not _HEX64.fullmatch(keyid):
                raise EnvelopeError(
                    f"signature {i}: keyid must be 64 lower-case hex characters, got {keyid!r}"
                )
            if "sig" not in item:
                raise EnvelopeError(f"signature {i} (keyid {keyid[:16]}...): sig missing")
            sig = b64decode(item["sig"], f"signature {i} (keyid {keyid[:16]}...): sig")
            signatures.append(Signature(keyid=keyid, sig=sig))
        return cls(payload_type=payload_type, payload=payload, signatures=tuple(signatures))

    @classmethod
    def from_json(cls, text: str | bytes) -> Envelope:
        """Parse envelope JSON text; raises EnvelopeError."""
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise EnvelopeError(f"envelope: not valid JSON ({error})") from error
        return cls.from_dict(data)


def sign_payload(
    payload: bytes, private_key: Ed25519PrivateKey, payload_type: str = PAYLOAD_TYPE
) -> Envelope:
    """A new envelope over `payload`, signed by `private_key`."""
    return add_signature(Envelope(payload_type=payload_type, payload=bytes(payload)), private_key)


def add_signature(envelope: Envelope, private_key: Ed25519PrivateKey) -> Envelope:
    """A copy of `envelope` with one more signature, by `private_key` (a verifier
    countersigning a node's trace). Raises ValueError if that key already signed it."""
    keyid = key_id(private_key)
    if any(s.keyid == keyid for s in envelope.signatures):
        raise ValueError(f"keyid {keyid[:16]}... has already signed this envelope")
    signature = Signature(keyid=keyid, sig=private_key.sign(envelope.pae()))
    return Envelope(envelope.payload_type, envelope.payload, (*envelope.signatures, signature))


def sign_statement(statement: Statement, private_key: Ed25519PrivateKey) -> Envelope:
    """Sign `statement` (its canonical JSON bytes) into a new in-toto DSSE envelope.

    The statement's `predicate.key_id` must be the signing key's id: a node signs only
    traces that name it.
    """
    keyid = key_id(private_key)
    if statement.predicate.key_id != keyid:
        raise ValueError(
            f"predicate.key_id is {statement.predicate.key_id}, but the signing key's id is {keyid}"
        )
    return sign_payload(statement.to_json_bytes(), private_key, PAYLOAD_TYPE)
