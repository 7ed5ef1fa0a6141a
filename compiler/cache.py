"""The persistent compile cache: object bytes and plans keyed by everything that can change
them (the program's hlo_hash, the whole CompilerConfig and the compiler's own source).

Nothing read from it is trusted as read: the node's confined execution process writes it, so
whoever runs there can write any file in it. An entry is two files: the object bytes, and a
record of the key, the plan, graph_hash and binary_hash, stored after the SHA-256 of its own
bytes. A hit checks the record against its SHA-256 and its key, and recomputes binary_hash
from the object bytes and the plan as read (compiler/codegen/plan.py `binary_hash`; the
record's stated one is never used). The seal catches bit rot, not an editor, who can reseal;
the binding is binary_hash itself: it covers the plan, which decides what the node reads back
as outputs and signs, so an edited plan runs, if at all, under another binary_hash than the
honest one every verifier's recompilation gives. And since the key pins everything that
decides the honest object and plan, a record whose stated binary_hash is not the recomputed
one is damaged too. A damaged entry is counted (`damaged`) and rebuilt, never used. Files
are written to a temporary file and renamed.

Beside the entries, a source index records the hlo_hash this compiler found for the exact
bytes of a source it verified, so `compiler.compile` finds a cached executable without parsing
the module again; a record holds the hlo_hash and a digest binding it to its source, checked
the same way (a wrong hlo_hash would be recorded in every trace of that source).

Under libraries/ it keeps the objects of kernel libraries (compiler/codegen/kernel_library.py)
by content address, sealed the same way, for every program compiled with this cache: a library
object that is not LLVM's for its IR gives a binary_hash no honest compile gives.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from attest.digests import sha256_hex, text_digest
from compiler.codegen.plan import Plan, binary_hash
from compiler.config import CompilerConfig
from compiler.fingerprint import compiler_fingerprint
from core.atomic_files import write_bytes_atomic

CACHE_FORMAT = 4  # 3: records carry the SHA-256 of their bytes; 4: binary_hash covers the plan


@dataclass
class Entry:
    object_bytes: bytes
    plan: Plan
    graph_hash: str
    binary_hash: str


def cache_key(hlo_hash: str, config: CompilerConfig) -> str:
    material = json.dumps({"format": CACHE_FORMAT, "hlo_hash": hlo_hash, "config": config.as_dict(), "compiler": compiler_fingerprint()}, sort_keys=True)
    return text_digest(material)


def source_key(source_hash: str) -> str:
    """The source index's key for a source's bytes. The hlo_hash of given bytes depends on
    the parser and printer alone, not on the config."""
    material = json.dumps({"format": CACHE_FORMAT, "source_hash": source_hash, "compiler": compiler_fingerprint()}, sort_keys=True)
    return text_digest(material)


def _is_digest(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def _sealed(content: bytes) -> bytes:
    """`content` after the hex SHA-256 of its bytes and a newline."""
    return sha256_hex(content).encode() + b"\n" + content


def _unsealed(data: bytes) -> bytes | None:
    """The content of a sealed record, or None when its digest does not match it."""
    digest, newline, content = data[:64], data[64:65], data[65:]
    if newline != b"\n" or sha256_hex(content).encode() != digest:
        return None
    return content


class CompileCache:
    """A directory of entries: <key>.o (object bytes) and <key>.json (the sealed record of
    the key, plan and hashes), of the source index: <source key>.hlo (the sealed record of
    a verified source's hlo_hash), and of kernel libraries: libraries/<key>.o (sealed)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.hits = 0
        self.misses = 0
        self.damaged = 0  # entries and records found damaged (and not used)

    def get(self, key: str) -> Entry | None:
        """The entry stored under `key`; None when there is none or it is damaged."""
        meta_path, object_path = self.directory / f"{key}.json", self.directory / f"{key}.o"
        try:
            record = meta_path.read_bytes()
            object_bytes = object_path.read_bytes()
        except OSError:
            self.misses += 1
            return None
        entry = _entry_of(key, record, object_bytes)
        if entry is None:
            self.damaged += 1
            self.misses += 1
            return None
        self.hits += 1
        return entry

    def put(self, key: str, entry: Entry) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        record = {"key": key, "binary_hash": entry.binary_hash, "graph_hash": entry.graph_hash, "plan": entry.plan.to_json()}
        write_bytes_atomic(self.directory / f"{key}.o", entry.object_bytes)
        write_bytes_atomic(self.directory / f"{key}.json", _sealed(json.dumps(record).encode()))

    def get_library(self, key: str) -> bytes | None:
        """A kernel library's object stored under its content address (kernel_library.py), or
        None when there is none or it is damaged."""
        if not _is_digest(key):
            return None
        try:
            data = (self.directory / "libraries" / f"{key}.o").read_bytes()
        except OSError:
            return None
        content = _unsealed(data)
        if content is None:
            self.damaged += 1
        return content

    def put_library(self, key: str, object_bytes: bytes) -> None:
        directory = self.directory / "libraries"
        directory.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(directory / f"{key}.o", _sealed(object_bytes))

    def recall_hlo_hash(self, source_hash: str) -> str | None:
        """The hlo_hash this compiler found for the source with `source_hash`, if it verified
        that source before (None otherwise, or when the record is unreadable or damaged)."""
        key = source_key(source_hash)
        try:
            data = (self.directory / f"{key}.hlo").read_bytes()
        except OSError:
            return None
        content = _unsealed(data)
        recorded = content.decode("ascii", "replace").partition(" ") if content is not None else ("", "", "")
        if recorded[0] != key or not _is_digest(recorded[2]):
            self.damaged += 1
            return None
        return recorded[2]

    def remember_hlo_hash(self, source_hash: str, hlo_hash: str) -> None:
        """Records a verified source's hlo_hash in the source index."""
        key = source_key(source_hash)
        if self.recall_hlo_hash(source_hash) != hlo_hash:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(self.directory / f"{key}.hlo", _sealed(f"{key} {hlo_hash}".encode()))


def _entry_of(key: str, record: bytes, object_bytes: bytes) -> Entry | None:
    """The entry a sealed record and object bytes make, or None when either is damaged: the
    record's digest and its key must match, and the binary_hash recomputed from the object
    and the plan as read must be the record's."""
    content = _unsealed(record)
    if content is None:
        return None
    try:
        meta = json.loads(content)
        if meta["key"] != key or not _is_digest(meta["graph_hash"]):
            return None
        plan = Plan.from_json(meta["plan"])
        recomputed = binary_hash(object_bytes, plan)
        if recomputed != meta["binary_hash"]:
            return None
        return Entry(object_bytes, plan, meta["graph_hash"], recomputed)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError):
        return None


def default_directory() -> Path:
    configured = os.environ.get("VXLA_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vxla" / "compile"


def open_cache(setting: str | Path | None | bool) -> CompileCache | None:
    """None or True: the default directory; False: no cache; a path: that directory."""
    if setting is False:
        return None
    if setting is None or setting is True:
        return CompileCache(default_directory())
    return CompileCache(Path(setting))
