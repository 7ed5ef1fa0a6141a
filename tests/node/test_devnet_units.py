"""The pieces under the devnet, without a chain: the chain digests of a job (inputs
manifest), fetching blobs from peers by digest, the chain section of the config, the
`/v1/chain/...` endpoints of a node without a chain, and the devnet CLI's bad input."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from attest.digests import sha256_hex
from attest.keys import generate_private_key
from compiler.api import graph_commitment, load_config, load_program
from harness.fixture_data import Fixture
from node.chain.state import ChainState
from node.chain.watcher import ChainJob, JobPending
from node.cli import main
from node.daemon.api import create_app
from node.daemon.chain_executor import BlobFetcher, ChainExecutor, download
from node.daemon.config import ConfigError, Limits, parse_config
from node.daemon.peer_addresses import PeerAddressPolicy
from node.daemon.sandbox import ExecutionDied
from node.daemon.store import BlobError, JobStore
from node.daemon.worker import WorkerPool
from node.errors import JobRejected
from node.protocol import chain_digests, inputs_manifest, parse_manifest
from node.tensors import npy_bytes

A, B = sha256_hex(b"a"), sha256_hex(b"b")


def test_inputs_digest_is_the_manifest_blob_digest_and_binds_order() -> None:
    manifest = inputs_manifest([A, B])
    assert parse_manifest(manifest) == [A, B]
    program, inputs = chain_digests(b"HloModule m", [A, B])
    assert program.hex() == sha256_hex(b"HloModule m")
    assert inputs.hex() == sha256_hex(manifest)
    assert chain_digests(b"HloModule m", [B, A])[1] != inputs


@pytest.mark.parametrize(
    "data, message",
    [
        (b"not json", "not JSON"),
        (b'{"inputs": "x"}', "must be"),
        (b'{"inputs": ["ABC"]}', "lower-case hex"),
        (b'{"inputs": []} ', "canonical"),
    ],
)
def test_a_bad_manifest_is_refused_naming_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_manifest(data)


def test_fetcher_stores_a_peers_blob_and_ignores_a_peer_serving_wrong_bytes(tmp_path: Path) -> None:
    good = b"module bytes"
    digest = sha256_hex(good)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "liar":
            return httpx.Response(200, content=b"other bytes")
        if request.url.host == "down":
            raise httpx.ConnectError("refused")
        return httpx.Response(200, content=good)

    store = JobStore(tmp_path)
    try:
        http = httpx.Client(transport=httpx.MockTransport(handler))
        fetcher = BlobFetcher(store, lambda: ["http://down", "http://liar"], http=http)
        with pytest.raises(BlobError, match="2 peer"):
            fetcher.ensure(digest)
        assert not store.blobs.has(digest)
        # Endpoints are whatever nodes registered: one that is not a URL is skipped too.
        fetcher = BlobFetcher(store, lambda: ["::garbage", "ftp://x", "http://liar", "http://honest"], http=http)
        assert fetcher.ensure(digest) == good
        assert store.blobs.has(digest)
        # An answer longer than the node takes is dropped as it streams in, never stored.
        big = b"x" * 4096
        http = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, content=big)))
        fetcher = BlobFetcher(store, lambda: ["http://big"], http=http, max_bytes=1024)
        with pytest.raises(BlobError, match="1 peer"):
            fetcher.ensure(sha256_hex(big))
        assert BlobFetcher(store, lambda: ["http://big"], http=http, max_bytes=4096).ensure(sha256_hex(big)) == big
        # An answer that keeps arriving past the time allowed is dropped as well.
        drip = httpx.Client(transport=httpx.MockTransport(lambda request: httpx.Response(200, content=iter([b"a"] * 3))))
        assert download(drip, "http://slow/x", None, max_seconds=-1.0, policy=PeerAddressPolicy()) is None
        assert download(drip, "http://slow/x", None, policy=PeerAddressPolicy()) == b"aaa"
    finally:
        store.close()


def test_chain_config_requires_the_contracts_and_an_account_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="chain.job_market: required"):
        parse_config('[chain]\nrpc_url = "http://127.0.0.1:8545"\n', environ={})
    market, registry = "0x" + "1" * 40, "0x" + "2" * 40
    text = f'[chain]\nrpc_url = "http://x"\njob_market = "{market}"\nnode_registry = "{registry}"\n'
    with pytest.raises(ConfigError, match="chain.account: required"):
        parse_config(text, environ={})
    config = parse_config(text, environ={"VXLA_CHAIN_PRIVATE_KEY": "0x" + "ab" * 32})
    assert config.chain.private_key and "private_key" not in repr(config.chain)
    with pytest.raises(ConfigError, match="chain.account"):
        parse_config(text + 'account = "nope"\n', environ={})
    with pytest.raises(ConfigError, match="node.fault_bit"):
        parse_config("[node]\nfault_bit = -1\n", environ={})


def test_chain_endpoints_without_a_chain_are_404_and_bad_ids_400(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    try:
        client = TestClient(create_app(store, Limits(), generate_private_key().public_key()))
        response = client.get("/v1/chain/jobs/1")
        assert response.status_code == 404 and "chain.rpc_url" in response.json()["detail"]
        assert client.get("/v1/chain/jobs/1/divergence").status_code == 404
        assert client.get("/v1/chain/jobs/1/trace").status_code == 404
    finally:
        store.close()


def test_devnet_cli_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["devnet", "status", "--dir", str(tmp_path)]) == 2
    assert "no devnet state" in capsys.readouterr().err
    (tmp_path / "state.json").write_text("{}")
    assert main(["devnet", "down", "--dir", str(tmp_path)]) == 2
    assert "not a devnet state file" in capsys.readouterr().err
    assert main(["devnet", "up", "--nodes", "9", "--dir", str(tmp_path / "n")]) == 2
    assert "--nodes must be in 1..8" in capsys.readouterr().err
    assert main(["devnet", "up", "--fault", "zero", "--dir", str(tmp_path / "n")]) == 2
    assert "NODE=INSTRUCTION" in capsys.readouterr().err
    assert main(["devnet", "up", "--nodes", "2", "--fault", "5=dot.1:3", "--dir", str(tmp_path / "n")]) == 2
    assert "fault on node 5" in capsys.readouterr().err
    # Something that is not a devnet node directory is in the way: refused, nothing deleted.
    directory = tmp_path / "busy"
    (directory / "node0").mkdir(parents=True)
    (directory / "node0" / "precious.txt").write_text("keep")
    assert main(["devnet", "up", "--nodes", "1", "--dir", str(directory)]) == 2
    assert "not a devnet node directory" in capsys.readouterr().err
    assert (directory / "node0" / "precious.txt").read_text() == "keep"
    # Refused before anvil starts: no state, no log, nothing else written.
    assert sorted(str(p.relative_to(directory)) for p in directory.rglob("*")) == ["node0", "node0/precious.txt"]


def _chain_job(program: str, inputs: str, module: str | None = None, arrays: list[np.ndarray] | None = None) -> ChainJob:
    """A chain job naming the graph commitment of `module` on `arrays` (no module: a root no
    graph has)."""
    graph = None if module is None else graph_commitment(load_program(module), load_config(), arrays)
    return ChainJob(
        job_id=1, submitter="0x" + "5" * 40, program_digest=bytes.fromhex(program),
        inputs_digest=bytes.fromhex(inputs), reward=1, k=1, commit_deadline=10, reveal_deadline=20,
        chain_id=31337, contract="0x" + "6" * 40, graph_root=bytes.fromhex(graph.root if graph else "00" * 32),
        trace_leaves=graph.trace_leaves if graph else 0, challenge_window=60,
    )  # fmt: skip


def _checked(executor: ChainExecutor, job: ChainJob) -> None:
    """executor.check until it is no longer pending (it runs in the background)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return executor.check(job)
        except JobPending:
            assert time.monotonic() < deadline, "the check did not end"
            time.sleep(0.02)


