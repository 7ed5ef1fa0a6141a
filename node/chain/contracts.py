"""Typed bindings of NodeRegistry and JobMarket, and their wired deployment."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from eth_abi import encode as abi_encode
from eth_utils import to_checksum_address

from node.chain.artifacts import Artifact, load_artifact
from node.chain.client import ChainClient, Sender, TxResult, _address
from node.chain.errors import ChainError
from node.chain.events import Event, decode_receipt
from node.protocol import seal_of


def _bytes32(value: bytes, what: str) -> bytes:
    if len(value) != 32:
        raise ValueError(f"{what} must be 32 bytes, got {len(value)}")
    return bytes(value)


class Phase(enum.IntEnum):
    """JobMarket.Phase."""

    NONE = 0
    OPEN = 1
    FINALIZED = 2


@dataclass(frozen=True)
class NodeInfo:
    """NodeRegistry.Node."""

    key_id: bytes
    endpoint: str
    stake: int
    locked: int
    unbonding: int
    unlock_at: int
    registered: bool


@dataclass(frozen=True)
class OnChainJob:
    """JobMarket.Job."""

    submitter: str
    program_digest: bytes
    inputs_digest: bytes
    reward: int
    commit_deadline: int
    reveal_deadline: int
    k: int
    claimed: int
    committed: int
    revealed: int
    phase: Phase
    accepted: bool
    result: bytes

    def commit_phase_over(self, next_block_time: int) -> bool:
        """Whether no commitment can land any more: every slot committed, or the next block
        (ChainClient.next_block_time) is already at the commit deadline (the contract's own
        rule for reveals)."""
        return self.committed >= self.k or next_block_time >= self.commit_deadline


@dataclass(frozen=True)
class Slot:
    """JobMarket.Slot."""

    node: str
    seal: bytes
    result_digest: bytes
    envelope_digest: bytes
    committed: bool
    revealed: bool


class _Bound:
    """A deployed contract of one artifact, reached through one ChainClient."""

    ARTIFACT = ""

    def __init__(self, client: ChainClient, address: str) -> None:
        self.client = client
        self.artifact: Artifact = load_artifact(self.ARTIFACT)
        self.address = to_checksum_address(address)
        self.contract = client.w3.eth.contract(address=self.address, abi=self.artifact.abi)

    def _send(self, sender: Sender, fn_name: str, *args: Any, value: int = 0) -> TxResult:
        fn = getattr(self.contract.functions, fn_name)(*args)
        return self.client.transact(sender, fn, value=value)

    def _view(self, fn_name: str, *args: Any, block: int | None = None) -> Any:
        return self.client.call(getattr(self.contract.functions, fn_name)(*args), block=block)

    def events(self, result: TxResult) -> list[Event]:
        """The events of this contract in a transaction's receipt, decoded."""
        return [
            e for e in decode_receipt(self.contract, result.receipt) if e.address == self.address
        ]


class NodeRegistry(_Bound):
    """Binding of NodeRegistry.sol: operators, stake, unbonding, and the market's locks."""

    ARTIFACT = "NodeRegistry"

    def set_market(self, sender: Sender, market: str) -> TxResult:
        """Wire the JobMarket (deployer only, once)."""
        return self._send(sender, "setMarket", to_checksum_address(market))

    def register(self, sender: Sender, key_id: bytes, endpoint: str, stake_wei: int) -> TxResult:
        """Register `sender` as a node with its attestation key id, endpoint and stake."""
        return self._send(sender, "register", _bytes32(key_id, "key_id"), endpoint, value=stake_wei)

    def update_endpoint(self, sender: Sender, endpoint: str) -> TxResult:
        """Change the endpoint URL of `sender`'s node."""
        return self._send(sender, "updateEndpoint", endpoint)

    def add_stake(self, sender: Sender, amount_wei: int) -> TxResult:
        """Add `amount_wei` to `sender`'s stake."""
        return self._send(sender, "addStake", value=amount_wei)

    def request_withdrawal(self, sender: Sender, amount_wei: int) -> TxResult:
        """Start unbonding `amount_wei` of `sender`'s free stake."""
        return self._send(sender, "requestWithdrawal", amount_wei)

    def withdraw_stake(self, sender: Sender) -> TxResult:
        """Pull `sender`'s unbonded stake once the unbonding delay is over."""
        return self._send(sender, "withdrawStake")

    def lock(self, sender: Sender, node: str, amount_wei: int) -> TxResult:
        """Lock stake of `node` (the market only; exposed for completeness and tests)."""
        return self._send(sender, "lock", to_checksum_address(node), amount_wei)

    def unlock(self, sender: Sender, node: str, amount_wei: int) -> TxResult:
        """Unlock stake of `node` (the market only)."""
        return self._send(sender, "unlock", to_checksum_address(node), amount_wei)

    def slash(self, sender: Sender, node: str, amount_wei: int) -> TxResult:
        """Slash stake of `node` (the market only)."""
        return self._send(sender, "slash", to_checksum_address(node), amount_wei)

    def get_node(self, node: str) -> NodeInfo:
        """The registry's record of `node` (all zero when unknown)."""
        r = self._view("getNode", to_checksum_address(node))
        return NodeInfo(bytes(r[0]), r[1], r[2], r[3], r[4], r[5], r[6])

    def is_registered(self, node: str) -> bool:
        """Whether `node` is registered."""
        return bool(self._view("isRegistered", to_checksum_address(node)))

    def free_stake(self, node: str) -> int:
        """Stake of `node` that is neither locked nor unbonding."""
        return int(self._view("freeStake", to_checksum_address(node)))

    def min_stake(self) -> int:
        """Minimum stake to register and to claim slots."""
        return int(self._view("minStake"))

    def unbonding_delay(self) -> int:
        """Seconds between a withdrawal request and the pull."""
        return int(self._view("unbondingDelay"))

    def owner(self) -> str:
        """The deployer."""
        return to_checksum_address(self._view("owner"))

    def market(self) -> str:
        """The wired JobMarket (zero address before setMarket)."""
        return to_checksum_address(self._view("market"))


