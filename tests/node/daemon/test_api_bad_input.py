"""Bad input on the node's HTTP API beyond the cases of test_daemon.py: bodies that are not
JSON or not a job, huge arrays of input digests, and the same blob or job submitted many
times at once. Each refusal is a 4xx naming the problem, leaves the store as it was, and the
node keeps serving; concurrent duplicates store one blob and run every job."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import pytest

from attest.digests import sha256_hex
from attest.keys import generate_private_key
from harness.fixture_data import Fixture
from node.daemon.config import Limits, NodeConfig
from node.daemon.server import NodeServer
from node.daemon.store import SMALL_BLOB_BYTES
from node.sdk import Client
from node.tensors import npy_bytes

KEY = generate_private_key()
LIMITS = Limits(
    max_module_bytes=64 * 1024,
    max_tensor_bytes=1024 * 1024,
    max_flops=10**8,
    max_while_iterations=1000,
    job_wall_seconds=60.0,
)
MLP = Fixture("mlp_softmax")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeServer]:
    config = NodeConfig(port=0, data_dir=tmp_path_factory.mktemp("node"), limits=LIMITS)
    server = NodeServer(config, KEY, log_level="warning")
    server.start_in_thread()
    yield server
    server.stop()


def snapshot(server: NodeServer) -> tuple[list[Any], int]:
    """Everything a refused request must leave as it was."""
    return [j.to_dict() for j in server.store.jobs()], server.store.blobs.count()


def upload(node: NodeServer, data: bytes) -> str:
    digest = sha256_hex(data)
    assert httpx.put(f"{node.url}/v1/blobs/{digest}", content=data, timeout=30).status_code == 201
    return digest


def detail_text(response: httpx.Response) -> str:
    """The `detail` of an error answer as text (FastAPI's validation errors are a list)."""
    return str(response.json()["detail"]).lower()


@pytest.mark.parametrize(
    ("case", "body", "named"),
    [
        ("not JSON", b"module = 'HloModule m'", "json"),
        ("truncated JSON", b'{"module": "HloModule m", "inputs": [', "json"),
        ("not UTF-8", b'{"module": "\xff\xfe"}', "body"),
        ("empty body", b"", "body"),
        ("JSON null", b"null", "body"),
        ("JSON array", b"[]", "body"),
        ("inputs not a list", b'{"module": "HloModule m", "inputs": "abc"}', "inputs"),
        ("inputs of numbers", b'{"module": "HloModule m", "inputs": [1, 2]}', "inputs"),
        ("module not a string", b'{"module": 7, "inputs": []}', "module"),
        ("redundancy not a number", b'{"module": "HloModule m", "redundancy": "three"}', "redundancy"),
    ],
)
def test_malformed_bodies_refused(node: NodeServer, case: str, body: bytes, named: str) -> None:
    before = snapshot(node)
    response = httpx.post(
        f"{node.url}/v1/jobs", content=body, headers={"content-type": "application/json"}, timeout=30
    )
    assert 400 <= response.status_code < 500, (case, response.status_code, response.text)
    assert named in detail_text(response), (case, response.text)
    assert snapshot(node) == before
    assert httpx.get(f"{node.url}/healthz").status_code == 200


def test_an_npy_header_declaring_more_than_its_bytes_is_a_400(node: NodeServer) -> None:
    """16 bytes of data under a header declaring 10^10 float32 elements, as a stored input and
    inline: refused naming the mismatch, with nothing allocated for the declared shape (it
    was a 500, a MemoryError)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (100_000, 100_000)})
    liar = header.getvalue() + bytes(16)
    inputs = [npy_bytes(a) for a in MLP.inputs()]
    digests = [upload(node, data) for data in (liar, *inputs[1:])]
    before = snapshot(node)
    for body in (
        {"module": MLP.module_text, "inputs": digests},
        {"module": MLP.module_text, "input_data": [base64.b64encode(d).decode() for d in (liar, *inputs[1:])]},
    ):
        response = httpx.post(f"{node.url}/v1/jobs", json=body, timeout=30)
        assert response.status_code == 400, response.text
        assert "declares float32[100000, 100000]" in response.json()["detail"] and "16 bytes follow" in response.json()["detail"]
    assert snapshot(node) == before


def test_huge_array_of_one_known_digest_reads_no_input(node: NodeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A body listing one stored blob many times is refused on the input count before any
    input is read: reading (and decoding) it once per listing would let a small body make the
    node hold that many copies of the largest allowed tensor."""
    inputs = MLP.inputs()
    digest = upload(node, npy_bytes(inputs[0]))
    count = 3_000  # a body of about 200 KB, within the job route's limit
    reads: list[str] = []
    original = node.store.blobs.get

    def counting_get(blob: str) -> bytes:
        reads.append(blob)
        return original(blob)

    monkeypatch.setattr(node.store.blobs, "get", counting_get)
    before = snapshot(node)
    response = httpx.post(f"{node.url}/v1/jobs", json={"module": MLP.module_text, "inputs": [digest] * count}, timeout=120)
    assert response.status_code == 400, response.text
    assert f"takes {len(inputs)} inputs, got {count}" in response.json()["detail"]
    assert reads.count(digest) == 0
    assert snapshot(node) == before
    assert httpx.get(f"{node.url}/healthz").status_code == 200


def test_huge_array_of_unknown_digests(node: NodeServer) -> None:
    before = snapshot(node)
    digests = [sha256_hex(str(i).encode()) for i in range(3_000)]
    response = httpx.post(f"{node.url}/v1/jobs", json={"module": MLP.module_text, "inputs": digests}, timeout=120)
    assert response.status_code == 400, response.text
    assert "inputs" in response.json()["detail"]
    assert snapshot(node) == before


def test_concurrent_puts_of_one_blob(node: NodeServer) -> None:
    """Many uploads of the same bytes at once (a blob large enough to be a file): every one
    succeeds, one file holds the bytes, and no temporary file is left beside it."""
    data = np.arange(SMALL_BLOB_BYTES // 2, dtype=np.float32).tobytes()
    digest = sha256_hex(data)

    def put(_: int) -> int:
        return httpx.put(f"{node.url}/v1/blobs/{digest}", content=data, timeout=30).status_code

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(put, range(32)))
    assert statuses == [201] * 32
    path = node.store.blobs.path(digest)
    assert path.read_bytes() == data
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(f".{digest}")] == []
    fetched = httpx.get(f"{node.url}/v1/blobs/{digest}")
    assert fetched.status_code == 200 and fetched.content == data