def test_executor_check_missing_blobs_are_transient_bad_jobs_are_refused(tmp_path: Path) -> None:
    fixture = Fixture("integer_arith")
    store = JobStore(tmp_path)
    pool = WorkerPool(store, generate_private_key(), Limits(max_module_bytes=len(fixture.module_text) + 10))
    try:
        state = ChainState(tmp_path / "chain.sqlite3", chain_id=31337, contract="0x" + "6" * 40, account="0x" + "7" * 40, start_block=0)
        executor = ChainExecutor(pool, BlobFetcher(store, lambda: []), state)
        module = fixture.module_text.encode()
        inputs = [store.blobs.put(npy_bytes(x)) for x in fixture.inputs()]
        program, inputs_digest = chain_digests(module, inputs)
        job = _chain_job(program.hex(), inputs_digest.hex(), fixture.module_text, fixture.inputs())
        # Not stored anywhere yet: a transient error (the watcher retries), not a refusal.
        with pytest.raises(BlobError):
            _checked(executor, job)
        store.blobs.put(module)
        store.blobs.put(inputs_manifest(inputs))
        _checked(executor, job)  # admitted
        # The same job naming another graph commitment: refused, naming both roots.
        other = replace(job, graph_root=bytes(32))
        with pytest.raises(JobRejected, match=f"graph commitment differs: the job names root {'00' * 32} .* commits to root {job.graph_root.hex()}"):
            _checked(executor, other)
        with pytest.raises(JobRejected, match=f"with {job.trace_leaves + 1} op-trace leaves"):
            _checked(executor, replace(job, trace_leaves=job.trace_leaves + 1))
        # A manifest naming the inputs in another order (uint8 where int32 belongs): refused.
        swapped = store.blobs.put(inputs_manifest(inputs[::-1]))
        with pytest.raises(JobRejected, match="parameter 0 expects s32"):
            _checked(executor, _chain_job(program.hex(), swapped))
        # A manifest listing more inputs than the module takes: refused before any is fetched.
        unknown = [sha256_hex(str(i).encode()) for i in range(1000)]
        fetched: list[str] = []
        executor.fetcher.peers = lambda: fetched.append("asked") or []  # type: ignore[method-assign,func-returns-value]
        padded = store.blobs.put(inputs_manifest(inputs + unknown))
        with pytest.raises(JobRejected, match=f"lists {len(inputs) + 1000} inputs; the module takes {len(inputs)}"):
            _checked(executor, _chain_job(program.hex(), padded))
        assert fetched == []
        # Not a manifest at all: refused.
        junk = store.blobs.put(b"not a manifest")
        with pytest.raises(JobRejected, match="manifest"):
            _checked(executor, _chain_job(program.hex(), junk))
        # Over the node's limits: refused before any claim.
        big = store.blobs.put(module + b"\n" * 64)
        with pytest.raises(JobRejected, match="max_module_bytes"):
            _checked(executor, _chain_job(big, inputs_digest.hex()))
        executor.close()
    finally:
        pool.executions.close()
        store.close()


