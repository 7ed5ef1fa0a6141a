"""The node's chain database: one SQLite file (`<data_dir>/chain.sqlite3`) holding everything
the node knows of the chain beyond the chain itself: each log reader's cursor (the watcher's,
the verifier's) and the logs already applied; each job's progress through claim, execute,
commit, reveal and finalize; the verifier's checks of other nodes' commitments; the record of
every chain job this node executed (what it committed to); the divergence reports naming
where other nodes' traces part from ours; and the transactions the dispute role sent
(node/chain/dispute_role.py), each once.

WAL mode; every change is one transaction, so a crash leaves either the old or the new
state, never half of one. Reorgs: each log reader keeps the hash of the last block of every range it read, so it can
see that the chain it read was replaced and go back to where the two chains part
(`rewind_to_common_block`); and each job that reached a terminal state keeps the head it was
decided at, so a reorg that reaches back past it reopens the job (`reopen_settled_after`).
The file is bound to one chain, contract and account on creation:
opening it for another is refused, because what it records only means something for that
triple. Several components open it (each with its own connection); one connection is safe
to share between threads.

Nodes before schema 4 kept this in two SQLite files and two kinds of JSON side file;
`import_legacy_files` moves them in (and renames the old files `*.migrated`). Schema 5 added
to each job its graph commitment and challenge window (the JobCommitment log) and the
op-trace root this node seals and reveals (docs/disputes.md); a schema 4 file gains those
columns when opened, its rows without them (NULL: see the watcher for what it does with a
job executed before its op-trace root was recorded).
"""

from __future__ import annotations

import enum
import json
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, closing
from dataclasses import dataclass, replace
from pathlib import Path

from node.errors import NodeError
from node.sqlite import Database

