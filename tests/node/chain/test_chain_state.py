"""The node's chain database: one SQLite file, bound to its chain, contract and account, with a
cursor per log reader; and the import of the layout older nodes kept (two SQLite files, the
executor's JSON records and the divergence reports beside them)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import pytest

from node.chain.state import (
    ChainState,
    ChainStateError,
    CommitRecord,
    JobState,
    TrackedJob,
    import_legacy_files,
)

CONTRACT = "0x" + "ab" * 20
ACCOUNT = "0x" + "cd" * 20

# The layout before schema 4, as those nodes wrote it (schema 2 named envelope_digest
# trace_digest).
LEGACY_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE cursor (id INTEGER PRIMARY KEY CHECK (id = 0), next_block INTEGER NOT NULL);
CREATE TABLE seen_logs (tx_hash BLOB NOT NULL, log_index INTEGER NOT NULL, PRIMARY KEY (tx_hash, log_index));
CREATE TABLE jobs (
    job_id INTEGER PRIMARY KEY, state TEXT NOT NULL, submitter TEXT NOT NULL, program_digest BLOB NOT NULL,
    inputs_digest BLOB NOT NULL, reward INTEGER NOT NULL, k INTEGER NOT NULL, commit_deadline INTEGER NOT NULL,
    reveal_deadline INTEGER NOT NULL, posted_block INTEGER NOT NULL, result_digest BLOB, {envelope} BLOB,
    note TEXT NOT NULL DEFAULT ''
);
CREATE TABLE verifications (
    job_id INTEGER NOT NULL, node TEXT NOT NULL, seal BLOB NOT NULL, status TEXT NOT NULL, local_result BLOB,
    note TEXT NOT NULL DEFAULT '', PRIMARY KEY (job_id, node)
);
"""


def open_state(path: Path, account: str = ACCOUNT) -> ChainState:
    return ChainState(path, chain_id=31337, contract=CONTRACT, account=account, start_block=5)


def tracked(job_id: int, envelope: bytes | None) -> TrackedJob:
    return TrackedJob(job_id, JobState.DONE, ACCOUNT, b"p" * 32, b"i" * 32, 1, 1, 10, 20, 3, b"r" * 32, envelope, "")


def legacy_database(path: Path, schema: int, next_block: int, account: str = ACCOUNT, chain_id: int = 31337, contract: str = CONTRACT) -> None:
    envelope = "trace_digest" if schema == 2 else "envelope_digest"
    with closing(sqlite3.connect(path)) as db, db:
        db.executescript(LEGACY_SCHEMA.format(envelope=envelope))
        meta = {"schema": str(schema), "chain_id": str(chain_id), "contract": contract.lower(), "account": account.lower()}
        db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
        db.execute("INSERT INTO cursor VALUES (0, ?)", (next_block,))
        db.execute("INSERT INTO seen_logs VALUES (?, ?)", (bytes([schema]) * 32, 0))
        if schema == 2:
            db.execute("INSERT INTO jobs VALUES (7, 'done', ?, ?, ?, 1, 1, 10, 20, 3, ?, ?, '')", (ACCOUNT, b"p" * 32, b"i" * 32, b"r" * 32, b"e" * 32))
        else:
            db.execute("INSERT INTO verifications VALUES (8, ?, ?, 'match', ?, '')", ("0x" + "ef" * 20, b"s" * 32, b"r" * 32))


def legacy_layout(data_dir: Path, account: str = ACCOUNT, chain_id: int = 31337, contract: str = CONTRACT, next_block: int = 40) -> None:
    """What an older node left in its data directory: the watcher's state (schema 2), the
    verifier's (schema 3), an execution record and a divergence report of job 7."""
    data_dir.mkdir(parents=True, exist_ok=True)
    legacy_database(data_dir / "chain-state.sqlite", 2, next_block, account, chain_id, contract)
    legacy_database(data_dir / "chain-verifier.sqlite", 3, next_block - 10, account, chain_id, contract)
    records = data_dir / "chain-jobs"
    records.mkdir()
    record = {"job_id": 7, "chain_id": chain_id, "contract": contract, "module_digest": "m", "input_digests": [],
              "output_digests": [], "output_tensor_digests": [], "envelope_digest": "65" * 32,
              "result_digest": "72" * 32, "trace_digest": "65" * 32}  # fmt: skip
    (records / f"{contract.lower()}-7.json").write_text(json.dumps(record))
    report = {"job_id": 7, "contract": contract, "divergences": [], "recorded_block": 12}
    (records / f"{contract.lower()}-7.divergence.json").write_text(json.dumps(report))


def test_each_reader_has_its_own_cursor_and_records_round_trip(tmp_path: Path) -> None:
    state = open_state(tmp_path / "chain.sqlite3")
    assert state.next_block("watcher") == state.next_block("verifier") == 5
    state.apply_range([(b"t" * 32, 0, tracked(7, b"e" * 32))], next_block=9)
    state.apply_range([], 12, [(b"u" * 32, 1, CommitRecord(7, "0x" + "ef" * 20, b"s" * 32))], reader="verifier")
    assert (state.next_block("watcher"), state.next_block("verifier")) == (9, 12)
    state.record_execution(CONTRACT.upper().replace("0X", "0x"), 7, {"job_id": 7})
    state.save_divergence(CONTRACT, 7, {"job_id": 7, "divergences": []})
    state.close()
    reopened = open_state(tmp_path / "chain.sqlite3")
    assert reopened.job(7) == tracked(7, b"e" * 32)
    assert [c.job_id for c in reopened.verifications()] == [7]
    assert reopened.execution(CONTRACT, 7) == {"job_id": 7} and reopened.executed_job_ids(CONTRACT) == [7]
    assert reopened.divergence(CONTRACT, 7) == {"job_id": 7, "divergences": []}
    reopened.close()
    with pytest.raises(ChainStateError, match="is for"):
        open_state(tmp_path / "chain.sqlite3", account="0x" + "00" * 20)


