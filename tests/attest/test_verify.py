"""attest.verify: signatures, payload type, statement, replay protection, tampering."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from attest import (
    PAYLOAD_TYPE,
    Envelope,
    Signature,
    Statement,
    StatementError,
    VerificationError,
    add_signature,
    canonical_json,
    key_id,
    sign_payload,
    sign_statement,
    verify,
)
from tests.attest.traces import CHAIN_ID, CONTRACT, JOB_ID, make_statement, node_key

NODE, VERIFIER, STRANGER = node_key("node"), node_key("verifier"), node_key("stranger")
TRUSTED = [NODE.public_key(), VERIFIER.public_key()]


def signed(**options: Any) -> Envelope:
    return sign_statement(make_statement(NODE, **options), NODE)


def short(key: Any) -> str:
    return re.escape(key_id(key)[:16] + "...")


def test_round_trip() -> None:
    statement = make_statement(NODE)
    envelope = sign_statement(statement, NODE)
    assert (
        verify(envelope, TRUSTED, job_id=JOB_ID, chain_id=CHAIN_ID, contract=CONTRACT) == statement
    )
    # The JSON text and JSON data forms verify too, and trusted keys may be given by key id.
    assert verify(envelope.to_json(), {key_id(NODE): NODE.public_key()}) == statement
    assert verify(json.loads(envelope.to_json()), [NODE.public_key()]) == statement
    # A checksummed contract address is the same contract.
    assert (
        verify(envelope, TRUSTED, contract="0x5FbDB2315678afecb367f032d93F642f64180aa3")
        == statement
    )


def test_multiple_signatures_are_each_checked() -> None:
    envelope = add_signature(signed(), VERIFIER)
    assert verify(envelope, TRUSTED).predicate.key_id == key_id(NODE)
    # Every signature must be by a trusted key ...
    with pytest.raises(
        VerificationError, match=rf"^signature 1 \(keyid {short(VERIFIER)}\): unknown key id"
    ):
        verify(envelope, [NODE.public_key()])
    # ... and must verify: a bad second signature rejects the envelope although the first is good.
    broken = replace(envelope.signatures[1], sig=bytes(64))
    with pytest.raises(
        VerificationError, match=rf"^signature 1 \(keyid {short(VERIFIER)}\): invalid$"
    ):
        verify(replace(envelope, signatures=(envelope.signatures[0], broken)), TRUSTED)
    # The same key may not appear twice.
    doubled = replace(envelope, signatures=(envelope.signatures[0], envelope.signatures[0]))
    with pytest.raises(VerificationError, match=r"^signature 1 .*: duplicate key id"):
        verify(doubled, TRUSTED)


def test_unknown_key_is_rejected() -> None:
    envelope = sign_statement(make_statement(STRANGER), STRANGER)
    with pytest.raises(
        VerificationError, match=rf"^signature 0 \(keyid {short(STRANGER)}\): unknown key id"
    ):
        verify(envelope, TRUSTED)
    # A signature under a trusted key's id made by another key is invalid.
    forged = replace(
        envelope, signatures=(Signature(keyid=key_id(NODE), sig=envelope.signatures[0].sig),)
    )
    with pytest.raises(VerificationError, match=rf"^signature 0 \(keyid {short(NODE)}\): invalid$"):
        verify(forged, TRUSTED)


def test_no_signature_is_rejected() -> None:
    with pytest.raises(VerificationError, match="^envelope.signatures: no signatures$"):
        verify(replace(signed(), signatures=()), TRUSTED)


def test_node_must_have_signed_its_own_statement() -> None:
    # The verifier countersigns a statement naming the node, but the node's signature is gone.
    envelope = add_signature(signed(), VERIFIER)
    with pytest.raises(VerificationError, match=rf"^predicate.key_id: {key_id(NODE)} did not sign"):
        verify(replace(envelope, signatures=envelope.signatures[1:]), TRUSTED)


@pytest.mark.parametrize(
    ("expectation", "message"),
    [
        ({"job_id": "job-0002"}, r"^predicate\.job_id: expected 'job-0002', got 'job-0001'$"),
        ({"chain_id": 1}, rf"^predicate\.chain_id: expected 1, got {CHAIN_ID}$"),
        (
            {"contract": "0x" + "11" * 20},
            rf"^predicate\.contract: expected 0x{'11' * 20}, got {CONTRACT}$",
        ),
    ],
)
def test_replay_for_another_job_chain_or_contract_is_rejected(
    expectation: dict[str, Any], message: str
) -> None:
    with pytest.raises(VerificationError, match=message):
        verify(signed(), TRUSTED, **expectation)


def test_statement_without_chain_binding_fails_a_chain_check() -> None:
    envelope = signed(chain_id=None, contract=None)
    assert verify(envelope, TRUSTED, job_id=JOB_ID).predicate.chain_id is None
    with pytest.raises(VerificationError, match=r"^predicate\.chain_id: expected 1, got null$"):
        verify(envelope, TRUSTED, chain_id=1)
    with pytest.raises(VerificationError, match=r"^predicate\.contract: expected 0x.*, got null$"):
        verify(envelope, TRUSTED, contract=CONTRACT)


def test_payload_type_and_payload_content_are_checked_after_the_signature() -> None:
    body = make_statement(NODE).to_json_bytes()
    with pytest.raises(
        VerificationError,
        match=r"^payloadType: expected 'application/vnd.in-toto\+json', got 'application/json'$",
    ):
        verify(sign_payload(body, NODE, "application/json"), TRUSTED)
    with pytest.raises(VerificationError, match="^payload: not valid JSON"):
        verify(sign_payload(b"{not json", NODE), TRUSTED)
    with pytest.raises(VerificationError, match="^payload: not canonical JSON"):
        verify(sign_payload(json.dumps(json.loads(body), indent=1).encode(), NODE), TRUSTED)
    data = json.loads(body)
    del data["predicate"]["job_id"]
    with pytest.raises(VerificationError, match=r"^predicate\.job_id: missing$"):
        verify(sign_payload(canonical_json(data), NODE), TRUSTED)
    with pytest.raises(VerificationError, match=r"^envelope: not valid JSON"):
        verify("{", TRUSTED)


def test_every_flipped_payload_byte_is_rejected() -> None:
    envelope = add_signature(signed(), VERIFIER)
    payload = envelope.payload
    expected = rf"^signature 0 \(keyid {short(NODE)}\): invalid$"
    for position in range(len(payload)):
        for mask in (0x01, 0xFF):
            flipped = (
                payload[:position] + bytes([payload[position] ^ mask]) + payload[position + 1 :]
            )
            # Through the JSON form: the flipped bytes are base64-encoded again.
            data = json.loads(envelope.to_json())
            data["payload"] = Envelope(PAYLOAD_TYPE, flipped).to_dict()["payload"]
            with pytest.raises(VerificationError, match=expected):
                verify(data, TRUSTED)


def test_every_flipped_signature_byte_is_rejected() -> None:
    envelope = add_signature(signed(), VERIFIER)
    for index, key in enumerate((NODE, VERIFIER)):
        sig = envelope.signatures[index].sig
        assert len(sig) == 64
        for position in range(len(sig)):
            for mask in (0x01, 0x80, 0xFF):
                bad = sig[:position] + bytes([sig[position] ^ mask]) + sig[position + 1 :]
                signatures = list(envelope.signatures)
                signatures[index] = Signature(keyid=signatures[index].keyid, sig=bad)
                data = replace(envelope, signatures=tuple(signatures)).to_dict()
                with pytest.raises(
                    VerificationError, match=rf"^signature {index} \(keyid {short(key)}\): invalid$"
                ):
                    verify(data, TRUSTED)
    truncated = replace(
        envelope,
        signatures=(Signature(envelope.signatures[0].keyid, envelope.signatures[0].sig[:63]),),
    )
    with pytest.raises(
        VerificationError, match=r"^signature 0 .*: invalid \(expected 64 bytes, got 63\)$"
    ):
        verify(truncated, TRUSTED)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for key in value:
            yield from _leaves(value[key], (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    else:
        yield path, value


def _other_valid_looking(value: Any) -> Any:
    """A different value of the same form: hex stays hex of the same length, and so on."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value):
        return ("1" if value[0] == "0" else "0") + value[1:]
    if isinstance(value, str) and value.startswith("0x"):
        return value[:-1] + ("1" if value[-1] == "0" else "0")
    if isinstance(value, str) and value == "f32":
        return "f64"
    if isinstance(value, str) and value == "s32":
        return "s64"
    if isinstance(value, str):
        return value + "x"
    raise AssertionError(f"no alternative for {value!r}")


