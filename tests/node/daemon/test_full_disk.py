"""A full disk must not cost a submitter or lose a job: a submission while the node's disk is
full is a 507 that charges its token nothing (and, once space is back, is taken and charged
once); a queued job whose run finds the disk full goes back to the queue and is done once
space is back. Beside them, two hostile requests of the same area: a chunked body sent to a
route that takes none is refused without being read to its end, and an .npy input whose
header the parser rejects is a 400 that names the problem without echoing the header.

Full disks are real ones: small tmpfs mounts (which needs root, as CI has)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from attest.keys import generate_private_key
from harness.fixture_data import Fixture
from node.daemon import worker as worker_module
from node.daemon.auth import TokenStore
from node.daemon.config import AuthConfig, NodeConfig
from node.daemon.server import NodeServer
from node.sdk import Client, inline_job_request
from node.tensors import npy_bytes
from tests.node.daemon.test_store_faults import fill, mounted, needs_root

MLP = Fixture("mlp_softmax")
KEY = generate_private_key()


def until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeServer]:
    server = NodeServer(NodeConfig(port=0, data_dir=tmp_path_factory.mktemp("node")), KEY, log_level="warning")
    server.start_in_thread()
    yield server
    server.stop()


@needs_root
def test_a_submission_on_a_full_disk_is_a_507_and_charges_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with mounted(data, "size=3m"):
        tokens = TokenStore(data)
        token = tokens.add("alice", max_jobs=10)
        tokens.close()
        server = NodeServer(NodeConfig(port=0, data_dir=data, auth=AuthConfig(required=True)), KEY, log_level="warning")
        server.start_in_thread()
        assert server.tokens is not None
        inputs = [npy_bytes(a) for a in MLP.inputs()]
        body = inline_job_request(MLP.module_text, inputs)
        uploaded = len(MLP.module_text.encode()) + sum(map(len, inputs))
        headers = {"Authorization": f"Bearer {token}"}
        try:
            fill(data / "filler")
            answer = httpx.post(f"{server.url}/v1/jobs", json=body, headers=headers, timeout=60)
            assert answer.status_code == 507, answer.text
            assert "storage is full" in answer.json()["detail"] and int(answer.headers["retry-after"]) > 0
            used = server.tokens.find(token)
            assert used is not None and (used.jobs, used.bytes) == (0, 0)
            assert sum(server.store.counts().values()) == 0
            (data / "filler").unlink()  # space is back: the same submission is taken, charged once
            answer = httpx.post(f"{server.url}/v1/jobs", json=body, headers=headers, timeout=60)
            assert answer.status_code == 201, answer.text
            used = server.tokens.find(token)
            assert used is not None and (used.jobs, used.bytes) == (1, uploaded)
            assert sum(server.store.counts().values()) == 1
        finally:
            server.stop()


@needs_root
def test_a_job_whose_run_finds_the_disk_full_waits_in_the_queue_for_space(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(worker_module, "RECORD_FIRST_WAIT_S", 0.05)
    data = tmp_path / "data"
    with mounted(data, "size=3m"):
        server = NodeServer(NodeConfig(port=0, data_dir=data), KEY, log_level="warning")
        executions = server.pool.executions
        real_execute = executions.execute
        runs: list[str] = []

        def execute_as_the_disk_fills(request: Any) -> Any:
            if not runs:
                fill(data / "filler")  # the disk fills up as the queued job starts to run
            try:
                answer = real_execute(request)
            except Exception as error:
                runs.append(f"{type(error).__name__}: {error}")
                raise
            runs.append("ran")
            return answer

        monkeypatch.setattr(executions, "execute", execute_as_the_disk_fills)
        server.start_in_thread()
        try:
            with caplog.at_level(logging.INFO, logger="vxla.node"), Client(server.url) as client:
                job = client.submit(MLP.module_text, MLP.inputs())
                until(lambda: bool(runs), 60, "the job's first run")
                assert "storage is full" in runs[0], runs
                time.sleep(1.0)  # the worker has tried the store again, and waits for space
                assert client.job(job.id).state in ("queued", "running")
                (data / "filler").unlink()
                job.wait(timeout=60)
                assert job.state == "done" and runs[-1] == "ran"
            assert any(job.id in r.getMessage() and "goes back to the queue" in r.getMessage() for r in caplog.records)
        finally:
            server.stop()


def test_a_chunked_body_to_a_route_that_takes_none_is_refused_unread(node: NodeServer) -> None:
    """250 MiB in chunks sent to GET /healthz: a 413, and the connection closed on the sender
    long before it is all sent (the server read on to its end)."""
    url = httpx.URL(node.url)
    total, chunk = 250 << 20, bytes(64 * 1024)
    framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
    answer = bytearray()
    with socket.create_connection((url.host, url.port), timeout=30) as connection:

        def read() -> None:
            try:
                while part := connection.recv(65536):
                    answer.extend(part)
            except OSError:
                pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        connection.sendall(f"GET /healthz HTTP/1.1\r\nHost: {url.host}\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        sent = 0
        try:
            while sent < total:
                connection.sendall(framed)
                sent += len(chunk)
            connection.sendall(b"0\r\n\r\n")
        except OSError:  # the server closed the connection: what it refused stays unsent
            pass
        reader.join(30)
    assert answer.split(b"\r\n", 1)[0].split()[1] == b"413", bytes(answer[:200])
    assert b"takes no request body" in answer
    assert sent < 64 << 20, f"{sent} bytes sent before the server closed the connection"
    assert httpx.get(f"{node.url}/healthz", timeout=10).status_code == 200


def test_a_hostile_npy_header_is_named_without_echoing_it(node: NodeServer) -> None:
    """A header whose descr is a call (the parser's error names its own object, with a heap
    address) and one whose descr is an empty tuple (numpy raises IndexError): 400s naming
    the header, echoing nothing of it."""
    inputs = [npy_bytes(a) for a in MLP.inputs()]
    for header in (
        "{'descr': __import__('os').getpid(), 'fortran_order': False, 'shape': (1,)}",
        "{'descr': (), 'fortran_order': False, 'shape': (1,)}",
    ):
        text = header.encode("latin-1")
        text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
        hostile = b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + bytes(4)
        body = inline_job_request(MLP.module_text, [hostile, *inputs[1:]])
        answer = httpx.post(f"{node.url}/v1/jobs", json=body, timeout=60)
        assert answer.status_code == 400, answer.text
        detail = answer.json()["detail"]
        assert "header" in detail and "0x" not in detail and "import" not in detail and "descr'" not in detail, detail