def test_the_older_layout_moves_into_one_database_once(tmp_path: Path) -> None:
    legacy_layout(tmp_path)
    state = open_state(tmp_path / "chain.sqlite3")
    assert import_legacy_files(tmp_path, state) == ["chain-state.sqlite", "chain-verifier.sqlite", "chain-jobs"]
    assert (state.next_block("watcher"), state.next_block("verifier")) == (40, 30)
    job = state.job(7)
    assert job is not None and job.envelope_digest == b"e" * 32 and job.result_digest == b"r" * 32
    assert [(c.job_id, c.status.value) for c in state.verifications()] == [(8, "match")]
    record = state.execution(CONTRACT, 7)
    assert record is not None and "trace_digest" not in record and record["envelope_digest"] == "65" * 32
    assert state.divergence(CONTRACT, 7) == {"job_id": 7, "contract": CONTRACT, "divergences": [], "recorded_block": 12}
    assert state.seen_log_count() == 2
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "chain-state.sqlite.migrated" in names and "chain-verifier.sqlite.migrated" in names and "chain-jobs.migrated" in names
    assert not (tmp_path / "chain-state.sqlite").exists() and not (tmp_path / "chain-jobs").exists()
    assert import_legacy_files(tmp_path, state) == []  # nothing left to move
    state.close()


def test_older_files_of_another_account_are_refused_and_left_alone(tmp_path: Path) -> None:
    legacy_layout(tmp_path, account="0x" + "99" * 20)
    state = open_state(tmp_path / "chain.sqlite3")
    with pytest.raises(ChainStateError, match="move the\\s+file away"):
        import_legacy_files(tmp_path, state)
    assert (tmp_path / "chain-state.sqlite").is_file() and (tmp_path / "chain-jobs").is_dir()
    assert state.job(7) is None and state.next_block() == 5
    state.close()


def test_a_database_of_another_schema_is_refused_with_what_to_do(tmp_path: Path) -> None:
    legacy_database(tmp_path / "old.sqlite", 3, next_block=1)
    with pytest.raises(ChainStateError, match="schema 3"):
        open_state(tmp_path / "old.sqlite")


def test_a_schema_4_database_gains_the_commitment_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    """A node's database from before the dispute game (schema 4) opens: its rows are kept,
    without a graph commitment or an op-trace root (NULL), and new rows carry both."""
    path = tmp_path / "chain.sqlite3"
    with closing(sqlite3.connect(path)) as db, db:
        db.executescript(
            """
            CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE jobs (
                job_id INTEGER PRIMARY KEY, state TEXT NOT NULL, submitter TEXT NOT NULL,
                program_digest BLOB NOT NULL, inputs_digest BLOB NOT NULL, reward INTEGER NOT NULL,
                k INTEGER NOT NULL, commit_deadline INTEGER NOT NULL, reveal_deadline INTEGER NOT NULL,
                posted_block INTEGER NOT NULL, result_digest BLOB, envelope_digest BLOB,
                note TEXT NOT NULL DEFAULT ''
            );
            """
        )
        meta = {"schema": "4", "chain_id": "31337", "contract": CONTRACT, "account": ACCOUNT}
        db.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))
        db.execute("INSERT INTO jobs VALUES (7, 'committed', ?, ?, ?, 1, 1, 10, 20, 3, ?, ?, '')", (ACCOUNT, b"p" * 32, b"i" * 32, b"r" * 32, b"e" * 32))
    state = open_state(path)
    old = state.job(7)
    assert old is not None and old.state == JobState.COMMITTED and old.result_digest == b"r" * 32
    assert (old.graph_root, old.trace_leaves, old.challenge_window, old.op_trace_root) == (None, None, None, None)
    # The same job read again from its logs (now with its commitment) is not another job.
    assert old.same_job(replace(old, graph_root=b"g" * 32, trace_leaves=4, challenge_window=60).terms())
    assert not old.same_job(replace(old, k=2).terms())
    filled = state.set_commitment(7, b"g" * 32, 4, 60)
    assert (filled.graph_root, filled.trace_leaves, filled.challenge_window) == (b"g" * 32, 4, 60)
    new = replace(tracked(8, b"e" * 32), graph_root=b"h" * 32, trace_leaves=0, challenge_window=5, op_trace_root=b"o" * 32)
    state.apply_range([(b"t" * 32, 0, new)], next_block=9)
    assert state.job(8) == new
    state.set_state(8, JobState.EXECUTED, result_digest=b"r" * 32, envelope_digest=b"e" * 32, op_trace_root=b"q" * 32)
    assert state.job(8).op_trace_root == b"q" * 32  # type: ignore[union-attr]
    state.close()
    with closing(sqlite3.connect(path)) as db:
        assert dict(db.execute("SELECT key, value FROM meta"))["schema"] == "5"
    assert open_state(path).job(7) == filled  # opened again: nothing to migrate
