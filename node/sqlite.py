"""How the node keeps SQLite: WAL mode, synchronous FULL (a change that returned survives a
power loss, not only a process crash; a transaction may opt out when restart repairs its
loss) and explicit transactions, so a crash leaves the old state or the new, never half of
one. The job store and the chain database both open theirs here.

Writes go through one connection, shared by the database object's threads under a lock.
Concurrent transactions commit as a group: a caller whose changes are made while other
callers wait for the lock leaves the transaction open for them, and the last one in commits
once for all (one sync where there were several). Each caller's changes are a savepoint of
the group, so one caller's error undoes only its own changes, and every caller returns only
once its changes are committed (or raises if the commit failed).

Reads go through one connection per reading thread: in WAL mode a reader sees the last
committed state and neither waits for a writer (nor its sync) nor holds one up. A thread
inside a transaction reads through the writing connection and sees its own changes.
"""

from __future__ import annotations

import errno
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from node.errors import NodeError

# The most callers one commit serves: bounds how long the first of them waits for it.
MAX_GROUP = 64


@dataclass
class _Group:
    """One open transaction that several callers' changes join, committed once for all."""

    durable: bool  # its commit is synced (synchronous FULL), not NORMAL
    members: int = 0
    committed: threading.Event = field(default_factory=threading.Event)
    error: str | None = None  # why the group's changes were not committed
    cause: sqlite3.Error | None = None  # the SQLite error that ended it, if one did


# What a client is told to wait (Retry-After, in seconds) after the node's storage failed.
STORAGE_RETRY_AFTER_S = 30


class StorageError(NodeError):
    """The node's storage failed: the disk is full, read-only, damaged, or an I/O error. The
    message names the file and the reason; `status` is what the API answers (507 when the
    storage is full, 503 otherwise: the node cannot take the request now)."""

    def __init__(self, message: str, status: int = 503) -> None:
        super().__init__(message)
        self.status = status


# SQLite's primary result codes (the low byte of an extended one).
_SQLITE_READONLY, _SQLITE_CORRUPT, _SQLITE_FULL, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 8, 11, 13, 14, 26


def storage_error(error: BaseException, where: str) -> StorageError:
    """The StorageError an OS or SQLite error at `where` (a file or directory) means."""
    code = getattr(error, "errno", None)
    sqlite_code = (getattr(error, "sqlite_errorcode", None) or 0) & 0xFF
    if code == errno.ENOSPC or sqlite_code == _SQLITE_FULL:
        return StorageError(f"{where}: the node's storage is full ({error})", 507)
    if code in (errno.EROFS, errno.EACCES, errno.EPERM) or sqlite_code in (_SQLITE_READONLY, _SQLITE_CANTOPEN):
        return StorageError(f"{where}: the node's storage cannot be written ({error}; is it read-only, or not there?)")
    if sqlite_code in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return StorageError(f"{where}: the database is damaged ({error}); restore it from a backup or move it away")
    return StorageError(f"{where}: the node's storage failed ({type(error).__name__}: {error})")


@contextmanager
def storage(where: str) -> Iterator[None]:
    """Turns what a storage operation at `where` raises from the OS or SQLite into a
    StorageError naming it (constraint violations and misuse pass through: they are bugs or
    the caller's to handle)."""
    try:
        yield
    except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
        raise
    except (sqlite3.DatabaseError, OSError) as error:
        raise storage_error(error, where) from error