BROADCAST = """HloModule broadcast

ENTRY main {
  x = f32[] parameter(0)
  ROOT b = f32[1024,1024] broadcast(x), dimensions={}
}
"""


def test_executor_check_compiles_in_an_execution_process_and_refuses_what_kills_it(tmp_path: Path) -> None:
    """Before a claim the job is compiled, not run, in an execution process: over the memory
    limit it is refused naming the limit; a process that dies during the check refuses the
    job (no stake is locked yet), and the next check gets a fresh process."""
    store = JobStore(tmp_path)
    pool = WorkerPool(store, generate_private_key(), Limits(max_job_memory_bytes=6 * 1024 * 1024))
    try:
        state = ChainState(tmp_path / "chain.sqlite3", chain_id=31337, contract="0x" + "6" * 40, account="0x" + "7" * 40, start_block=0)
        executor = ChainExecutor(pool, BlobFetcher(store, lambda: []), state)
        scalar = [store.blobs.put(npy_bytes(np.asarray(np.float32(1.5))))]

        def job_of(module: str) -> ChainJob:
            store.blobs.put(module.encode())
            store.blobs.put(inputs_manifest(scalar))
            program, inputs_digest = chain_digests(module.encode(), scalar)
            return _chain_job(program.hex(), inputs_digest.hex(), module, [np.asarray(np.float32(1.5))])

        # 4 MiB of output, and its .npy copy: over 6 MiB once the plan is known.
        with pytest.raises(JobRejected, match=r"needs \d+ bytes of memory, over limits.max_job_memory_bytes \(6291456\)"):
            _checked(executor, job_of(BROADCAST))
        small = job_of(BROADCAST.replace("1024,1024", "16,16"))
        _checked(executor, small)  # admitted; nothing ran
        assert store.blobs.count() == 4  # the two modules, the input, the manifest: no outputs

        # The process the check is sent to dies with it in hand (stopped first, so that the
        # request is in flight when it is killed, whatever the compile's speed).
        [pid] = pool.executions.pids()
        os.kill(pid, signal.SIGSTOP)
        other = job_of(BROADCAST.replace("1024,1024", "8,8"))
        with pytest.raises(JobPending):
            executor.check(other)
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(ExecutionDied, match=r"died \(killed by SIGKILL"):
            _checked(executor, other)
        _checked(executor, other)  # a fresh process
        assert pid not in pool.executions.pids()
        executor.close()
    finally:
        pool.executions.close()
        store.close()


def test_readyz_is_503_naming_the_chain_when_it_is_unreachable(tmp_path: Path) -> None:
    """A node whose chain endpoint stops answering says so: not ready, with the reason."""
    from web3 import HTTPProvider, Web3

    from node.chain import ChainClient
    from node.daemon.chain_role import ChainRole

    store = JobStore(tmp_path)
    try:
        dead = ChainClient(Web3(HTTPProvider("http://127.0.0.1:9", request_kwargs={"timeout": 5})))
        role = ChainRole(dead, None, None, None, None, "0x" + "3" * 40)  # type: ignore[arg-type]
        client = TestClient(create_app(store, Limits(), generate_private_key().public_key(), chain=role))
        response = client.get("/readyz")
        assert response.status_code == 503
        body = response.json()
        assert body["ok"] is False and "Connection refused" in body["chain"]["error"]
        assert body["jobs"] == {"queued": 0, "running": 0, "done": 0, "failed": 0}  # the store answers
        assert client.get("/healthz").json() == {"ok": True}  # alive, just not ready
    finally:
        store.close()
