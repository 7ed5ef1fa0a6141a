"""A campaign of the compiler's differential fuzzer: random valid HLO modules
(harness/program_generator.py) on the reference evaluator and on the LLVM backend for every
target this host runs, with 1, 2 and 3 threads, every output compared bit for bit. `make
test` runs a derandomized sample of 8 modules (tests/codegen/test_random_programs.py).

    .venv/bin/python tools/fuzz_backend.py --modules 10000 [--save DIR]

On the first difference, crash or refusal, hypothesis shrinks the module to a small one,
which is printed (and written to DIR with its input seed); the exit status is then 1.
Progress and the totals (modules, instructions) go to standard error.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from harness.fuzzing import check_against_reference, fuzz_settings, report_failure
from harness.program_generator import programs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=1000, help="modules to generate and check (default 1000)")
    parser.add_argument("--save", type=Path, help="directory for the shrunk module of a failure")
    parser.add_argument("--derandomize", action="store_true", help="the fixed modules of the test, extended")
    args = parser.parse_args(argv)
    if args.modules < 1:
        parser.error("--modules must be at least 1")
    totals = {"modules": 0, "instructions": 0}
    failing: list[tuple[str, int]] = []
    started = time.monotonic()

    @fuzz_settings(args.modules, args.derandomize)
    @given(programs(), st.integers(0, 2**32 - 1))
    def campaign(text: str, seed: int) -> None:
        try:
            instructions = check_against_reference(text, seed)
        except BaseException:
            failing.append((text, seed))  # the last one recorded is the shrunk module
            raise
        totals["modules"] += 1
        totals["instructions"] += instructions
        if totals["modules"] % 100 == 0:
            rate = totals["modules"] / (time.monotonic() - started)
            print(f"{totals['modules']} modules, {totals['instructions']} instructions, no difference ({rate:.1f} modules/s)", file=sys.stderr, flush=True)

    try:
        campaign()
    except Exception as exc:
        text, seed = failing[-1]
        report_failure(exc, text, seed, args.save, "fuzz")
        return 1
    elapsed = time.monotonic() - started
    print(f"{totals['modules']} modules, {totals['instructions']} instructions: every output bit agreed ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
