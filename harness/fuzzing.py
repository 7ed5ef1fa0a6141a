"""The differential fuzzer's check and settings, shared by its sample in `make test`
(tests/codegen/test_random_programs.py) and the campaigns (tools/fuzz_backend.py,
tools/fuzz_vs_xla.py, tools/contention_campaign.py): a module run on the reference
evaluator and on the LLVM backend for every target and thread count gives the same bytes."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, settings

from compiler.driver import compile_program
from compiler.hlo import load_module
from compiler.hlo.shape import ArrayShape
from compiler.program import load_program
from compiler.reference import evaluate
from harness.program_generator import inputs
from harness.targets import RUNNABLE, config

THREADS = (1, 2, 3)


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


def report_failure(error: BaseException, text: str, seed: int, save: Path | None, prefix: str) -> None:
    """Prints a campaign's failure with the seed and the failing module on stdout and, with
    `save`, writes the module to a new file there (`prefix`, the time and the seed in its
    name) so that it can be run again."""
    first_line = str(error).splitlines()[0] if str(error) else ""
    print(f"difference or failure: {type(error).__name__}: {first_line}\nseed {seed}\n{text}")
    if save and text:
        save.mkdir(parents=True, exist_ok=True)
        path = save / f"{prefix}_{int(time.time())}_seed{seed}.hlo"
        path.write_text(text)
        print(f"written to {path}", file=sys.stderr)
