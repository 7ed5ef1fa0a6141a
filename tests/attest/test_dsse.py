"""DSSE envelopes: PAE against the spec, base64 handling, signing, parsing."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from attest import (
    PAYLOAD_TYPE,
    Envelope,
    EnvelopeError,
    add_signature,
    b64decode,
    key_id,
    pae,
    sign_payload,
    sign_statement,
)
from tests.attest.traces import make_statement, node_key

# The DSSE protocol document's test vector (protocol.md, "Test Vectors").
SPEC_TYPE = "http://example.com/HelloWorld"
SPEC_BODY = b"hello world"
SPEC_X = 46950820868899156662930047687818585632848591499744589407958293238635476079160
SPEC_Y = 5640078356564379163099075877009565129882514886557779369047442380624545832820
SPEC_SIG = (
    "A3JqsQGtVsJ2O2xqrI5IcnXip5GToJ3F+FnZ+O88SjtR6rDAajabZKciJTfUiHqJPcIAriEGAHTVeCUjW2JIZA=="
)


def test_pae_matches_the_dsse_spec_vector() -> None:
    assert pae(SPEC_TYPE, SPEC_BODY) == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_spec_signature_verifies_over_our_pae() -> None:
    # The spec's ECDSA P-256 signature is over its PAE; it verifies over ours only if the
    # bytes are identical, and it does not verify over neighbouring encodings.
    public = ec.EllipticCurvePublicNumbers(SPEC_X, SPEC_Y, ec.SECP256R1()).public_key()
    raw = base64.b64decode(SPEC_SIG)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, pae(SPEC_TYPE, SPEC_BODY), ec.ECDSA(hashes.SHA256()))
    with pytest.raises(InvalidSignature):
        public.verify(der, pae(SPEC_TYPE, SPEC_BODY + b"!"), ec.ECDSA(hashes.SHA256()))


def test_pae_counts_bytes_not_characters() -> None:
    assert pae("t\u00e9", "\u00e9".encode()) == b"DSSEv1 3 t\xc3\xa9 2 \xc3\xa9"
    assert pae("", b"") == b"DSSEv1 0  0 "


def test_base64_standard_and_url_safe_with_or_without_padding() -> None:
    data = bytes(range(256))
    standard = base64.b64encode(data).decode()
    url_safe = base64.urlsafe_b64encode(data).decode()
    assert "+" in standard and "-" in url_safe
    for text in (standard, url_safe, standard.rstrip("="), url_safe.rstrip("=")):
        assert b64decode(text, "payload") == data
    for bad in ("a", "ab$c", "+-ab", "abc==="):
        with pytest.raises(EnvelopeError, match="payload: not valid base64"):
            b64decode(bad, "payload")


def test_envelope_json_round_trip_and_signature() -> None:
    key = node_key("a")
    envelope = sign_payload(b"{}", key)
    data = json.loads(envelope.to_json())
    assert data["payloadType"] == PAYLOAD_TYPE
    assert base64.b64decode(data["payload"]) == b"{}"
    assert data["signatures"][0]["keyid"] == key_id(key)
    assert Envelope.from_json(envelope.to_json()) == envelope
    key.public_key().verify(envelope.signatures[0].sig, pae(PAYLOAD_TYPE, b"{}"))


def test_add_signature_keeps_payload_and_refuses_a_second_signature_by_one_key() -> None:
    a, b = node_key("a"), node_key("b")
    first = sign_statement(make_statement(a), a)
    both = add_signature(first, b)
    assert both.payload == first.payload and both.signatures[0] == first.signatures[0]
    assert [s.keyid for s in both.signatures] == [key_id(a), key_id(b)]
    with pytest.raises(ValueError, match="already signed"):
        add_signature(both, a)


def test_sign_statement_refuses_a_statement_naming_another_key() -> None:
    with pytest.raises(ValueError, match="predicate.key_id"):
        sign_statement(make_statement(node_key("a")), node_key("b"))


def test_signatures_are_deterministic() -> None:
    # Ed25519 is deterministic: the same key and statement give the same envelope bytes.
    key = node_key("a")
    assert (
        sign_statement(make_statement(key), key).to_json()
        == sign_statement(make_statement(key), key).to_json()
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "envelope: expected a JSON object"),
        ({"payload": "", "signatures": []}, "envelope.payloadType: missing"),
        ({"payloadType": PAYLOAD_TYPE, "signatures": []}, "envelope.payload: missing"),
        ({"payloadType": PAYLOAD_TYPE, "payload": ""}, "envelope.signatures: missing"),
        (
            {"payloadType": 3, "payload": "", "signatures": []},
            "envelope.payloadType: expected a string",
        ),
        (
            {"payloadType": PAYLOAD_TYPE, "payload": "%%", "signatures": []},
            "payload: not valid base64",
        ),
        (
            {"payloadType": PAYLOAD_TYPE, "payload": "", "signatures": {}},
            "envelope.signatures: expected a list",
        ),
        (
            {"payloadType": PAYLOAD_TYPE, "payload": "", "signatures": [], "x": 1},
            "envelope.x: unknown field",
        ),
        (
            {"payloadType": PAYLOAD_TYPE, "payload": "", "signatures": [{"sig": ""}]},
            "signature 0: keyid must be",
        ),
        (
            {"payloadType": PAYLOAD_TYPE, "payload": "", "signatures": [{"keyid": "ab" * 32}]},
            r"signature 0 \(keyid abababababababab...\): sig missing",
        ),
        (
            {
                "payloadType": PAYLOAD_TYPE,
                "payload": "",
                "signatures": [{"keyid": "ab" * 32, "sig": "*"}],
            },
            r"signature 0 \(keyid abababababababab...\): sig: not valid base64",
        ),
    ],
)
def test_malformed_envelopes_name_the_field(data: object, message: str) -> None:
    with pytest.raises(EnvelopeError, match=message):
        Envelope.from_dict(data)


def test_envelope_text_that_is_not_json() -> None:
    with pytest.raises(EnvelopeError, match="envelope: not valid JSON"):
        Envelope.from_json("{nope")
