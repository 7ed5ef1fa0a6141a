"""The node's part in the dispute game (docs/disputes.md), played by itself each round of the
chain loop: as **challenger** of any revealed slot whose execution differs from one this node
holds of the same job (its own slot's, or one its verifier role re-executed), as
**defender** of its own slots (under the step referee too: node/chain/step_play.py), and as
**committee member** when drawn.

Every decision is read from chain state at the time (the dispute, the panel, the job), never
from memory of earlier rounds, so a restart or a reorg changes nothing but what the chain now
says. Each transaction is recorded under the action it performs (`challenge:JOB:SLOT`,
`move:DISPUTE:STAGE:MOVES`, `step:DISPUTE:STAGE:TREE:LEVEL:POSITION`, `vote:DISPUTE`,
`resolve:DISPUTE`, `timeout:DISPUTE`, `step-timeout:DISPUTE`) in the node's chain database
before the next one: an action on record is not sent again unless the chain no longer holds
its transaction (a reorg dropped it) and still asks for it.

What the node knows of a job (its execution, the graph, the digest a member votes, what it
holds of a disputed instruction) comes from a `DisputeKnowledge`, which the daemon implements
with its executor: the chain side never compiles or runs anything itself.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from node.chain.client import ChainClient, Sender, TxResult, _address
from node.chain.contracts import (
    Committee,
    Dispute,
    DisputeGame,
    JobMarket,
    OnChainJob,
    Phase,
    Stage,
    StepReferee,
    StepStage,
)
from node.chain.disputes import Execution, GraphLeaves, play_move
from node.chain.errors import ChainError, ContractRevert
from node.chain.state import ChainState
from node.chain.step_play import InstructionHolding, play_step_move
from node.chain.watcher import JobPending

log = logging.getLogger(__name__)


class DisputeKnowledge(Protocol):
    """What the node knows of a job, for its disputes. Each may raise node.chain.watcher's
    JobPending (the answer is being computed: ask again next round) or JobRejected (this node
    cannot answer for the job)."""

    def executed_jobs(self) -> list[int]:
        """Jobs of this market this node holds its own execution of."""
        ...

    def execution(self, job_id: int) -> Execution | None:
        """This node's execution of the job (op-trace digests and result), or None."""
        ...

    def graph(self, job: OnChainJob, job_id: int) -> GraphLeaves:
        """The job's graph leaves from this node's own compile."""
        ...

    def vote(self, job: OnChainJob, job_id: int, index: int) -> bytes:
        """The digest this node computes for instruction `index` of the job (n: the result)."""
        ...

    def instruction(self, job: OnChainJob, job_id: int, index: int) -> InstructionHolding:
        """What this node holds of instruction `index` for the step referee's moves (its
        parts may raise JobPending too)."""
        ...


@dataclass(frozen=True)
class DisputeConfig:
    """What the role does by itself."""

    challenge: bool = True  # open disputes against slots whose execution differs from ours
    play: bool = True  # defend, answer and vote


@dataclass(frozen=True)
class Action:
    """One transaction the role sent, for logs and metrics."""

    key: str
    tx: TxResult