def _with(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    copy = json.loads(json.dumps(data))
    target = copy
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return copy


# Fields whose change the statement's own consistency checks catch (they are cross-checked
# against another field, or one of a known set: the tensor digest version); every other leaf
# changes to a statement that still parses.
CROSS_CHECKED = re.compile(
    r"deterministic\.(op_trace\.(merkle_root|instructions\.\d+\.(digest|index))|outputs\.\d+\.(name|digest)|tensor_digest_version)$"
)


def test_every_predicate_leaf_changed_is_rejected_by_the_signature() -> None:
    envelope = add_signature(signed(), VERIFIER)
    statement = json.loads(envelope.payload)
    leaves = list(_leaves(statement["predicate"], ("predicate",)))
    assert len(leaves) > 60  # the walk reaches the instructions, tensors and run metadata
    parseable = 0
    for path, value in leaves:
        changed = _with(statement, path, _other_valid_looking(value))
        payload = canonical_json(changed)
        assert payload != envelope.payload
        dotted = ".".join(str(p) for p in path)
        try:
            Statement.from_dict(changed)
            parseable += 1
        except StatementError:
            assert CROSS_CHECKED.search(dotted), f"{dotted}: change was not valid-looking"
        with pytest.raises(
            VerificationError, match=rf"^signature 0 \(keyid {short(NODE)}\): invalid$"
        ):
            verify(replace(envelope, payload=payload), TRUSTED)
    cross_checked = sum(
        1 for path, _ in leaves if CROSS_CHECKED.search(".".join(str(p) for p in path))
    )
    assert parseable == len(leaves) - cross_checked
