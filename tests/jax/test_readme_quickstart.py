"""The README's quickstart the way a newcomer meets it (make test-jax, so in CI): a clean clone
of this checkout's HEAD, a fresh virtual environment, no contracts/node_modules, and the
block's lines run as written in bash from the clone's root, the install line included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
README = CHECKOUT / "README.md"


def quickstart() -> list[str]:
    text = README.read_text()
    start = text.index("<!-- quickstart")
    block = text[text.index("```bash\n", start) + len("```bash\n") :]
    return block[: block.index("```")].splitlines()


def newcomer_environment(venv: Path) -> dict[str, str]:
    """The environment of a shell with `venv` activated: its bin first on PATH, nothing of
    this test environment's Python (no PYTHONPATH, no other virtual environment)."""
    kept = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**kept, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}


def test_the_quickstart_runs_as_written_from_a_fresh_clone_in_a_fresh_venv(tmp_path: Path) -> None:
    lines = quickstart()
    assert len(lines) <= 10
    assert lines[0].startswith("pip install")
    clone, venv = tmp_path / "clone", tmp_path / "venv"
    subprocess.run(["git", "clone", "-q", str(CHECKOUT), str(clone)], check=True)
    assert not (clone / "contracts" / "node_modules").exists()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    environment = newcomer_environment(venv)
    script = "set -euo pipefail\n" + "\n".join(lines) + "\n"
    try:
        done = subprocess.run(["bash", "-c", script], cwd=clone, env=environment, capture_output=True, text=True, timeout=900, check=False)
    finally:
        subprocess.run(["vxla", "devnet", "down"], cwd=clone, env=environment, capture_output=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "installing the pinned anvil (npm ci in contracts/, once)" in done.stderr  # nothing was there
    assert "] True\n" in done.stdout, done.stdout  # the outputs, then job.verify().verified
    assert "result: verified" in done.stdout  # vxla verify --devnet .devnet --job 1
