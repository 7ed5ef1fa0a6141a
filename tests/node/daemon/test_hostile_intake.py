"""What a request must pass before the node reads its body, against a real `vxla node run`
process with `[auth] required = true`: a hostile body, deep or large, sent without a token
gets its 401 without being read or parsed, and the node lives on; with a token, JSON nested
past the API's depth limit is a 400; no import leaves the interpreter's recursion limit raised
(py_ecc, under eth_account, raises it to 100,000, past what the C stack holds: json.loads of
deep nesting then crashed the process)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from node.cli import main
from tests.node.cli.test_daemon_cli import REPO, start_node

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.fixture(scope="module")
def guarded_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    directory = tmp_path_factory.mktemp("guarded")
    url, process = start_node(directory, "\n[auth]\nrequired = true\n")
    yield url, process, directory
    process.kill()
    process.wait()
    assert process.stderr is not None
    process.stderr.close()


def _alive(url: str, process: subprocess.Popen) -> bool:
    return process.poll() is None and httpx.get(f"{url}/healthz", timeout=10).status_code == 200


def test_deep_json_without_a_token_is_refused_unread(guarded_node: tuple[str, subprocess.Popen, Path]) -> None:
    url, process, _ = guarded_node
    answer = httpx.post(f"{url}/v1/jobs", content=DEEP, headers={"Content-Type": "application/json"}, timeout=60)
    assert answer.status_code == 401, answer.text[:200]
    assert _alive(url, process)


def test_deep_json_with_a_token_is_a_400_naming_the_depth(guarded_node: tuple[str, subprocess.Popen, Path], capsys: pytest.CaptureFixture[str]) -> None:
    url, process, directory = guarded_node
    assert main(["tokens", "add", "deep", "--config", str(directory / "node.toml")]) == 0
    token = capsys.readouterr().out.strip()
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    answer = httpx.post(f"{url}/v1/jobs", content=DEEP, headers=headers, timeout=60)
    assert answer.status_code == 400 and "nested" in answer.json()["detail"], answer.text[:200]
    # Nesting a little deeper than any job request is refused the same way, in a real job.
    body = b'{"module": "HloModule m", "inputs": [' + b"[" * 40 + b"]" * 40 + b"]}"
    answer = httpx.post(f"{url}/v1/jobs", content=body, headers=headers, timeout=60)
    assert answer.status_code == 400 and "nested" in answer.json()["detail"]
    assert _alive(url, process)


def test_a_large_body_without_a_token_gets_401_before_it_is_sent(guarded_node: tuple[str, subprocess.Popen, Path]) -> None:
    """The headers declare 250 MiB and no body byte follows: the answer comes at once."""
    url, process, _ = guarded_node
    parts = urlsplit(url)
    for request in (
        f"POST /v1/jobs HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\nContent-Length: {250 << 20}\r\n\r\n",
        f"PUT /v1/blobs/{'0' * 64} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Length: {250 << 20}\r\n\r\n",
    ):
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as connection:
            connection.sendall(request.encode())
            status_line = connection.recv(4096).split(b"\r\n", 1)[0]
        assert status_line.split()[1] == b"401", status_line
    assert _alive(url, process)


def test_no_import_leaves_the_recursion_limit_raised() -> None:
    """Every module of the node (the chain client and web3 among them) imported in a fresh
    interpreter: the recursion limit is still the interpreter's own."""
    code = (
        "import sys, pkgutil, importlib, node, compiler, attest\n"
        "before = sys.getrecursionlimit()\n"
        "for package in (attest, compiler, node):\n"
        "    for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        if not info.name.endswith('__main__'):\n"
        "            importlib.import_module(info.name)\n"
        "import web3, eth_account\n"
        "print(before, sys.getrecursionlimit())\n"
    )
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    before, after = map(int, result.stdout.split())
    assert after == before == 1000, f"recursion limit {after} after the imports (was {before}), {time.monotonic() - started:.0f} s"
