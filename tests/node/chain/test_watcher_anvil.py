"""The watcher on anvil, for what py-evm's tester cannot show: the guard against unmined
transactions (the tester reports no pending nonces; anvil with automine off keeps a
transaction in its pool), and reorgs (`anvil_reorg`) shallower and deeper than
`confirmations`."""

from __future__ import annotations

from pathlib import Path

from web3 import Web3

from node.chain import ChainClient, Deployment, GameTerms, JobMarket, Phase, deploy, fetch_events
from node.chain.state import JobState
from node.chain.watcher import ChainWatcher, WatcherConfig
from tests.contracts.test_anvil import anvil  # noqa: F401  (the fixture)
from tests.node.chain.test_watcher import (
    ETHER,
    GRAPH,
    HONEST,
    LEAVES,
    PROGRAM,
    REWARD,
    SLASH,
    MapExecutor,
)

# A one-second challenge window: the jobs here settle a second after their reveal.
TERMS = GameTerms(min_challenge_window_s=1)
COMMITMENT = {"graph_root": GRAPH, "trace_leaves": LEAVES, "challenge_window": 1}


def test_no_decision_while_a_transaction_of_the_node_is_unmined(anvil: Web3, tmp_path) -> None:  # noqa: ANN001, F811
    client = ChainClient(anvil)
    accounts = client.accounts()
    deployer, node, submitter = accounts[0], accounts[1], accounts[2]
    d = deploy(client, deployer, min_stake_wei=ETHER, unbonding_delay_s=3_600, slash_amount_wei=SLASH, terms=TERMS)
    d.registry.register(node, b"\x01" * 32, "http://node.example", 2 * ETHER)
    market: JobMarket = d.market
    now = client.timestamp()
    job_id = market.post_job(submitter, PROGRAM, b"\x02" * 32, 3, now + 1_000, now + 2_000, REWARD, **COMMITMENT)
    watcher = ChainWatcher(
        market, node, MapExecutor({PROGRAM: HONEST}, "node"), tmp_path / "w.sqlite", start_block=d.block
    )

    anvil.provider.make_request("evm_setAutomine", [False])
    try:
        # As after a restart with a transaction of the node still in the pool: its effect
        # is not readable yet, so the watcher must not decide (it might send it again).
        anvil.eth.send_transaction({"from": node, "to": node, "value": 0})
        assert client.pending_count(node) == 1
        report = watcher.step()
        assert report.waited_for_pending and report.transactions == []
        assert report.new_jobs == 1
    finally:
        anvil.provider.make_request("evm_setAutomine", [True])
        anvil.provider.make_request("evm_mine", [])
    assert client.pending_count(node) == 0
    report = watcher.step()
    assert not report.waited_for_pending
    assert report.transactions == [(job_id, "claim"), (job_id, "commit")]


# -- reorgs (anvil_reorg drops the last N blocks and mines N new ones with the given
# transactions; the dropped ones do not return to the pool) --------------------------------


def _reorg(w3: Web3, depth: int, keep: list[dict] | None = None) -> None:
    """Replaces the last `depth` blocks; `keep` transactions (from, to, data, value) are mined
    again in the first new block, as a chain would carry them over."""
    carried = [[{k: (hex(v) if isinstance(v, int) else v) for k, v in tx.items()}, 0] for tx in (keep or [])]
    assert "error" not in w3.provider.make_request("anvil_reorg", [depth, carried])


def _mine(w3: Web3, blocks: int) -> None:
    """Mine `blocks` blocks, each a second after the one before (so challenge windows pass)."""
    w3.provider.make_request("anvil_mine", [blocks, 1])


def _one_each(client: ChainClient, market: JobMarket, job_id: int, node: str) -> dict[str, int]:
    counts = {"SlotClaimed": 0, "Committed": 0, "Revealed": 0}
    for event in fetch_events(client, market.contract, 0, names=tuple(counts)):
        if int(event.args["jobId"]) == job_id and event.args["node"] == node:
            counts[event.name] += 1
    return counts


def _failed_transactions(w3: Web3, sender: str) -> int:
    """Transactions of `sender` on the chain as it is now that reverted (a duplicate send)."""
    failed = 0
    for number in range(w3.eth.block_number + 1):
        for tx in w3.eth.get_block(number, full_transactions=True)["transactions"]:
            if tx["from"] == sender and w3.eth.get_transaction_receipt(tx["hash"])["status"] != 1:
                failed += 1
    return failed


def _setup(w3: Web3, tmp_path: Path, confirmations: int) -> tuple[ChainClient, Deployment, str, str, ChainWatcher]:
    client = ChainClient(w3)
    deployer, node, submitter = client.accounts()[:3]
    d = deploy(client, deployer, min_stake_wei=ETHER, unbonding_delay_s=3_600, slash_amount_wei=SLASH, terms=TERMS)
    d.registry.register(node, b"\x01" * 32, "http://node.example", 2 * ETHER)
    watcher = ChainWatcher(
        d.market, node, MapExecutor({PROGRAM: HONEST}, "node"), tmp_path / "w.sqlite",
        start_block=d.block, config=WatcherConfig(confirmations=confirmations),
    )  # fmt: skip
    return client, d, node, submitter, watcher


