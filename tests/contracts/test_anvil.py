"""One full job lifecycle over HTTP JSON-RPC on anvil (the pinned npm build), which this test
starts on a free port and stops."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from eth_account import Account
from eth_utils import keccak
from web3 import Web3

from harness.anvil import running_anvil
from node.chain import ChainClient, Phase, deploy, fetch_events
from node.chain.errors import TransactionDropped
from tests.contracts.helpers import reverts

ETHER = 10**18


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
    assert (d.registry.market(), d.registry.game(), d.registry.referee()) == (
        d.market.address,
        d.game.address,
        d.committee.address,
    )
    for i, node in enumerate((n0, n1, local)):
        d.registry.register(node, bytes([i + 1]) * 32, f"http://node{i}", 2 * ETHER)
    now = client.timestamp()
    job = d.market.post_job(
        submitter,
        b"\x01" * 32,
        b"\x02" * 32,
        3,
        now + 100,
        now + 200,
        ETHER,
        graph_root=b"\x47" * 32,
        trace_leaves=4,
        challenge_window=30,
    )
    good, bad, root = b"\xaa" * 32, b"\xbb" * 32, b"\x0e" * 32
    for node, digest in ((n0, good), (n1, good), (local, bad)):
        d.market.claim_slot(node, job)
        d.market.commit_result(node, job, digest, root)
    for node, digest in ((n0, good), (n1, good), (local, bad)):
        d.market.reveal(node, job, digest, b"\x03" * 32, root)
    # The third reveal ended the reveal phase; the 30 s challenge window runs from there.
    deadline = d.market.challenge_deadline(job)
    assert deadline == d.market.get_job(job).reveal_end + 30
    with reverts("ChallengeWindowOpen", jobId=job, challengeDeadline=deadline):
        d.market.finalize(submitter, job)
    client.advance_time(deadline - client.timestamp())
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
    assert names[:2] == ["JobPosted", "JobCommitment"] and names[-2:] == ["Finalized", "Withdrawn"]

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


# -- transactions a chain loses -----------------------------------------------------------
# What a reorg does to a node's sent transactions, made deterministic: with automining off a
# transaction stays in anvil's pool until the test mines, and anvil_dropTransaction takes one
# out as a reorg (or an eviction) would.


def _rpc(w3: Web3, method: str, *params: object) -> object:
    answer = w3.provider.make_request(method, list(params))  # type: ignore[arg-type]
    assert "error" not in answer, answer
    return answer.get("result")


def _count(w3: Web3, address: str, block: str) -> int:
    return int(w3.eth.get_transaction_count(address, block))  # type: ignore[arg-type]


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.02)


def _transfer_in_background(client: ChainClient, sender: str, to: str) -> Future[object]:
    """client.transact of a 1 ether transfer, in a thread (it blocks until mined or dropped)."""
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(client.transact, sender, to=to, value=ETHER, gas=21_000)
    pool.shutdown(wait=False)
    return future


def test_a_transaction_behind_a_nonce_gap_is_cancelled_and_the_gap_filled(anvil: Web3) -> None:
    # A gap opens when the pool loses a lower nonce that the client already used (a pool
    # that evicted it, an RPC node that restarted). anvil never re-queues a transaction that
    # way (it drops it at the next block), and the client takes every nonce from the pool's
    # count, so the test sends a transaction one nonce ahead itself and waits for it as
    # `transact` does.
    client = ChainClient(anvil)
    sender, payee = client.accounts()[1:3]
    payee_before = client.balance(payee)
    mined = _count(anvil, sender, "latest")
    fee, tip = client.fees()
    ahead = {
        "from": sender, "to": payee, "value": ETHER, "gas": 21_000, "chainId": client.chain_id,
        "nonce": mined + 1, "maxFeePerGas": fee, "maxPriorityFeePerGas": tip,
    }  # fmt: skip
    tx_hash = client._submit(sender, ahead)
    assert _rpc(anvil, "txpool_status") == {"pending": "0x0", "queued": "0x1"}

    started = time.monotonic()
    with pytest.raises(TransactionDropped, match="nonce gap and was cancelled"):
        client._receipt(sender, sender, ahead, tx_hash)
    assert time.monotonic() - started < 10, "cancelled after the stuck wait, not the receipt timeout"

    # Both nonces now hold no-ops (empty transfers to the sender itself); the transfer never ran.
    # The client sends the no-ops without waiting for them: anvil mines them a moment later.
    _wait_for(lambda: _count(anvil, sender, "latest") == mined + 2, "both no-ops mined")
    assert _rpc(anvil, "txpool_status") == {"pending": "0x0", "queued": "0x0"}
    sent = []
    for number in range(1, anvil.eth.block_number + 1):
        for tx in anvil.eth.get_block(number, full_transactions=True)["transactions"]:
            if tx["from"] == sender:
                sent.append((int(tx["nonce"]), tx["to"], int(tx["value"])))
    assert sorted(sent)[-2:] == [(mined, sender, 0), (mined + 1, sender, 0)]
    assert client.balance(payee) == payee_before


def test_a_transaction_gone_from_the_pool_is_reported_at_once(anvil: Web3) -> None:
    client = ChainClient(anvil)
    sender, payee = client.accounts()[1:3]
    _rpc(anvil, "evm_setAutomine", False)
    mined = _count(anvil, sender, "latest")
    started = time.monotonic()
    transfer = _transfer_in_background(client, sender, payee)
    _wait_for(lambda: _count(anvil, sender, "pending") == mined + 1, "the transfer is in the pool")

    _rpc(anvil, "anvil_dropAllTransactions")
    with pytest.raises(TransactionDropped, match="no longer known to the node"):
        transfer.result(timeout=30)
    assert time.monotonic() - started < 10, "reported after the stuck wait, not the receipt timeout"

    # Nothing was sent in its place, and the next transaction takes the nonce.
    _rpc(anvil, "evm_setAutomine", True)
    assert _count(anvil, sender, "pending") == mined
    client.transact(sender, to=payee, value=ETHER, gas=21_000)
    assert _count(anvil, sender, "latest") == mined + 1


def test_a_transaction_whose_nonce_another_took_is_reported(anvil: Web3) -> None:
    client = ChainClient(anvil)
    sender, payee, other = client.accounts()[1:4]
    payee_before = client.balance(payee)
    _rpc(anvil, "evm_setAutomine", False)
    mined = _count(anvil, sender, "latest")
    transfer = _transfer_in_background(client, sender, payee)
    _wait_for(lambda: _count(anvil, sender, "pending") == mined + 1, "the transfer is in the pool")

    # A reorg's other branch mined another transaction at the same nonce.
    _rpc(anvil, "anvil_dropAllTransactions")
    anvil.eth.send_transaction({"from": sender, "to": other, "value": 1, "gas": 21_000, "nonce": mined})
    _rpc(anvil, "evm_mine")
    with pytest.raises(TransactionDropped, match=f"nonce {mined} used by another"):
        transfer.result(timeout=30)
    assert client.balance(payee) == payee_before
