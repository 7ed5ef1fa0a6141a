"""node.protocol.JobRequest: the one definition of a `POST /v1/jobs` body, which the node
validates requests against and the SDK builds them with; the bodies on the wire are the
ones the SDK always sent."""

from __future__ import annotations

import base64

import pytest
from pydantic import ValidationError

import node.daemon.api
import node.sdk
from node.protocol import JobRequest


def test_the_node_and_the_sdk_share_the_definition() -> None:
    assert node.daemon.api.JobRequest is JobRequest
    assert node.sdk.JobRequest is JobRequest


def test_an_inline_request_is_the_module_and_the_inputs_in_base64() -> None:
    body = JobRequest.inline("HloModule m", [b"\x93NUMPY1", b""], redundancy=1).body()
    assert body == {"module": "HloModule m", "input_data": [base64.b64encode(b"\x93NUMPY1").decode(), ""], "redundancy": 1}
    assert list(body) == ["module", "input_data", "redundancy"]
    assert node.sdk.inline_job_request("HloModule m", [b"\x93NUMPY1", b""]) == body


def test_a_request_for_stored_inputs_names_their_digests() -> None:
    digest = "ab" * 32
    body = JobRequest.stored("HloModule m", [digest], redundancy=2).body()
    assert body == {"module": "HloModule m", "inputs": [digest], "redundancy": 2}
    assert list(body) == ["module", "inputs", "redundancy"]


def test_a_body_of_the_wrong_types_does_not_validate() -> None:
    # What FastAPI turns into a 422 before the node's own checks run.
    with pytest.raises(ValidationError):
        JobRequest.model_validate({"module": ["not", "text"]})
    with pytest.raises(ValidationError):
        JobRequest.model_validate({"module": "HloModule m", "redundancy": "several"})
    assert JobRequest.model_validate({"module": "HloModule m"}).redundancy == 1
