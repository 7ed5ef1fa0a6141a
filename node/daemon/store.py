"""The node's job store: SQLite in WAL mode for jobs, and content-addressed blobs (modules,
inputs, outputs, traces) keyed by the SHA-256 of the bytes: small ones in the same database,
larger ones in a directory.

Every state change is one transaction. A job left `running` by a crash goes back to
`queued` when the store opens: a trace is deterministic, so redoing the job gives the same
digests, and no job is lost. A job whose execution process died (node/daemon/sandbox.py)
is queued once more and failed the second time, so one program cannot keep a node busy
dying on it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from attest.digests import sha256_hex
from core.atomic_files import remove_temporaries, write_bytes_atomic
from node.errors import NodeError
from node.protocol import is_digest
from node.sqlite import Database, storage

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
STATES = (QUEUED, RUNNING, DONE, FAILED)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    module_digest TEXT NOT NULL,
    input_digests TEXT NOT NULL,
    state TEXT NOT NULL,
    output_digests TEXT,
    statement_digest TEXT,
    envelope_digest TEXT,
    error TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    deaths INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, seq);
-- Jobs per state, kept by triggers in the transaction of each change: counting is then
-- constant time however long the node's history (the metrics read it after every job).
CREATE TABLE IF NOT EXISTS job_counts (state TEXT PRIMARY KEY, count INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS job_counts_insert AFTER INSERT ON jobs BEGIN
    UPDATE job_counts SET count = count + 1 WHERE state = NEW.state;
END;
CREATE TRIGGER IF NOT EXISTS job_counts_update AFTER UPDATE OF state ON jobs WHEN OLD.state != NEW.state BEGIN
    UPDATE job_counts SET count = count - 1 WHERE state = OLD.state;
    UPDATE job_counts SET count = count + 1 WHERE state = NEW.state;
END;
CREATE TRIGGER IF NOT EXISTS job_counts_delete AFTER DELETE ON jobs BEGIN
    UPDATE job_counts SET count = count - 1 WHERE state = OLD.state;
END;
"""


class BlobError(NodeError, ValueError):
    """A blob that is missing, or whose bytes no longer hash to its digest."""


class BlobDamaged(BlobError):
    """A blob whose stored bytes no longer hash to its digest: the node's fault, repaired
    when the blob is stored again."""


Method = TypeVar("Method", bound=Callable[..., Any])


def _stored(method: Method) -> Method:
    """A store operation whose OS and SQLite failures are StorageErrors naming the store's
    directory and the reason (full, read-only, damaged), never raw exceptions."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with storage(str(self.directory if isinstance(self, BlobStore) else self.data_dir)):
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


@dataclass(frozen=True)
class StoredJob:
    """One job as stored."""

    id: str
    module_digest: str
    input_digests: tuple[str, ...]
    state: str
    output_digests: tuple[str, ...]
    statement_digest: str | None
    envelope_digest: str | None
    error: str | None
    created_at: float
    updated_at: float
    deaths: int = 0  # times its execution process died while running it

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "module_digest": self.module_digest,
            "input_digests": list(self.input_digests),
            "state": self.state,
            "output_digests": list(self.output_digests),
            "statement_digest": self.statement_digest,
            "envelope_digest": self.envelope_digest,
            "error": self.error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "deaths": self.deaths,
        }


# Blobs up to this size are rows of the job database, larger ones files: many small blobs
# (a job's outputs and envelope) then cost one fsync'd transaction, where each file costs a
# create, an fsync and a rename.
SMALL_BLOB_BYTES = 64 * 1024

_BLOB_SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (
    digest TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
"""


