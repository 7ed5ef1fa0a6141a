"""Who may hand the node work: bearer tokens, their quotas and their rate limits.

With `[auth] required = true` in the node config, the requests that make the node store or
compute something (POST /v1/jobs, PUT /v1/blobs) need `Authorization: Bearer TOKEN`, a token
made by `vxla tokens add NAME`. Reads of results (jobs, traces, blobs by digest, chain state)
stay open: they are public by design, and peers fetch them.

Tokens live in the node's data directory (tokens.sqlite3), stored as their SHA-256 only: the
token itself is printed once, when it is made. Each token has a quota of jobs and of uploaded
bytes (0: none) and a rate limit of requests a minute (a token bucket, kept in memory: a
restart refills it). Refusals: 401 without a known token, 403 over a quota, 429 over the rate,
each naming the reason; a refused request stores nothing and uses nothing of the quota.

A charge and what it pays for are one unit (`Gate.charged`): the token is charged only for a
job or blob that was stored, and a failure of either store (a full disk) is a StorageError,
answered 507 or 503, with nothing stored and nothing charged.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from attest.digests import sha256_hex
from node.errors import NodeError
from node.sqlite import Database, StorageError, storage, storage_error

log = logging.getLogger("vxla.node")
T = TypeVar("T")

TOKEN_PREFIX = "vxla_"
TOKENS_FILE = "tokens.sqlite3"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    name TEXT PRIMARY KEY,
    token_sha256 TEXT NOT NULL UNIQUE,
    max_jobs INTEGER NOT NULL,
    max_bytes INTEGER NOT NULL,
    rate_per_minute INTEGER NOT NULL,
    jobs INTEGER NOT NULL DEFAULT 0,
    bytes INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);
"""


class TokenError(NodeError, ValueError):
    """A token name that is taken, unknown or not allowed."""


class Refused(NodeError):
    """A request the credentials do not allow: `status` is 401, 403 or 429."""

    def __init__(self, status: int, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class ChargeNotStored(StorageError, Generic[T]):
    """The token database failed to commit a charge after the work it pays for was stored:
    `done` is what that work returned (the caller withdraws it, or keeps it uncharged)."""

    def __init__(self, error: StorageError, done: T) -> None:
        super().__init__(str(error), error.status)
        self.done = done


@dataclass(frozen=True)
class Token:
    """A token's record: its name, quotas (0: no limit) and what it has used."""

    name: str
    max_jobs: int
    max_bytes: int
    rate_per_minute: int
    jobs: int
    bytes: int
    created_at: float

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "max_jobs": self.max_jobs,
            "max_bytes": self.max_bytes,
            "rate_per_minute": self.rate_per_minute,
            "jobs": self.jobs,
            "bytes": self.bytes,
            "created_at": self.created_at,
        }


def _valid_name(name: str) -> bool:
    return 0 < len(name) <= 64 and all(c.isalnum() or c in "-_." for c in name)


def _hash(token: str) -> str:
    return sha256_hex(token.encode("utf-8"))


