"""Files that appear complete or not at all: written beside the target, flushed, renamed.

The one implementation every writer of results uses (compile cache, tensors, pass dumps), so
an interrupted process never leaves a half-written file under the final name.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def write_atomic(path: str | Path, fill: Callable[[BinaryIO], None]) -> None:
    """Creates or replaces `path` with what `fill` writes to the handle it is given."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def is_temporary(path: Path) -> bool:
    """Whether `path` is named like the temporary file of `write_atomic` (".<target>.<random>")."""
    return path.name.startswith(".") and path.name.count(".") >= 2


def remove_temporaries(directory: Path, pattern: str = "*") -> list[Path]:
    """Deletes the temporary files that a process killed during `write_atomic` left in the
    directories matching `pattern` under `directory`; returns them, sorted. Call it only
    while no writer is active in those directories (at startup, before serving)."""
    leftovers = sorted(
        entry
        for folder in [directory, *sorted(directory.glob(pattern))]
        if folder.is_dir()
        for entry in folder.iterdir()
        if entry.is_file() and is_temporary(entry)
    )
    for entry in leftovers:
        entry.unlink(missing_ok=True)
    return leftovers


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Creates or replaces `path` with `data`."""
    write_atomic(path, lambda handle: handle.write(data))


def write_text_atomic(path: str | Path, text: str) -> None:
    """Creates or replaces `path` with `text` as UTF-8."""
    write_bytes_atomic(path, text.encode("utf-8"))
