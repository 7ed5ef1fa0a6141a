"""Authenticated intake: with `[auth] required = true` a node takes jobs and blobs only with a
token from `vxla tokens add`, within the token's quotas and rate, and answers 401, 403 and 429
naming the reason; a refused request stores nothing and uses no quota; reads stay open."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from attest.digests import sha256_hex
from attest.keys import generate_private_key
from harness.fixture_data import Fixture
from node.cli import main
from node.daemon.auth import TOKENS_FILE, RateLimiter, Refused, TokenStore
from node.daemon.config import ConfigError, load_config
from node.daemon.server import NodeServer
from node.sdk import TOKEN_ENV, Client, RequestRefused, connect
from node.tensors import npy_bytes

KEY = generate_private_key()
MLP = Fixture("mlp_softmax")


def write_config(directory: Path, required: bool = True) -> Path:
    path = directory / "node.toml"
    path.write_text(f'[node]\nport = 0\ndata_dir = "{directory / "data"}"\n\n[auth]\nrequired = {"true" if required else "false"}\n')
    return path


def add_token(config: Path, name: str, capsys: pytest.CaptureFixture[str], *options: str) -> str:
    """A token made the way an operator makes one: `vxla tokens add`."""
    assert main(["tokens", "add", name, "--config", str(config), *options]) == 0
    return capsys.readouterr().out.strip()


@pytest.fixture(scope="module")
def node_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("auth-node")


@pytest.fixture(scope="module")
def node(node_dir: Path) -> Iterator[NodeServer]:
    server = NodeServer(load_config(write_config(node_dir)), KEY, log_level="warning")
    server.start_in_thread()
    yield server
    server.stop()


def snapshot(server: NodeServer) -> tuple[list[str], int]:
    return [j.id for j in server.store.jobs()], server.store.blobs.count()


def job_body(fixture: Fixture, client: Client) -> dict:
    return {"module": fixture.module_text, "inputs": [client.put_blob(p.read_bytes()) for p in fixture.input_paths()]}


def test_without_a_token_nothing_is_taken_and_reads_stay_open(node: NodeServer, node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(node)
    answer = httpx.post(f"{node.url}/v1/jobs", json={"module": MLP.module_text, "inputs": []}, timeout=30)
    assert answer.status_code == 401 and "requires a token" in answer.json()["detail"]
    assert answer.headers["www-authenticate"].startswith("Bearer")
    # Also when the body is not a job at all: the credentials are checked first.
    assert httpx.post(f"{node.url}/v1/jobs", content=b"not json", timeout=30).status_code == 401
    data = b"some bytes"
    put = httpx.put(f"{node.url}/v1/blobs/{sha256_hex(data)}", content=data, timeout=30)
    assert put.status_code == 401
    wrong = httpx.post(f"{node.url}/v1/jobs", json={"module": MLP.module_text}, headers={"Authorization": "Bearer vxla_not-a-token"}, timeout=30)
    assert wrong.status_code == 401 and "unknown token" in wrong.json()["detail"]
    assert snapshot(node) == before
    # With a token the same job runs; what it made is readable without one.
    token = add_token(write_config(node_dir), "alice", capsys)
    with Client(node.url, token=token) as client:
        job = client.submit(MLP.module_text, MLP.inputs())
        job.wait(timeout=120)
        assert job.state == "done"
    for path in (f"/v1/jobs/{job.id}", f"/v1/jobs/{job.id}/trace", f"/v1/blobs/{job.info['output_digests'][0]}", "/healthz"):
        assert httpx.get(f"{node.url}{path}", timeout=30).status_code == 200, path


def test_the_token_is_stored_hashed_and_listed_without_it(node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(node_dir)
    token = add_token(config, "bob", capsys, "--max-jobs", "3")
    raw = (node_dir / "data" / TOKENS_FILE).read_bytes() + b"".join(p.read_bytes() for p in (node_dir / "data").glob(f"{TOKENS_FILE}-*"))
    assert token.encode() not in raw
    assert main(["tokens", "list", "--config", str(config), "--json"]) == 0
    listed = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert listed["bob"]["max_jobs"] == 3 and token not in json.dumps(listed)
    # A name is unique, and bad names or options exit 2.
    assert main(["tokens", "add", "bob", "--config", str(config)]) == 2
    assert "taken" in capsys.readouterr().err
    assert main(["tokens", "add", "no spaces", "--config", str(config)]) == 2
    assert main(["tokens", "add", "carol", "--max-jobs", "-1", "--config", str(config)]) == 2


def test_a_job_quota_refuses_the_next_job_with_403(node: NodeServer, node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = add_token(write_config(node_dir), "one-job", capsys, "--max-jobs", "1")
    with Client(node.url, token=token) as client:
        client.submit(MLP.module_text, MLP.inputs()).wait()  # done: its outputs are stored
        before = snapshot(node)
        body = job_body(MLP, client)  # the inputs are stored already: uploading them again adds nothing
        with pytest.raises(RequestRefused) as refused:
            client._json("POST", "/v1/jobs", json=body)
    assert refused.value.status == 403 and "quota of 1 jobs" in refused.value.detail
    assert snapshot(node) == before


def test_a_refused_job_uses_no_quota(node: NodeServer, node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = add_token(write_config(node_dir), "careful", capsys, "--max-jobs", "1")
    with Client(node.url, token=token) as client:
        with pytest.raises(RequestRefused) as refused:
            client._json("POST", "/v1/jobs", json={"module": "HloModule broken\n", "inputs": []})
        assert refused.value.status == 400
        client.submit(MLP.module_text, MLP.inputs())  # the one job it may post


def test_a_byte_quota_refuses_an_upload_with_403(node: NodeServer, node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = add_token(write_config(node_dir), "small", capsys, "--max-bytes", "1000")
    with Client(node.url, token=token) as client:
        client.put_blob(b"x" * 600)
        before = snapshot(node)
        with pytest.raises(RequestRefused) as refused:
            client.put_blob(b"y" * 600)
    assert refused.value.status == 403 and "quota of 1000" in refused.value.detail
    assert snapshot(node) == before


def test_a_byte_quota_counts_inputs_sent_in_the_job_request(node: NodeServer, node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    module_bytes = len(MLP.module_text.encode())
    input_bytes = sum(len(npy_bytes(a)) for a in MLP.inputs())
    # Enough for the module, not for the module and the inputs the SDK sends with it.
    token = add_token(write_config(node_dir), "no-inputs", capsys, "--max-bytes", str(module_bytes + input_bytes - 1))
    before = snapshot(node)
    with Client(node.url, token=token) as client, pytest.raises(RequestRefused) as refused:
        client.submit(MLP.module_text, MLP.inputs())
    assert refused.value.status == 403 and "quota of" in refused.value.detail
    assert snapshot(node) == before


def test_past_the_rate_a_request_gets_429_with_retry_after(node: NodeServer, node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = add_token(write_config(node_dir), "bursty", capsys, "--rate", "2")
    headers = {"Authorization": f"Bearer {token}"}
    answers = [httpx.put(f"{node.url}/v1/blobs/{sha256_hex(bytes([i]))}", content=bytes([i]), headers=headers, timeout=30) for i in range(3)]
    assert [a.status_code for a in answers] == [201, 201, 429]
    assert "rate of 2 requests a minute" in answers[2].json()["detail"]
    assert int(answers[2].headers["retry-after"]) >= 1


def test_a_removed_token_is_refused(node: NodeServer, node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(node_dir)
    token = add_token(config, "leaving", capsys)
    with Client(node.url, token=token) as client:
        client.put_blob(b"before")
        assert main(["tokens", "remove", "leaving", "--config", str(config)]) == 0
        with pytest.raises(RequestRefused) as refused:
            client.put_blob(b"after")
    assert refused.value.status == 401
    assert main(["tokens", "remove", "leaving", "--config", str(config)]) == 2


def test_connect_and_submit_take_the_token_from_the_environment(node: NodeServer, node_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    token = add_token(write_config(node_dir), "env", capsys)
    monkeypatch.setenv(TOKEN_ENV, token)
    with connect(node.url) as client:
        assert client.put_blob(b"from the environment")
    argv = ["submit", "--node", node.url, str(MLP.directory / "module.hlo"), *map(str, MLP.input_paths())]
    assert main(argv) == 0
    monkeypatch.delenv(TOKEN_ENV)
    assert main(argv) == 2
    assert "401" in capsys.readouterr().err
    assert main([*argv, "--token", token]) == 0


def test_a_node_without_required_auth_takes_anyone(tmp_path: Path) -> None:
    server = NodeServer(load_config(write_config(tmp_path, required=False)), KEY, log_level="warning")
    server.start_in_thread()
    try:
        with Client(server.url) as client:
            assert client.put_blob(b"open")
    finally:
        server.stop()
    assert not (tmp_path / "data" / TOKENS_FILE).exists()


def test_auth_config_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text('[auth]\nrequired = "yes"\n')
    with pytest.raises(ConfigError, match="auth.required: expected bool"):
        load_config(path)
    path.write_text("[auth]\nrequire = true\n")
    with pytest.raises(ConfigError, match="auth.require: unknown key"):
        load_config(path)


def test_concurrent_charges_cannot_both_pass_a_quota(tmp_path: Path) -> None:
    store = TokenStore(tmp_path)
    store.add("t", max_jobs=1)
    store.charge("t", jobs=1)
    with pytest.raises(Refused) as refused:
        store.charge("t", jobs=1)
    assert refused.value.status == 403
    with sqlite3.connect(tmp_path / TOKENS_FILE) as db:
        assert db.execute("SELECT jobs FROM tokens WHERE name = 't'").fetchone() == (1,)
    store.close()


def test_the_rate_limiter_refills_at_its_rate() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])
    for _ in range(60):
        limiter.take("a", 60)
    with pytest.raises(Refused) as refused:
        limiter.take("a", 60)
    assert refused.value.status == 429 and refused.value.retry_after_s == pytest.approx(1.0)
    limiter.take("b", 60)  # buckets are per token
    now[0] = 1.0
    limiter.take("a", 60)  # one request a second comes back
    with pytest.raises(Refused):
        limiter.take("a", 60)