class BlobStore:
    """Bytes named by their SHA-256: small ones (`SMALL_BLOB_BYTES`) in the `blobs` table of
    `database`, larger ones as files under `directory/ab/abcdef...`."""

    def __init__(self, directory: Path, database: Database) -> None:
        """Opens (or creates) the store; temporary files of writes a crash interrupted are
        deleted (the store is opened once, before anything writes to it)."""
        self.directory = directory
        self._database = database
        directory.mkdir(parents=True, exist_ok=True)
        database.connection.executescript(_BLOB_SCHEMA)
        self.removed_temporaries = remove_temporaries(directory, "??")

    def path(self, digest: str) -> Path:
        """Where a blob larger than `SMALL_BLOB_BYTES` is kept."""
        if not is_digest(digest):
            raise BlobError(f"{digest!r} is not a lower-case hex SHA-256")
        return self.directory / digest[:2] / digest

    def put(self, data: bytes) -> str:
        """Stores `data` durably (a reader never sees a partial blob); returns its digest."""
        return self.put_all([data])[0]

    @_stored
    def put_all(self, blobs: Sequence[bytes]) -> list[str]:
        """Stores each of `blobs` durably, the small ones in one transaction; their digests."""
        with self._database.transaction() as db:
            return self.put_in(db, blobs)

    def put_in(self, db: sqlite3.Connection, blobs: Sequence[bytes]) -> list[str]:
        """Stores `blobs` as part of the caller's transaction `db`: the small ones are rows
        of it, the large ones files written (durably) before it commits. Their digests."""
        digests = [sha256_hex(data) for data in blobs]
        rows = []
        for digest, data in zip(digests, blobs, strict=True):
            if len(data) <= SMALL_BLOB_BYTES:
                rows.append((digest, data))
                continue
            path = self.path(digest)
            if not self._intact(path, digest):
                path.parent.mkdir(parents=True, exist_ok=True)
                write_bytes_atomic(path, data)
        # REPLACE: a row whose bytes were damaged is repaired by storing its blob again.
        db.executemany("INSERT OR REPLACE INTO blobs (digest, data) VALUES (?, ?)", rows)
        return digests

    @staticmethod
    def _intact(path: Path, digest: str) -> bool:
        """Whether the file of a large blob exists and still hashes to its digest (a damaged
        one is written again when its blob is stored again)."""
        try:
            with path.open("rb") as handle:
                return hashlib.file_digest(handle, "sha256").hexdigest() == digest
        except FileNotFoundError:
            return False

    @_stored
    def has(self, digest: str) -> bool:
        if not is_digest(digest):
            return False
        if self._database.rows("SELECT 1 FROM blobs WHERE digest = ?", (digest,)):
            return True
        return self.path(digest).is_file()

    @_stored
    def get(self, digest: str) -> bytes:
        """The bytes of `digest`, re-hashed: corrupted bytes are an error, never served."""
        path = self.path(digest)  # refuses what is not a digest
        rows = self._database.rows("SELECT data FROM blobs WHERE digest = ?", (digest,))
        if rows:
            data = bytes(rows[0][0])
        else:
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise BlobError(f"blob {digest}: unknown") from None
        if sha256_hex(data) != digest:
            raise BlobDamaged(f"blob {digest}: this node's stored copy is damaged (its bytes no longer match the digest); storing the blob again repairs it")
        return data

    @_stored
    def count(self) -> int:
        (rows,) = self._database.rows("SELECT COUNT(*) FROM blobs")[0]
        return rows + sum(1 for p in self.directory.glob("??/*") if is_digest(p.name))