def _run(watcher: ChainWatcher, w3: Web3, steps: int = 12) -> None:
    for _ in range(steps):
        watcher.step()
        _mine(w3, 1)


def _assert_settled_once(w3: Web3, client: ChainClient, d: Deployment, node: str, watcher: ChainWatcher, job_id: int) -> None:
    """The job finalized on the honest result and is done in the watcher's state; the node's
    claim, commit and reveal stand once each on the chain as it is now (sent again after the
    reorg, never twice), and none of its transactions reverted."""
    job = d.market.get_job(job_id)
    assert job.phase == Phase.FINALIZED and job.accepted and job.result == HONEST
    assert watcher.state.job(job_id).state == JobState.DONE  # type: ignore[union-attr]
    assert _one_each(client, d.market, job_id, node) == {"SlotClaimed": 1, "Committed": 1, "Revealed": 1}
    assert _failed_transactions(w3, node) == 0


def test_a_reorg_shallower_than_confirmations_drops_transactions_the_watcher_sends_again(anvil: Web3, tmp_path) -> None:  # noqa: ANN001, F811
    client, d, node, submitter, watcher = _setup(anvil, tmp_path, confirmations=2)
    now = client.timestamp()
    job_id = d.market.post_job(submitter, PROGRAM, b"\x02" * 32, 1, now + 1_000, now + 2_000, REWARD, **COMMITMENT)
    _mine(anvil, 2)
    report = watcher.step()  # sees the post, claims and commits (k=1: then reveals)
    assert [a for _, a in report.transactions][:2] == ["claim", "commit"]
    # The blocks of the node's claim and commit (and what followed) are replaced; the
    # post, two blocks deeper, is not touched.
    _reorg(anvil, anvil.eth.block_number - report.to_block)
    assert d.market.get_slots(job_id) == []
    _run(watcher, anvil)
    _assert_settled_once(anvil, client, d, node, watcher, job_id)


def test_a_reorg_deeper_than_confirmations_is_traced_back_and_reopens_what_it_undid(anvil: Web3, tmp_path) -> None:  # noqa: ANN001, F811
    client, d, node, submitter, watcher = _setup(anvil, tmp_path, confirmations=1)
    now = client.timestamp()
    posted_at = anvil.eth.block_number + 1
    job_id = d.market.post_job(submitter, PROGRAM, b"\x02" * 32, 1, now + 1_000, now + 2_000, REWARD, **COMMITMENT)
    post_tx = anvil.eth.get_block(posted_at, full_transactions=True)["transactions"][0]
    _run(watcher, anvil)
    assert watcher.state.job(job_id).state == JobState.DONE  # type: ignore[union-attr]
    # Every block from the post on is replaced; the post comes back in the first new block,
    # the node's claim, commit, reveal and finalize do not.
    depth = anvil.eth.block_number - posted_at + 1
    assert depth > 1
    _reorg(anvil, depth, keep=[{"from": post_tx["from"], "to": post_tx["to"], "input": "0x" + bytes(post_tx["input"]).hex(), "value": post_tx["value"], "gas": post_tx["gas"]}])
    assert d.market.get_job(job_id).phase == Phase.OPEN and d.market.get_slots(job_id) == []
    _mine(anvil, 1)
    report = watcher.step()
    assert report.rewound_to is not None and report.rewound_to <= posted_at
    assert report.reopened == [job_id]
    _run(watcher, anvil)
    _assert_settled_once(anvil, client, d, node, watcher, job_id)


def test_a_job_id_that_a_reorg_gives_to_another_job_replaces_the_record(anvil: Web3, tmp_path) -> None:  # noqa: ANN001, F811
    client, d, node, submitter, watcher = _setup(anvil, tmp_path, confirmations=1)
    now = client.timestamp()
    posted_at = anvil.eth.block_number + 1
    job_id = d.market.post_job(submitter, PROGRAM, b"\x02" * 32, 1, now + 1_000, now + 2_000, REWARD, **COMMITMENT)
    _mine(anvil, 1)
    watcher.step()  # records the job, claims it
    old = watcher.state.job(job_id)
    assert old is not None and old.inputs_digest == b"\x02" * 32
    # The post is dropped for good; another job (other inputs) takes its id.
    _reorg(anvil, anvil.eth.block_number - posted_at + 1)
    again = d.market.post_job(submitter, PROGRAM, b"\x03" * 32, 1, now + 1_000, now + 2_000, REWARD, **COMMITMENT)
    assert again == job_id
    _run(watcher, anvil)
    rec = watcher.state.job(job_id)
    assert rec is not None and rec.inputs_digest == b"\x03" * 32 and rec.state == JobState.DONE
    job = d.market.get_job(job_id)
    assert job.phase == Phase.FINALIZED and job.accepted
    assert _failed_transactions(anvil, node) == 0
