"""Files written whole or not at all (core/atomic_files.py): a writer that fails or is killed
mid-write leaves the previous file as it was, and what a killed one left behind is found."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.atomic_files import (
    is_temporary,
    remove_temporaries,
    write_bytes_atomic,
    write_text_atomic,
)


def test_a_write_replaces_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    write_bytes_atomic(target, b"first")
    write_text_atomic(target, "second")
    assert target.read_bytes() == b"second"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    from core.atomic_files import write_atomic

    target = tmp_path / "out.bin"
    write_bytes_atomic(target, b"old")

    def half_then_fail(handle) -> None:  # noqa: ANN001
        handle.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, half_then_fail)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_what_a_killed_writer_leaves_is_a_temporary_that_startup_removes(tmp_path: Path) -> None:
    target = tmp_path / "jobs" / "result.bin"
    target.parent.mkdir()
    write_bytes_atomic(target, b"old")
    code = (
        "import os, signal, sys\n"
        "from core.atomic_files import write_atomic\n"
        "def fill(handle):\n"
        "    handle.write(b'partial'); handle.flush()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        f"write_atomic({str(target)!r}, fill)\n"
    )
    process = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=False)
    assert process.returncode == -signal.SIGKILL
    left = [p for p in target.parent.iterdir() if p != target]
    assert len(left) == 1 and is_temporary(left[0]) and left[0].read_bytes() == b"partial"
    assert target.read_bytes() == b"old"
    assert remove_temporaries(tmp_path) == left
    assert sorted(os.listdir(target.parent)) == ["result.bin"]