class JobStore:
    """Jobs in SQLite (WAL) plus their blobs. Safe to share between threads: one connection
    guarded by a lock (SQLite serializes writers anyway)."""

    def __init__(self, data_dir: str | Path) -> None:
        """Opens (or creates) the store in `data_dir`; StorageError naming the problem when
        it cannot be written or is damaged."""
        self.data_dir = Path(data_dir)
        with storage(str(self.data_dir)):
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._database = Database(self.data_dir / "jobs.sqlite3", rows_by_name=True)
            try:
                self.blobs = BlobStore(self.data_dir / "blobs", self._database)
                self._db = self._database.connection
                self._migrate()
                self._db.executescript(_SCHEMA)
                self._recount()
                self.requeued = self._requeue_running()
            except BaseException:
                self._database.close()
                raise

    @_stored
    def check_writable(self) -> None:
        """Writes, syncs and removes a small file beside the database: StorageError when the
        store could not take a write now (a full or read-only disk). /readyz asks this."""
        write_bytes_atomic(self.data_dir / ".write-check", bytes(4096))
        (self.data_dir / ".write-check").unlink()

    def _migrate(self) -> None:
        """Brings a store made by an earlier vxla to this schema: the job column trace_digest
        became statement_digest (the same value, renamed), and deaths was added."""
        columns = [row["name"] for row in self._db.execute("PRAGMA table_info(jobs)")]
        if "trace_digest" in columns:
            self._db.execute("ALTER TABLE jobs RENAME COLUMN trace_digest TO statement_digest")
        if columns and "deaths" not in columns:
            self._db.execute("ALTER TABLE jobs ADD COLUMN deaths INTEGER NOT NULL DEFAULT 0")

    def close(self) -> None:
        self._database.close()

    def _transaction(self, *, durable: bool = True) -> AbstractContextManager[sqlite3.Connection]:
        return self._database.transaction(durable=durable)

    def _recount(self) -> None:
        """Sets the per-state counts from the jobs themselves, once at open (a store of an
        earlier vxla has none; the triggers keep them from here on)."""
        with self._transaction() as db:
            db.execute("DELETE FROM job_counts")
            db.executemany("INSERT INTO job_counts (state, count) VALUES (?, 0)", [(state,) for state in STATES])
            db.execute(
                "UPDATE job_counts SET count = (SELECT COUNT(*) FROM jobs WHERE jobs.state = job_counts.state)"
            )

    def _requeue_running(self) -> list[str]:
        """Jobs a crash left `running` go back to `queued` (redoing one is deterministic)."""
        with self._transaction() as db:
            ids = [r["id"] for r in db.execute("SELECT id FROM jobs WHERE state = ?", (RUNNING,))]
            db.execute(
                "UPDATE jobs SET state = ?, updated_at = ? WHERE state = ?",
                (QUEUED, time.time(), RUNNING),
            )
        return ids

    @_stored
    def add_job(self, module_digest: str, input_digests: Sequence[str], new_blobs: Sequence[bytes] = ()) -> StoredJob:
        """A new queued job. Its blobs must be stored already or be among `new_blobs`, which
        are stored with the job in one transaction: both, or neither."""
        now = time.time()
        with self._transaction() as db:
            stored = set(self.blobs.put_in(db, new_blobs))
            for digest in (module_digest, *input_digests):
                if digest not in stored and not self.blobs.has(digest):
                    raise BlobError(f"blob {digest}: unknown")
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM jobs").fetchone()[0]
            # The id binds the job to its content and its place in this node's queue.
            job_id = sha256_hex(
                json.dumps([seq, module_digest, list(input_digests), now]).encode()
            )[:32]
            db.execute(
                "INSERT INTO jobs (id, seq, module_digest, input_digests, state, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (job_id, seq, module_digest, json.dumps(list(input_digests)), QUEUED, now, now),
            )
            return _job(db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

    @_stored
    def withdraw(self, job_id: str) -> bool:
        """Removes a job still queued, whose submission failed after it was stored (its
        token's charge could not be); False when a worker has taken it already. Its blobs
        stay: they are named by their content, and may be another job's too."""
        with self._transaction() as db:
            return db.execute("DELETE FROM jobs WHERE id = ? AND state = ?", (job_id, QUEUED)).rowcount == 1

    @_stored
    def get(self, job_id: str) -> StoredJob | None:
        rows = self._database.rows("SELECT * FROM jobs WHERE id = ?", (job_id,))
        return _job(rows[0]) if rows else None

    @_stored
    def jobs(self) -> list[StoredJob]:
        return [_job(r) for r in self._database.rows("SELECT * FROM jobs ORDER BY seq")]

    @_stored
    def recent_jobs(self, limit: int, state: str | None = None, before: str | None = None) -> list[StoredJob]:
        """Up to `limit` jobs, newest first: only those in `state` when given, and only those
        queued before job `before` (the last of a previous page; [] if unknown)."""
        query, params = "SELECT * FROM jobs WHERE 1 = 1", []
        if state is not None:
            query += " AND state = ?"
            params.append(state)
        if before is not None:
            query += " AND seq < (SELECT seq FROM jobs WHERE id = ?)"
            params.append(before)
        rows = self._database.rows(query + " ORDER BY seq DESC LIMIT ?", (*params, limit))
        return [_job(r) for r in rows]

    @_stored
    def counts(self) -> dict[str, int]:
        """Jobs per state (every state present, zero when none)."""
        rows = self._database.rows("SELECT state, count FROM job_counts")
        counts = dict.fromkeys(STATES, 0)
        counts.update({r[0]: r[1] for r in rows})
        return counts

    @_stored
    def claim_next(self) -> StoredJob | None:
        """The oldest queued job, now `running`; None when the queue is empty. The claim is
        not synced to disk: if a power loss undoes it the job is queued, and a running job
        is put back in the queue at start anyway."""
        with self._transaction(durable=False) as db:
            return _claim_in(db)

    @_stored
    def finish(
        self,
        job_id: str,
        output_digests: Sequence[str],
        statement_digest: str,
        envelope_digest: str,
        new_blobs: Sequence[bytes] = (),
        *,
        claim_next: bool = False,
    ) -> StoredJob | None:
        """Marks a running job done. `statement_digest` names the deterministic execution (the
        same on every honest node and every redo); `envelope_digest` is the blob of the signed
        DSSE envelope. The output and envelope blobs are either stored already or among
        `new_blobs`, which are stored in the same transaction (one commit a job, and no
        outputs without their job's record). With `claim_next`, the same transaction also
        claims the next queued job (see `claim_next`) and returns it: a busy worker's one
        commit a job."""
        with self._transaction() as db:
            self.blobs.put_in(db, new_blobs)
            _set_in(
                db, job_id, DONE, output_digests=json.dumps(list(output_digests)),
                statement_digest=statement_digest, envelope_digest=envelope_digest, error=None,
            )  # fmt: skip
            return _claim_in(db) if claim_next else None

    @_stored
    def fail(self, job_id: str, error: str) -> None:
        """Marks a running job failed with `error`."""
        self._set(job_id, FAILED, error=error)

    @_stored
    def record_death(self, job_id: str, error: str) -> bool:
        """A running job whose execution process died: queued once more the first time (the
        death may have had another cause), failed with `error` the second. Returns whether
        it was queued again."""
        with self._transaction() as db:
            row = db.execute("SELECT deaths FROM jobs WHERE id = ? AND state = ?", (job_id, RUNNING)).fetchone()
            if row is None:
                raise ValueError(f"job {job_id}: not running")
            again = row["deaths"] == 0
            db.execute(
                "UPDATE jobs SET state = ?, updated_at = ?, deaths = deaths + 1, error = ? WHERE id = ?",
                (QUEUED if again else FAILED, time.time(), None if again else error, job_id),
            )
        return again

    @_stored
    def requeue(self, job_id: str) -> None:
        """Puts a running job back in the queue (shutdown before it finished)."""
        self._set(job_id, QUEUED)

    def _set(self, job_id: str, state: str, **columns: str | None) -> None:
        with self._transaction() as db:
            _set_in(db, job_id, state, **columns)


def _set_in(db: sqlite3.Connection, job_id: str, state: str, **columns: str | None) -> None:
    """Moves a running job to `state` with `columns`, in the caller's transaction `db`;
    ValueError when it is not running."""
    assignments = "".join(f", {name} = ?" for name in columns)
    cursor = db.execute(
        f"UPDATE jobs SET state = ?, updated_at = ?{assignments} WHERE id = ? AND state = ?",
        (state, time.time(), *columns.values(), job_id, RUNNING),
    )
    if cursor.rowcount != 1:
        raise ValueError(f"job {job_id}: not running")


def _claim_in(db: sqlite3.Connection) -> StoredJob | None:
    """The oldest queued job, moved to `running` in the caller's transaction `db`."""
    row = db.execute("SELECT * FROM jobs WHERE state = ? ORDER BY seq LIMIT 1", (QUEUED,)).fetchone()
    if row is None:
        return None
    now = time.time()
    db.execute("UPDATE jobs SET state = ?, updated_at = ? WHERE id = ?", (RUNNING, now, row["id"]))
    return replace(_job(row), state=RUNNING, updated_at=now)


def _job(row: sqlite3.Row) -> StoredJob:
    return StoredJob(
        id=row["id"],
        module_digest=row["module_digest"],
        input_digests=tuple(json.loads(row["input_digests"])),
        state=row["state"],
        output_digests=tuple(json.loads(row["output_digests"] or "[]")),
        statement_digest=row["statement_digest"],
        envelope_digest=row["envelope_digest"],
        error=row["error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        deaths=row["deaths"],
    )
