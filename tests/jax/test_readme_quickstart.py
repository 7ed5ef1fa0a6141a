"""The README's quickstart, run as written (make test-jax): the block's commands in bash, in an
empty directory, with this environment's `vxla` and `python` first on PATH. Only its first
line, the install, is left out: this environment is that install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def quickstart() -> list[str]:
    text = README.read_text()
    start = text.index("<!-- quickstart")
    block = text[text.index("```bash\n", start) + len("```bash\n") :]
    return block[: block.index("```")].splitlines()


def test_the_quickstart_is_short_and_runs_as_written(tmp_path: Path) -> None:
    lines = quickstart()
    assert len(lines) <= 10
    assert lines[0].startswith("pip install")
    script = "set -euo pipefail\n" + "\n".join(lines[1:]) + "\n"
    bin_dir = str(Path(sys.executable).parent)
    environment = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    try:
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600, check=False)
    finally:
        subprocess.run([str(Path(bin_dir) / "vxla"), "devnet", "down"], cwd=tmp_path, capture_output=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "] True\n" in done.stdout, done.stdout  # the outputs, then job.verify().verified
    assert "result: verified" in done.stdout  # vxla verify --devnet .devnet --job 1
