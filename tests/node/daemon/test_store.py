"""node.daemon.store: blobs are content-addressed and checked on read; job state changes are
transactions; a crash's running jobs are requeued."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from attest.digests import sha256_hex
from node.daemon.store import DONE, FAILED, QUEUED, RUNNING, SMALL_BLOB_BYTES, BlobError, JobStore


def test_blobs_round_trip_and_detect_corruption(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    digest = store.blobs.put(b"hello")
    assert digest == sha256_hex(b"hello")
    assert store.blobs.get(digest) == b"hello"
    assert store.blobs.put(b"hello") == digest and store.blobs.count() == 1
    with sqlite3.connect(tmp_path / "jobs.sqlite3") as db:
        db.execute("UPDATE blobs SET data = ? WHERE digest = ?", (b"jello", digest))
    with pytest.raises(BlobError, match="damaged"):
        store.blobs.get(digest)
    with pytest.raises(BlobError, match="unknown"):
        store.blobs.get("0" * 64)
    with pytest.raises(BlobError, match="not a lower-case hex"):
        store.blobs.get("../etc/passwd")


def test_large_blobs_are_files_small_ones_rows_and_both_are_checked(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    small, large = b"s" * SMALL_BLOB_BYTES, b"L" * (SMALL_BLOB_BYTES + 1)
    digests = store.blobs.put_all([small, large, small])
    assert digests == [sha256_hex(small), sha256_hex(large), sha256_hex(small)]
    assert not store.blobs.path(digests[0]).exists() and store.blobs.path(digests[1]).is_file()
    assert store.blobs.count() == 2 and all(store.blobs.has(d) for d in digests)
    reopened = JobStore(tmp_path)
    assert [reopened.blobs.get(d) for d in digests] == [small, large, small]
    reopened.blobs.path(digests[1]).write_bytes(b"l" * len(large))
    with pytest.raises(BlobError, match="damaged"):
        reopened.blobs.get(digests[1])


def test_finish_stores_the_outputs_and_the_envelope_with_the_job_or_not_at_all(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    module = store.blobs.put(b"module")
    job = store.add_job(module, [])
    assert store.claim_next() is not None
    small, large, envelope = b"out", b"L" * (SMALL_BLOB_BYTES + 1), b'{"envelope": 1}'
    digests = [sha256_hex(b) for b in (small, large, envelope)]
    store.finish(job.id, digests[:2], "ab" * 32, digests[2], new_blobs=[small, large, envelope])
    done = store.get(job.id)
    assert done is not None and done.state == DONE and done.output_digests == tuple(digests[:2])
    assert [store.blobs.get(d) for d in digests] == [small, large, envelope]
    # A job that is no longer running is not finished, and its small blobs are not kept.
    other = b"never stored"
    with pytest.raises(ValueError, match="not running"):
        store.finish(job.id, [sha256_hex(other)], "ab" * 32, sha256_hex(other), new_blobs=[other])
    assert not store.blobs.has(sha256_hex(other))


def test_wal_mode(tmp_path: Path) -> None:
    JobStore(tmp_path).close()
    with sqlite3.connect(tmp_path / "jobs.sqlite3") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_job_lifecycle(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    module = store.blobs.put(b"module")
    a, b = store.blobs.put(b"a"), store.blobs.put(b"b")
    job = store.add_job(module, [a, b])
    assert job.state == QUEUED and job.input_digests == (a, b)
    second = store.add_job(module, [])
    assert store.counts() == {QUEUED: 2, RUNNING: 0, DONE: 0, FAILED: 0}
    claimed = store.claim_next()
    assert claimed is not None and claimed.id == job.id and claimed.state == RUNNING
    store.finish(job.id, [a], b, a)
    done = store.get(job.id)
    assert done is not None and done.state == DONE and done.output_digests == (a,) and done.statement_digest == b
    assert done.envelope_digest == a
    with pytest.raises(ValueError, match="not running"):
        store.fail(job.id, "too late")
    assert store.claim_next().id == second.id  # type: ignore[union-attr]
    store.fail(second.id, "boom")
    assert store.get(second.id).error == "boom"  # type: ignore[union-attr]
    assert store.claim_next() is None


def test_a_finish_claims_the_next_job_in_its_own_commit(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    module = store.blobs.put(b"module")
    first, second, third = (store.add_job(module, []) for _ in range(3))
    assert store.claim_next().id == first.id  # type: ignore[union-attr]
    statements: list[str] = []
    store._database.connection.set_trace_callback(statements.append)
    following = store.finish(first.id, [], "ab" * 32, "cd" * 32, claim_next=True)
    assert statements.count("COMMIT") == 1
    assert following is not None and following.id == second.id and following.state == RUNNING
    assert store.get(second.id) == following
    assert store.get(first.id).state == DONE  # type: ignore[union-attr]
    # A finish that fails claims nothing: the next job stays queued.
    with pytest.raises(ValueError, match="not running"):
        store.finish(first.id, [], "ab" * 32, "cd" * 32, claim_next=True)
    assert store.get(third.id).state == QUEUED  # type: ignore[union-attr]
    assert store.finish(second.id, [], "ab" * 32, "cd" * 32, claim_next=True).id == third.id  # type: ignore[union-attr]
    assert store.finish(third.id, [], "ab" * 32, "cd" * 32, claim_next=True) is None  # the queue is empty
    assert store.counts() == {QUEUED: 0, RUNNING: 0, DONE: 3, FAILED: 0}


def test_unknown_blob_refused_and_nothing_stored(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    with pytest.raises(BlobError, match="unknown"):
        store.add_job("f" * 64, [])
    assert store.jobs() == []


def test_running_jobs_requeued_on_open(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.add_job(store.blobs.put(b"m"), [])
    store.claim_next()
    store.close()  # as if the process died mid-job
    reopened = JobStore(tmp_path)
    assert reopened.requeued == [job.id]
    assert reopened.get(job.id).state == QUEUED  # type: ignore[union-attr]
    assert reopened.claim_next().id == job.id  # type: ignore[union-attr]


def test_temporary_files_of_interrupted_writes_are_removed_on_open(tmp_path: Path) -> None:
    """A process killed inside `write_atomic` leaves its hidden temporary file; the next open
    deletes it and leaves every blob alone."""
    store = JobStore(tmp_path)
    kept = store.blobs.put(b"a finished blob")
    store.close()
    digest = sha256_hex(b"an interrupted blob")
    folder = tmp_path / "blobs" / digest[:2]
    folder.mkdir(exist_ok=True)
    leftover = folder / f".{digest}.k3j2_x9a"
    leftover.write_bytes(b"an interr")  # the bytes written before the kill
    reopened = JobStore(tmp_path)
    assert reopened.blobs.removed_temporaries == [leftover]
    assert not leftover.exists() and not reopened.blobs.has(digest)
    assert reopened.blobs.get(kept) == b"a finished blob"
    assert [p.name for p in (tmp_path / "blobs").rglob("*") if p.is_file()] == []  # kept is a row


def test_a_store_of_the_earlier_schema_is_migrated_on_open(tmp_path: Path) -> None:
    # Earlier stores named the statement digest column trace_digest.
    store = JobStore(tmp_path)
    module = store.blobs.put(b"module")
    job = store.add_job(module, [])
    store.claim_next()
    store.finish(job.id, [], "ab" * 32, "cd" * 32)
    store.close()
    with sqlite3.connect(tmp_path / "jobs.sqlite3") as db:
        db.execute("ALTER TABLE jobs RENAME COLUMN statement_digest TO trace_digest")
    reopened = JobStore(tmp_path)
    done = reopened.get(job.id)
    assert done is not None and done.statement_digest == "ab" * 32 and done.envelope_digest == "cd" * 32
    assert done.to_dict()["statement_digest"] == "ab" * 32


def test_counts_follow_every_change_and_are_rebuilt_for_an_earlier_store(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    module = store.blobs.put(b"module")
    jobs = [store.add_job(module, []) for _ in range(5)]
    for job in jobs[:4]:
        assert store.claim_next().id == job.id  # type: ignore[union-attr]
    store.finish(jobs[0].id, [], "ab" * 32, "cd" * 32)
    store.fail(jobs[1].id, "boom")
    store.requeue(jobs[2].id)
    assert store.record_death(jobs[3].id, "died")  # queued once more

    def counted(path: Path) -> dict[str, int]:
        with sqlite3.connect(path / "jobs.sqlite3") as db:
            found = dict(db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
        return {state: found.get(state, 0) for state in (QUEUED, RUNNING, DONE, FAILED)}

    assert store.counts() == counted(tmp_path) == {QUEUED: 3, RUNNING: 0, DONE: 1, FAILED: 1}
    store.close()
    with sqlite3.connect(tmp_path / "jobs.sqlite3") as db:  # as an earlier vxla left it
        db.execute("DROP TABLE job_counts")
    reopened = JobStore(tmp_path)
    assert reopened.counts() == counted(tmp_path)