class JobMarket(_Bound):
    """Binding of JobMarket.sol: jobs, slots, sealed commit-reveal, quorum, credits."""

    ARTIFACT = "JobMarket"

    def post_job(
        self,
        sender: Sender,
        program_digest: bytes,
        inputs_digest: bytes,
        k: int,
        commit_deadline: int,
        reveal_deadline: int,
        reward_wei: int,
    ) -> int:
        """Post a job with `reward_wei` in escrow; returns its id (from JobPosted)."""
        result = self._send(
            sender,
            "postJob",
            _bytes32(program_digest, "program_digest"),
            _bytes32(inputs_digest, "inputs_digest"),
            k,
            commit_deadline,
            reveal_deadline,
            value=reward_wei,
        )
        for event in self.events(result):
            if event.name == "JobPosted":
                return int(event.args["jobId"])
        raise ChainError("postJob succeeded without a JobPosted event")

    def claim_slot(self, sender: Sender, job_id: int) -> TxResult:
        """Claim a slot of `job_id` for `sender`'s node (locks slashAmount of its stake)."""
        return self._send(sender, "claimSlot", job_id)

    def commit(self, sender: Sender, job_id: int, seal: bytes) -> TxResult:
        """Commit a sealed result (see `seal_of`)."""
        return self._send(sender, "commit", job_id, _bytes32(seal, "seal"))

    def commit_result(self, sender: Sender, job_id: int, result_digest: bytes) -> TxResult:
        """Commit the seal of `result_digest` for `sender` (computed locally)."""
        return self.commit(sender, job_id, seal_of(_address(sender), job_id, result_digest))

    def reveal(
        self, sender: Sender, job_id: int, result_digest: bytes, envelope_digest: bytes
    ) -> TxResult:
        """Reveal the result and trace digests behind `sender`'s seal."""
        return self._send(
            sender,
            "reveal",
            job_id,
            _bytes32(result_digest, "result_digest"),
            _bytes32(envelope_digest, "envelope_digest"),
        )

    def finalize(self, sender: Sender, job_id: int) -> TxResult:
        """Settle `job_id` by quorum (anyone may call it when the reveal phase is over)."""
        return self._send(sender, "finalize", job_id)

    def withdraw(self, sender: Sender) -> TxResult:
        """Pull `sender`'s credits (rewards and refunds)."""
        return self._send(sender, "withdraw")

    def get_job(self, job_id: int, block: int | None = None) -> OnChainJob:
        """The job record at the latest block, or after block number `block` (UnknownJob for
        an id not posted by then)."""
        r = self._view("getJob", job_id, block=block)
        return OnChainJob(
            to_checksum_address(r[0]),
            bytes(r[1]),
            bytes(r[2]),
            r[3],
            r[4],
            r[5],
            r[6],
            r[7],
            r[8],
            r[9],
            Phase(r[10]),
            r[11],
            bytes(r[12]),
        )

    def get_slots(self, job_id: int) -> list[Slot]:
        """The claimed slots of `job_id`, in claim order."""
        return [
            Slot(to_checksum_address(s[0]), bytes(s[1]), bytes(s[2]), bytes(s[3]), s[4], s[5])
            for s in self._view("getSlots", job_id)
        ]

    def credits(self, account: str) -> int:
        """Wei `account` can withdraw."""
        return int(self._view("credits", to_checksum_address(account)))

    def job_count(self) -> int:
        """Number of jobs posted (ids are 1..job_count)."""
        return int(self._view("jobCount"))

    def slash_amount(self) -> int:
        """Stake locked per slot and slashed on a wrong or missing reveal."""
        return int(self._view("slashAmount"))

    def max_k(self) -> int:
        """Largest redundancy a job may ask for."""
        return int(self._view("MAX_K"))

    def registry(self) -> str:
        """Address of the NodeRegistry."""
        return to_checksum_address(self._view("registry"))

    def seal_of(self, node: str, job_id: int, result_digest: bytes) -> bytes:
        """The contract's own seal computation (a check of `seal_of`)."""
        return bytes(self._view("sealOf", to_checksum_address(node), job_id, result_digest))


@dataclass(frozen=True)
class Deployment:
    """A wired NodeRegistry and JobMarket."""

    registry: NodeRegistry
    market: JobMarket
    block: int  # the block of the first deployment: where a watcher starts reading logs


def deploy(
    client: ChainClient,
    deployer: Sender,
    *,
    min_stake_wei: int,
    unbonding_delay_s: int,
    slash_amount_wei: int,
) -> Deployment:
    """Deploy the registry, then the market wired to it, then `registry.setMarket`."""
    reg_art = load_artifact("NodeRegistry")
    market_art = load_artifact("JobMarket")
    reg_tx = client.deploy(
        deployer,
        reg_art.bytecode,
        abi_encode(["uint256", "uint64"], [min_stake_wei, unbonding_delay_s]),
    )
    registry = NodeRegistry(client, reg_tx.receipt["contractAddress"])
    market_tx = client.deploy(
        deployer,
        market_art.bytecode,
        abi_encode(["address", "uint256"], [registry.address, slash_amount_wei]),
    )
    market = JobMarket(client, market_tx.receipt["contractAddress"])
    registry.set_market(deployer, market.address)
    return Deployment(registry, market, int(reg_tx.receipt["blockNumber"]))
