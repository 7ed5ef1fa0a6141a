"""The differential fuzzer, sampled: random valid modules (tests/program_generator.py) give the
reference evaluator's bytes on every target this host runs, with 1, 2 and 3 threads. Any
difference, crash or refusal is a bug; tools/fuzz_backend.py runs the long campaigns. Modules
the fuzzer found bugs with are kept in tests/fixtures/fuzz_regressions/ and run every time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.driver import compile_program
from compiler.hlo import load_module
from compiler.hlo.shape import ArrayShape
from compiler.program import load_program
from compiler.reference import evaluate
from tests.program_generator import inputs, programs
from tests.targets import RUNNABLE, config

THREADS = (1, 2, 3)
REGRESSIONS = Path(__file__).resolve().parent.parent / "fixtures" / "fuzz_regressions"


def fuzz_settings(examples: int, derandomize: bool = True) -> settings:
    """The sample's settings (and the campaign's, with more examples)."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=derandomize,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def check_against_reference(text: str, seed: int, targets: tuple[str, ...] = RUNNABLE) -> int:
    """Runs `text` on the reference and on the backend for every target in `targets` and
    every thread count; asserts every output's type, dimensions and bytes agree. Returns
    the module's instruction count."""
    module = load_module(text)
    parameters = module.entry.parameters
    assert all(isinstance(p.shape, ArrayShape) for p in parameters)
    arrays = inputs([(p.shape.dtype.name, p.shape.dims) for p in parameters], seed)  # type: ignore[union-attr]
    expected = evaluate(module, arrays)
    program = load_program(text)
    for target in targets:
        executable = compile_program(program, config(target), cache_dir=False)
        for threads in THREADS:
            got = executable.run(*arrays, threads=threads)
            assert len(got) == len(expected)
            for index, (have, want) in enumerate(zip(got, expected, strict=True)):
                where = f"{target}, {threads} threads, output {index}"
                assert (have.dtype, have.shape) == (want.dtype, want.shape), where
                assert np.ascontiguousarray(have).tobytes() == np.ascontiguousarray(want).tobytes(), f"{where}:\n{have!r}\nreference\n{want!r}"
    return sum(len(c.instructions) for c in module.computations)


@fuzz_settings(8)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_programs_give_the_reference_bits(text: str, seed: int) -> None:
    check_against_reference(text, seed)


@pytest.mark.parametrize("path", sorted(REGRESSIONS.glob("*.hlo")), ids=lambda p: p.stem)
def test_modules_the_fuzzer_found_bugs_with(path: Path) -> None:
    check_against_reference(path.read_text(), seed=int(path.stem.rsplit("_seed", 1)[1]) if "_seed" in path.stem else 0)