class TokenStore:
    """The tokens of one node's data directory (SQLite, shared with `vxla tokens` while the
    node runs: WAL mode lets both write)."""

    def __init__(self, data_dir: str | Path) -> None:
        directory = Path(data_dir)
        directory.mkdir(parents=True, exist_ok=True)
        self._database = Database(directory / TOKENS_FILE, rows_by_name=True)
        self._database.connection.executescript(_SCHEMA)

    def close(self) -> None:
        self._database.close()

    def add(self, name: str, *, max_jobs: int = 0, max_bytes: int = 0, rate_per_minute: int = 600) -> str:
        """Makes a token for `name` and returns it (the only time it is seen: the store keeps
        its SHA-256)."""
        if not _valid_name(name):
            raise TokenError(f"token name {name!r}: use 1 to 64 letters, digits, '-', '_' or '.'")
        if min(max_jobs, max_bytes, rate_per_minute) < 0:
            raise TokenError("quotas and the rate must not be negative (0: no limit)")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        try:
            with self._database.transaction() as db:
                db.execute(
                    "INSERT INTO tokens (name, token_sha256, max_jobs, max_bytes, rate_per_minute, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (name, _hash(token), max_jobs, max_bytes, rate_per_minute, time.time()),
                )
        except sqlite3.IntegrityError:
            raise TokenError(f"token name {name!r} is taken (vxla tokens remove {name} first)") from None
        return token

    def remove(self, name: str) -> None:
        with self._database.transaction() as db:
            if db.execute("DELETE FROM tokens WHERE name = ?", (name,)).rowcount != 1:
                raise TokenError(f"no token named {name!r}")

    def tokens(self) -> list[Token]:
        """Every token's record, by name."""
        with storage(self._database.path):
            return [_token(r) for r in self._database.rows("SELECT * FROM tokens ORDER BY name")]

    def find(self, token: str) -> Token | None:
        """The record of `token`, None when no token hashes to it."""
        with storage(self._database.path):
            rows = self._database.rows("SELECT * FROM tokens WHERE token_sha256 = ?", (_hash(token),))
        return _token(rows[0]) if rows else None

    def charge(self, name: str, *, jobs: int = 0, nbytes: int = 0) -> None:
        """Adds to a token's use, or raises Refused (403) if that would pass a quota; the check
        and the addition are one transaction, so concurrent requests cannot both pass."""
        self.charge_for(name, lambda: None, jobs=jobs, nbytes=nbytes)

    def charge_for(self, name: str, work: Callable[[], T], *, jobs: int = 0, nbytes: int = 0) -> T:
        """`work()` (what stores the request's job or blob, in its own database), charged to
        token `name` as `charge` does, in a token transaction left open while `work` runs and
        committed after it returned: what `work` raises undoes the charge, so nothing that
        was not stored is charged. Refused (403) before `work` runs past a quota; StorageError
        when the token database fails, ChargeNotStored when it fails after `work` stored."""
        stored: list[T] = []
        in_work = False
        try:
            with self._database.transaction() as db:
                row = db.execute("SELECT * FROM tokens WHERE name = ?", (name,)).fetchone()
                if row is None:
                    raise Refused(401, f"token {name!r} was removed")
                over = over_quota(_token(row), jobs, nbytes)
                if over is not None:
                    raise over
                db.execute("UPDATE tokens SET jobs = jobs + ?, bytes = bytes + ? WHERE name = ?", (jobs, nbytes, name))
                in_work = True
                stored.append(work())
                in_work = False
        except (sqlite3.DatabaseError, OSError) as error:
            # What `work` raised is its own store's (passed on as it is), and constraint
            # violations and misuse are bugs: only the token database's failures are named here.
            if in_work or isinstance(error, (sqlite3.IntegrityError, sqlite3.ProgrammingError)):
                raise
            failure = storage_error(error, self._database.path)
            if stored:  # the commit failed after `work` stored its result
                raise ChargeNotStored(failure, stored[0]) from error
            raise failure from error
        return stored[0]


def over_quota(record: Token, jobs: int, nbytes: int) -> Refused | None:
    """The refusal (403) when `jobs` more jobs or `nbytes` more bytes would pass one of the
    token's quotas, as `record` counts them; None when both fit."""
    if jobs and record.max_jobs and record.jobs + jobs > record.max_jobs:
        return Refused(403, f"token {record.name!r} has used its quota of {record.max_jobs} jobs")
    if nbytes and record.max_bytes and record.bytes + nbytes > record.max_bytes:
        return Refused(403, f"token {record.name!r}: {nbytes} more bytes would pass its quota of {record.max_bytes} ({record.bytes} used)")
    return None


def _token(row: sqlite3.Row) -> Token:
    return Token(row["name"], row["max_jobs"], row["max_bytes"], row["rate_per_minute"], row["jobs"], row["bytes"], row["created_at"])


