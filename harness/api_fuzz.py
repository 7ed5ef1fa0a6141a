"""Fuzzing a node's HTTP API from its own OpenAPI schema (schemathesis), shared by the short
run of `make test` (tests/node/daemon/test_api_fuzz.py) and the campaign (tools/api_fuzz.py).

The target is a real `vxla node run` process requiring tokens. Requests are drawn from every
operation of the schema, valid ones and, as often, invalid ones (schemathesis's negative
mode), sent with the node's token or without one, and a few hand-made hostile bodies
between them. Each answer is checked: never a 5xx but the 503 and 507 that name a node's
trouble (none are expected here), the node still alive, and a refused request (4xx) leaves
the store as it was, not a byte more. The node's resident memory is compared at the end
with what it was after a warm-up.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx
import hypothesis
import psutil
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.bench_load import bench
from harness.fixture_data import Fixture
from node.daemon.auth import TokenStore
from node.sdk import Client

MLP = Fixture("mlp_softmax")

# Hand-made bodies a schema does not suggest: nesting past any parser's depth, a lying .npy
# digest list, a huge declared length (sent as bytes, the length honest).
HOSTILE_BODIES = (
    b"[" * 100_000 + b"]" * 100_000,
    b'{"module": "' + b"f32[] negate(" * 5_000 + b'", "inputs": []}',
    b'{"module": "HloModule m", "inputs": ["' + b"0" * 64 + b'"], "input_data": ["AAAA"]}',
    b'{"module_digest": "' + b"a" * 64 + b'", "inputs": []}',
    b"\xff\xfe\x00",
)


class Answer(Protocol):
    status_code: int
    text: str


@dataclass
class Tally:
    """What the campaign saw."""

    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)
    stored_by_refusals: list[str] = field(default_factory=list)
    deaths: int = 0
    rss_start: int = 0
    rss_end: int = 0

    @property
    def rss_change(self) -> float:
        return (self.rss_end - self.rss_start) / self.rss_start if self.rss_start else 0.0

    def summary(self) -> str:
        statuses = ", ".join(f"{status}: {count}" for status, count in sorted(self.statuses.items()))
        return (
            f"{self.requests} requests ({statuses}); {len(self.server_errors)} server errors, {self.deaths} crashes, "
            f"{len(self.stored_by_refusals)} refused requests that stored something; node RSS {self.rss_start / 2**20:.0f} MiB "
            f"after warm-up, {self.rss_end / 2**20:.0f} MiB at the end ({100 * self.rss_change:+.1f}%)"
        )


class FuzzedNode:
    """A `vxla node run` process requiring tokens, its token, and a view of its store."""

    def __init__(self, directory: Path) -> None:
        self.process = bench.new_node(directory, auth=True)
        self.url = self.process.start()
        tokens = TokenStore(self.process.data_dir)
        try:
            self.token = tokens.add("fuzz", rate_per_minute=0)
        finally:
            tokens.close()

    def stored(self) -> tuple[int, int]:
        """(jobs, blobs) in the store, read as another process reads a WAL database."""
        data = self.process.data_dir
        with sqlite3.connect(f"file:{data / 'jobs.sqlite3'}?mode=ro", uri=True) as db:
            jobs = db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
            rows = db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0]
        files = sum(1 for path in (data / "blobs").glob("??/*") if len(path.name) == 64)
        return jobs, rows + files

    def rss(self) -> int:
        return psutil.Process(self.process.process.pid).memory_info().rss

    def alive(self) -> bool:
        if self.process.process.poll() is not None:
            return False
        try:
            return httpx.get(f"{self.url}/healthz", timeout=30).status_code == 200
        except httpx.HTTPError:
            return False

    def stop(self) -> None:
        self.process.stop()


def campaign(node: FuzzedNode, requests: int, *, derandomize: bool, seed: int | None = None) -> Tally:
    """Sends about `requests` drawn requests to `node` and checks every answer (the module
    docstring)."""
    tally = Tally()
    schema = schemathesis.openapi.from_url(f"{node.url}/openapi.json")
    cases = st.one_of(schema.as_strategy(schemathesis.GenerationMode.POSITIVE), schema.as_strategy(schemathesis.GenerationMode.NEGATIVE))
    client = httpx.Client(base_url=node.url, timeout=60)
    # The warm-up: a real job run and read back, and each hostile body with and without the
    # token; the node's memory after it is the baseline.
    with Client(node.url, token=node.token) as sdk:
        job = sdk.submit(MLP.module_text, MLP.inputs())
        job.wait(timeout=120)
        assert job.state == "done", job.info
        job.outputs()
    for index, body in enumerate(HOSTILE_BODIES * 2):
        headers = _auth(node, index % 2 == 0, "application/json")
        _check(node, tally, "POST", "/v1/jobs", lambda body=body, headers=headers: client.post("/v1/jobs", content=body, headers=headers))
    tally.rss_start = node.rss()

    @settings(max_examples=requests, derandomize=derandomize, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=cases, with_token=st.booleans())
    def send(case: schemathesis.Case, with_token: bool) -> None:
        headers = _auth(node, with_token)
        _check(node, tally, case.method.upper(), case.formatted_path, lambda: case.call(base_url=node.url, headers=headers, timeout=60))

    if seed is not None:
        send = hypothesis.seed(seed)(send)
    try:
        send()
    finally:
        client.close()
    tally.rss_end = node.rss()
    return tally


def _auth(node: FuzzedNode, with_token: bool, content_type: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {node.token}"} if with_token else {}
    if content_type:
        headers["Content-Type"] = content_type
    return headers


def _check(node: FuzzedNode, tally: Tally, method: str, path: str, call: Callable[[], Answer]) -> None:
    before = node.stored()
    try:
        response = call()
    except (httpx.HTTPError, requests.RequestException) as error:
        tally.requests += 1
        if not node.alive():
            tally.deaths += 1
            raise AssertionError(f"{method} {path}: the node died ({error})") from None
        tally.server_errors.append(f"{method} {path}: no answer ({error})")
        return
    tally.requests += 1
    tally.statuses[response.status_code] += 1
    if response.status_code >= 500:
        tally.server_errors.append(f"{method} {path}: {response.status_code} {response.text[:200]}")
    elif 400 <= response.status_code < 500 and node.stored() != before:
        tally.stored_by_refusals.append(f"{method} {path}: {response.status_code} stored {before} -> {node.stored()}")
