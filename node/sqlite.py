"""How the node keeps SQLite: one connection per database object, shared by its threads under
a lock, WAL mode, synchronous FULL (a change that returned survives a power loss, not only a
process crash; a transaction may opt out when restart repairs its loss) and explicit
transactions, so a crash leaves the old state or the new, never half of one. The job store
and the chain database both open theirs here.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Database:
    """One SQLite file, safe to share between threads."""

    def __init__(self, path: str | Path, *, rows_by_name: bool = False) -> None:
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE in `transaction`).
        self.connection = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        if rows_by_name:
            self.connection.row_factory = sqlite3.Row
        self.lock = threading.RLock()
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """The connection inside one immediate transaction: committed when the block ends,
        rolled back if it raises. With `durable` false the commit is not synced to disk
        (synchronous NORMAL for it): a power loss may undo it, a process crash does not, and
        the next durable commit syncs it too (WAL frames are synced in order). For changes
        whose loss restart repairs anyway."""
        with self.lock:
            if not durable:
                self.connection.execute("PRAGMA synchronous=NORMAL")
            try:
                self.connection.execute("BEGIN IMMEDIATE")
                try:
                    yield self.connection
                except BaseException:
                    self.connection.execute("ROLLBACK")
                    raise
                self.connection.execute("COMMIT")
            finally:
                if not durable:
                    self.connection.execute("PRAGMA synchronous=FULL")

    def rows(self, query: str, params: tuple = ()) -> list:  # type: ignore[type-arg]
        """The rows of one query, read under the lock."""
        with self.lock:
            return self.connection.execute(query, params).fetchall()

    def close(self) -> None:
        with self.lock:
            self.connection.close()
