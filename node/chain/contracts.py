"""Typed bindings of NodeRegistry, JobMarket, DisputeGame and Committee, and their wired
deployment (docs/disputes.md describes the game)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from eth_abi import encode as abi_encode
from eth_utils import to_checksum_address

from node.chain.artifacts import Artifact, load_artifact
from node.chain.client import ChainClient, Sender, TxResult, _address
from node.chain.errors import ChainError, DeploymentMismatch
from node.chain.events import Event, decode_receipt, fetch_events
from node.protocol import seal_of

# How far back from the head a step referee's revealed chunk is first looked for (then 16
# times as far, and so on, down to where the caller says the case began). The reveal is the
# move before the one that reads it, a few blocks back: a node's RPC answers a small range as
# fast as a large one, and a chain that reads every block of the range (py-evm) far faster.
REVEAL_LOOKBACK_BLOCKS = 16


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
    graph_root: bytes
    reward: int
    commit_deadline: int
    reveal_deadline: int
    challenge_window: int
    reveal_end: int  # when the k-th slot revealed; 0 while not all did
    trace_leaves: int
    k: int
    claimed: int
    committed: int
    revealed: int
    open_disputes: int
    phase: Phase
    accepted: bool
    result: bytes

    @property
    def challenge_deadline(self) -> int:
        """When challenges close and finalize may run: the end of the reveal phase (the k-th
        reveal, or the reveal deadline) plus the challenge window (the contract's rule)."""
        return (self.reveal_end or self.reveal_deadline) + self.challenge_window

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
    op_trace_root: bytes
    committed: bool
    revealed: bool
    refuted: bool
    undecided: bool  # a dispute on it ended without a verdict: it cannot carry the job


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

    def set_market(self, sender: Sender, market: str, game: str, referee: str, committee: str | None = None) -> TxResult:
        """Wire the JobMarket, its DisputeGame, the referee and the committee (the referee
        itself unless given: the step referee's fallback) (deployer only, once)."""
        return self._send(
            sender,
            "setMarket",
            to_checksum_address(market),
            to_checksum_address(game),
            to_checksum_address(referee),
            to_checksum_address(committee or referee),
        )

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

    def game(self) -> str:
        """The wired DisputeGame."""
        return to_checksum_address(self._view("game"))

    def referee(self) -> str:
        """The wired referee (StepReferee, or the Committee alone)."""
        return to_checksum_address(self._view("referee"))

    def committee(self) -> str:
        """The wired Committee (the referee itself, or its fallback)."""
        return to_checksum_address(self._view("committee"))

    def check_deployment(self) -> None:
        """DeploymentMismatch unless this is a NodeRegistry wired to a market, a dispute game
        and a referee (a registry from before the dispute game has no `game`)."""
        try:
            modules = (self.market(), self.game(), self.referee())
        except Exception as exc:  # no such function, no contract there
            raise DeploymentMismatch(
                f"{self.address} is not a NodeRegistry with a dispute game and referee (a deployment from before "
                f"the dispute game, or not vxla's: {type(exc).__name__}); this vxla needs the contracts of "
                "contracts/src deployed together (vxla devnet up deploys them)"
            ) from None
        if any(int(m, 16) == 0 for m in modules):
            raise DeploymentMismatch(f"the NodeRegistry at {self.address} is not wired yet (setMarket names no market, game or referee)")

    def node_count(self) -> int:
        """Number of nodes ever registered."""
        return int(self._view("nodeCount"))

    def node_at(self, index: int) -> str:
        """The node registered `index`-th (0-based)."""
        return to_checksum_address(self._view("nodeAt", index))


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
        *,
        graph_root: bytes,
        trace_leaves: int,
        challenge_window: int,
    ) -> int:
        """Post a job with `reward_wei` in escrow, naming the graph it must run (its graph
        commitment: root and op-trace leaf count, docs/disputes.md) and how long after the
        reveal phase its results may be challenged; returns its id (from JobPosted)."""
        result = self._send(
            sender,
            "postJob",
            _bytes32(program_digest, "program_digest"),
            _bytes32(inputs_digest, "inputs_digest"),
            _bytes32(graph_root, "graph_root"),
            trace_leaves,
            k,
            commit_deadline,
            reveal_deadline,
            challenge_window,
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

    def commit_result(self, sender: Sender, job_id: int, result_digest: bytes, op_trace_root: bytes) -> TxResult:
        """Commit the seal of `result_digest` and `op_trace_root` for `sender` (computed locally)."""
        return self.commit(sender, job_id, seal_of(_address(sender), job_id, result_digest, op_trace_root))

    def reveal(
        self, sender: Sender, job_id: int, result_digest: bytes, envelope_digest: bytes, op_trace_root: bytes
    ) -> TxResult:
        """Reveal the result digest, the trace (envelope) digest and the op-trace Merkle root
        behind `sender`'s seal."""
        return self._send(
            sender,
            "reveal",
            job_id,
            _bytes32(result_digest, "result_digest"),
            _bytes32(envelope_digest, "envelope_digest"),
            _bytes32(op_trace_root, "op_trace_root"),
        )

    def finalize(self, sender: Sender, job_id: int) -> TxResult:
        """Settle `job_id` (anyone may call it once the challenge deadline passed and no
        dispute on it is open)."""
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
            bytes(r[3]),
            *r[4:15],
            Phase(r[15]),
            r[16],
            bytes(r[17]),
        )

    def get_slots(self, job_id: int) -> list[Slot]:
        """The claimed slots of `job_id`, in claim order."""
        return [
            Slot(to_checksum_address(s[0]), bytes(s[1]), bytes(s[2]), bytes(s[3]), bytes(s[4]), s[5], s[6], s[7], s[8])
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

    def seal_of(self, node: str, job_id: int, result_digest: bytes, op_trace_root: bytes) -> bytes:
        """The contract's own seal computation (a check of `seal_of`)."""
        return bytes(self._view("sealOf", to_checksum_address(node), job_id, result_digest, op_trace_root))

    def challenge_deadline(self, job_id: int) -> int:
        """When challenges on `job_id` close (see OnChainJob.challenge_deadline)."""
        return int(self._view("challengeDeadline", job_id))

    def min_challenge_window(self) -> int:
        """Shortest challenge window a job may ask for, in seconds."""
        return int(self._view("minChallengeWindow"))

    def max_challenge_window(self) -> int:
        """Longest challenge window a job may ask for, in seconds."""
        return int(self._view("MAX_CHALLENGE_WINDOW"))


class Stage(enum.IntEnum):
    """DisputeGame.Stage."""

    NONE = 0
    BISECT = 1
    REVEAL_LEAF = 2
    OPEN_LEAF = 3
    REFEREE = 4
    SETTLED = 5


class Verdict(enum.IntEnum):
    """The referee's ruling (Verdict in DisputeGame.sol)."""

    NONE = 0
    DEFENDER_RIGHT = 1
    DEFENDER_WRONG = 2
    NO_VERDICT = 3


@dataclass(frozen=True)
class Dispute:
    """DisputeGame.Dispute."""

    job_id: int
    challenger: str
    defender: str
    slot: int
    stage: Stage
    verdict: Verdict
    defender_to_move: bool
    by_timeout: bool
    level: int
    position: int
    trace_leaves: int
    moves: int
    deadline: int
    graph_root: bytes
    defender_exec_root: bytes
    challenger_result: bytes
    challenger_op_trace_root: bytes
    defender_node: bytes
    challenger_node: bytes
    defender_left: bytes
    defender_right: bytes
    defender_leaf: bytes
    challenger_leaf: bytes
    bond: int

    @property
    def leaf_index(self) -> int | None:
        """The instruction the walk reached (n: the result), or None while still bisecting."""
        return None if self.stage in (Stage.NONE, Stage.BISECT) else self.position

    @property
    def winner(self) -> str | None:
        """Who won, once settled (None without a verdict or before the end)."""
        if self.verdict == Verdict.DEFENDER_RIGHT:
            return self.defender
        if self.verdict == Verdict.DEFENDER_WRONG:
            return self.challenger
        return None


@dataclass(frozen=True)
class Panel:
    """Committee.Panel: a dispute's committee and its votes."""

    defender: str
    challenger: str
    defender_leaf: bytes
    deadline: int
    cast: int
    resolved: bool
    members: tuple[str, ...]
    votes: tuple[bytes, ...]
    voted: tuple[bool, ...]


def _b32(values: Any) -> list[bytes]:
    return [_bytes32(bytes(v), "hash") for v in values]


class DisputeGame(_Bound):
    """Binding of DisputeGame.sol: challenges, bisection, the leaf, timeouts."""

    ARTIFACT = "DisputeGame"

    def challenge(self, sender: Sender, job_id: int, slot: int, result_digest: bytes, op_trace_root: bytes, bond_wei: int) -> int:
        """Challenge `slot` of `job_id` with `sender`'s own execution; returns the dispute id."""
        result = self._send(
            sender,
            "challenge",
            job_id,
            slot,
            _bytes32(result_digest, "result_digest"),
            _bytes32(op_trace_root, "op_trace_root"),
            value=bond_wei,
        )
        for event in self.events(result):
            if event.name == "DisputeOpened":
                return int(event.args["disputeId"])
        raise ChainError("challenge succeeded without a DisputeOpened event")

    def bisect(self, sender: Sender, dispute_id: int, left: bytes, right: bytes) -> TxResult:
        """One bisection move: `sender`'s two children of the walk's node."""
        return self._send(sender, "bisect", dispute_id, _bytes32(left, "left"), _bytes32(right, "right"))

    def reveal_leaf(self, sender: Sender, dispute_id: int, digest: bytes) -> TxResult:
        """The defender's digest at the leaf the walk reached."""
        return self._send(sender, "revealLeaf", dispute_id, _bytes32(digest, "digest"))

    def open_leaf(
        self,
        sender: Sender,
        dispute_id: int,
        digest: bytes,
        graph_leaf: bytes,
        graph_proof: list[bytes],
        operands: list[bytes],
        operand_proofs: list[list[bytes]],
    ) -> TxResult:
        """The challenger's digest at the leaf, the graph leaf with its proof and the operand
        digests with theirs; the referee then rules."""
        return self._send(
            sender,
            "openLeaf",
            dispute_id,
            _bytes32(digest, "digest"),
            bytes(graph_leaf),
            _b32(graph_proof),
            _b32(operands),
            [_b32(proof) for proof in operand_proofs],
        )

    def timeout(self, sender: Sender, dispute_id: int) -> TxResult:
        """End a dispute whose party missed its deadline (anyone)."""
        return self._send(sender, "timeout", dispute_id)

    def get_dispute(self, dispute_id: int, block: int | None = None) -> Dispute:
        """The dispute record."""
        r = self._view("getDispute", dispute_id, block=block)
        return Dispute(
            int(r[0]),
            to_checksum_address(r[1]),
            to_checksum_address(r[2]),
            int(r[3]),
            Stage(r[4]),
            Verdict(r[5]),
            bool(r[6]),
            bool(r[7]),
            *(int(v) for v in r[8:13]),
            *(bytes(v) for v in r[13:23]),
            int(r[23]),
        )

    def to_move(self, dispute_id: int) -> str | None:
        """Who must move next (None once the referee rules or it settled)."""
        mover = to_checksum_address(self._view("toMove", dispute_id))
        return None if int(mover, 16) == 0 else mover

    def dispute_count(self) -> int:
        """Number of disputes opened (ids 1..dispute_count)."""
        return int(self._view("disputeCount"))

    def challenge_bond(self) -> int:
        """Wei a challenge carries."""
        return int(self._view("challengeBond"))

    def move_window(self) -> int:
        """Seconds each party has for a move."""
        return int(self._view("moveWindow"))


class Committee(_Bound):
    """Binding of Committee.sol, the referee: members drawn per dispute vote a digest."""

    ARTIFACT = "Committee"

    def vote(self, sender: Sender, dispute_id: int, digest: bytes) -> TxResult:
        """A member's vote: the output digest it computed."""
        return self._send(sender, "vote", dispute_id, _bytes32(digest, "digest"))

    def resolve(self, sender: Sender, dispute_id: int) -> TxResult:
        """Tally, pay the members and hand the verdict to the game (anyone, when due)."""
        return self._send(sender, "resolve", dispute_id)

    def get_panel(self, dispute_id: int) -> Panel:
        """The dispute's committee (UnknownPanel before its leaf was referred)."""
        r = self._view("getPanel", dispute_id)
        return Panel(
            to_checksum_address(r[0]),
            to_checksum_address(r[1]),
            bytes(r[2]),
            int(r[3]),
            int(r[4]),
            bool(r[5]),
            tuple(to_checksum_address(m) for m in r[6]),
            tuple(bytes(v) for v in r[7]),
            tuple(bool(v) for v in r[8]),
        )

    def size(self) -> int:
        """Members drawn per dispute."""
        return int(self._view("size"))

    def member_stake(self) -> int:
        """Stake locked per member."""
        return int(self._view("memberStake"))

    def vote_window(self) -> int:
        """Seconds the members have to vote."""
        return int(self._view("voteWindow"))


class StepStage(enum.IntEnum):
    """StepReferee.Stage."""

    NONE = 0
    CLAIM = 1  # the challenger shows the program and its output's chunk root
    ROOT = 2  # the defender shows its output's chunk root
    BISECT = 3  # over the chunk trees (locating) or the values trees
    REVEAL = 4  # the defender reveals the located chunk
    ELEMENT = 5  # the challenger names an element of it
    ANSWER = 6  # the defender answers with its value
    RESOLVE = 7  # the challenger opens the first differing step
    COMMITTEE = 8  # the fallback referee (the committee) rules
    DONE = 9


class StepReferee(_Bound):
    """Binding of StepReferee.sol, the referee that evaluates one scalar operation: after the
    game refers an instruction, bisection over the two output tensors' chunk trees locates a
    chunk where they differ, the challenger names an element of it, both commit their values
    of its program's steps, bisection finds the first differing step and the challenger opens
    it; what the machine cannot evaluate goes to the committee (docs/disputes.md, "Down to one
    scalar operation")."""

    ARTIFACT = "StepReferee"

    def claim_uncovered(self, sender: Sender, case_id: int, record_body: bytes) -> TxResult:
        return self._send(sender, "claimUncovered", case_id, _bytes32(record_body, "record_body"))

    def claim_program(self, sender: Sender, case_id: int, record_body: bytes, program: tuple, result_template: tuple, header: bytes, chunk_root: bytes) -> TxResult:
        return self._send(sender, "claimProgram", case_id, _bytes32(record_body, "record_body"), program, result_template, header, _bytes32(chunk_root, "chunk_root"))

    def answer_root(self, sender: Sender, case_id: int, header: bytes, chunk_root: bytes) -> TxResult:
        return self._send(sender, "answerRoot", case_id, header, _bytes32(chunk_root, "chunk_root"))

    def reveal_chunk(self, sender: Sender, case_id: int, chunk: bytes) -> TxResult:
        return self._send(sender, "revealChunk", case_id, chunk)

    def claim_element(self, sender: Sender, case_id: int, element: int, proof: tuple, values_root: bytes, result_value: tuple) -> TxResult:
        return self._send(sender, "claimElement", case_id, element, proof, _bytes32(values_root, "values_root"), result_value)

    def answer_element(self, sender: Sender, case_id: int, proof: tuple, values_root: bytes, result_value: tuple) -> TxResult:
        return self._send(sender, "answerElement", case_id, proof, _bytes32(values_root, "values_root"), result_value)

    def bisect(self, sender: Sender, case_id: int, left: bytes, right: bytes) -> TxResult:
        return self._send(sender, "bisect", case_id, _bytes32(left, "left"), _bytes32(right, "right"))

    def resolve(self, sender: Sender, case_id: int, template: tuple, arguments: list[tuple], load: tuple, entry: tuple) -> TxResult:
        return self._send(sender, "resolve", case_id, template, arguments, load, entry)

    def timeout(self, sender: Sender, case_id: int) -> TxResult:
        return self._send(sender, "timeout", case_id)

    def to_move(self, case_id: int) -> str | None:
        """Who must move next (None once decided or with the committee)."""
        mover = to_checksum_address(self._view("toMove", case_id))
        return None if int(mover, 16) == 0 else mover

    def get_case(self, case_id: int) -> dict[str, Any]:
        """The case's fields by name (the struct of StepReferee.sol); `stage` a StepStage."""
        names = [o["name"] for o in next(f for f in self.artifact.abi if f.get("name") == "getCase")["outputs"][0]["components"]]
        case = dict(zip(names, self._view("getCase", case_id), strict=True))
        case["stage"] = StepStage(case["stage"])
        return case

    def revealed_chunk(self, case_id: int, from_block: int = 0) -> bytes | None:
        """The chunk the defender revealed in the case (its ChunkRevealed log) since
        `from_block`, if any. Read back from the head in growing windows: the reveal is the
        move just before the one that needs it, so the first window nearly always holds it,
        and a party does not read the logs of the whole chain for every case it plays."""
        stop, span = self.client.block_number(), REVEAL_LOOKBACK_BLOCKS
        while stop >= from_block:
            start = max(from_block, stop - span + 1)
            for event in reversed(fetch_events(self.client, self.contract, start, stop, names=("ChunkRevealed",))):
                if int(event.args["caseId"]) == case_id:
                    return bytes(event.args["bytes_"])
            stop, span = start - 1, span * 16
        return None


def referees(client: ChainClient, registry: NodeRegistry) -> tuple[Committee, StepReferee | None]:
    """The deployment's committee and its step referee (None when the committee is the
    game's referee alone), as the registry wires them."""
    committee = Committee(client, registry.committee())
    referee = registry.referee()
    return committee, None if referee == committee.address else StepReferee(client, referee)


@dataclass(frozen=True)
class GameTerms:
    """The dispute game's parameters, fixed at deployment."""

    min_challenge_window_s: int = 10
    challenge_bond_wei: int = 10**17
    move_window_s: int = 30
    committee_size: int = 3
    member_stake_wei: int = 10**17
    vote_window_s: int = 60


@dataclass(frozen=True)
class Deployment:
    """A wired NodeRegistry, JobMarket, DisputeGame and Committee."""

    registry: NodeRegistry
    market: JobMarket
    game: DisputeGame
    committee: Committee
    block: int  # the block of the first deployment: where a watcher starts reading logs
    step_referee: StepReferee | None = None  # the referee, when it is the step referee


def deploy(
    client: ChainClient,
    deployer: Sender,
    *,
    min_stake_wei: int,
    unbonding_delay_s: int,
    slash_amount_wei: int,
    terms: GameTerms | None = None,
    step_referee: bool = False,
) -> Deployment:
    """Deploy the registry, the market, the game and the committee, then wire them with
    `registry.setMarket`. With `step_referee`, a StepReferee is the game's referee instead of
    the committee (not yet what nodes play: tests and benches)."""
    terms = terms or GameTerms()
    reg_tx = client.deploy(
        deployer,
        load_artifact("NodeRegistry").bytecode,
        abi_encode(["uint256", "uint64"], [min_stake_wei, unbonding_delay_s]),
    )
    registry = NodeRegistry(client, reg_tx.receipt["contractAddress"])
    market_tx = client.deploy(
        deployer,
        load_artifact("JobMarket").bytecode,
        abi_encode(["address", "uint256", "uint64"], [registry.address, slash_amount_wei, terms.min_challenge_window_s]),
    )
    market = JobMarket(client, market_tx.receipt["contractAddress"])
    game_tx = client.deploy(
        deployer,
        load_artifact("DisputeGame").bytecode,
        abi_encode(["address", "uint256", "uint64"], [registry.address, terms.challenge_bond_wei, terms.move_window_s]),
    )
    game = DisputeGame(client, game_tx.receipt["contractAddress"])
    committee_tx = client.deploy(
        deployer,
        load_artifact("Committee").bytecode,
        abi_encode(
            ["address", "uint8", "uint256", "uint64"],
            [registry.address, terms.committee_size, terms.member_stake_wei, terms.vote_window_s],
        ),
    )
    committee = Committee(client, committee_tx.receipt["contractAddress"])
    referee: StepReferee | None = None
    if step_referee:
        machine_tx = client.deploy(deployer, load_artifact("ScalarMachine").bytecode, b"")
        referee_tx = client.deploy(
            deployer,
            load_artifact("StepReferee").bytecode,
            abi_encode(
                ["address", "address", "address", "uint64"],
                [game.address, machine_tx.receipt["contractAddress"], committee.address, terms.move_window_s],
            ),
        )
        referee = StepReferee(client, referee_tx.receipt["contractAddress"])
    registry.set_market(deployer, market.address, game.address, (referee or committee).address, committee.address)
    return Deployment(registry, market, game, committee, int(reg_tx.receipt["blockNumber"]), referee)
