"""The differential fuzzer, sampled: random valid modules (harness/program_generator.py) give
the reference evaluator's bytes on every target this host runs, with 1, 2 and 3 threads
(harness/fuzzing.py). Any difference, crash or refusal is a bug; tools/fuzz_backend.py runs
the long campaigns. Modules the fuzzer found bugs with are kept in
tests/fixtures/fuzz_regressions/ and run every time."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.fuzzing import check_against_reference, fuzz_settings
from harness.program_generator import programs

REGRESSIONS = Path(__file__).resolve().parent.parent / "fixtures" / "fuzz_regressions"


@fuzz_settings(8)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_programs_give_the_reference_bits(text: str, seed: int) -> None:
    check_against_reference(text, seed)


@pytest.mark.parametrize("path", sorted(REGRESSIONS.glob("*.hlo")), ids=lambda p: p.stem)
def test_modules_the_fuzzer_found_bugs_with(path: Path) -> None:
    check_against_reference(path.read_text(), seed=int(path.stem.rsplit("_seed", 1)[1]) if "_seed" in path.stem else 0)