SCHEMA_VERSION = 5
# The schemas a file may have and be brought up to SCHEMA_VERSION when opened.
MIGRATABLE = ("4",)
# The log readers, each with its own cursor.
READERS = ("watcher", "verifier")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cursors (reader TEXT PRIMARY KEY, next_block INTEGER NOT NULL);
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
    note TEXT NOT NULL DEFAULT '',
    graph_root BLOB,
    trace_leaves INTEGER,
    challenge_window INTEGER,
    op_trace_root BLOB
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
CREATE TABLE IF NOT EXISTS executed_jobs (
    contract TEXT NOT NULL, job_id INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (contract, job_id)
);
CREATE TABLE IF NOT EXISTS divergence_reports (
    contract TEXT NOT NULL, job_id INTEGER NOT NULL, report TEXT NOT NULL, PRIMARY KEY (contract, job_id)
);
CREATE TABLE IF NOT EXISTS read_blocks (
    reader TEXT NOT NULL, number INTEGER NOT NULL, hash BLOB NOT NULL, PRIMARY KEY (reader, number)
);
CREATE TABLE IF NOT EXISTS settled (job_id INTEGER PRIMARY KEY, head INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS dispute_actions (
    action TEXT PRIMARY KEY, tx_hash BLOB NOT NULL, block INTEGER NOT NULL
);
"""
# How many read ranges keep the hash of their last block: how far back a reorg can be
# traced to the block where the chain the node read and the chain now part.
KEPT_BLOCK_HASHES = 256
# The columns schema 5 added to `jobs` (each NULL in a row from before).
_ADDED_JOB_COLUMNS = (("graph_root", "BLOB"), ("trace_leaves", "INTEGER"), ("challenge_window", "INTEGER"), ("op_trace_root", "BLOB"))


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
    # The job's graph commitment and challenge window (its JobCommitment log); None in a row
    # recorded before schema 5 (the watcher fills them in from the chain).
    graph_root: bytes | None = None
    trace_leaves: int | None = None
    challenge_window: int | None = None
    # The op-trace Merkle root of this node's execution, sealed and revealed with the result
    # digest; None before execution, and in a row executed before schema 5.
    op_trace_root: bytes | None = None

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (the API's chain job list): digests in hex."""
        return {
            "job_id": self.job_id, "state": self.state.value, "note": self.note, "submitter": self.submitter,
            "program_digest": self.program_digest.hex(), "inputs_digest": self.inputs_digest.hex(),
            "reward": str(self.reward), "k": self.k, "commit_deadline": self.commit_deadline,
            "reveal_deadline": self.reveal_deadline, "posted_block": self.posted_block,
            "result_digest": None if self.result_digest is None else self.result_digest.hex(),
            "graph_root": None if self.graph_root is None else self.graph_root.hex(),
            "trace_leaves": self.trace_leaves, "challenge_window": self.challenge_window,
            "op_trace_root": None if self.op_trace_root is None else self.op_trace_root.hex(),
        }  # fmt: skip

    def terms(self) -> tuple[object, ...]:
        """What the JobPosted and JobCommitment logs said of the job: the same job has the
        same terms (the last three are None in a row from before schema 5)."""
        return (self.submitter, self.program_digest, self.inputs_digest, self.reward, self.k,
                self.commit_deadline, self.reveal_deadline, self.graph_root, self.trace_leaves,
                self.challenge_window)  # fmt: skip

    def same_job(self, terms: tuple[object, ...]) -> bool:
        """Whether `terms` (in the order of `terms()`) are this job's: every term this record
        holds is equal (a row from before schema 5 holds no graph commitment, so it is not
        compared)."""
        return len(terms) == len(self.terms()) and all(
            mine is None or mine == theirs for mine, theirs in zip(self.terms(), terms, strict=True)
        )


# The columns of schema 4, which the files of older nodes hold too (import_legacy_files).
_BASE_COLUMNS = (
    "job_id, state, submitter, program_digest, inputs_digest, reward, k, commit_deadline, "
    "reveal_deadline, posted_block, result_digest, envelope_digest, note"
)
_COLUMNS = _BASE_COLUMNS + ", graph_root, trace_leaves, challenge_window, op_trace_root"


def _blob(value: object) -> bytes | None:
    return None if value is None else bytes(value)  # type: ignore[arg-type]


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


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
        _blob(row[10]),
        _blob(row[11]),
        row[12],
        _blob(row[13]),
        _int(row[14]),
        _int(row[15]),
        _blob(row[16]),
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
    """The chain database belongs to another chain, contract or account, or is of another
    version; the message says what to do."""


class ChainState:
    """The node's chain database (see the module docstring)."""

    def __init__(
        self, path: str | Path, *, chain_id: int, contract: str, account: str, start_block: int
    ) -> None:
        """Open (or create) the state at `path` for (`chain_id`, `contract`, `account`);
        a new file starts reading logs at `start_block`."""
        self.path = Path(path)
        self.start_block = start_block
        self._database = Database(path)
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
            if stored.get("schema") in MIGRATABLE and {**stored, "schema": identity["schema"]} == identity:
                _migrate(db)
                stored["schema"] = identity["schema"]
            if not stored:
                db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(identity.items()))
            elif stored.get("schema") != identity["schema"]:
                raise ChainStateError(
                    f"{path} has schema {stored.get('schema')}, this vxla {SCHEMA_VERSION}: open the data "
                    "directory with the vxla that made it, or move the file away to start from the chain"
                )
            elif stored != identity:
                raise ChainStateError(f"chain database {path} is for {stored}, not {identity}")
        self.identity = identity

    def close(self) -> None:
        """Close the database."""
        self._database.close()

    def _tx(self) -> AbstractContextManager[sqlite3.Connection]:
        return self._database.transaction()

    def _rows(self, query: str, params: tuple = ()) -> list[tuple]:  # type: ignore[type-arg]
        return self._database.rows(query, params)

    # -- logs ------------------------------------------------------------------------------

    def next_block(self, reader: str = "watcher") -> int:
        """The first block whose logs `reader` has not applied (start_block at first)."""
        rows = self._rows("SELECT next_block FROM cursors WHERE reader = ?", (reader,))
        return int(rows[0][0]) if rows else self.start_block

    def apply_range(
        self,
        new_jobs: list[tuple[bytes, int, TrackedJob]],
        next_block: int,
        commits: Sequence[tuple[bytes, int, CommitRecord]] = (),
        reader: str = "watcher",
        last_block_hash: bytes | None = None,
    ) -> int:
        """Record the JobPosted logs of one block range (each as (tx hash, log index, job)),
        and the Committed logs a verifier follows (as pending verifications), and move the
        cursor of `reader` to `next_block`, in one transaction; `last_block_hash` is the hash
        of block `next_block - 1` as read. Reading a range twice changes nothing. A posted
        job whose id is known with other terms, or a commitment known with another seal,
        comes from a chain that replaced the one read before: it replaces the old record
        (the job starts over as SEEN, with no execution record). Returns how many jobs were
        new or replaced."""
        added = 0
        with self._tx() as db:
            for tx_hash, log_index, commit in commits:
                db.execute("INSERT OR IGNORE INTO seen_logs VALUES (?, ?)", (tx_hash, log_index))
                cur = db.execute(
                    "UPDATE verifications SET seal = ?, status = ?, local_result = NULL, note = '' "
                    "WHERE job_id = ? AND node = ? AND seal != ?",
                    (commit.seal, VerificationStatus.PENDING.value, commit.job_id, commit.node, commit.seal),
                )
                db.execute(
                    "INSERT OR IGNORE INTO verifications (job_id, node, seal, status) VALUES (?, ?, ?, ?)",
                    (commit.job_id, commit.node, commit.seal, VerificationStatus.PENDING.value),
                )
            for tx_hash, log_index, job in new_jobs:
                db.execute("INSERT OR IGNORE INTO seen_logs VALUES (?, ?)", (tx_hash, log_index))
                known = db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE job_id = ?", (job.job_id,)).fetchone()
                if known is not None:
                    if _record(known).same_job(job.terms()):
                        continue
                    db.execute("DELETE FROM jobs WHERE job_id = ?", (job.job_id,))
                    db.execute("DELETE FROM settled WHERE job_id = ?", (job.job_id,))
                    db.execute("DELETE FROM executed_jobs WHERE contract = ? AND job_id = ?", (self.identity["contract"], job.job_id))
                    job = replace(job, note="replaced: the chain now holds another job under this id")
                cur = db.execute(
                    f"INSERT OR IGNORE INTO jobs ({_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                        job.graph_root,
                        job.trace_leaves,
                        job.challenge_window,
                        job.op_trace_root,
                    ),
                )
                added += cur.rowcount
            db.execute("INSERT OR REPLACE INTO cursors VALUES (?, ?)", (reader, next_block))
            if last_block_hash is not None:
                db.execute("INSERT OR REPLACE INTO read_blocks VALUES (?, ?, ?)", (reader, next_block - 1, last_block_hash))
                db.execute(
                    "DELETE FROM read_blocks WHERE reader = ? AND number NOT IN "
                    "(SELECT number FROM read_blocks WHERE reader = ? ORDER BY number DESC LIMIT ?)",
                    (reader, reader, KEPT_BLOCK_HASHES),
                )
        return added

    def rewind_to_common_block(self, reader: str, block_hash: Callable[[int], bytes | None]) -> int | None:
        """When the chain no longer holds the last block `reader` read (`block_hash(n)`: the
        chain's hash of block n now, None past the head), moves its cursor back to just after
        the newest block it read that the chain still holds (or to `start_block` if none
        is), so the replaced blocks are read again. Returns the new cursor, or None when the
        chain still holds what was read."""
        kept = self._rows("SELECT number, hash FROM read_blocks WHERE reader = ? ORDER BY number DESC", (reader,))
        if not kept or block_hash(int(kept[0][0])) == bytes(kept[0][1]):
            return None
        resume = self.start_block
        for number, stored in kept[1:]:
            if block_hash(int(number)) == bytes(stored):
                resume = int(number) + 1
                break
        with self._tx() as db:
            db.execute("DELETE FROM read_blocks WHERE reader = ? AND number >= ?", (reader, resume))
            db.execute("INSERT OR REPLACE INTO cursors VALUES (?, ?)", (reader, resume))
        return resume

    def seen_log_count(self) -> int:
        """How many logs have been applied (for tests and metrics)."""
        return int(self._rows("SELECT COUNT(*) FROM seen_logs")[0][0])

    # -- jobs ------------------------------------------------------------------------------

    def job(self, job_id: int) -> TrackedJob | None:
        """The record of `job_id`, or None if never seen."""
        rows = self._rows(f"SELECT {_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,))
        return _record(rows[0]) if rows else None

    def jobs(self) -> list[TrackedJob]:
        """Every job, by id."""
        rows = self._rows(f"SELECT {_COLUMNS} FROM jobs ORDER BY job_id")
        return [_record(r) for r in rows]

    def recent_jobs(self, limit: int, state: JobState | None = None, before: int | None = None) -> list[TrackedJob]:
        """Up to `limit` jobs, newest (highest id) first: only those in `state` when given,
        only those below id `before` when given."""
        query, params = f"SELECT {_COLUMNS} FROM jobs WHERE 1 = 1", []
        if state is not None:
            query += " AND state = ?"
            params.append(state.value)
        if before is not None:
            query += " AND job_id < ?"
            params.append(before)
        return [_record(r) for r in self._rows(query + " ORDER BY job_id DESC LIMIT ?", (*params, limit))]

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
        op_trace_root: bytes | None = None,
        head: int | None = None,
    ) -> TrackedJob:
        """Move `job_id` to `state` (and store digests or a note when given), atomically; the
        digests of an execution (`result_digest`, `envelope_digest`, `op_trace_root`) are
        stored together. A terminal state records `head`, the latest block the decision was
        made at (see `reopen_settled_after`)."""
        with self._tx() as db:
            db.execute("UPDATE jobs SET state = ? WHERE job_id = ?", (state.value, job_id))
            if state in TERMINAL and head is not None:
                db.execute("INSERT OR REPLACE INTO settled VALUES (?, ?)", (job_id, head))
            elif state not in TERMINAL:
                db.execute("DELETE FROM settled WHERE job_id = ?", (job_id,))
            if note is not None:
                db.execute("UPDATE jobs SET note = ? WHERE job_id = ?", (note, job_id))
            if result_digest is not None:
                db.execute(
                    "UPDATE jobs SET result_digest = ?, envelope_digest = ?, op_trace_root = ? WHERE job_id = ?",
                    (result_digest, envelope_digest, op_trace_root, job_id),
                )
        record = self.job(job_id)
        if record is None:
            raise KeyError(job_id)
        return record

    def set_commitment(self, job_id: int, graph_root: bytes, trace_leaves: int, challenge_window: int) -> TrackedJob:
        """Fill in the graph commitment and challenge window of a row recorded before schema
        5 (from the chain's record of the job); a row that holds them keeps its own."""
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET graph_root = ?, trace_leaves = ?, challenge_window = ? WHERE job_id = ? AND graph_root IS NULL",
                (graph_root, trace_leaves, challenge_window, job_id),
            )
        record = self.job(job_id)
        if record is None:
            raise KeyError(job_id)
        return record

    def reopen_settled_after(self, block: int) -> list[int]:
        """Jobs decided terminal (done, skipped, expired) at a head at or after `block` go
        back to SEEN, from where the watcher finds again, from chain state, how far each
        has come: a reorg back to `block` may have undone what the decision rested on (a
        finalize, the claims that filled the slots). Returns their ids."""
        with self._tx() as db:
            ids = [int(r[0]) for r in db.execute("SELECT job_id FROM settled WHERE head >= ? ORDER BY job_id", (block,))]
            for job_id in ids:
                db.execute("UPDATE jobs SET state = ?, note = ? WHERE job_id = ?", (JobState.SEEN.value, "reopened after a reorg", job_id))
                db.execute("DELETE FROM settled WHERE job_id = ?", (job_id,))
        return ids

    # -- verifications ---------------------------------------------------------------------

    def verifications(self, status: VerificationStatus | None = None) -> list[CommitRecord]:
        """Recorded commitments of other nodes (optionally only those in `status`), by job, node."""
        query = "SELECT job_id, node, seal, status, local_result, note FROM verifications"
        params: tuple[str, ...] = ()
        if status is not None:
            query += " WHERE status = ?"
            params = (status.value,)
        rows = self._rows(query + " ORDER BY job_id, node", params)
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

    # -- the dispute role's transactions -----------------------------------------------------

    def dispute_action(self, action: str) -> tuple[bytes, int] | None:
        """The transaction (hash, block) the dispute role sent for `action`, or None."""
        rows = self._rows("SELECT tx_hash, block FROM dispute_actions WHERE action = ?", (action,))
        return (bytes(rows[0][0]), int(rows[0][1])) if rows else None

    def record_dispute_action(self, action: str, tx_hash: bytes, block: int) -> None:
        """Records that `action` was sent (mined in `block`), so it is never sent twice."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO dispute_actions VALUES (?, ?, ?)", (action, tx_hash, block))

    def forget_dispute_action(self, action: str) -> None:
        """Forgets an action whose transaction the chain no longer holds (a reorg dropped it)."""
        with self._tx() as db:
            db.execute("DELETE FROM dispute_actions WHERE action = ?", (action,))

    # -- executions and divergence reports (JSON documents of the daemon) ------------------

    def record_execution(self, contract: str, job_id: int, record: dict) -> None:
        """Stores the record of a chain job this node executed (what it commits to)."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO executed_jobs VALUES (?, ?, ?)", (contract.lower(), job_id, _json(record)))

    def execution(self, contract: str, job_id: int) -> dict | None:
        """The record of an executed chain job, or None."""
        rows = self._rows("SELECT record FROM executed_jobs WHERE contract = ? AND job_id = ?", (contract.lower(), job_id))
        return json.loads(rows[0][0]) if rows else None

    def executed_job_ids(self, contract: str) -> list[int]:
        """The chain jobs of `contract` this node executed, by id."""
        return [int(r[0]) for r in self._rows("SELECT job_id FROM executed_jobs WHERE contract = ? ORDER BY job_id", (contract.lower(),))]

    def save_divergence(self, contract: str, job_id: int, report: dict) -> None:
        """Stores (replaces) the divergence report of a job."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO divergence_reports VALUES (?, ?, ?)", (contract.lower(), job_id, _json(report)))

    def divergence(self, contract: str, job_id: int) -> dict | None:
        """The divergence report of a job, or None."""
        rows = self._rows("SELECT report FROM divergence_reports WHERE contract = ? AND job_id = ?", (contract.lower(), job_id))
        return json.loads(rows[0][0]) if rows else None


def _migrate(db: sqlite3.Connection) -> None:
    """Bring a schema 4 file up to SCHEMA_VERSION (in the opening transaction): the columns
    schema 5 added to `jobs`, NULL in every row there."""
    present = {str(row[1]) for row in db.execute("PRAGMA table_info(jobs)")}
    for name, kind in _ADDED_JOB_COLUMNS:
        if name not in present:
            db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")
    db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))


def _json(document: dict) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


# The layout before schema 4: two SQLite files (the watcher's and the verifier's, schema 2
# or 3) and the executor's JSON records, with the divergence reports beside them.
LEGACY_STATE_FILES = {"chain-state.sqlite": "watcher", "chain-verifier.sqlite": "verifier"}
LEGACY_RECORDS_DIR = "chain-jobs"


def import_legacy_files(data_dir: str | Path, state: ChainState) -> list[str]:
    """Moves an older node's chain files in `data_dir` into `state` (its cursors, logs, jobs,
    verifications, execution records and divergence reports) in one transaction, then renames
    them `<name>.migrated`. Idempotent: what is already in `state` is kept. A file for another
    chain, contract or account is refused (ChainStateError) and nothing is changed. Returns
    the names imported."""
    data_dir = Path(data_dir)
    databases = [(data_dir / name, reader) for name, reader in LEGACY_STATE_FILES.items() if (data_dir / name).is_file()]
    records_dir = data_dir / LEGACY_RECORDS_DIR
    if not databases and not records_dir.is_dir():
        return []
    for path, _ in databases:
        with closing(sqlite3.connect(path)) as legacy:
            stored = dict(legacy.execute("SELECT key, value FROM meta").fetchall())
        expected = {key: value for key, value in state.identity.items() if key != "schema"}
        if {key: stored.get(key) for key in expected} != expected or stored.get("schema") not in ("2", "3"):
            raise ChainStateError(
                f"{path} (from an older vxla) is for {stored}, but this node follows {expected}: move the "
                "file away to start from the chain, or set chain.* to what it was"
            )
    imported = []
    with state._database.exclusive() as connection:
        for index, (path, _) in enumerate(databases):
            connection.execute(f"ATTACH DATABASE ? AS legacy{index}", (str(path),))
        try:
            with state._tx() as db:
                for index, (path, reader) in enumerate(databases):
                    schema = f"legacy{index}"
                    envelope = "trace_digest" if _legacy_schema(db, schema) == "2" else "envelope_digest"
                    (next_block,) = db.execute(f"SELECT next_block FROM {schema}.cursor WHERE id = 0").fetchone()
                    db.execute("INSERT OR REPLACE INTO cursors VALUES (?, ?)", (reader, next_block))
                    db.execute(f"INSERT OR IGNORE INTO seen_logs SELECT tx_hash, log_index FROM {schema}.seen_logs")
                    columns = _BASE_COLUMNS.replace("envelope_digest", envelope)
                    db.execute(f"INSERT OR IGNORE INTO jobs ({_BASE_COLUMNS}) SELECT {columns} FROM {schema}.jobs")
                    db.execute(f"INSERT OR IGNORE INTO verifications SELECT job_id, node, seal, status, local_result, note FROM {schema}.verifications")
                    imported.append(path.name)
                if records_dir.is_dir():
                    for path in sorted(records_dir.glob("*.json")):
                        document = json.loads(path.read_text(encoding="utf-8"))
                        if path.name.endswith(".divergence.json"):
                            table = "divergence_reports"
                            contract, job_id = str(document["contract"]), int(document["job_id"])
                        else:
                            document.pop("trace_digest", None)  # repeated envelope_digest under this name
                            table = "executed_jobs"
                            contract, job_id = str(document["contract"]), int(document["job_id"])
                        db.execute(f"INSERT OR IGNORE INTO {table} VALUES (?, ?, ?)", (contract.lower(), job_id, _json(document)))
                    imported.append(LEGACY_RECORDS_DIR)
        finally:
            for index in range(len(databases)):
                connection.execute(f"DETACH DATABASE legacy{index}")
    for path, _ in databases:
        for suffix in ("", "-wal", "-shm"):
            part = path.with_name(path.name + suffix)
            if part.exists():
                part.rename(part.with_name(part.name + ".migrated"))
    if records_dir.is_dir():
        records_dir.rename(records_dir.with_name(records_dir.name + ".migrated"))
    return imported


def _legacy_schema(db: sqlite3.Connection, schema: str) -> str:
    return str(db.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema'").fetchone()[0])
