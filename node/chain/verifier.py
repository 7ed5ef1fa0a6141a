"""The verifier role: re-execute the jobs other nodes committed results to (all of them, or a
configured fraction) and check each commitment against the re-execution as soon as it is on
chain, before any reveal.

A commitment is a seal, keccak256(abi.encode(node, jobId, resultDigest, opTraceRoot))
(`node.protocol.seal_of`), so a verifier that knows the result digest and op-trace root its
own re-execution gives can tell whether a node sealed the same execution without waiting for
the node to reveal it: MATCH or MISMATCH is recorded during the commit phase (a node that
sealed the right result under another op-trace root is a MISMATCH too: its execution
commitment is not the honest one, and a dispute would find where). Finding the first divergent instruction needs the other
node's trace, which nodes serve only once the commit phase is over (before that it would
let a lazy node copy a result); `node.divergence_report` does that part, for every job this
node holds a local execution of, the ones re-executed here included.

It follows the market's `Committed` logs the way the watcher follows `JobPosted` (bounded
ranges trailing the head, applied idempotently, cursor and records in one SQLite
transaction, a cursor of its own, reorgs traced back the same way), so a restart neither
loses nor repeats a check. It sends no transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from attest.digests import sha256_hex
from node.chain import JobMarket, fetch_events
from node.chain.state import ChainState, CommitRecord, VerificationStatus
from node.chain.watcher import ChainJob, ExecutionOutcome, JobExecutor, JobPending
from node.errors import JobRejected
from node.protocol import seal_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VerifierConfig:
    """Tuning of the verifier."""

    fraction: float = 1.0  # share of jobs re-executed, chosen by a per-verifier hash
    confirmations: int = 0
    max_blocks_per_step: int = 2_000
    log_chunk: int = 500


class ChainVerifier:
    """Re-executes sampled jobs other nodes commit to and records the commitments that do
    not seal the re-executed result."""

    def __init__(
        self,
        market: JobMarket,
        address: str,
        executor: JobExecutor,
        state_path: str | Path,
        *,
        config: VerifierConfig | None = None,
        start_block: int = 0,
    ) -> None:
        """`address`: the verifying node (its own commitments are not checked; it also salts
        the sampling so that verifiers pick different jobs). `state_path`: a state file of
        its own (not the watcher's: the two cursors move independently)."""
        self.market = market
        self.client = market.client
        self.address = address
        self.executor = executor
        self.config = config if config is not None else VerifierConfig()
        if not 0.0 <= self.config.fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], got {self.config.fraction}")
        self.chain_id = self.client.chain_id
        self.state = ChainState(
            state_path,
            chain_id=self.chain_id,
            contract=market.address,
            account=address,
            start_block=start_block,
        )
        # Outcomes of this process's re-executions, by job: one run per job however many
        # commitments it has. Not persisted: after a restart a pending job is run again, which
        # is deterministic and so gives the same outcome.
        self._outcomes: dict[int, ExecutionOutcome | str] = {}

    def close(self) -> None:
        """Close the state file."""
        self.state.close()

    def sampled(self, job_id: int) -> bool:
        """Whether this verifier re-executes `job_id`: a hash of (verifier, job) below the
        fraction, so the choice is stable across restarts and differs between verifiers."""
        if self.config.fraction >= 1.0:
            return True
        draw = int(sha256_hex(f"{self.address.lower()}:{job_id}".encode())[:16], 16)
        return draw < self.config.fraction * 2**64

    def step(self) -> list[CommitRecord]:
        """Read the next confirmed range of Committed logs, then check every pending
        commitment; returns the commitments decided in this step."""
        self._poll()
        decided = []
        waiting: set[int] = set()  # jobs whose re-execution is not done: ask once per step
        for commit in self.state.verifications(VerificationStatus.PENDING):
            if commit.job_id in waiting:
                continue
            status, local, note = self._check(commit)
            if status is None:
                waiting.add(commit.job_id)
                continue
            self.state.set_verification(commit.job_id, commit.node, status, local_result=local, note=note)
            if status == VerificationStatus.MISMATCH:
                log.warning("job %d: %s committed to a result that re-execution does not give: %s",
                            commit.job_id, commit.node, note)
            decided.append(CommitRecord(commit.job_id, commit.node, commit.seal, status, local, note))
        return decided

    def mismatches(self) -> list[CommitRecord]:
        """Every recorded commitment that does not seal the re-executed result."""
        return self.state.verifications(VerificationStatus.MISMATCH)

    def _poll(self) -> None:
        # After a reorg deeper than `confirmations` the replaced blocks are read again; a
        # commitment now under another seal is checked again (`ChainState.apply_range`).
        rewound = self.state.rewind_to_common_block("verifier", self.client.block_hash)
        if rewound is not None:
            log.warning("verifier: the chain read was replaced by a reorg; reading again from block %d", rewound)
        start = self.state.next_block("verifier")
        end = min(self.client.block_number() - self.config.confirmations, start + self.config.max_blocks_per_step - 1)
        if end < start:
            return
        before = self.client.block_hash(end)
        events = fetch_events(
            self.client, self.market.contract, start, end, names=("Committed",), chunk=self.config.log_chunk
        )
        commits = [
            (e.tx_hash, e.log_index, CommitRecord(int(e.args["jobId"]), str(e.args["node"]), bytes(e.args["seal"])))
            for e in events
        ]
        if before is not None and self.client.block_hash(end) == before:  # else read again next step
            self.state.apply_range([], end + 1, commits, reader="verifier", last_block_hash=before)

    def _check(self, commit: CommitRecord) -> tuple[VerificationStatus | None, bytes | None, str]:
        if commit.node.lower() == self.address.lower():
            return VerificationStatus.NOT_SAMPLED, None, "own commitment"
        if not self.sampled(commit.job_id):
            return VerificationStatus.NOT_SAMPLED, None, ""
        outcome = self._outcomes.get(commit.job_id)
        if outcome is None:
            j = self.market.get_job(commit.job_id)
            job = ChainJob(
                commit.job_id, j.submitter, j.program_digest, j.inputs_digest, j.reward, j.k,
                j.commit_deadline, j.reveal_deadline, self.chain_id, self.market.address,
                j.graph_root, j.trace_leaves, j.challenge_window,
            )
            try:
                self.executor.check(job)
                outcome = self.executor.execute(job)
            except JobRejected as exc:
                outcome = str(exc)
            except JobPending:
                return None, None, ""
            except Exception as exc:  # transient: checked again next step
                log.warning("job %d: re-execution failed, will retry: %s", commit.job_id, exc)
                return None, None, ""
            self._outcomes[commit.job_id] = outcome
        if isinstance(outcome, str):
            return VerificationStatus.REFUSED, None, outcome
        if seal_of(commit.node, commit.job_id, outcome.result_digest, outcome.op_trace_root) == commit.seal:
            return VerificationStatus.MATCH, outcome.result_digest, ""
        note = (
            f"seal {commit.seal.hex()} is not the seal of the re-executed result "
            f"{outcome.result_digest.hex()} and op-trace root {outcome.op_trace_root.hex()}"
        )
        return VerificationStatus.MISMATCH, outcome.result_digest, note