class Database:
    """One SQLite file, safe to share between threads. Opening it checks it (SQLite's
    quick_check): a damaged database is a StorageError, not a node that answers 500s."""

    def __init__(self, path: str | Path, *, rows_by_name: bool = False) -> None:
        self.path = str(path)
        self._rows_by_name = rows_by_name
        with storage(self.path):
            self.connection = self._connect()
            self.connection.execute("PRAGMA journal_mode=WAL")
            self.connection.execute("PRAGMA synchronous=FULL")
            problems = [row[0] for row in self.connection.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            self.connection.close()
            raise StorageError(f"{self.path}: the database is damaged (SQLite's check: {problems[0]}); restore it from a backup or move it away")
        self._lock = threading.RLock()  # the writing connection
        self._arrivals = threading.Lock()
        self._waiting = 0  # callers of `transaction` waiting for the lock
        self._group: _Group | None = None
        self._writer: int | None = None  # the thread inside a transaction's block, if any
        self._exclusive: int | None = None  # the thread inside `exclusive`, if any
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._closed = False

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE in `transaction`).
        connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        if self._rows_by_name:
            connection.row_factory = sqlite3.Row
        return connection

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """The writing connection inside a transaction: the block's changes are committed
        when it ends (perhaps in one commit with other threads' changes, see the module
        docstring; this returns once they are), and undone if it raises. With `durable`
        false the caller does not need the commit synced to disk: a group of such callers
        only commits with synchronous NORMAL (a power loss may undo it, a process crash does
        not, and the next durable commit syncs it too, as WAL frames are synced in order).
        For changes whose loss restart repairs anyway. Transactions do not nest."""
        if self._writer == threading.get_ident():
            # Its commit would wait for the outer block, which waits for it.
            raise RuntimeError("a transaction inside a transaction of the same thread")
        with self._arrivals:
            self._waiting += 1
        self._lock.acquire()
        with self._arrivals:
            self._waiting -= 1
        caller_error: BaseException | None = None
        try:
            group = self._join(durable)
            self._writer = threading.get_ident()
            try:
                self.connection.execute("SAVEPOINT caller")
                try:
                    yield self.connection
                except BaseException as error:
                    caller_error = error
                    self._undo_caller()
                else:
                    self.connection.execute("RELEASE caller")
            except BaseException as error:  # the savepoint's own statements failed
                self._end_group(f"the transaction failed: {error}")
                raise
            finally:
                self._writer = None
            # A caller waiting for the lock joins the group, and the last one in commits.
            joined_later = group.durable and self._waiting and group.members < MAX_GROUP and self._exclusive is None
            if self._group is group and not joined_later:
                try:
                    self._commit(group)
                except sqlite3.Error:
                    # A caller whose changes were undone raises its own error, not the
                    # commit's (the group's other callers hear of that through group.error).
                    if caller_error is None:
                        raise
        finally:
            self._lock.release()
        if caller_error is not None:
            raise caller_error
        group.committed.wait()
        if group.error is not None:
            raise _not_committed(group)

    def _join(self, durable: bool) -> _Group:
        """The open group, or a new one. SQLite fixes a transaction's sync level at its
        start, so a group that is not durable has this caller alone (it commits before it
        lets go of the lock), and a durable group serves callers that are not as well."""
        if self._closed:
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        if self._group is None:
            if not durable:
                self.connection.execute("PRAGMA synchronous=NORMAL")
            try:
                self.connection.execute("BEGIN IMMEDIATE")
            except BaseException:
                self._restore_sync(durable)
                raise
            self._group = _Group(durable=durable)
        self._group.members += 1
        return self._group

    def _restore_sync(self, durable: bool) -> None:
        if not durable:
            self.connection.execute("PRAGMA synchronous=FULL")

    def _undo_caller(self) -> None:
        """Undoes this caller's changes alone; where SQLite has rolled back the whole
        transaction already (some errors do), the group ends without a commit."""
        if self.connection.in_transaction:
            try:
                self.connection.execute("ROLLBACK TO caller")
                self.connection.execute("RELEASE caller")
                return
            except sqlite3.Error:
                pass
        self._end_group("the transaction was rolled back by an error of another change in it")

    def _commit(self, group: _Group) -> None:
        try:
            self.connection.execute("COMMIT")
        except sqlite3.Error as error:
            self._end_group(f"the commit failed: {error}", error)
            raise
        self._group = None
        self._restore_sync(group.durable)
        group.committed.set()

    def _end_group(self, reason: str, cause: sqlite3.Error | None = None) -> None:
        """Rolls back the open group (if SQLite has not) and tells its callers why."""
        group, self._group = self._group, None
        if self.connection.in_transaction:
            with suppress(sqlite3.Error):
                self.connection.execute("ROLLBACK")
        if group is not None:
            with suppress(sqlite3.Error):
                self._restore_sync(group.durable)
            group.error = reason
            group.cause = cause
            group.committed.set()

    @contextmanager
    def exclusive(self) -> Iterator[sqlite3.Connection]:
        """The writing connection outside any transaction, for this thread alone until the
        block ends (to ATTACH another file, say); transactions in the block commit at once."""
        with self._lock:
            if self._group is not None:
                self._commit(self._group)
            self._exclusive = threading.get_ident()
            try:
                yield self.connection
            finally:
                self._exclusive = None

    def rows(self, query: str, params: tuple = ()) -> list:  # type: ignore[type-arg]
        """The rows of one query: from the last committed state through this thread's
        reading connection, or through the writing one inside this thread's transaction."""
        if self._writer == threading.get_ident():
            return self.connection.execute(query, params).fetchall()
        return self._reader().execute(query, params).fetchall()

    def _reader(self) -> sqlite3.Connection:
        reader: sqlite3.Connection | None = getattr(self._local, "reader", None)
        if reader is None:
            with self._arrivals:
                if self._closed:
                    raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
                reader = self._connect()
                reader.execute("PRAGMA query_only=ON")
                self._readers.append(reader)
            self._local.reader = reader
        return reader

    def close(self) -> None:
        """Closes the writing connection and every thread's reading one; a transaction
        still open is rolled back (its callers raise)."""
        with self._lock:
            self._end_group("the database was closed")
            with self._arrivals:
                self._closed = True
                for reader in self._readers:
                    reader.close()
                self._readers.clear()
            self.connection.close()


def _not_committed(group: _Group) -> sqlite3.OperationalError:
    """What a caller whose changes were in a group that did not commit raises: the error of
    the commit, its SQLite code kept (a member of a group whose commit found the disk full is
    told the disk is full, a 507, as the caller that ran the commit is)."""
    error = sqlite3.OperationalError(f"not committed: {group.error}")
    if group.cause is not None:
        error.sqlite_errorcode = getattr(group.cause, "sqlite_errorcode", None)  # type: ignore[attr-defined]
        error.__cause__ = group.cause
    return error
