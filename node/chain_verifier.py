"""The verifier role (skeleton): re-execute jobs other nodes revealed results for, for a
configured fraction of jobs, and record every reveal that disagrees with the re-execution.

It follows the market's `Revealed` logs the same way the watcher follows `JobPosted` (bounded
ranges trailing the head, applied once by (transaction hash, log index), cursor and records
in one SQLite transaction of its own state file), so a restart neither loses nor repeats a
check. It sends no transaction: what it produces is the record of mismatches, available
before `finalize` settles the quorum.

What it compares: result digests (the tuple digest of the outputs, the same for every honest
node). Trace digests are per node (each names a trace signed by that node's key), so they
are recorded, not compared: finding the first divergent instruction needs the other node's
trace itself (fetched by digest from its endpoint, a later slice) and
`attest.divergence` against the local op-level trace.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from attest.digests import sha256_hex
from node.chain import JobMarket, fetch_events
from node.chain_state import ChainState, RevealRecord, VerificationStatus
from node.watcher import ChainJob, ExecutionOutcome, JobExecutor, JobPending, JobRefused

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VerifierConfig:
    """Tuning of the verifier."""

    fraction: float = 1.0  # share of jobs re-executed, chosen by a per-verifier hash
    confirmations: int = 0
    max_blocks_per_step: int = 2_000
    log_chunk: int = 500


class ChainVerifier:
    """Re-executes sampled jobs after other nodes reveal and records mismatches."""

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
        """`address`: the verifying node (its own reveals are not checked; it also salts
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
        # reveals it has. Not persisted: after a restart a pending job is run again, which
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

    def step(self) -> list[RevealRecord]:
        """Read the next confirmed range of Revealed logs, then check every pending reveal;
        returns the reveals decided in this step."""
        self._poll()
        decided = []
        waiting: set[int] = set()  # jobs whose re-execution is not done: ask once per step
        for reveal in self.state.verifications(VerificationStatus.PENDING):
            if reveal.job_id in waiting:
                continue
            status, local, note = self._check(reveal)
            if status is None:
                waiting.add(reveal.job_id)
                continue
            self.state.set_verification(reveal.job_id, reveal.node, status, local_result=local, note=note)
            if status == VerificationStatus.MISMATCH:
                log.warning("job %d: %s revealed a result that re-execution does not give: %s",
                            reveal.job_id, reveal.node, note)
            decided.append(
                RevealRecord(reveal.job_id, reveal.node, reveal.result_digest, reveal.trace_digest, status, local, note)
            )
        return decided

    def mismatches(self) -> list[RevealRecord]:
        """Every recorded reveal that disagreed with the re-execution."""
        return self.state.verifications(VerificationStatus.MISMATCH)

    def _poll(self) -> None:
        start = self.state.next_block()
        end = min(self.client.block_number() - self.config.confirmations, start + self.config.max_blocks_per_step - 1)
        if end < start:
            return
        events = fetch_events(
            self.client, self.market.contract, start, end, names=("Revealed",), chunk=self.config.log_chunk
        )
        reveals = [
            (
                e.tx_hash,
                e.log_index,
                RevealRecord(
                    int(e.args["jobId"]),
                    str(e.args["node"]),
                    bytes(e.args["resultDigest"]),
                    bytes(e.args["traceDigest"]),
                ),
            )
            for e in events
        ]
        self.state.apply_range([], end + 1, reveals)

    def _check(self, reveal: RevealRecord) -> tuple[VerificationStatus | None, bytes | None, str]:
        if reveal.node.lower() == self.address.lower():
            return VerificationStatus.NOT_SAMPLED, None, "own reveal"
        if not self.sampled(reveal.job_id):
            return VerificationStatus.NOT_SAMPLED, None, ""
        outcome = self._outcomes.get(reveal.job_id)
        if outcome is None:
            j = self.market.get_job(reveal.job_id)
            job = ChainJob(
                reveal.job_id, j.submitter, j.program_digest, j.inputs_digest, j.reward, j.k,
                j.commit_deadline, j.reveal_deadline, self.chain_id, self.market.address,
            )
            try:
                self.executor.check(job)
                outcome = self.executor.execute(job)
            except JobRefused as exc:
                outcome = exc.reason
            except JobPending:
                return None, None, ""
            except Exception as exc:  # transient: checked again next step
                log.warning("job %d: re-execution failed, will retry: %s", reveal.job_id, exc)
                return None, None, ""
            self._outcomes[reveal.job_id] = outcome
        if isinstance(outcome, str):
            return VerificationStatus.REFUSED, None, outcome
        if outcome.result_digest == reveal.result_digest:
            return VerificationStatus.MATCH, outcome.result_digest, ""
        note = (
            f"revealed result {reveal.result_digest.hex()}, re-execution gave "
            f"{outcome.result_digest.hex()}; its trace is {reveal.trace_digest.hex()}"
        )
        return VerificationStatus.MISMATCH, outcome.result_digest, note
