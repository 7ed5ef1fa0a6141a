"""Fixtures for the contract tests: one deployed py-evm chain per worker, reset per test.

Each test starts from a snapshot taken right after the deployment (reverting is much cheaper
than a new chain) and ends with the balance-conservation check: the sum of every account's
and the four contracts' balances (registry, market, dispute game, committee) plus the gas
fees paid is what it was at the start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from web3 import Web3

from harness.market import (  # noqa: F401 - the constants are the tests'
    BOND,
    ETHER,
    GRAPH_ROOT,
    MIN_STAKE,
    MIN_WINDOW,
    MOVE_WINDOW,
    OP_ROOT,
    SLASH,
    TRACE_LEAVES,
    UNBONDING_DELAY,
    _Chain,
    deployed_chain,
)
from node.chain import ChainClient, Committee, DisputeGame, JobMarket, NodeRegistry

KEY_ID = bytes.fromhex("11" * 32)
ENDPOINT = "http://node.example:8545"
WINDOW = 60  # the challenge window of the tests' jobs, in seconds


@dataclass
class Env:
    """A deployed market on a fresh chain state, and the accounts that use it."""

    w3: Web3
    client: ChainClient
    registry: NodeRegistry
    market: JobMarket
    game: DisputeGame
    committee: Committee
    deployer: str
    nodes: list[str]  # accounts used as node operators
    submitter: str
    outsider: str
    start_total: int = 0
    extra_addresses: list[str] = field(default_factory=list)

    def tracked(self) -> list[str]:
        """Every address whose balance the conservation check sums."""
        return [
            *self.client.accounts(),
            self.registry.address,
            self.market.address,
            self.game.address,
            self.committee.address,
            *self.extra_addresses,
        ]

    def total(self) -> int:
        """Sum of tracked balances plus every gas fee paid through the client."""
        balances = sum(self.client.balance(a) for a in self.tracked())
        return balances + sum(self.client.fees_paid.values())

    def check_conservation(self) -> None:
        """Ether is never created or lost: only gas leaves the tracked accounts."""
        assert self.total() == self.start_total

    def register_nodes(self, count: int, stake: int = 2 * ETHER) -> list[str]:
        """Register the first `count` node accounts with `stake` each."""
        for i, node in enumerate(self.nodes[:count]):
            key = (i + 1).to_bytes(32, "big")
            self.registry.register(node, key, f"http://node{i}.example", stake)
        return self.nodes[:count]

    def post(
        self,
        k: int,
        reward: int = ETHER,
        commit_in: int = 1_000,
        reveal_in: int = 2_000,
        *,
        window: int = WINDOW,
        trace_leaves: int = TRACE_LEAVES,
    ) -> int:
        """Post a job from the submitter with deadlines relative to the block it goes into:
        py-evm stamps a new block with the wall clock unless the chain has travelled past it,
        and the latest block may be seconds old on a busy machine."""
        now = max(self.client.timestamp(), int(time.time()))
        return self.market.post_job(
            self.submitter,
            b"\x01" * 32,
            b"\x02" * 32,
            k,
            now + commit_in,
            now + reveal_in,
            reward,
            graph_root=GRAPH_ROOT,
            trace_leaves=trace_leaves,
            challenge_window=window,
        )

    def travel_to(self, timestamp: int) -> None:
        """Mine a block at `timestamp` (the next transactions run after it)."""
        now = self.client.timestamp()
        if timestamp > now:
            self.client.advance_time(timestamp - now)

    def close_window(self, job: int) -> None:
        """Travel to the job's challenge deadline: finalize may run from there on."""
        self.travel_to(self.market.challenge_deadline(job))


@pytest.fixture(scope="session")
def _chain() -> _Chain:
    """The deployed market the harness keeps, one per process (deploying costs seconds); each
    test starts from its snapshot."""
    return deployed_chain()


@pytest.fixture
def env(_chain: _Chain) -> Iterator[Env]:
    """A freshly deployed market (from the snapshot); checks conservation at the end."""
    tester = _chain.w3.provider.ethereum_tester
    tester.revert_to_snapshot(_chain.snapshot)
    # An empty block stamped now: the snapshot's latest block may be minutes old, and tests
    # take deadlines from the latest block's time (py-evm stamps the next one with the clock).
    tester.mine_blocks(1)
    client = ChainClient(_chain.w3)  # new nonce counts: the snapshot rewound them
    accounts = client.accounts()
    e = Env(
        w3=_chain.w3,
        client=client,
        registry=NodeRegistry(client, _chain.registry),
        market=JobMarket(client, _chain.market),
        game=DisputeGame(client, _chain.game),
        committee=Committee(client, _chain.committee),
        deployer=accounts[0],
        nodes=accounts[1:8],
        submitter=accounts[8],
        outsider=accounts[9],
    )
    e.start_total = e.total()
    yield e
    e.check_conservation()
