"""Writes tests/fixtures/golden_hashes.json: every fixture's hlo_hash, the digests of the
reference evaluator's outputs on its inputs (the bits every target must give) and, for every
pinned target (the GPU ones' binary_hash covers their cubin), its graph_hash and binary_hash,
with the pipeline_id, LLVM version and linkers (compiler/targets.py) they were made with. Compiling only (no run of machine code), so every target is recorded on any
host.

tests/codegen/test_fixtures_backend.py holds each compile against this manifest: a change of
the optimized graph or of the machine code, or of an output's bits, fails there until it is made on purpose, with a
pass version bump where a pass changed the graph, and this manifest regenerated:

  make golden          (or: python tools/golden_hashes.py [--check])
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from attest.digests import tensor_digest
from compiler.api import (
    ARCHITECTURES,
    TARGET_CPUS,
    compile_program,
    evaluate,
    load_config,
    load_program,
)
from harness.fixture_data import FIXTURE_NAMES, GOLDEN_HASHES_PATH, Fixture

ROOT = Path(__file__).resolve().parent.parent


def manifest() -> dict:
    """The golden manifest of this checkout, compiled afresh (no compile cache)."""
    pinned = load_config()
    fixtures: dict[str, dict] = {}
    started = time.monotonic()
    for index, name in enumerate(FIXTURE_NAMES, 1):
        program = load_program(Fixture(name).module_text)
        targets = {}
        for cpu in TARGET_CPUS:
            hashes = compile_program(program, pinned.with_target(cpu=cpu), cache_dir=False).hashes
            targets[cpu] = {"graph_hash": hashes["graph_hash"], "binary_hash": hashes["binary_hash"]}
        # The reference's outputs on the fixture's inputs: the bits every target must give, kept
        # so that a change of the backend can be seen to leave them unchanged.
        outputs = [tensor_digest(o) for o in evaluate(program.module, Fixture(name).inputs())]
        fixtures[name] = {"hlo_hash": program.hlo_hash, "output_digests": outputs, "targets": targets}
        print(f"  {index}/{len(FIXTURE_NAMES)} {name} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    return {
        "pipeline": pinned.pipeline,
        "pipeline_id": pinned.pipeline_id,
        "llvm_version": pinned.llvm_version,
        "llvmlite_version": pinned.llvmlite_version,
        "linkers": {row.name: f"{row.linker.name} {row.linker.version}" for row in ARCHITECTURES.values() if row.linker},
        "fixtures": fixtures,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with the committed manifest instead of writing it")
    args = parser.parse_args()
    current = manifest()
    if args.check:
        committed = json.loads(GOLDEN_HASHES_PATH.read_text())
        if committed == current:
            print(f"{GOLDEN_HASHES_PATH.name}: all {len(current['fixtures'])} fixtures match")
            return 0
        for name, entry in current["fixtures"].items():
            if committed["fixtures"].get(name) != entry:
                print(f"{name}: differs from {GOLDEN_HASHES_PATH.name}")
        if committed["pipeline_id"] != current["pipeline_id"]:
            print("pipeline_id differs")
        return 1
    GOLDEN_HASHES_PATH.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN_HASHES_PATH.relative_to(ROOT)}: {len(current['fixtures'])} fixtures x {len(TARGET_CPUS)} targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
