"""The chain role of a node: follow the JobMarket, claim the jobs it accepts, execute them,
commit, reveal, finalize and withdraw, surviving restarts without duplicate transactions.

How it works:
- Logs are read by `get_logs` polling over bounded block ranges that trail the head by
  `confirmations` blocks (so a shallow reorg never reaches what was read). Only JobPosted
  logs create work; applying one twice changes nothing, and the range and the cursor move
  in one SQLite transaction (`node.chain.state`).
- Reorgs. Shallower than `confirmations`: what was read stands; a transaction of this node
  that the reorg dropped is found missing from chain state (its slot is not claimed,
  committed or revealed, the job is not finalized) and sent again. Terminal decisions (done,
  skipped, expired) rest on the confirmed block (head minus `confirmations`), never on
  blocks a shallow reorg can replace. Deeper: the hash of the last block read no longer
  matches the chain, so the cursor goes back to the newest block both chains share, the
  replaced blocks are read again (a job id now holding another job replaces the record),
  and every decision resting on a replaced block is reopened.
- Each job then advances through a state machine (SEEN, CLAIMED, EXECUTED, COMMITTED,
  REVEALED, DONE, with SKIPPED, EXPIRED and FAILED on the side). Before every transaction
  the watcher reads the chain (the job, its own slot: claimed, committed, revealed) and sends
  only what is still missing, so a restart after a transaction was mined but before the
  state file recorded it sends nothing twice. While the account has unmined transactions
  the watcher sends nothing new (their effect is not yet readable from chain state).
- Transactions go through the market's ChainClient, whose per-account nonce manager
  serializes them.

Refusals (the documented choice): a node claims first and executes after, so a long job
does not lose its slot to faster nodes while it runs. To keep that from costing stake, the
executor gets a `check` before the claim (the daemon's fetches the blobs, checks the limits
and compiles the job without running it, to know its memory): a `JobRejected` there means
no claim, and `JobPending` means the check is still running. With
`WatcherConfig.run_before_claim` the job is also executed before the claim, so that a run
that fails costs no stake either (the operator's choice: work is lost to slot races). A
`JobRejected` from `execute` after the claim means the node does not commit: committing a
made-up digest would be slashed just the same and would pollute the quorum, so the slot is
left uncommitted and is slashed at finalize; the job is FAILED and the watcher still
finalizes it. Any other exception from `execute` is treated as transient
and retried on the next step until the commit deadline passes.

Commitments (docs/disputes.md): a job names the graph it must run (`graph_root`,
`trace_leaves`, from its JobCommitment log) and the executor's check refuses a job whose
graph this node's own compile does not commit to, before any claim. The seal and the reveal
bind the op-trace Merkle root of the node's signed trace (`ExecutionOutcome.op_trace_root`),
which the state records with the result digest. A job executed by a vxla that did not record
that root (a row from before schema 5) is read again from the executor before its commit; a
job committed without it cannot be revealed under this contract (its seal binds no root), so
it is FAILED with a note saying so.

Finalizing: the contract settles a job only once its challenge deadline (the end of the
reveal phase plus the job's challenge window) has passed and no dispute on it is open; the
watcher waits for both on the chain's clock (the time its transaction would run at), so it
sends no finalize the chain would refuse. A watcher given a `finalize_gate` finalizes at the
challenge deadline only when the gate agrees (the daemon's gate is its divergence monitor
having compared every other commitment, so its report is on record before the quorum
settles); at the latest challenge deadline a job can have (the reveal deadline plus the
window) it finalizes regardless.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from node.chain import (
    ChainError,
    ContractRevert,
    JobMarket,
    OnChainJob,
    Phase,
    Sender,
    Slot,
    fetch_events,
)
from node.chain.client import _address
from node.chain.state import ChainState, JobState, TrackedJob
from node.errors import JobRejected, NodeError
from node.protocol import seal_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChainJob:
    """A job as posted on chain, with the chain and contract it lives on (what a trace binds)."""

    job_id: int
    submitter: str
    program_digest: bytes
    inputs_digest: bytes
    reward: int
    k: int
    commit_deadline: int
    reveal_deadline: int
    chain_id: int
    contract: str
    # The graph commitment the job names (docs/disputes.md): the root over its graph records
    # and n, the op-trace leaves of its graph; and the seconds after the reveal phase in
    # which its results may be challenged.
    graph_root: bytes
    trace_leaves: int
    challenge_window: int


@dataclass(frozen=True)
class ExecutionOutcome:
    """What a node commits to (the result digest and the op-trace root, sealed together) and
    reveals alongside them (the trace's envelope digest)."""

    result_digest: bytes
    envelope_digest: bytes
    op_trace_root: bytes  # `op_trace.merkle_root` of the signed trace (EMPTY_ROOT without one)

    def __post_init__(self) -> None:
        for name in ("result_digest", "envelope_digest", "op_trace_root"):
            if len(getattr(self, name)) != 32:
                raise ValueError(f"{name} must be 32 bytes")


class JobPending(NodeError):
    """The executor has the job in hand but no result yet (a worker pool runs it): the
    watcher asks again on its next step, until the commit deadline."""


class JobExecutor(Protocol):
    """How the watcher gets results: the daemon plugs its worker in here."""

    def check(self, job: ChainJob) -> None:
        """Admission before claiming: raise JobRejected to leave the job alone, JobPending
        while the check runs elsewhere (the watcher asks again on its next step)."""
        ...

    def execute(self, job: ChainJob) -> ExecutionOutcome:
        """Run the job (deterministically); raise JobRejected if it cannot be run, JobPending
        if it runs elsewhere and is not done yet."""
        ...


# A policy returns None to accept a job, or the reason to decline it. `now` is chain time.
Policy = Callable[[ChainJob, int], str | None]


@dataclass(frozen=True)
class AcceptancePolicy:
    """The default policy: thresholds on reward, redundancy, time left to commit and time to
    reveal in."""

    min_reward_wei: int = 1
    max_k: int = 16
    min_commit_window_s: int = 0  # seconds the node needs between decision and commit deadline
    # Seconds between the commit deadline and the reveal deadline. A claimed slot that is
    # never revealed is slashed, and while fewer than k nodes commit (more slots than nodes
    # take the job) the reveal can only run after the commit deadline: a shorter window can
    # pass between two blocks (or while the node's chain connection blinks), and the stake
    # with it.
    min_reveal_window_s: int = 10
    # A claimed slot's stake stays locked until the job settles, after its challenge window:
    # a job asking for a longer one ties the stake up that long.
    max_challenge_window_s: int = 86_400

    def __call__(self, job: ChainJob, now: int) -> str | None:
        """None to accept `job`, else why not."""
        if job.reward < self.min_reward_wei:
            return f"reward {job.reward} below {self.min_reward_wei}"
        if job.k > self.max_k:
            return f"redundancy {job.k} above {self.max_k}"
        if job.commit_deadline - now < self.min_commit_window_s:
            return f"{job.commit_deadline - now}s left to commit, need {self.min_commit_window_s}"
        if job.reveal_deadline - job.commit_deadline < self.min_reveal_window_s:
            return f"{job.reveal_deadline - job.commit_deadline}s to reveal in, need {self.min_reveal_window_s}"
        if job.challenge_window > self.max_challenge_window_s:
            return f"challenge window {job.challenge_window}s, longer than {self.max_challenge_window_s}s of locked stake"
        return None


@dataclass(frozen=True)
class WatcherConfig:
    """Tuning of the watcher."""

    confirmations: int = 0  # blocks the read range trails the head by
    max_blocks_per_step: int = 2_000  # largest block range one step reads
    log_chunk: int = 500  # largest range of one eth_getLogs call
    poll_interval_s: float = 2.0  # pause between steps in `run`
    withdraw_min_wei: int = 1  # withdraw credits once they reach this (0: never)
    max_moves_per_job: int = 8  # bound on state transitions of one job in one step
    # Execute a job before claiming a slot, not after: a run that fails (its process dies,
    # it passes the wall limit) then skips the job with no stake locked, where after a claim
    # the slot would be slashed; the work is lost when the slots fill while it runs.
    run_before_claim: bool = False


@dataclass
class StepReport:
    """What one `step` did (for tests, logs and metrics)."""

    from_block: int
    to_block: int  # from_block - 1 when no block was read
    new_jobs: int = 0
    # (job id, action) of every transaction sent; the job id is 0 for "withdraw".
    transactions: list[tuple[int, str]] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (job id, what failed), retried
    waited_for_pending: bool = False
    rewound_to: int | None = None  # the cursor after a reorg deeper than `confirmations`
    reopened: list[int] = field(default_factory=list)  # jobs whose decision that reorg undid


class ChainWatcher:
    """Follows one JobMarket for one node account (see the module docstring)."""

    def __init__(
        self,
        market: JobMarket,
        account: Sender,
        executor: JobExecutor,
        state_path: str | Path,
        *,
        policy: Policy | None = None,
        config: WatcherConfig | None = None,
        start_block: int = 0,
        finalize_gate: Callable[[int], bool] | None = None,
    ) -> None:
        """`state_path`: the SQLite file of this node's chain progress (created if missing,
        starting at `start_block`, typically the deployment block). `finalize_gate(job_id)`:
        whether this node may finalize a fully revealed job before its reveal deadline."""
        self.finalize_gate = finalize_gate if finalize_gate is not None else (lambda job_id: True)
        self.market = market
        self.client = market.client
        self.account = account
        self.address = _address(account)
        self.executor = executor
        self.policy: Policy = policy if policy is not None else AcceptancePolicy()
        self.config = config if config is not None else WatcherConfig()
        self.chain_id = self.client.chain_id
        self.state = ChainState(
            state_path,
            chain_id=self.chain_id,
            contract=market.address,
            account=self.address,
            start_block=start_block,
        )
        # The block terminal decisions rest on (head minus confirmations), set by `step`.
        self._confirmed_block = start_block

    def close(self) -> None:
        """Close the state file."""
        self.state.close()

    # -- the loop ------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Step until `stop` is set; chain errors are logged and retried next round."""
        while not stop.is_set():
            try:
                self.step()
            except Exception:  # keep the daemon alive; the next step starts from chain state
                log.exception("watcher step failed")
            stop.wait(self.config.poll_interval_s)

    def step(self) -> StepReport:
        """One bounded round: read the next log range, then advance every open job."""
        self._confirmed_block = max(0, self.client.block_number() - self.config.confirmations)
        report = self.poll_logs()
        if self.client.pending_count(self.address) > 0:
            # An unmined transaction of ours: its effect is not readable yet, so deciding
            # now could send it again. Wait for it.
            report.waited_for_pending = True
            return report
        for record in self.state.open_jobs():
            self._advance(record, report)
        self._withdraw(report)
        return report

    def poll_logs(self) -> StepReport:
        """Apply the JobPosted logs of the next confirmed block range (at most
        `max_blocks_per_step` blocks) and move the cursor past it; first, after a reorg
        deeper than `confirmations`, go back to where the chains part."""
        rewound = self.state.rewind_to_common_block("watcher", self.client.block_hash)
        reopened = []
        if rewound is not None:
            reopened = self.state.reopen_settled_after(rewound)
            log.warning("the chain read up to here was replaced (a reorg deeper than %d blocks): reading again "
                        "from block %d; reopened jobs %s", self.config.confirmations, rewound, reopened)
        report = self._read_range()
        report.rewound_to, report.reopened = rewound, reopened
        return report

    def _read_range(self) -> StepReport:
        start = self.state.next_block()
        head = self.client.block_number() - self.config.confirmations
        end = min(head, start + self.config.max_blocks_per_step - 1)
        report = StepReport(start, start - 1)
        if end < start:
            return report
        before = self.client.block_hash(end)
        events = fetch_events(
            self.client,
            self.market.contract,
            start,
            end,
            names=("JobPosted", "JobCommitment"),
            chunk=self.config.log_chunk,
        )
        # postJob emits JobCommitment right after JobPosted, in the same transaction.
        commitments = {(e.tx_hash, int(e.args["jobId"])): e.args for e in events if e.name == "JobCommitment"}
        rows = []
        for event in events:
            if event.name != "JobPosted":
                continue
            a = event.args
            c = commitments.get((event.tx_hash, int(a["jobId"])))
            if c is None:
                raise ChainError(f"job {a['jobId']}: JobPosted without its JobCommitment in transaction 0x{event.tx_hash.hex()}")
            record = TrackedJob(
                job_id=int(a["jobId"]),
                state=JobState.SEEN,
                submitter=str(a["submitter"]),
                program_digest=bytes(a["programDigest"]),
                inputs_digest=bytes(a["inputsDigest"]),
                reward=int(a["reward"]),
                k=int(a["k"]),
                commit_deadline=int(a["commitDeadline"]),
                reveal_deadline=int(a["revealDeadline"]),
                posted_block=event.block_number,
                result_digest=None,
                envelope_digest=None,
                note="",
                graph_root=bytes(c["graphRoot"]),
                trace_leaves=int(c["traceLeaves"]),
                challenge_window=int(c["challengeWindow"]),
            )
            rows.append((event.tx_hash, event.log_index, record))
        if before is None or self.client.block_hash(end) != before:
            return report  # replaced while it was read: read again next step
        report.new_jobs = self.state.apply_range(rows, end + 1, last_block_hash=before)
        report.to_block = end
        return report

    # -- per job -------------------------------------------------------------------------

    def chain_job(self, record: TrackedJob) -> ChainJob:
        """The executor's view of a job record (one holding its graph commitment)."""
        assert record.graph_root is not None and record.trace_leaves is not None and record.challenge_window is not None
        return ChainJob(
            job_id=record.job_id,
            submitter=record.submitter,
            program_digest=record.program_digest,
            inputs_digest=record.inputs_digest,
            reward=record.reward,
            k=record.k,
            commit_deadline=record.commit_deadline,
            reveal_deadline=record.reveal_deadline,
            chain_id=self.chain_id,
            contract=self.market.address,
            graph_root=record.graph_root,
            trace_leaves=record.trace_leaves,
            challenge_window=record.challenge_window,
        )

    def _advance(self, record: TrackedJob, report: StepReport) -> None:
        for _ in range(self.config.max_moves_per_job):
            try:
                moved = self._move(record, report)
            except ChainError as exc:
                # One job's trouble (a node error, a gas cap) must not hold up the others;
                # its state is unchanged, so the next step tries again from chain state.
                log.warning("job %d: chain error, will retry: %s", record.job_id, exc)
                report.errors.append((record.job_id, str(exc)))
                return
            if moved is None:
                return
            record = moved
            if record.state in (JobState.SKIPPED, JobState.EXPIRED, JobState.DONE):
                return

    def _my_slot(self, job_id: int) -> Slot | None:
        for slot in self.market.get_slots(job_id):
            if slot.node == self.address:
                return slot
        return None

    def _send(self, report: StepReport, job_id: int, action: str, fn: Callable[[], object]) -> str | None:
        """Send one transaction; None on success, else the custom error's name."""
        try:
            fn()
        except ContractRevert as exc:
            log.info("job %d: %s refused: %s", job_id, action, exc.name)
            return exc.name
        report.transactions.append((job_id, action))
        if job_id:
            log.info("job %d: %s mined", job_id, action)
        else:
            log.info("%s mined", action)
        return None

    def _decided(self, job_id: int) -> OnChainJob:
        """The job as of the confirmed block (head minus `confirmations`): what a terminal
        decision rests on, since no reorg this node is configured to ride out reaches it."""
        if self.config.confirmations == 0:
            return self.market.get_job(job_id)
        return self.market.get_job(job_id, block=self._confirmed_block)

    def _set(self, job_id: int, state: JobState, **changes: Any) -> TrackedJob:
        if state in (JobState.EXPIRED, JobState.SKIPPED) and changes.get("note"):
            # Jobs this node will not run: an operator (and a submitter's node) sees why.
            log.info("job %d %s: %s", job_id, state.value, changes["note"])
        return self.state.set_state(job_id, state, head=self._confirmed_block, **changes)

    def _finalized(self, job_id: int, job: OnChainJob) -> bool:
        """Finalized at the latest block and at the confirmed one; finalized only at the
        latest is waited on (`_move` answers None), since a reorg may still drop it."""
        if job.phase != Phase.FINALIZED:
            return False
        try:
            return self._decided(job_id).phase == Phase.FINALIZED
        except ContractRevert:  # not posted yet at the confirmed block
            return False

    def _gone(self, rec: TrackedJob) -> TrackedJob | None:
        """The chain holds no job under this id (a reorg dropped its post): the job waits
        for its post to come back, until its commit deadline, after which nobody could
        claim it anyway."""
        if self.client.next_block_time() >= rec.commit_deadline:
            return self._set(rec.job_id, JobState.EXPIRED, note="no longer on chain (dropped by a reorg)")
        return None

    def _move(self, rec: TrackedJob, report: StepReport) -> TrackedJob | None:
        """One transition of `rec`, reading the chain first; None when it must wait."""
        job_id = rec.job_id
        try:
            job = self.market.get_job(job_id)
        except ContractRevert as exc:
            if exc.name == "UnknownJob":
                return self._gone(rec)
            raise
        if not rec.same_job(_terms(job)):
            # Another job under this id: the chain was replaced after the log was read. The
            # new log, read again after the rewind, replaces the record; until then, wait.
            return None
        if rec.graph_root is None:  # a row from before schema 5: its commitment from the chain
            rec = self.state.set_commitment(job_id, job.graph_root, job.trace_leaves, job.challenge_window)
        slot = self._my_slot(job_id)
        # Our next transaction lands in a later block: its time is what the contract's
        # deadline checks will see (an idle devnet's latest block can be minutes old).
        now = self.client.next_block_time()
        backward = _missing_on_chain(rec, slot)
        if backward is not None:
            state, note = backward
            log.warning("job %d: %s; back to %s", job_id, note, state.value)
            return self._set(job_id, state, note=note)
        if job.phase == Phase.FINALIZED:
            if not self._finalized(job_id, job):
                return None
            if rec.state == JobState.SEEN and slot is None:
                return self._set(job_id, JobState.SKIPPED, note="finalized before a decision")
            return self._set(job_id, JobState.DONE, note=_outcome_note(job, rec.result_digest, slot))
        if rec.state == JobState.SEEN:
            return self._decide(rec, job, slot, now, report)
        if rec.state == JobState.CLAIMED:
            return self._execute(rec, job, slot, now)
        if rec.state == JobState.EXECUTED:
            return self._commit(rec, job, slot, now, report)
        if rec.state == JobState.COMMITTED:
            return self._reveal(rec, job, slot, now, report)
        return self._finalize(rec, job, now, report)  # REVEALED or FAILED

    def _decide(self, rec: TrackedJob, job: OnChainJob, slot: Slot | None, now: int, report: StepReport) -> TrackedJob | None:
        job_id = rec.job_id
        if slot is not None:  # claimed before a crash: do not claim again
            return self._set(job_id, JobState.CLAIMED, note="claim found on chain")
        if now >= job.commit_deadline:
            return self._set(job_id, JobState.EXPIRED, note="commit phase over before claim")
        if job.claimed >= job.k:
            # Full at the latest block; a shallow reorg may still free a slot, so the job is
            # given up only once it is full at the confirmed block.
            if self._decided(job_id).claimed >= job.k:
                return self._set(job_id, JobState.SKIPPED, note="all slots claimed")
            return None
        chain_job = self.chain_job(rec)
        reason = self.policy(chain_job, now)
        if reason is None:
            try:
                self.executor.check(chain_job)
            except JobPending:
                return None
            except JobRejected as exc:
                reason = f"refused: {exc}"
            except Exception as exc:  # transient (e.g. a blob store not reachable)
                log.warning("job %d: check failed, will retry: %s", job_id, exc)
                report.errors.append((job_id, f"check: {exc}"))
                return None
        if reason is not None:
            return self._set(job_id, JobState.SKIPPED, note=reason)
        if self.config.run_before_claim:
            try:
                self.executor.execute(chain_job)  # recorded: `_execute` finds the outcome
            except JobPending:
                return None
            except JobRejected as exc:
                return self._set(job_id, JobState.SKIPPED, note=f"refused when run before the claim: {exc}")
            except Exception as exc:  # transient: retried next step
                log.warning("job %d: execution before the claim failed, will retry: %s", job_id, exc)
                report.errors.append((job_id, f"execute: {exc}"))
                return None
        error = self._send(report, job_id, "claim", lambda: self.market.claim_slot(self.account, job_id))
        if error is None or error == "AlreadyClaimed":
            return self._set(job_id, JobState.CLAIMED, note="")
        if error == "CommitPhaseOver":
            return self._set(job_id, JobState.EXPIRED, note=error)
        if error == "AllSlotsClaimed":
            return None  # decided above, from the confirmed block, on the next step
        return self._set(job_id, JobState.SKIPPED, note=f"claim refused: {error}")

    def _execute(self, rec: TrackedJob, job: OnChainJob, slot: Slot | None, now: int) -> TrackedJob | None:
        job_id = rec.job_id
        committed = slot is not None and slot.committed
        if not committed and now >= job.commit_deadline:
            return self._set(job_id, JobState.FAILED, note="commit deadline passed before execution")
        try:
            outcome = self.executor.execute(self.chain_job(rec))
        except JobRejected as exc:
            return self._set(job_id, JobState.FAILED, note=f"refused after claim: {exc}")
        except JobPending:
            return None
        except Exception as exc:  # transient: retried next step, until the deadline
            log.warning("job %d: execution failed, will retry: %s", job_id, exc)
            self._set(job_id, JobState.CLAIMED, note=f"execution error: {exc}")
            return None
        return self._set(
            job_id,
            JobState.EXECUTED,
            note="",
            result_digest=outcome.result_digest,
            envelope_digest=outcome.envelope_digest,
            op_trace_root=outcome.op_trace_root,
        )

    def _commit(self, rec: TrackedJob, job: OnChainJob, slot: Slot | None, now: int, report: StepReport) -> TrackedJob | None:
        job_id = rec.job_id
        assert rec.result_digest is not None
        if rec.op_trace_root is None:
            # Executed by a vxla that did not record the op-trace root (schema 4): the seal
            # needs it, so the outcome is read again from the executor (its record holds the
            # signed trace, whose root it is).
            return self._set(job_id, JobState.CLAIMED, note="executed before op-trace roots were recorded: reading the outcome again")
        if slot is not None and slot.committed:  # committed before a crash
            if slot.seal != seal_of(self.address, job_id, rec.result_digest, rec.op_trace_root):
                return self._set(job_id, JobState.FAILED, note="on-chain seal differs from the local result and op-trace root")
            return self._set(job_id, JobState.COMMITTED, note="commit found on chain")
        if now >= job.commit_deadline:
            return self._set(job_id, JobState.FAILED, note="commit deadline passed")
        result, root = rec.result_digest, rec.op_trace_root
        error = self._send(report, job_id, "commit", lambda: self.market.commit_result(self.account, job_id, result, root))
        if error is None:
            return self._set(job_id, JobState.COMMITTED, note="")
        if error == "CommitPhaseOver":
            return self._set(job_id, JobState.FAILED, note="commit deadline passed")
        if error == "AlreadyCommitted":
            return rec  # read the slot again: the branch above checks the seal
        return self._set(job_id, JobState.EXECUTED, note=f"commit refused: {error}")

    def _reveal(self, rec: TrackedJob, job: OnChainJob, slot: Slot | None, now: int, report: StepReport) -> TrackedJob | None:
        job_id = rec.job_id
        assert rec.result_digest is not None and rec.envelope_digest is not None
        if slot is not None and slot.revealed:  # revealed before a crash
            return self._set(job_id, JobState.REVEALED, note="reveal found on chain")
        if rec.op_trace_root is None:
            # Committed by a vxla that sealed no op-trace root (schema 4): the contract checks
            # the reveal against a seal of (result, op-trace root), which this one is not.
            return self._set(
                job_id, JobState.FAILED,
                note="committed before op-trace roots were recorded: the seal binds no op-trace root, so this "
                "contract cannot accept its reveal; the slot is slashed at finalize",
            )  # fmt: skip
        if now < job.commit_deadline and job.committed < job.k:
            return None  # the commit phase is still open
        if now >= job.reveal_deadline:
            return self._set(job_id, JobState.FAILED, note="reveal deadline passed")
        result, trace, root = rec.result_digest, rec.envelope_digest, rec.op_trace_root
        error = self._send(report, job_id, "reveal", lambda: self.market.reveal(self.account, job_id, result, trace, root))
        if error is None or error == "AlreadyRevealed":
            return self._set(job_id, JobState.REVEALED, note="")
        if error == "RevealPhaseOver":
            return self._set(job_id, JobState.FAILED, note="reveal deadline passed")
        if error == "CommitPhaseNotOver":
            return None
        return self._set(job_id, JobState.COMMITTED, note=f"reveal refused: {error}")

    def _finalize(self, rec: TrackedJob, job: OnChainJob, now: int, report: StepReport) -> TrackedJob | None:
        # REVEALED or FAILED: settle the job once its challenge window is over and no dispute
        # on it is open (the contract's rule). Done is recorded when the finalization is seen
        # at the confirmed block (`_move`).
        job_id = rec.job_id
        if not finalizable(job, now):
            return None
        if now < job.reveal_deadline + job.challenge_window and not self.finalize_gate(job_id):
            return None
        error = self._send(report, job_id, "finalize", lambda: self.market.finalize(self.account, job_id))
        if self.config.confirmations == 0 and error in (None, "JobFinalized"):
            note = _outcome_note(self.market.get_job(job_id), rec.result_digest, self._my_slot(job_id))
            return self._set(job_id, JobState.DONE, note=note)
        return None

    def _withdraw(self, report: StepReport) -> None:
        minimum = self.config.withdraw_min_wei
        if minimum <= 0 or self.market.credits(self.address) < minimum:
            return
        self._send(report, 0, "withdraw", lambda: self.market.withdraw(self.account))


def finalizable(job: OnChainJob, now: int) -> bool:
    """Whether `finalize` of `job` can run at chain time `now` (the next block's): its
    challenge deadline has passed and no dispute on it is open (JobMarket.finalize's rule,
    whose errors are ChallengeWindowOpen and DisputesOpen)."""
    return job.phase == Phase.OPEN and now >= job.challenge_deadline and job.open_disputes == 0


def _terms(job: OnChainJob) -> tuple[object, ...]:
    """`TrackedJob.terms` of a job as the chain holds it now."""
    return (job.submitter, job.program_digest, job.inputs_digest, job.reward, job.k, job.commit_deadline,
            job.reveal_deadline, job.graph_root, job.trace_leaves, job.challenge_window)  # fmt: skip


# The furthest step of each state that must be on chain: a claim, a commit, a reveal.
_NEEDS = {
    JobState.CLAIMED: "claimed",
    JobState.EXECUTED: "claimed",
    JobState.COMMITTED: "committed",
    JobState.REVEALED: "revealed",
}


def _missing_on_chain(rec: TrackedJob, slot: Slot | None) -> tuple[JobState, str] | None:
    """Where `rec` must go back to when a transaction its state rests on is not on chain
    (a reorg dropped it): (state, note), or None when the chain holds all of them. Each
    transaction is mined before its state is recorded, so only a reorg removes one."""
    needs = _NEEDS.get(rec.state)
    if needs is None:
        return None
    if slot is None:
        return JobState.SEEN, "our claim is no longer on chain (dropped by a reorg)"
    if needs in ("committed", "revealed") and not slot.committed:
        return JobState.EXECUTED, "our commit is no longer on chain (dropped by a reorg)"
    if needs == "revealed" and not slot.revealed:
        return JobState.COMMITTED, "our reveal is no longer on chain (dropped by a reorg)"
    return None


def _outcome_note(job: OnChainJob, ours: bytes | None, slot: Slot | None = None) -> str:
    if slot is not None and slot.refuted:
        return "finalized: our slot was refuted by a dispute"
    if slot is not None and slot.undecided:
        return "finalized: a dispute on our slot ended without a verdict, so it did not count"
    if not job.accepted:
        return "finalized without a majority (refunded)"
    if ours is not None and job.result == ours:
        return "finalized: our result won"
    return "finalized: another result won"
