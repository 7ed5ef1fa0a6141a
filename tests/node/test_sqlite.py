"""node.sqlite: concurrent transactions commit as a group (one commit, each caller's changes
its own savepoint, every caller back only once committed), reads do not wait for writers,
and a commit that opts out of the sync leaves every other one synced."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from node.sqlite import Database


def _database(path: Path) -> tuple[Database, list[str]]:
    """A database with a table t, and the statements its writing connection runs."""
    database = Database(path / "t.sqlite3")
    database.connection.execute("CREATE TABLE t (x INTEGER PRIMARY KEY)")
    statements: list[str] = []
    database.connection.set_trace_callback(statements.append)
    return database, statements


def _wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


class _Writer(threading.Thread):
    """One transaction inserting `value` (raising inside the block when `fail`), run in a
    thread; `error` is what it raised, `returned` when the call came back."""

    def __init__(self, database: Database, value: int, *, fail: bool = False, hold: threading.Event | None = None) -> None:
        super().__init__(daemon=True)
        self.database, self.value, self.fail, self.hold = database, value, fail, hold
        self.error: BaseException | None = None
        self.inside = threading.Event()
        self.returned: float | None = None

    def run(self) -> None:
        try:
            with self.database.transaction() as db:
                db.execute("INSERT INTO t VALUES (?)", (self.value,))
                self.inside.set()
                if self.hold is not None:
                    self.hold.wait(10)
                if self.fail:
                    raise RuntimeError(f"caller {self.value} failed")
        except BaseException as error:  # noqa: BLE001 - handed to the test
            self.error = error
        self.returned = time.monotonic()


def _queue_behind(database: Database, first: _Writer, *others: _Writer) -> None:
    """Starts `first`, which holds the lock inside its block, then `others`, each waiting
    for the lock before the next starts (so they enter in this order), then lets `first` go."""
    first.start()
    assert first.inside.wait(10)
    for count, writer in enumerate(others, start=1):
        writer.start()
        _wait_until(lambda count=count: database._waiting == count)
    assert first.hold is not None
    first.hold.set()
    for writer in (first, *others):
        writer.join(10)
        assert not writer.is_alive()


def test_callers_waiting_for_the_lock_share_one_commit_and_each_returns_once_committed(tmp_path: Path) -> None:
    database, statements = _database(tmp_path)
    first = _Writer(database, 1, hold=threading.Event())
    others = [_Writer(database, value) for value in (2, 3, 4)]
    _queue_behind(database, first, *others)
    assert [w.error for w in (first, *others)] == [None] * 4
    assert statements.count("COMMIT") == 1 and statements.count("BEGIN IMMEDIATE") == 1
    assert statements.count("SAVEPOINT caller") == 4
    # The commit was made by the last one in; the first came back only after it.
    assert first.returned is not None and all(w.returned is not None for w in others)
    assert database.rows("SELECT x FROM t ORDER BY x") == [(1,), (2,), (3,), (4,)]
    # Alone, a transaction commits at once.
    with database.transaction() as db:
        db.execute("INSERT INTO t VALUES (5)")
    assert statements.count("COMMIT") == 2
    assert database.rows("SELECT COUNT(*) FROM t") == [(5,)]


def test_a_caller_that_raises_undoes_its_own_changes_only_even_as_the_last_one_in(tmp_path: Path) -> None:
    database, statements = _database(tmp_path)
    first = _Writer(database, 1, hold=threading.Event())
    failing = _Writer(database, 2, fail=True)
    _queue_behind(database, first, failing)
    assert first.error is None
    assert isinstance(failing.error, RuntimeError) and "caller 2 failed" in str(failing.error)
    assert statements.count("COMMIT") == 1  # made by the failing caller, for the first one
    assert database.rows("SELECT x FROM t") == [(1,)]


def test_a_commit_that_fails_fails_every_caller_of_the_group_and_stores_nothing(tmp_path: Path) -> None:
    database = Database(tmp_path / "fk.sqlite3")
    database.connection.executescript(
        "PRAGMA foreign_keys = ON;"
        "CREATE TABLE parent (id INTEGER PRIMARY KEY);"
        "CREATE TABLE t (x INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);"
        "INSERT INTO parent VALUES (1);"
    )
    hold = threading.Event()
    errors: dict[str, BaseException | None] = {}

    def insert(name: str, parent: int, wait: threading.Event | None = None, inside: threading.Event | None = None) -> None:
        try:
            with database.transaction() as db:
                db.execute("INSERT INTO t (parent) VALUES (?)", (parent,))
                if inside is not None:
                    inside.set()
                if wait is not None:
                    wait.wait(10)
            errors[name] = None
        except BaseException as error:  # noqa: BLE001 - handed to the test
            errors[name] = error

    inside = threading.Event()
    good = threading.Thread(target=insert, args=("good", 1, hold, inside))
    good.start()
    assert inside.wait(10)
    # Its row names no parent: the deferred constraint fails the group's commit.
    bad = threading.Thread(target=insert, args=("bad", 2))
    bad.start()
    _wait_until(lambda: database._waiting == 1)
    hold.set()
    good.join(10)
    bad.join(10)
    assert isinstance(errors["bad"], sqlite3.IntegrityError)  # the committer's own error
    assert isinstance(errors["good"], sqlite3.OperationalError) and "not committed" in str(errors["good"])
    assert database.rows("SELECT COUNT(*) FROM t") == [(0,)]
    assert not database.connection.in_transaction
    with database.transaction() as db:  # the next transaction starts afresh
        db.execute("INSERT INTO t (parent) VALUES (1)")
    assert database.rows("SELECT COUNT(*) FROM t") == [(1,)]


def test_reads_see_the_last_commit_without_waiting_for_a_writer_and_a_writer_sees_its_own(tmp_path: Path) -> None:
    database, _ = _database(tmp_path)
    with database.transaction() as db:
        db.execute("INSERT INTO t VALUES (1)")
    writer = _Writer(database, 2, hold=threading.Event())
    writer.start()
    assert writer.inside.wait(10)
    # The writer holds the lock and its transaction is open: another thread reads at once,
    # and sees the committed row only.
    seen: list[list] = []
    reader = threading.Thread(target=lambda: seen.append(database.rows("SELECT x FROM t")), daemon=True)
    reader.start()
    reader.join(5)
    assert seen == [[(1,)]], "the read waited for the writer"
    assert writer.hold is not None
    writer.hold.set()
    writer.join(10)
    assert database.rows("SELECT x FROM t ORDER BY x") == [(1,), (2,)]
    with database.transaction() as db:
        db.execute("INSERT INTO t VALUES (3)")
        assert database.rows("SELECT COUNT(*) FROM t") == [(3,)]  # its own change, uncommitted
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        database.rows("INSERT INTO t VALUES (4)")  # the reading connections only read


def test_a_commit_that_opts_out_of_the_sync_leaves_every_other_commit_synced(tmp_path: Path) -> None:
    database, statements = _database(tmp_path)
    with database.transaction(durable=False) as db:
        db.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(RuntimeError), database.transaction(durable=False) as db:
        raise RuntimeError("rolled back")
    with database.transaction() as db:
        db.execute("INSERT INTO t VALUES (2)")
    # SQLite fixes a transaction's sync level when it begins: NORMAL is set before BEGIN and
    # FULL is back before the next transaction, after a rollback too.
    relevant = [s for s in statements if s.startswith(("PRAGMA synchronous", "BEGIN", "COMMIT"))]
    assert relevant == [
        "PRAGMA synchronous=NORMAL", "BEGIN IMMEDIATE", "COMMIT", "PRAGMA synchronous=FULL",
        "PRAGMA synchronous=NORMAL", "BEGIN IMMEDIATE", "COMMIT", "PRAGMA synchronous=FULL",
        "BEGIN IMMEDIATE", "COMMIT",
    ]  # fmt: skip
    assert database.connection.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    assert database.rows("SELECT x FROM t ORDER BY x") == [(1,), (2,)]


def test_a_durable_caller_never_commits_unsynced_with_one_that_opted_out(tmp_path: Path) -> None:
    database, statements = _database(tmp_path)
    first = _Writer(database, 1, hold=threading.Event())  # durable, opens the group
    first.start()
    assert first.inside.wait(10)
    unsynced: list[BaseException | None] = []

    def claim() -> None:
        try:
            with database.transaction(durable=False) as db:
                db.execute("INSERT INTO t VALUES (2)")
            unsynced.append(None)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            unsynced.append(error)

    joiner = threading.Thread(target=claim)
    joiner.start()
    _wait_until(lambda: database._waiting == 1)
    assert first.hold is not None
    first.hold.set()
    first.join(10)
    joiner.join(10)
    assert first.error is None and unsynced == [None]
    # The caller that opted out joined the durable group and committed it synced.
    assert statements.count("COMMIT") == 1 and "PRAGMA synchronous=NORMAL" not in statements
    assert database.rows("SELECT COUNT(*) FROM t") == [(2,)]


def test_a_transaction_inside_a_transaction_is_refused_and_the_outer_one_goes_on(tmp_path: Path) -> None:
    database, _ = _database(tmp_path)
    with database.transaction() as db:
        db.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(RuntimeError, match="inside a transaction"), database.transaction():
            pass
    assert database.rows("SELECT x FROM t") == [(1,)]


def test_closing_closes_every_thread_s_reading_connection(tmp_path: Path) -> None:
    database, _ = _database(tmp_path)
    readers: list[sqlite3.Connection] = []

    def read() -> None:
        database.rows("SELECT 1")
        readers.append(database._local.reader)

    thread = threading.Thread(target=read)
    thread.start()
    thread.join(10)
    database.rows("SELECT 1")
    database.close()
    with pytest.raises(sqlite3.ProgrammingError):
        readers[0].execute("SELECT 1")
    with pytest.raises(sqlite3.ProgrammingError):
        database.rows("SELECT 1")
    with pytest.raises(sqlite3.ProgrammingError), database.transaction():
        pass