@dataclass
class RateLimiter:
    """A token bucket per token name: `rate_per_minute` requests a minute, in bursts of up to
    that many."""

    clock: object = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, name: str, rate_per_minute: int) -> None:
        """Takes one request from `name`'s bucket, or raises Refused (429) with the seconds
        until one is free."""
        if rate_per_minute <= 0:
            return
        now = self.clock()  # type: ignore[operator]
        with self._lock:
            level, then = self._buckets.get(name, (float(rate_per_minute), now))
            level = min(float(rate_per_minute), level + (now - then) * rate_per_minute / 60.0)
            if level < 1.0:
                wait = (1.0 - level) * 60.0 / rate_per_minute
                self._buckets[name] = (level, now)
                raise Refused(429, f"token {name!r} is over its rate of {rate_per_minute} requests a minute; retry in {wait:.1f} s", wait)
            self._buckets[name] = (level - 1.0, now)


@dataclass
class Gate:
    """What the API asks before it stores or computes anything: `admit` the request's
    Authorization header (None: no credentials needed)."""

    required: bool
    tokens: TokenStore | None
    limiter: RateLimiter = field(default_factory=RateLimiter)

    def admit(self, authorization: str | None) -> Token | None:
        """The request's token, after its rate limit; None when the node requires none.
        Raises Refused: 401 without a known bearer token, 429 over the rate."""
        if not self.required or self.tokens is None:
            return None
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(401, "this node requires a token: send 'Authorization: Bearer TOKEN' (the node's operator makes one with vxla tokens add NAME)")
        record = self.tokens.find(token.strip())
        if record is None:
            raise Refused(401, "unknown token (it may have been removed)")
        self.limiter.take(record.name, record.rate_per_minute)
        return record

    def may_use(self, token: Token | None, *, jobs: int = 0, nbytes: int = 0) -> None:
        """Raises Refused (403) when `jobs` more jobs or `nbytes` more bytes would pass one of
        the admitted token's quotas, as its record read by `admit` says; charges nothing
        (`charge` does, checking again in its transaction)."""
        over = over_quota(token, jobs, nbytes) if token is not None else None
        if over is not None:
            raise over

    def charge(self, token: Token | None, *, jobs: int = 0, nbytes: int = 0) -> None:
        """Counts what an admitted request uses against its token's quotas (403 past one)."""
        self.charged(token, lambda: None, jobs=jobs, nbytes=nbytes)

    def charged(
        self, token: Token | None, work: Callable[[], T], *, jobs: int = 0, nbytes: int = 0,
        withdraw: Callable[[T], bool] | None = None,
    ) -> T:  # fmt: skip
        """`work()` (storing what an admitted request brings: a job, a blob) and its charge to
        the request's token, as one unit: the token is charged only if `work` stored, and a
        failure of either store is a StorageError (507 full, 503 otherwise) with nothing
        charged. Refused (403) past a quota, before `work` runs.

        The charge commits after `work`'s own commit (two SQLite files cannot commit as one):
        when the charge's commit fails, `withdraw(result)` undoes `work` and the StorageError
        is raised; where nothing can be withdrawn (a blob, a job a worker took already) the
        request stands uncharged, logged: the node's loss, never the submitter's."""
        if token is None or self.tokens is None:
            return work()
        try:
            return self.tokens.charge_for(token.name, work, jobs=jobs, nbytes=nbytes)
        except ChargeNotStored as failed:
            done: T = failed.done
            if withdraw is not None and _withdrawn(withdraw, done):
                raise StorageError(str(failed), failed.status) from None
            log.warning("token %r: its charge could not be stored (%s); the request stands, uncharged", token.name, failed)
            return done


def _withdrawn(withdraw: Callable[[T], bool], done: T) -> bool:
    """Whether `withdraw(done)` undid it; a store that fails to is as if it could not."""
    try:
        return withdraw(done)
    except StorageError as error:
        log.warning("could not withdraw what an uncharged request stored (%s)", error)
        return False