def test_concurrent_duplicate_jobs_all_run(node: NodeServer) -> None:
    """The same job submitted many times at once: distinct jobs (a submission is never merged
    into another), each done once, all with the same trace and output digests."""
    inputs = MLP.inputs()
    before_jobs = len(node.store.jobs())

    def submit(_: int) -> str:
        with Client(node.url) as client:
            return client.submit(MLP.module_text, inputs).id

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(submit, range(12)))
    assert len(set(ids)) == 12
    with Client(node.url) as client:
        infos = [client.job(i).wait(timeout=120).info for i in ids]
    assert {info["statement_digest"] for info in infos} != {None}
    assert len({info["statement_digest"] for info in infos}) == 1
    assert len({tuple(info["output_digests"]) for info in infos}) == 1
    assert len(node.store.jobs()) == before_jobs + 12


def test_chunked_body_over_the_limit_refused_while_it_arrives(node: NodeServer) -> None:
    """A chunked body declares no Content-Length, so the declared-length check cannot see it:
    the node must count the bytes as they arrive and refuse the job (413 naming the body
    limit) instead of buffering and parsing a body of any size."""
    inputs = MLP.inputs()
    digest = upload(node, npy_bytes(inputs[0]))
    body = json.dumps({"module": MLP.module_text, "inputs": [digest] * 30_000}).encode()
    assert len(body) > LIMITS.max_tensor_bytes + 65536
    before = snapshot(node)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    response = httpx.post(
        f"{node.url}/v1/jobs", content=chunks(), headers={"content-type": "application/json"}, timeout=60
    )
    assert response.status_code == 413, response.text
    assert "over this route's limit" in response.json()["detail"]
    assert snapshot(node) == before
    assert httpx.get(f"{node.url}/healthz").status_code == 200
