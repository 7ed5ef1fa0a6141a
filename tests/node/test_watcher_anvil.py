"""The watcher's guard against unmined transactions, on anvil: py-evm's tester reports no
pending nonces, anvil does (automine off keeps a transaction in its pool)."""

from __future__ import annotations

from web3 import Web3

from node.chain import ChainClient, JobMarket, deploy
from node.chain.watcher import ChainWatcher
from tests.contracts.test_anvil import anvil  # noqa: F401  (the fixture)
from tests.node.test_watcher import ETHER, HONEST, PROGRAM, REWARD, SLASH, MapExecutor


def test_no_decision_while_a_transaction_of_the_node_is_unmined(anvil: Web3, tmp_path) -> None:  # noqa: ANN001, F811
    client = ChainClient(anvil)
    accounts = client.accounts()
    deployer, node, submitter = accounts[0], accounts[1], accounts[2]
    d = deploy(client, deployer, min_stake_wei=ETHER, unbonding_delay_s=3_600, slash_amount_wei=SLASH)
    d.registry.register(node, b"\x01" * 32, "http://node.example", 2 * ETHER)
    market: JobMarket = d.market
    now = client.timestamp()
    job_id = market.post_job(submitter, PROGRAM, b"\x02" * 32, 3, now + 1_000, now + 2_000, REWARD)
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
