"""One side of the dispute game (docs/disputes.md, contracts/src/DisputeGame.sol): the moves a
party makes from what it holds, its own execution of the job and the job's graph.

Everything here is a pure function of local data and the dispute as the chain shows it, so a
node, a test harness and a verifier compute the same moves. Sending them is the caller's
business (`play_move` sends the one move due, for a party that is to move).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from attest.commitment import TreeLevels, commitment_proof, commitment_root, exec_root
from node.chain.client import Sender, TxResult, _address
from node.chain.contracts import Dispute, DisputeGame, Stage
from node.chain.events import fetch_events


@dataclass(frozen=True)
class Execution:
    """One execution of a job as the chain commits to it: the op-trace digests in schedule
    order (raw 32 bytes each, the leaves of the signed trace's Merkle tree) and the result
    digest (the top leaf)."""

    digests: tuple[bytes, ...]
    result: bytes

    def __post_init__(self) -> None:
        for i, digest in enumerate((*self.digests, self.result)):
            if len(digest) != 32:
                raise ValueError(f"digest {i} is {len(digest)} bytes, not 32")

    @cached_property
    def levels(self) -> TreeLevels:
        """Every level of the op-trace tree (what bisection moves answer from)."""
        return TreeLevels(self.digests)

    @property
    def op_trace_root(self) -> bytes:
        """The op-trace Merkle root a reveal commits."""
        return bytes.fromhex(self.levels.root)

    @property
    def exec_root(self) -> bytes:
        """The execution commitment the contract derives from a reveal."""
        return bytes.fromhex(exec_root(self.levels.root, self.result.hex()))

    def digest_at(self, index: int) -> bytes:
        """The digest at position `index` (n: the result digest)."""
        return self.result if index == len(self.digests) else self.digests[index]

    def proof(self, index: int) -> list[bytes]:
        """The commitment proof of position `index` against `exec_root`."""
        return [bytes.fromhex(h) for h in commitment_proof(self.digests, self.result, index)]


@dataclass(frozen=True)
class GraphLeaves:
    """The job's graph commitment as leaves: one graph leaf per op-trace record (record digest,
    then its op-trace operands as 4-byte big-endian indices), and the result record's."""

    leaves: tuple[bytes, ...]
    top: bytes

    @property
    def n(self) -> int:
        return len(self.leaves)

    @cached_property
    def root(self) -> bytes:
        """graphRoot as the job posts it."""
        return bytes.fromhex(commitment_root(self.leaves, self.top))

    def leaf(self, index: int) -> bytes:
        """Graph leaf `index` (n: the result record)."""
        return self.top if index == self.n else self.leaves[index]

    def proof(self, index: int) -> list[bytes]:
        """The commitment proof of graph leaf `index` against `root`."""
        return [bytes.fromhex(h) for h in commitment_proof(self.leaves, self.top, index)]


def operand_indices(graph_leaf: bytes) -> list[int]:
    """The op-trace leaves a graph leaf's instruction reads (its 4-byte tail entries)."""
    if len(graph_leaf) < 32 or (len(graph_leaf) - 32) % 4:
        raise ValueError(f"a graph leaf is 32 bytes then 4-byte indices, not {len(graph_leaf)} bytes")
    return [int.from_bytes(graph_leaf[i : i + 4], "big") for i in range(32, len(graph_leaf), 4)]


@dataclass(frozen=True)
class LeafOpening:
    """The arguments of DisputeGame.openLeaf."""

    digest: bytes
    graph_leaf: bytes
    graph_proof: list[bytes]
    operands: list[bytes]
    operand_proofs: list[list[bytes]]


def bisection_children(mine: Execution, dispute: Dispute) -> tuple[bytes, bytes]:
    """The mover's two children of the walk's current node, from its own tree."""
    left, right = mine.levels.children(dispute.level, dispute.position)
    return bytes.fromhex(left), bytes.fromhex(right)


def leaf_opening(mine: Execution, graph: GraphLeaves, index: int) -> LeafOpening:
    """What the challenger posts at leaf `index`: its digest, the graph leaf with its proof,
    and each operand's digest with its proof against the challenger's own commitment."""
    graph_leaf = graph.leaf(index)
    operands = operand_indices(graph_leaf)
    return LeafOpening(
        digest=mine.digest_at(index),
        graph_leaf=graph_leaf,
        graph_proof=graph.proof(index),
        operands=[mine.digests[j] for j in operands],
        operand_proofs=[mine.proof(j) for j in operands],
    )


def play_move(game: DisputeGame, sender: Sender, dispute_id: int, mine: Execution, graph: GraphLeaves) -> TxResult | None:
    """Sends `sender`'s move in the dispute when it is `sender`'s turn (None when it is not):
    a bisection move, the defender's leaf digest, or the challenger's leaf opening. Honest
    play: every move comes from `mine` and `graph`."""
    dispute = game.get_dispute(dispute_id)
    me = _address(sender)
    if game.to_move(dispute_id) != me:
        return None
    if dispute.stage == Stage.BISECT:
        left, right = bisection_children(mine, dispute)
        return game.bisect(sender, dispute_id, left, right)
    if dispute.stage == Stage.REVEAL_LEAF:
        return game.reveal_leaf(sender, dispute_id, mine.digest_at(dispute.position))
    opening = leaf_opening(mine, graph, dispute.position)
    return game.open_leaf(
        sender, dispute_id, opening.digest, opening.graph_leaf, opening.graph_proof, opening.operands, opening.operand_proofs
    )



@dataclass(frozen=True)
class DisputeSummary:
    """What a person is shown of one dispute (`vxla job`, the chain job page and API)."""

    dispute_id: int
    job_id: int
    slot: int
    challenger: str
    defender: str
    stage: str  # bisect, reveal-leaf, open-leaf, referee, settled
    moves: int  # bisection moves made so far
    instruction: int | None  # the op-trace leaf the walk reached (n: the result record)
    result_leaf: bool  # the dispute is about the result record, not an instruction
    verdict: str | None  # defender-right, defender-wrong, no-verdict; None while open
    winner: str | None
    by_timeout: bool
    to_move: str | None
    deadline: int  # of the current move (0 once the referee has it or it settled)

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def summarize(game: DisputeGame, dispute_id: int) -> DisputeSummary:
    """The dispute as it stands on chain."""
    d = game.get_dispute(dispute_id)
    verdict = None if d.stage != Stage.SETTLED else d.verdict.name.lower().replace("_", "-")
    return DisputeSummary(
        dispute_id=dispute_id,
        job_id=d.job_id,
        slot=d.slot,
        challenger=d.challenger,
        defender=d.defender,
        stage=d.stage.name.lower().replace("_", "-"),
        moves=d.moves,
        instruction=d.leaf_index,
        result_leaf=d.leaf_index is not None and d.leaf_index == d.trace_leaves,
        verdict=verdict,
        winner=d.winner,
        by_timeout=d.by_timeout,
        to_move=game.to_move(dispute_id),
        deadline=d.deadline,
    )


def job_dispute_ids(game: DisputeGame, job_id: int, from_block: int = 0) -> list[int]:
    """The disputes opened on `job_id`, oldest first (from the DisputeOpened logs)."""
    events = fetch_events(game.client, game.contract, from_block, names=("DisputeOpened",))
    return [int(e.args["disputeId"]) for e in events if int(e.args["jobId"]) == job_id]
