"""One full job lifecycle over HTTP JSON-RPC on anvil (the pinned npm build), which this test
starts on a free port and stops."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from eth_account import Account
from eth_utils import keccak
from web3 import HTTPProvider, Web3

from node.chain import ChainClient, Phase, deploy, fetch_events
from tests.contracts.helpers import reverts

ANVIL = (
    Path(__file__).resolve().parents[2]
    / "contracts/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
)
ETHER = 10**18


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_anvil(log: Path | None = None) -> Iterator[tuple[Web3, int]]:
    """anvil on a free port, with its output in `log` (or its errors kept for the message
    when it fails to start); yields the connection and the port, stopped at the end."""
    assert ANVIL.is_file(), "anvil is installed by `make contracts` (npm ci in contracts/)"
    port = _free_port()
    with contextlib.ExitStack() as files:
        out = files.enter_context(log.open("ab")) if log is not None else subprocess.DEVNULL
        proc = subprocess.Popen(
            [str(ANVIL), "--port", str(port), "--host", "127.0.0.1", "--silent", "--chain-id", "31337"],
            stdout=out,
            stderr=subprocess.STDOUT if log is not None else subprocess.PIPE,
        )
    try:
        w3 = Web3(HTTPProvider(f"http://127.0.0.1:{port}", request_kwargs={"timeout": 30}))
        deadline = time.monotonic() + 60
        while not w3.is_connected():
            if proc.poll() is not None:
                raise RuntimeError(f"anvil exited: {proc.stderr.read().decode(errors='replace') if proc.stderr else f'see {log}'}")
            if time.monotonic() > deadline:
                raise RuntimeError("anvil did not answer within 60 s")
            time.sleep(0.1)
        yield w3, port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def anvil() -> Iterator[Web3]:
    with running_anvil() as (w3, _):
        yield w3


def test_job_lifecycle_on_anvil(anvil: Web3) -> None:
    client = ChainClient(anvil)
    assert client.chain_id == 31337
    deployer, n0, n1, submitter = client.accounts()[:4]
    # A locally signed operator too: the path a production node takes.
    local = Account.from_key(keccak(b"vxla anvil test: local operator"))
    client.transact(deployer, to=local.address, value=5 * ETHER)

    d = deploy(
        client, deployer, min_stake_wei=ETHER, unbonding_delay_s=60, slash_amount_wei=ETHER // 10
    )
    for i, node in enumerate((n0, n1, local)):
        d.registry.register(node, bytes([i + 1]) * 32, f"http://node{i}", 2 * ETHER)
    now = client.timestamp()
    job = d.market.post_job(submitter, b"\x01" * 32, b"\x02" * 32, 3, now + 100, now + 200, ETHER)
    good, bad = b"\xaa" * 32, b"\xbb" * 32
    for node, digest in ((n0, good), (n1, good), (local, bad)):
        d.market.claim_slot(node, job)
        d.market.commit_result(node, job, digest)
    for node, digest in ((n0, good), (n1, good), (local, bad)):
        d.market.reveal(node, job, digest, b"\x03" * 32)
    d.market.finalize(submitter, job)

    j = d.market.get_job(job)
    assert j.phase == Phase.FINALIZED and j.accepted and j.result == good
    pool = ETHER + ETHER // 10
    assert d.market.credits(n0) == pool - pool // 2 and d.market.credits(n1) == pool // 2
    assert d.registry.get_node(local.address).stake == 2 * ETHER - ETHER // 10
    before = client.balance(n0)
    paid = d.market.withdraw(n0)
    assert client.balance(n0) == before + pool - pool // 2 - paid.fee_wei
    names = [e.name for e in fetch_events(client, d.market.contract, d.block)]
    assert names[0] == "JobPosted" and names[-2:] == ["Finalized", "Withdrawn"]

    # Reverts come back from a JSON-RPC node as named custom errors too.
    with reverts("JobFinalized", jobId=job):
        d.market.finalize(submitter, job)
    with reverts("AlreadyRegistered", node=local.address):
        d.registry.register(local, b"\x09" * 32, "http://again", ETHER)

    # Time travel works over RPC too: the stake of the slashed node unbonds after the delay.
    d.registry.request_withdrawal(local, ETHER)
    client.advance_time(61)
    d.registry.withdraw_stake(local)
    assert d.registry.get_node(local.address).unbonding == 0