class DisputeRole:
    """Plays the node's disputes; `step` once per chain round."""

    def __init__(
        self,
        client: ChainClient,
        market: JobMarket,
        game: DisputeGame,
        committee: Committee,
        sender: Sender,
        knowledge: DisputeKnowledge,
        state: ChainState,
        config: DisputeConfig | None = None,
        step_referee: StepReferee | None = None,
    ) -> None:
        self.client = client
        self.market = market
        self.game = game
        self.committee = committee
        # The game's referee when it is the step referee (the committee its fallback).
        self.step_referee = step_referee
        self.sender = sender
        self.address = _address(sender)
        self.knowledge = knowledge
        self.state = state
        self.config = config or DisputeConfig()
        self._scanned = 0  # disputes 1.._scanned were looked at; open ones stay in _open
        self._open: set[int] = set()
        self._said: set[str] = set()  # problems already logged, once each
        # Jobs settled or past their challenge window when last looked at: not asked about
        # again each round (a restart asks once more).
        self._closed: set[int] = set()

    # -- the round ------------------------------------------------------------------------

    def step(self) -> list[Action]:
        """One round: open the challenges due, then make every move due in open disputes."""
        actions: list[Action] = []
        now = self.client.next_block_time()
        if self.config.challenge:
            actions += self._challenges(now)
        if self.config.play:
            self._scan()
            for dispute_id in sorted(self._open):
                actions += self._play(dispute_id, now)
        return actions

    def _scan(self) -> None:
        count = self.game.dispute_count()
        if count < self._scanned:  # a reorg took disputes back: look at them again
            self._open = {d for d in self._open if d <= count}
            self._scanned = count
        self._open.update(range(self._scanned + 1, count + 1))
        self._scanned = count

    # -- challenger ---------------------------------------------------------------------------

    def _challenges(self, now: int) -> list[Action]:
        actions: list[Action] = []
        for job_id in self.knowledge.executed_jobs():
            if job_id not in self._closed:
                actions += self._challenge_job(job_id, now)
        return actions

    def _challenge_job(self, job_id: int, now: int) -> list[Action]:
        """Challenges every revealed, unrefuted slot of the job whose execution differs from
        this node's, while the window is open."""
        job = self.market.get_job(job_id)
        if job.phase != Phase.OPEN or now >= job.challenge_deadline:
            self._closed.add(job_id)
            return []
        if job.revealed == 0:
            return []
        mine = self._known(f"execution of job {job_id}", lambda: self.knowledge.execution(job_id))
        if mine is None:
            return []
        if len(mine.digests) != job.trace_leaves:
            self._say(f"job {job_id}: this node's execution has {len(mine.digests)} op-trace leaves, the job {job.trace_leaves}; not challenging")
            return []
        actions: list[Action] = []
        for slot, s in enumerate(self.market.get_slots(job_id)):
            if s.node == self.address or not s.revealed or s.refuted:
                continue
            if (s.result_digest, s.op_trace_root) == (mine.result, mine.op_trace_root):
                continue
            action = self._send(f"challenge:{job_id}:{slot}", lambda slot=slot: self._challenge_tx(job_id, slot, mine))
            if action is not None:
                log.info("challenged slot %d of job %d (node %s): its execution differs from ours", slot, job_id, s.node)
                actions.append(action)
        return actions

    def _challenge_tx(self, job_id: int, slot: int, mine: Execution) -> TxResult:
        fn = self.game.contract.functions.challenge(job_id, slot, mine.result, mine.op_trace_root)
        return self.client.transact(self.sender, fn, value=self.game.challenge_bond())

    # -- defender, challenger moves, committee ---------------------------------------------------

    def _play(self, dispute_id: int, now: int) -> list[Action]:
        try:
            d = self.game.get_dispute(dispute_id)
        except ContractRevert:  # UnknownDispute: a reorg took it back
            self._open.discard(dispute_id)
            return []
        if d.stage == Stage.SETTLED:
            self._open.discard(dispute_id)
            return []
        if d.stage == Stage.REFEREE:
            if self.step_referee is not None and self.step_referee.get_case(dispute_id)["stage"] != StepStage.COMMITTEE:
                return self._step_case(dispute_id, d, now)
            return self._committee(dispute_id, d, now)
        if self.address not in (d.challenger, d.defender):
            return []
        mover = self.game.to_move(dispute_id)
        if mover == self.address and now < d.deadline:
            return self._move(dispute_id, d)
        if mover is not None and mover != self.address and now >= d.deadline:
            action = self._send(f"timeout:{dispute_id}", lambda: self.game.timeout(self.sender, dispute_id))
            if action is not None:
                log.info("dispute %d: %s missed its deadline; timed out", dispute_id, mover)
            return [action] if action is not None else []
        return []

    def _move(self, dispute_id: int, d: Dispute) -> list[Action]:
        mine = self._my_execution(d)
        if mine is None:
            return []
        job = self.market.get_job(d.job_id)
        graph = self._known(f"graph of job {d.job_id}", lambda: self.knowledge.graph(job, d.job_id))
        if graph is None:
            return []
        if graph.root != job.graph_root:
            self._say(f"job {d.job_id}: this node's graph commitment is not the job's; cannot open its leaf")
            return []
        key = f"move:{dispute_id}:{d.stage.name.lower()}:{d.moves}"

        def send() -> TxResult:
            result = play_move(self.game, self.sender, dispute_id, mine, graph)
            if result is None:
                raise ChainError("not this node's move any more")
            return result

        action = self._send(key, send)
        return [action] if action is not None else []

    def _my_execution(self, d: Dispute) -> Execution | None:
        """The execution this node plays with: what it revealed as defender, or the one it
        challenged with (a verifier's re-execution); it must be the one on chain."""
        mine = self._known(f"execution of job {d.job_id}", lambda: self.knowledge.execution(d.job_id))
        if mine is None:
            self._say(f"dispute {self._label(d)}: this node holds no execution of job {d.job_id}; it cannot answer")
            return None
        if self.address == d.defender:
            stated = mine.exec_root == d.defender_exec_root
        else:
            stated = (mine.result, mine.op_trace_root) == (d.challenger_result, d.challenger_op_trace_root)
        if not stated:
            self._say(f"dispute {self._label(d)}: this node's execution of job {d.job_id} is not the one it stated on chain")
            return None
        return mine

    def _step_case(self, dispute_id: int, d: Dispute, now: int) -> list[Action]:
        """A party's move in the step referee's case (node/chain/step_play.py), or the timeout
        of an opponent past its deadline."""
        referee = self.step_referee
        assert referee is not None
        if self.address not in (d.challenger, d.defender):
            return []
        case = referee.get_case(dispute_id)
        mover = referee.to_move(dispute_id)
        if mover is not None and mover != self.address and now >= case["deadline"]:
            action = self._send(f"step-timeout:{dispute_id}", lambda: referee.timeout(self.sender, dispute_id))
            if action is not None:
                log.info("dispute %d: %s missed its step referee deadline; timed out", dispute_id, mover)
            return [action] if action is not None else []
        if mover != self.address or now >= case["deadline"]:
            return []
        if self._my_execution(d) is None:
            return []
        job = self.market.get_job(d.job_id)
        label = f"instruction {d.position} of job {d.job_id}"
        holding = self._known(label, lambda: self.knowledge.instruction(job, d.job_id, d.position))
        if holding is None:
            return []
        stage = case["stage"]
        key = (
            f"step:{dispute_id}:{stage.name.lower()}:{'chunks' if case['locating'] else 'steps'}:{case['level']}:{case['position']}"
        )

        def send() -> TxResult:
            move = play_step_move(referee, self.sender, dispute_id, holding, self.state.start_block)
            if move is None:
                raise ChainError("not this node's move any more")
            log.info("dispute %d: %s in the step referee's case (%s)", dispute_id, move.name, label)
            return move.tx

        try:
            action = self._send(key, send)
        except JobPending:  # a part is being computed: the next round asks again
            return []
        except Exception as error:  # JobRejected, an unreadable answer: this node cannot answer
            self._say(f"dispute {self._label(d)}: {label}: {error}")
            return []
        return [action] if action is not None else []

    def _committee(self, dispute_id: int, d: Dispute, now: int) -> list[Action]:
        panel = self.committee.get_panel(dispute_id)
        actions: list[Action] = []
        if self.address in panel.members and not panel.resolved and now < panel.deadline:
            seat = panel.members.index(self.address)
            if not panel.voted[seat]:
                job = self.market.get_job(d.job_id)
                digest = self._known(f"instruction {d.position} of job {d.job_id}", lambda: self.knowledge.vote(job, d.job_id, d.position))
                if digest is not None:
                    action = self._send(f"vote:{dispute_id}", lambda: self.committee.vote(self.sender, dispute_id, digest))
                    if action is not None:
                        side = "the defender's" if digest == panel.defender_leaf else "not the defender's"
                        log.info("dispute %d: voted %s for instruction %d (%s)", dispute_id, digest.hex()[:16], d.position, side)
                        actions.append(action)
                return actions
        involved = self.address in (d.challenger, d.defender, *panel.members)
        due = panel.cast == len(panel.members) or now >= panel.deadline
        if involved and due and not panel.resolved:
            action = self._send(f"resolve:{dispute_id}", lambda: self.committee.resolve(self.sender, dispute_id))
            if action is not None:
                actions.append(action)
        return actions

    # -- sending once ------------------------------------------------------------------------------

    def _send(self, key: str, send) -> Action | None:  # noqa: ANN001 - a callable giving a TxResult
        """Sends `key`'s transaction unless it is on record and still on chain."""
        recorded = self.state.dispute_action(key)
        if recorded is not None:
            if self._on_chain(recorded[0]):
                return None
            log.warning("the chain no longer holds the %s transaction %s (a reorg); sending it again", key, recorded[0].hex())
            self.state.forget_dispute_action(key)
        try:
            tx = send()
        except ContractRevert as error:
            # The chain moved (another node resolved, a deadline passed between the read and the
            # send): the next round reads it again.
            self._say(f"{key}: refused by the chain ({error})")
            return None
        except ChainError as error:
            self._say(f"{key}: not sent ({error})")
            return None
        self.state.record_dispute_action(key, tx.tx_hash, int(tx.receipt["blockNumber"]))
        return Action(key, tx)

    def _on_chain(self, tx_hash: bytes) -> bool:
        try:
            self.client.w3.eth.get_transaction_receipt(tx_hash)
        except Exception:  # TransactionNotFound: dropped by a reorg
            return False
        return True

    def _known(self, what: str, get):  # noqa: ANN001, ANN202 - a callable and what it gives
        """What `get` gives, or None while it is being computed or when this node cannot say
        (said once, with the reason)."""
        try:
            return get()
        except JobPending:
            return None
        except Exception as error:  # JobRejected, a blob gone: the node cannot answer this
            self._say(f"{what}: {error}")
            return None

    def _say(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            log.warning("%s", message)

    @staticmethod
    def _label(d: Dispute) -> str:
        return f"on slot {d.slot} of job {d.job_id}"
