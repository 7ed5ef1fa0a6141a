"""The persistent compile cache: object bytes and plans keyed by everything that can change
them (the program's hlo_hash, the whole CompilerConfig and the compiler's own source).

A hit re-checks the stored bytes against their recorded binary_hash, so a corrupted or
tampered entry is never run; entries are written to a temporary file and renamed.

Beside the entries, a source index records the hlo_hash this compiler found for the exact
bytes of a source it verified, so `compiler.compile` finds a cached executable without parsing
the module again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from attest.digests import sha256_hex, text_digest
from compiler.atomic_files import write_bytes_atomic
from compiler.codegen.plan import Plan
from compiler.config import CompilerConfig

CACHE_FORMAT = 2  # 2: a plan's buffers are lists of their fields
_SOURCE_ROOT = Path(__file__).resolve().parent


@dataclass
class Entry:
    object_bytes: bytes
    plan: Plan
    graph_hash: str
    binary_hash: str


@lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """SHA-256 over the compiler's source files: any change to the code generator, passes or
    numerics starts a fresh cache."""
    parts = []
    for path in sorted(_SOURCE_ROOT.rglob("*.py")):
        parts.append(str(path.relative_to(_SOURCE_ROOT)).encode())
        parts.append(path.read_bytes())
    return sha256_hex(b"".join(parts))


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


class CompileCache:
    """A directory of entries: <key>.o (object bytes) and <key>.json (plan and hashes), and of
    the source index: <source key>.hlo (the hlo_hash of a verified source)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> Entry | None:
        meta_path, object_path = self.directory / f"{key}.json", self.directory / f"{key}.o"
        try:
            meta = json.loads(meta_path.read_text())
            object_bytes = object_path.read_bytes()
        except (OSError, ValueError):
            self.misses += 1
            return None
        if sha256_hex(object_bytes) != meta.get("binary_hash"):
            self.misses += 1
            return None
        self.hits += 1
        return Entry(object_bytes, Plan.from_json(meta["plan"]), meta["graph_hash"], meta["binary_hash"])

    def put(self, key: str, entry: Entry) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        meta = {"binary_hash": entry.binary_hash, "graph_hash": entry.graph_hash, "plan": entry.plan.to_json()}
        write_bytes_atomic(self.directory / f"{key}.o", entry.object_bytes)
        write_bytes_atomic(self.directory / f"{key}.json", json.dumps(meta).encode())


    def recall_hlo_hash(self, source_hash: str) -> str | None:
        """The hlo_hash this compiler found for the source with `source_hash`, if it verified
        that source before (None otherwise, or when the record is unreadable)."""
        try:
            recorded = (self.directory / f"{source_key(source_hash)}.hlo").read_text()
        except (OSError, ValueError):
            return None
        return recorded if _is_digest(recorded) else None

    def remember_hlo_hash(self, source_hash: str, hlo_hash: str) -> None:
        """Records a verified source's hlo_hash in the source index."""
        path = self.directory / f"{source_key(source_hash)}.hlo"
        if self.recall_hlo_hash(source_hash) != hlo_hash:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(path, hlo_hash.encode())


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
