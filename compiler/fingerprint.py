"""The compiler's own fingerprint: the SHA-256 over its source files. Whatever the compiler
keeps between processes (compile cache entries, kernel libraries) is keyed by it, so any
change to the code generator, the passes or the numerics starts afresh."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

_SOURCE_ROOT = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(_SOURCE_ROOT.rglob("*.py")):
        digest.update(str(path.relative_to(_SOURCE_ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
