"""The chain watcher's own durable state: the log cursor, the logs already applied, and each
job's progress through claim, execute, commit, reveal and finalize.

One SQLite file per node account, in WAL mode; every change is one transaction, so a crash
leaves either the old or the new state, never half of one. The file is bound to one chain,
contract and account on creation: opening it for another is refused, because the progress
it records only means something for that triple.
"""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from node.errors import NodeError

SCHEMA_VERSION = 3
# Schema 3 renamed jobs.trace_digest to envelope_digest (the same value: the digest of the
# envelope the node revealed); a schema 2 file is migrated when opened.
_MIGRATIONS = {2: "ALTER TABLE jobs RENAME COLUMN trace_digest TO envelope_digest"}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cursor (id INTEGER PRIMARY KEY CHECK (id = 0), next_block INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS seen_logs (
    tx_hash BLOB NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY (tx_hash, log_index)
);
CREATE TABLE IF NOT EXISTS jobs (
    job_id INTEGER PRIMARY KEY,
    state TEXT NOT NULL,
    submitter TEXT NOT NULL,
    program_digest BLOB NOT NULL,
    inputs_digest BLOB NOT NULL,
    reward INTEGER NOT NULL,
    k INTEGER NOT NULL,
    commit_deadline INTEGER NOT NULL,
    reveal_deadline INTEGER NOT NULL,
    posted_block INTEGER NOT NULL,
    result_digest BLOB,
    envelope_digest BLOB,
    note TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS verifications (
    job_id INTEGER NOT NULL,
    node TEXT NOT NULL,
    seal BLOB NOT NULL,
    status TEXT NOT NULL,
    local_result BLOB,
    note TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (job_id, node)
);
"""


class JobState(enum.StrEnum):
    """Where one job stands for this node. Terminal states: SKIPPED, EXPIRED, DONE."""

    SEEN = "seen"  # posted; not yet decided
    SKIPPED = "skipped"  # declined (policy, executor check, no free slot): no slot, no stake at risk
    EXPIRED = "expired"  # the commit phase ended before this node claimed
    CLAIMED = "claimed"  # this node holds a slot; stake locked
    EXECUTED = "executed"  # result and trace digests known, not yet committed
    COMMITTED = "committed"  # seal on chain
    REVEALED = "revealed"  # result and trace digests on chain
    FAILED = "failed"  # claimed but will never commit or reveal (refused, deadline missed)
    DONE = "done"  # finalized on chain (by anyone)


TERMINAL = frozenset({JobState.SKIPPED, JobState.EXPIRED, JobState.DONE})


@dataclass(frozen=True)
class TrackedJob:
    """One row of the jobs table."""

    job_id: int
    state: JobState
    submitter: str
    program_digest: bytes
    inputs_digest: bytes
    reward: int
    k: int
    commit_deadline: int
    reveal_deadline: int
    posted_block: int
    result_digest: bytes | None
    envelope_digest: bytes | None
    note: str


_COLUMNS = (
    "job_id, state, submitter, program_digest, inputs_digest, reward, k, commit_deadline, "
    "reveal_deadline, posted_block, result_digest, envelope_digest, note"
)


def _record(row: tuple) -> TrackedJob:  # type: ignore[type-arg]
    return TrackedJob(
        int(row[0]),
        JobState(row[1]),
        row[2],
        bytes(row[3]),
        bytes(row[4]),
        int(row[5]),
        int(row[6]),
        int(row[7]),
        int(row[8]),
        int(row[9]),
        None if row[10] is None else bytes(row[10]),
        None if row[11] is None else bytes(row[11]),
        row[12],
    )


class VerificationStatus(enum.StrEnum):
    """Outcome of re-executing a job another node committed a result to."""

    PENDING = "pending"  # committed, not yet checked
    MATCH = "match"  # the commitment seals the result our re-execution reached
    MISMATCH = "mismatch"  # it does not: known before any reveal, let alone finalize
    NOT_SAMPLED = "not_sampled"  # outside the configured fraction
    REFUSED = "refused"  # our executor cannot run the job


@dataclass(frozen=True)
class CommitRecord:
    """A Committed log, as a verifier records it (and the outcome of checking it)."""

    job_id: int
    node: str
    seal: bytes
    status: VerificationStatus = VerificationStatus.PENDING
    local_result: bytes | None = None
    note: str = ""


class ChainStateError(NodeError):
    """The state file belongs to another chain, contract or account, or is of another version."""


class ChainState:
    """The watcher's SQLite state (see the module docstring)."""

    def __init__(
        self, path: str | Path, *, chain_id: int, contract: str, account: str, start_block: int
    ) -> None:
        """Open (or create) the state at `path` for (`chain_id`, `contract`, `account`);
        a new file starts reading logs at `start_block`."""
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE in `_tx`).
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        identity = {
            "schema": str(SCHEMA_VERSION),
            "chain_id": str(chain_id),
            "contract": contract.lower(),
            "account": account.lower(),
        }
        with self._tx() as db:
            for statement in _SCHEMA.strip().split(";\n"):
                if statement.strip():
                    db.execute(statement)
            stored = dict(db.execute("SELECT key, value FROM meta").fetchall())
            while stored and int(stored.get("schema", SCHEMA_VERSION)) in _MIGRATIONS:
                version = int(stored["schema"])
                db.execute(_MIGRATIONS[version])
                db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(version + 1),))
                stored["schema"] = str(version + 1)
            if not stored:
                db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(identity.items()))
                db.execute("INSERT INTO cursor VALUES (0, ?)", (start_block,))
            elif stored != identity:
                raise ChainStateError(f"state file {path} is for {stored}, not {identity}")

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- logs ------------------------------------------------------------------------------

    def next_block(self) -> int:
        """The first block whose logs have not been applied."""
        return int(self._db.execute("SELECT next_block FROM cursor WHERE id = 0").fetchone()[0])

    def apply_range(
        self,
        new_jobs: list[tuple[bytes, int, TrackedJob]],
        next_block: int,
        commits: Sequence[tuple[bytes, int, CommitRecord]] = (),
    ) -> int:
        """Record the JobPosted logs of one block range (each as (tx hash, log index, job)),
        and the Committed logs a verifier follows (as pending verifications), and move the
        cursor to `next_block`, in one transaction. A log already applied is ignored, so
        reading a range twice changes nothing. Returns how many jobs were new."""
        added = 0
        with self._tx() as db:
            for tx_hash, log_index, commit in commits:
                cur = db.execute(
                    "INSERT OR IGNORE INTO seen_logs VALUES (?, ?)", (tx_hash, log_index)
                )
                if cur.rowcount == 0:
                    continue
                db.execute(
                    "INSERT OR IGNORE INTO verifications (job_id, node, seal, status) VALUES (?, ?, ?, ?)",
                    (commit.job_id, commit.node, commit.seal, VerificationStatus.PENDING.value),
                )
            for tx_hash, log_index, job in new_jobs:
                cur = db.execute(
                    "INSERT OR IGNORE INTO seen_logs VALUES (?, ?)", (tx_hash, log_index)
                )
                if cur.rowcount == 0:
                    continue
                cur = db.execute(
                    f"INSERT OR IGNORE INTO jobs ({_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        job.job_id,
                        job.state.value,
                        job.submitter,
                        job.program_digest,
                        job.inputs_digest,
                        job.reward,
                        job.k,
                        job.commit_deadline,
                        job.reveal_deadline,
                        job.posted_block,
                        job.result_digest,
                        job.envelope_digest,
                        job.note,
                    ),
                )
                added += cur.rowcount
            db.execute("UPDATE cursor SET next_block = ? WHERE id = 0", (next_block,))
        return added

    def seen_log_count(self) -> int:
        """How many logs have been applied (for tests and metrics)."""
        return int(self._db.execute("SELECT COUNT(*) FROM seen_logs").fetchone()[0])

    # -- jobs ------------------------------------------------------------------------------

    def job(self, job_id: int) -> TrackedJob | None:
        """The record of `job_id`, or None if never seen."""
        row = self._db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return None if row is None else _record(row)

    def jobs(self) -> list[TrackedJob]:
        """Every job, by id."""
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM jobs ORDER BY job_id").fetchall()
        return [_record(r) for r in rows]

    def open_jobs(self) -> list[TrackedJob]:
        """Jobs not in a terminal state, by id."""
        return [j for j in self.jobs() if j.state not in TERMINAL]

    def set_state(
        self,
        job_id: int,
        state: JobState,
        *,
        note: str | None = None,
        result_digest: bytes | None = None,
        envelope_digest: bytes | None = None,
    ) -> TrackedJob:
        """Move `job_id` to `state` (and store digests or a note when given), atomically."""
        with self._tx() as db:
            db.execute("UPDATE jobs SET state = ? WHERE job_id = ?", (state.value, job_id))
            if note is not None:
                db.execute("UPDATE jobs SET note = ? WHERE job_id = ?", (note, job_id))
            if result_digest is not None:
                db.execute(
                    "UPDATE jobs SET result_digest = ?, envelope_digest = ? WHERE job_id = ?",
                    (result_digest, envelope_digest, job_id),
                )
        record = self.job(job_id)
        if record is None:
            raise KeyError(job_id)
        return record

    # -- verifications ---------------------------------------------------------------------

    def verifications(self, status: VerificationStatus | None = None) -> list[CommitRecord]:
        """Recorded commitments of other nodes (optionally only those in `status`), by job, node."""
        query = "SELECT job_id, node, seal, status, local_result, note FROM verifications"
        params: tuple[str, ...] = ()
        if status is not None:
            query += " WHERE status = ?"
            params = (status.value,)
        rows = self._db.execute(query + " ORDER BY job_id, node", params).fetchall()
        return [
            CommitRecord(
                int(r[0]),
                r[1],
                bytes(r[2]),
                VerificationStatus(r[3]),
                None if r[4] is None else bytes(r[4]),
                r[5],
            )
            for r in rows
        ]

    def set_verification(
        self,
        job_id: int,
        node: str,
        status: VerificationStatus,
        *,
        local_result: bytes | None = None,
        note: str = "",
    ) -> None:
        """Record the outcome of checking `node`'s commitment for `job_id`."""
        with self._tx() as db:
            db.execute(
                "UPDATE verifications SET status = ?, local_result = ?, note = ? "
                "WHERE job_id = ? AND node = ?",
                (status.value, local_result, note, job_id, node),
            )
