"""Our envelopes against an independent DSSE implementation (securesystemslib)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.exceptions import VerificationError as SslibVerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey

from attest import PAYLOAD_TYPE, VerificationError, add_signature, key_id, sign_statement, verify
from tests.attest.traces import JOB_ID, make_statement, node_key

NODE, VERIFIER = node_key("node"), node_key("verifier")


def sslib_key(private_key) -> SSlibKey:  # type: ignore[no-untyped-def]
    # securesystemslib computes its own default key ids; ours are passed explicitly.
    return SSlibKey.from_crypto(private_key.public_key(), keyid=key_id(private_key))


def test_securesystemslib_accepts_our_envelope() -> None:
    ours = add_signature(sign_statement(make_statement(NODE), NODE), VERIFIER)
    theirs = SslibEnvelope.from_dict(ours.to_dict())
    assert theirs.payload == ours.payload and theirs.payload_type == PAYLOAD_TYPE
    assert theirs.pae() == ours.pae()
    accepted = theirs.verify([sslib_key(NODE), sslib_key(VERIFIER)], 2)
    assert set(accepted) == {key_id(NODE), key_id(VERIFIER)}
    # And it rejects our envelope once the payload is changed (the check can fail).
    tampered = replace(ours, payload=ours.payload.replace(JOB_ID.encode(), b"job-0002"))
    with pytest.raises(SslibVerificationError):
        SslibEnvelope.from_dict(tampered.to_dict()).verify(
            [sslib_key(NODE), sslib_key(VERIFIER)], 1
        )


def test_we_accept_an_envelope_securesystemslib_signs() -> None:
    statement = make_statement(NODE)
    theirs = SslibEnvelope(
        payload=statement.to_json_bytes(), payload_type=PAYLOAD_TYPE, signatures={}
    )
    theirs.sign(CryptoSigner(NODE, sslib_key(NODE)))
    theirs.sign(CryptoSigner(VERIFIER, sslib_key(VERIFIER)))
    assert (
        verify(theirs.to_dict(), [NODE.public_key(), VERIFIER.public_key()], job_id=JOB_ID)
        == statement
    )
    # Its signature by our node's key is the one we make (Ed25519 is deterministic).
    ours = sign_statement(statement, NODE)
    assert theirs.signatures[key_id(NODE)].signature == ours.signatures[0].sig.hex()
    with pytest.raises(VerificationError, match="unknown key id"):
        verify(theirs.to_dict(), [NODE.public_key()])
