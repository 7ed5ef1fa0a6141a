"""Long work says what it is doing on a terminal: `vxla compile` and `vxla graph` run with
their stderr on a pseudo-terminal (as a user's shell gives them) show rich's spinner with
each stage (the passes, the kernels LLVM compiles, the graph's layout), and with stderr on a
pipe (scripts, CI) print only their results."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from harness.fixture_data import Fixture

ROOT = Path(__file__).resolve().parents[3]
MODULE = str(Fixture("transformer_block").directory / "module.hlo")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _run_on_a_terminal(arguments: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """(exit status, stdout, what the terminal showed on stderr, ANSI codes removed)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "node.cli", *arguments], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other side closed: the process ended
            break
        if not chunk:
            break
        shown += chunk
    stdout = process.stdout.read().decode() if process.stdout else ""
    status = process.wait(timeout=300)
    os.close(leader)
    return status, stdout, ANSI.sub("", shown.decode("utf-8", errors="replace"))


def test_compile_and_graph_say_each_stage_on_a_terminal_and_nothing_on_a_pipe(tmp_path: Path) -> None:
    env = {**os.environ, "VXLA_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200", "TERM": "xterm"}
    status, stdout, shown = _run_on_a_terminal(["compile", MODULE], env)
    assert status == 0 and "binary_hash" in stdout, shown
    assert f"compiling {MODULE}: optimizing" in shown, shown
    assert re.search(rf"compiling {re.escape(MODULE)}: generating machine code for \S+: \d+ kernels, \d+ steps", shown), shown
    status, stdout, shown = _run_on_a_terminal(["graph", MODULE, "--svg", str(tmp_path / "g.svg")], env)
    assert status == 0 and "wrote" in stdout, shown
    assert re.search(r"laying out \d+ instructions with Graphviz", shown), shown
    # On a pipe: the results only.
    piped = subprocess.run([sys.executable, "-m", "node.cli", "graph", MODULE, "--svg", str(tmp_path / "h.svg")], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr


def test_verify_says_each_stage_on_a_terminal(tmp_path: Path) -> None:
    from attest import init_key_files

    keys = init_key_files(tmp_path / "keys")
    fixture = Fixture("transformer_block")
    inputs = [str(p) for p in fixture.input_paths()]
    trace = tmp_path / "trace.json"
    env = {**os.environ, "VXLA_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200", "TERM": "xterm"}
    made = subprocess.run([sys.executable, "-m", "node.cli", "run", MODULE, *inputs, "--trace", str(trace), "--key", str(keys.private_path)], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert made.returncode == 0, made.stderr
    status, stdout, shown = _run_on_a_terminal(["verify", str(trace), "--module", MODULE, "--inputs", *inputs, "--trusted-key", str(keys.public_path)], env)
    assert status == 0 and "verified" in stdout.lower(), (stdout, shown)
    assert f"verifying {trace}: optimizing" in shown and re.search(rf"verifying {re.escape(str(trace))}: re-executing on \S+", shown), shown
