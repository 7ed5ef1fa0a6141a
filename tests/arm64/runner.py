"""Runs fixtures on one target and prints, per fixture, one JSON line: the hashes, the output
digests and the op-level digests. `make test-arm64` runs it under AArch64 emulation (the
compile cache filled natively beforehand, since the objects are byte-identical) and compares
its lines with a native x86 run.

Usage: runner.py CPU FIXTURE...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from attest.digests import tensor_digest  # noqa: E402
from compiler.driver import compile_program  # noqa: E402
from compiler.program import load_program  # noqa: E402
from harness.fixture_data import Fixture  # noqa: E402
from harness.targets import config  # noqa: E402


def describe(cpu: str, name: str, threads: int = 2) -> dict:
    """What the comparison needs of one fixture's run on `cpu`."""
    fixture = Fixture(name)
    executable = compile_program(load_program(fixture.module_text), config(cpu), cache_dir=None)
    run = executable.run_traced(*fixture.inputs(), threads=threads)
    return {
        "fixture": name,
        "cpu": cpu,
        **executable.hashes,
        "outputs": [tensor_digest(o) for o in run.outputs],
        "instructions": [list(record) for record in run.instructions],
    }


def main(argv: list[str]) -> int:
    cpu, names = argv[0], argv[1:]
    for name in names:
        print(json.dumps(describe(cpu, name)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
