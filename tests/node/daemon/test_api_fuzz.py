"""A short, derandomized sample of the API fuzz campaign (tools/api_fuzz.py): requests drawn
from the node's own OpenAPI schema, valid and invalid, with and without its token, against a
real `vxla node run` requiring tokens. No server error, no crash, no byte stored by a refused
request, memory back within 10% (harness/api_fuzz.py)."""

from __future__ import annotations

from pathlib import Path

from harness.api_fuzz import FuzzedNode, campaign

REQUESTS = 300


def test_drawn_requests_get_no_server_error_and_refusals_store_nothing(tmp_path: Path) -> None:
    node = FuzzedNode(tmp_path / "node")
    try:
        tally = campaign(node, REQUESTS, derandomize=True)
    finally:
        node.stop()
    assert tally.requests >= REQUESTS
    assert not tally.server_errors, tally.summary() + "\n" + "\n".join(tally.server_errors[:10])
    assert not tally.stored_by_refusals, "\n".join(tally.stored_by_refusals[:10])
    assert tally.deaths == 0
    assert tally.rss_change <= 0.10, tally.summary()
    assert {400, 401, 404} <= set(tally.statuses), tally.summary()  # it reached the routes' own checks
