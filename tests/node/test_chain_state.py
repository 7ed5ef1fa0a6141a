"""The chain state file: bound to its chain, contract and account, and migrated from the
schema an earlier vxla wrote."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from node.chain.state import SCHEMA_VERSION, ChainState, JobState, TrackedJob

CONTRACT = "0x" + "ab" * 20
ACCOUNT = "0x" + "cd" * 20


def open_state(path: Path) -> ChainState:
    return ChainState(path, chain_id=31337, contract=CONTRACT, account=ACCOUNT, start_block=5)


def record(job_id: int, envelope: bytes | None) -> TrackedJob:
    return TrackedJob(job_id, JobState.DONE, ACCOUNT, b"p" * 32, b"i" * 32, 1, 1, 10, 20, 3, b"r" * 32, envelope, "")


def test_a_schema_2_file_is_migrated_and_keeps_its_records(tmp_path: Path) -> None:
    path = tmp_path / "chain-state.sqlite"
    state = open_state(path)
    state.apply_range([(b"t" * 32, 0, record(7, b"e" * 32))], next_block=9)
    state.close()
    # What vxla wrote before schema 3: the envelope digest column was called trace_digest.
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE jobs RENAME COLUMN envelope_digest TO trace_digest")
        db.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    migrated = open_state(path)
    job = migrated.job(7)
    assert job is not None and job.envelope_digest == b"e" * 32 and job.result_digest == b"r" * 32
    assert migrated.next_block() == 9
    migrated.close()
    with sqlite3.connect(path) as db:
        assert dict(db.execute("SELECT key, value FROM meta"))["schema"] == str(SCHEMA_VERSION)
